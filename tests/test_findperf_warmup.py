"""Find-performance measures a warmed-up device: the first full-sized burst is not one of its windows.

A GPU comes out of idle clocks and picks kernels for each new batch shape during its first bursts; on
a real H200 the first of three measured windows ran at 3,033 samples/s and the next two at 4,245 and
4,229 (the qualification's Offline run, 2026-11-29). Measured, that burst pulled Server's target
(0.4 x the slowest window) down by a third.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from workload.loadgen import findperf
from workload.loadgen.encoders import StandInEncoder
from workload.loadgen.model import FloatArray, TokenBatch, synthetic_tokens
from workload.loadgen.settings import RunSettings


class CountingModel:
    """The stand-in encoder, counting its calls; the first ``cold`` calls are the device's cold ones."""

    def __init__(self, cold: int) -> None:
        self._inner = StandInEncoder()
        self._lock = threading.Lock()
        self.calls = 0
        self.cold = cold

    def embed(self, batch: TokenBatch) -> FloatArray:
        with self._lock:
            self.calls += 1
        return self._inner.embed(batch)

    def describe(self) -> dict[str, object]:
        return self._inner.describe()


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_the_cold_calls_all_come_before_the_first_measured_window(
    scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each burst records how many model calls had been made when it began. The rate probe is one
    burst, the warm-up window at least two batches more; the measured windows begin after both."""
    model = CountingModel(cold=3)
    started_at: list[int] = []
    measure = findperf._throughput

    def recording(*args: object, **kwargs: object) -> float:
        started_at.append(model.calls)
        return measure(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(findperf, "_throughput", recording)
    settings = RunSettings(model_kind="standin", sample_count=64, sequence_length=8, offline_batch_size=8)
    data = synthetic_tokens(64, 8, seed=1)
    found = findperf.find_performance(scenario, model, data, settings, budget_s=0.3)  # type: ignore[arg-type]

    windows = found.measured["window_samples_per_second"]
    assert isinstance(windows, list) and len(windows) == findperf.WINDOWS
    assert len(started_at) == 1 + findperf.WARM_UP_WINDOWS + findperf.WINDOWS
    first_measured = started_at[1 + findperf.WARM_UP_WINDOWS]
    assert first_measured >= model.cold, started_at  # no cold call inside a measured window
    assert np.isfinite(windows).all() and min(windows) > 0
