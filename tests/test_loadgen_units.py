"""The LoadGen benchmark's library parts without LoadGen: settings, user.conf, model, SUTs, accuracy, logs."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from workload.errors import ResultsError, UsageError
from workload.loadgen.accuracy import check_accuracy, cosine
from workload.loadgen.findperf import OFFLINE_HEADROOM, SERVER_LOAD, WINDOWS, apply_found, find_performance
from workload.loadgen.logs import detail_errors, detail_values, loadgen_settings
from workload.loadgen.model import CLS_ID, SEP_ID, VOCAB_SIZE, EmbeddingModel, FloatArray, synthetic_tokens
from workload.loadgen.settings import RunSettings, load_settings, render_user_conf
from workload.loadgen.sut import make_sut, model_threads


@pytest.fixture(scope="module")
def model() -> EmbeddingModel:
    return EmbeddingModel(threads=2)


class Recorder:
    """A responder that keeps what the SUT answered, by response id."""

    def __init__(self) -> None:
        self.rows: dict[int, FloatArray | None] = {}
        self.done = threading.Event()
        self.expected = 0

    def __call__(self, ids: Sequence[int], out: FloatArray | None) -> None:
        for k, i in enumerate(ids):
            self.rows[i] = None if out is None else out[k].copy()
        if len(self.rows) >= self.expected:
            self.done.set()


class Sample:
    def __init__(self, id: int, index: int) -> None:
        self.id = id
        self.index = index


# -- settings and user.conf ----------------------------------------------------------------------
def test_user_conf_has_only_the_keys_we_set_for_that_scenario() -> None:
    s = RunSettings(min_duration_ms=2000, offline_target_qps=123.4, server_target_qps=50,
                    server_target_latency_ms=0.5, multi_stream_samples_per_query=2)  # fmt: skip
    offline = render_user_conf(s, "Offline")
    assert "minilm-int8.Offline.min_duration = 2000\n" in offline
    assert "minilm-int8.Offline.target_qps = 123.4\n" in offline
    assert "target_latency" not in offline and "samples_per_query" not in offline
    server = render_user_conf(s, "Server")
    assert "minilm-int8.Server.target_qps = 50\n" in server
    assert "minilm-int8.Server.target_latency = 0.5\n" in server  # LoadGen reads ms as a double: no rounding
    assert "minilm-int8.MultiStream.samples_per_query = 2\n" in render_user_conf(s, "MultiStream")
    assert "e-" not in render_user_conf(RunSettings(single_stream_target_latency_ms=0.00001), "SingleStream")


def test_settings_file_errors_name_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"sample_count": 0}')
    with pytest.raises(UsageError, match=r"settings.json: field 'sample_count': Input should be greater"):
        load_settings(path)
    path.write_text("[1, 2]")
    with pytest.raises(UsageError, match="expected a JSON object"):
        load_settings(path)
    path.write_text("{not json")
    with pytest.raises(UsageError, match="not a readable JSON file"):
        load_settings(path)
    with pytest.raises(UsageError, match="settings file not found"):
        load_settings(tmp_path / "missing.json")


def test_server_splits_the_thread_budget_between_its_workers() -> None:
    s = RunSettings(threads=8, server_workers=2)
    assert model_threads("Server", s, cpus=2) == 4
    assert model_threads("Offline", s, cpus=2) == 8
    assert model_threads("Offline", RunSettings(), cpus=3) == 3


# -- model and data ------------------------------------------------------------------------------
def test_synthetic_tokens_are_deterministic_bert_shaped_ids() -> None:
    a, b = synthetic_tokens(8, 12, seed=3), synthetic_tokens(8, 12, seed=3)
    assert np.array_equal(a.input_ids, b.input_ids)
    assert not np.array_equal(a.input_ids, synthetic_tokens(8, 12, seed=4).input_ids)
    assert (a.input_ids[:, 0] == CLS_ID).all() and (a.input_ids[:, -1] == SEP_ID).all()
    assert a.input_ids.max() < VOCAB_SIZE and a.attention_mask.all()


def test_embeddings_do_not_depend_on_the_batch(model: EmbeddingModel) -> None:
    data = synthetic_tokens(6, 16, seed=0)
    batched = model.embed(data)
    assert batched.shape == (6, 384) and batched.dtype == np.float32
    for i in range(6):
        assert cosine(model.embed(data.take([i]))[0], batched[i]) > 0.9999
    assert cosine(batched[0], batched[1]) < 0.99  # different inputs give different embeddings


@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream", "MultiStream"])
def test_every_sut_answers_each_sample_with_its_own_embedding(model: EmbeddingModel, scenario: str) -> None:
    data = synthetic_tokens(10, 16, seed=1)
    recorder = Recorder()
    recorder.expected = 10
    sut = make_sut(scenario, model, data, RunSettings(offline_batch_size=4, server_max_batch=3), recorder)  # type: ignore[arg-type]
    try:
        samples = [Sample(100 + k, (3 * k) % 10) for k in range(10)]
        if scenario in ("SingleStream", "MultiStream"):
            for k in range(0, 10, 2):
                sut.issue(samples[k : k + 2])
        else:
            sut.issue(samples)
        assert recorder.done.wait(30)
    finally:
        sut.close()
    assert sut.error is None
    reference = model.embed(data)
    for s in samples:
        row = recorder.rows[s.id]
        assert row is not None and cosine(row, reference[s.index]) > 0.9999


def test_a_model_failure_still_answers_the_samples(model: EmbeddingModel) -> None:
    data = synthetic_tokens(4, 16, seed=1)
    recorder = Recorder()
    recorder.expected = 2
    sut = make_sut("SingleStream", model, data, RunSettings(), recorder)
    sut.issue([Sample(1, 0), Sample(2, 99)])  # index 99 does not exist: the model call fails
    assert recorder.rows == {1: None, 2: None}
    assert isinstance(sut.error, IndexError)


# -- find-performance ----------------------------------------------------------------------------
def test_find_performance_picks_targets_and_the_user_value_wins(model: EmbeddingModel) -> None:
    data = synthetic_tokens(32, 16, seed=0)
    found = find_performance("Offline", model, data, RunSettings(offline_batch_size=8), budget_s=0.3)
    windows = found.measured["window_samples_per_second"]
    assert isinstance(windows, list) and len(windows) == WINDOWS and min(windows) > 0
    # Offline takes the fastest window: a target below the real rate would end the run early
    assert found.chosen["offline_target_qps"] == pytest.approx(max(windows) * OFFLINE_HEADROOM, rel=1e-3)
    settings, applied = apply_found(RunSettings(), found)
    assert settings.offline_target_qps == found.chosen["offline_target_qps"] and applied
    mine, applied = apply_found(RunSettings(offline_target_qps=7), found)
    assert mine.offline_target_qps == 7 and applied == {}
    stream = find_performance("SingleStream", model, data, RunSettings(), budget_s=0.2)
    assert 0 < stream.chosen["single_stream_target_latency_ms"] < 1000


def test_server_find_performance_asks_for_a_fraction_of_the_burst_rate(model: EmbeddingModel) -> None:
    data = synthetic_tokens(32, 16, seed=0)
    found = find_performance("Server", model, data, RunSettings(server_workers=2, server_max_batch=4), budget_s=0.3)
    windows = found.measured["window_samples_per_second"]
    assert isinstance(windows, list) and len(windows) == WINDOWS
    # Server takes the slowest window: a neighbour busy during the measurement is busy during the run too
    assert found.chosen["server_target_qps"] == pytest.approx(min(windows) * SERVER_LOAD, rel=1e-3)
    # the latency bound: 4 full batches (4 samples here) at the slowest rate, at least 100 ms
    bound = max(100.0, 4 * 4 / min(windows) * 1000)
    assert found.chosen["server_target_latency_ms"] == pytest.approx(bound, rel=1e-2)
    mine, applied = apply_found(RunSettings(server_target_latency_ms=50), found)
    assert mine.server_target_latency_ms == 50 and "server_target_latency_ms" not in applied


def test_server_gets_enough_queries_for_early_stopping_unless_the_user_says_otherwise() -> None:
    assert "minilm-int8.Server.min_query_count = 500\n" in render_user_conf(RunSettings(), "Server")
    assert "min_query_count" not in render_user_conf(RunSettings(), "Offline")
    assert "minilm-int8.Server.min_query_count = 50\n" in render_user_conf(RunSettings(min_query_count=50), "Server")


# -- accuracy ------------------------------------------------------------------------------------
def write_log(path: Path, rows: dict[int, bytes]) -> Path:
    path.write_text(
        json.dumps([{"seq_id": n, "qsl_idx": i, "data": b.hex().upper()} for n, (i, b) in enumerate(rows.items())])
    )
    return path


def test_accuracy_compares_each_answer_with_its_reference_row(tmp_path: Path) -> None:
    ref = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    good = write_log(tmp_path / "a.json", {i: ref[i].tobytes() for i in (2, 0, 1)})
    result = check_accuracy(good, ref, 0.999)
    assert result.passed and result.samples == 3 and result.value == pytest.approx(1.0)
    swapped = write_log(tmp_path / "b.json", {0: ref[1].tobytes(), 1: ref[0].tobytes(), 2: ref[2].tobytes()})
    assert not check_accuracy(swapped, ref, 0.999).passed


def test_accuracy_fails_on_missing_or_malformed_answers(tmp_path: Path) -> None:
    ref = np.ones((3, 4), dtype=np.float32)
    missing = check_accuracy(write_log(tmp_path / "m.json", {0: ref[0].tobytes()}), ref, 0.5)
    assert not missing.passed and "2 of 3 samples have no answer" in missing.problems[0]
    short = check_accuracy(write_log(tmp_path / "s.json", {i: b"\0\0\0\0" for i in range(3)}), ref, 0.5)
    assert not short.passed and "not 4 float32 values" in short.problems[0]
    (tmp_path / "bad.json").write_text('[{"qsl_idx": 0}]')
    with pytest.raises(ResultsError, match="entry 0 is not a LoadGen accuracy record"):
        check_accuracy(tmp_path / "bad.json", ref, 0.5)


# -- logs ----------------------------------------------------------------------------------------
def test_detail_log_reader_keeps_last_values_and_flags_errors(tmp_path: Path) -> None:
    log = tmp_path / "mlperf_log_detail.txt"
    rec = lambda key, value, err=False: ":::MLLOG " + json.dumps(  # noqa: E731
        {"key": key, "value": value, "metadata": {"is_error": err}})  # fmt: skip
    log.write_text("\n".join([rec("requested_min_duration_ms", 1000), rec("effective_min_duration_ms", 1000),
                              "noise", rec("result_validity", "INVALID"), rec("result_validity", "VALID"),
                              rec("error_invalid_config", "Multiple conf files are used.", True)]))  # fmt: skip
    values = detail_values(log)
    assert values["result_validity"] == "VALID"
    assert loadgen_settings(values) == {"requested": {"min_duration_ms": 1000}, "effective": {"min_duration_ms": 1000}}
    assert [e["key"] for e in detail_errors(log)] == ["error_invalid_config"]
    log.write_text(":::MLLOG {broken")
    with pytest.raises(ResultsError, match=r"mlperf_log_detail.txt:1: bad :::MLLOG record"):
        detail_values(log)
