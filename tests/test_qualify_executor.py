"""GpuQualifyExecutor driven by hand: the remote path (files copied back), verdicts re-judged on recorded files."""

from __future__ import annotations

import json
import sys
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.test_loadgen_executor import ForeignHost, make_ctx
from workload.actions.gpu_qualify import GpuQualifyExecutor, QualifyParameters, parse_gpu_identities
from workload.errors import StepError
from workload.hosts.local import LocalHost
from workload.monitors.nvsmi import GpuSample, parse_query

pytestmark = pytest.mark.timeout(240)
REAL_H200 = Path(__file__).parent / "fixtures" / "monitors" / "h200-580.159.04" / "query-under-load.txt"
QUICK = {
    "Model": "standin",
    "Devices": "0,1",
    "Scenarios": "Offline",
    "MinDurationMs": 300,
    "SampleCount": 32,
    "SequenceLength": 16,
    "AgreementSamples": 4,
    "MatmulProbeSeconds": 0.05,
}


def make_step(**params: Any) -> GpuQualifyExecutor:
    parsed = QualifyParameters.model_validate(params)
    GpuQualifyExecutor.check_parameters(parsed)
    return GpuQualifyExecutor(parsed, location="Actions[0]", kind="action")


def test_gpu_identities_from_nvidia_smi_rows() -> None:
    rows = "0, 00000000:00:06.0, [N/A], NVIDIA H200\n1, 00000000:4C:00.0, 1654923012345, NVIDIA H200\nbad row\n"
    found = parse_gpu_identities(rows)
    assert sorted(found) == [0, 1]
    assert found[0].label() == "GPU 0 (PCI 00000000:00:06.0, serial unknown)"
    assert found[1].serial == "1654923012345" and found[1].name == "NVIDIA H200"


def test_an_accuracy_mode_is_refused_at_profile_load() -> None:
    with pytest.raises(ValueError, match="TestModes: the qualification runs PerformanceOnly"):
        make_step(**(QUICK | {"TestModes": "PerformanceOnly,AccuracyOnly"}))


def test_devices_that_are_not_indices_are_refused(tmp_path: Path) -> None:
    step = make_step(**(QUICK | {"Devices": "0,first"}))
    with pytest.raises(StepError, match="Devices '0,first': expected GPU indices"):
        step.plan(make_ctx(LocalHost("local"), tmp_path))


def test_remote_host_files_come_back_and_verdicts_judge_recorded_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the host's state folder: this test's own
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))  # "installed" on the host
    host = ForeignHost()
    ctx = make_ctx(host, tmp_path)
    step = make_step(**(QUICK | {"Python": sys.executable}))  # this venv has the package (editable)
    plan = step.plan(ctx)
    assert any("CUDA_VISIBLE_DEVICES=0" in " ".join(map(str, c.commands[0].argv)) for c in plan.changes)
    step.apply(ctx, plan)
    step.verify(ctx)

    results = ctx.host_dir / "results" / "qualify" / "qualify-standin"
    for name in ("gpu0", "gpu1", "all-gpu0", "all-gpu1"):
        assert (results / name / "Offline" / "performance" / "run_1" / "mlperf_log_detail.txt").is_file(), name
    probes = ctx.host_dir / "qualify" / "qualify-standin"
    remote = tmp_path / "home" / ".local/state/workload/nodes" / host.identity.node / "qualify" / "run-1"
    for name in ("probe-cpu", "probe-gpu0", "probe-gpu1"):
        assert (probes / name / "outputs.npy").is_file(), name
        copied = remote / "qualify" / "qualify-standin" / name / "outputs.npy"
        assert (probes / name / "outputs.npy").read_bytes() == copied.read_bytes()
    first = json.loads((results / "verdicts" / "agreement" / "accuracy.json").read_text())
    assert first["pass"] is True

    # GPU 1 computed wrong answers; GPU 0's probe file is malformed; the real H200 rows as telemetry
    good = np.load(probes / "probe-gpu1" / "outputs.npy")
    buffer = BytesIO()
    np.save(buffer, -good)
    (probes / "probe-gpu1" / "outputs.npy").write_bytes(buffer.getvalue())
    (probes / "probe-gpu0" / "probe.json").write_text('{"matmul_tflops": "lots", "flops_per_sample": 1e999}')
    from workload.qualify.verdicts import GpuIdentity

    ctx.memo["identities"] = {0: GpuIdentity(0, "00000000:00:06.0", None, "NVIDIA H200")}
    samples = parse_query(REAL_H200.read_text(encoding="utf-8"))
    step.write_verdicts(ctx, samples)
    capped = json.loads((results / "verdicts" / "throttling" / "accuracy.json").read_text())
    assert capped["pass"] is True and "57% at the power limit" in capped["details"][0]  # by design, not a fault
    # the same rows with the HW power brake (0x80) set wherever the cap was
    braked = [GpuSample(s.timestamp, s.index, s.name, {**s.values, "clocks_event_reasons": 0x84})
              if s.event_reasons == 0x4 else s for s in samples]  # fmt: skip
    step.write_verdicts(ctx, braked)

    verdicts = {p.parent.name: json.loads(p.read_text()) for p in (results / "verdicts").glob("*/accuracy.json")}
    assert verdicts["agreement"]["pass"] is False
    assert all(p.startswith("GPU 1 ") for p in verdicts["agreement"]["problems"])
    assert verdicts["math-efficiency"]["pass"] is False
    assert any(p.startswith("GPU 0 (PCI 00000000:00:06.0") for p in verdicts["math-efficiency"]["problems"])
    assert verdicts["throttling"]["pass"] is False
    assert "HW power brake slowdown" in verdicts["throttling"]["problems"][0]


class ShortJobHost(LocalHost):
    """This machine inside a scheduler job with one second left (what a Slurm node's host reports)."""

    def time_left_s(self) -> float | None:
        return 1.0


def test_a_job_too_short_for_the_next_run_stops_before_it(tmp_path: Path) -> None:
    step = make_step(**(QUICK | {"Devices": "0"}))
    ctx = make_ctx(ShortJobHost("local"), tmp_path)
    with pytest.raises(StepError, match=r"LoadGen Offline on gpu0 needs about \d+s, the job has 1s left"):
        step.apply(ctx, step.plan(ctx))
    assert not (ctx.host_dir / "results" / "qualify" / "qualify-standin" / "gpu0").exists()
