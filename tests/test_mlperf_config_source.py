"""The config-source channel (issue 18): from the MLPerf action's decision to every metric's metadata.

The MLPerf action records per (scenario, benchmark) where the harness's config values come from
(:mod:`workload.mlperf.config_sources`) and writes it beside each kept result; the metrics layer merges it into the
metadata (:mod:`workload.metrics.config_source`). Real result files (tests/fixtures/results), real gpuconfigs tables;
the runs against the stand-in harnesses in containers are in test_mlperf_rounds_run.py and test_mlperf_v6_run.py.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from workload.metrics import OutputContext, collect, write_outputs
from workload.metrics.config_source import SIDECAR, ConfigSource, from_json
from workload.mlperf import config_sources
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.rounds.v6_0.systems import v60_files
from workload.mlperf.system import HostSystem
from workload.mlperf.system_support_files import _generated

RESULT = Path(__file__).parent / "fixtures" / "results" / "loadgen" / "server_valid"
KEYS = ("config_source", "config_tuned", "config_untuned_reason", "config_from", "config_system")
UNTUNED = config_sources.generated(
    "WL_H100_SXM_80GBx8",
    ["v5.0 closed/NVIDIA/configs/llama2-70b/Offline/__init__.py H100_SXM_80GB_PP2x4"],
    "NVIDIA's v5.1 configs do not tune NVIDIA H100 80GB HBM3; these are its v5.0 values",
)


def result_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "WL_H100_SXM_80GBx8_TRT" / "llama2-70b-99" / "Server"
    shutil.copytree(RESULT, folder)
    return folder


def config_keys(folder: Path, **kwargs: object) -> tuple[list[dict[str, object]], list[str]]:
    parsed = collect(folder, **kwargs)  # type: ignore[arg-type]
    assert parsed.results
    metas = [{k: v for k, v in m.metadata.items() if k in KEYS} for m in parsed.metrics]
    return metas, [str(i) for i in parsed.issues]


def test_the_sidecar_round_trips_and_says_untuned_why_and_from_where() -> None:
    text = UNTUNED.to_json("llama2-70b-99", "Offline")
    data = json.loads(text)
    assert data["format"] == 1 and data["benchmark"] == "llama2-70b-99" and data["scenario"] == "Offline"
    assert (
        from_json(text).labels()
        == UNTUNED.labels()
        == {
            "config_source": "generated",
            "config_tuned": False,
            # ';' would split metrics.csv's key=value;key=value Metadata column: written as ','
            "config_untuned_reason": (
                "NVIDIA's v5.1 configs do not tune NVIDIA H100 80GB HBM3, these are its v5.0 values"
            ),
            "config_from": "v5.0 closed/NVIDIA/configs/llama2-70b/Offline/__init__.py H100_SXM_80GB_PP2x4",
            "config_system": "WL_H100_SXM_80GBx8",
        }
    )
    tuned = config_sources.generated("WL_B200x4", ["a.py X", "b.py Y", "a.py X"])
    assert tuned.labels() == {
        "config_source": "generated",
        "config_tuned": True,
        "config_from": "a.py X + b.py Y",
        "config_system": "WL_B200x4",
    }
    assert ConfigSource("user", system="MySys").labels() == {"config_source": "user", "config_system": "MySys"}
    with pytest.raises(ValueError, match="untuned reason"):
        ConfigSource("nvidia", tuned=True, untuned_reason="no")


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"format": 2, "config_source": "nvidia"}, r"\$\.format: 2"),
        ({"format": 1, "config_source": "mine"}, r"\$\.config_source: 'mine'"),
        ({"format": 1, "config_source": "nvidia", "config_tuned": "yes"}, r"\$\.config_tuned: 'yes'"),
        ({"format": 1, "config_source": "generated", "config_from": 3}, r"\$\.config_from: 3"),
        ({"format": 1, "config_source": "generated", "config_untuned_reason": "x"}, r"\$\.config_untuned_reason"),
        ([], r"\$: not a JSON object"),
    ],
)
def test_a_bad_sidecar_is_named_with_the_key_at_fault(body: object, where: str) -> None:
    with pytest.raises(ValueError, match=where):
        from_json(json.dumps(body))


def test_the_metrics_of_a_result_get_the_sidecar_and_parsed_values_win(tmp_path: Path) -> None:
    folder = result_copy(tmp_path)
    before = collect(folder)
    config_sources.write_sidecar(folder, "llama2-70b-99", "Server", UNTUNED)
    metas, issues = config_keys(folder, labels={"config_source": "from-the-inventory", "rack": "r12"})
    assert not issues
    assert metas and all(m == UNTUNED.labels() for m in metas)  # the sidecar beats an inventory label of its name
    after = collect(folder, labels={"rack": "r12"})
    for old, new in zip(before.metrics, after.metrics, strict=True):
        # everything parsed is as it was: the sidecar only adds its own keys (and the label its own)
        assert {k: v for k, v in new.metadata.items() if k not in (*KEYS, "rack")} == old.metadata
        assert (new.name, new.value, new.unit) == (old.name, old.value, old.unit)
    # a key the sidecar has no business setting (a parsed one) is not read from it
    data = json.loads((folder / SIDECAR).read_text())
    (folder / SIDECAR).write_text(json.dumps({**data, "scenario": "Bogus", "host": "elsewhere"}))
    parsed = collect(folder, host="h1")
    assert {r.scenario for r in parsed.results} == {"Server"} and {r.host for r in parsed.results} == {"h1"}
    assert {m.metadata["scenario"] for m in parsed.metrics} == {"Server"}


def test_a_result_without_a_sidecar_has_no_config_keys_and_a_broken_one_is_an_issue(tmp_path: Path) -> None:
    folder = result_copy(tmp_path)
    metas, issues = config_keys(folder)
    assert not issues and all(m == {} for m in metas)
    (folder / SIDECAR).write_text('{"format": 1, "config_source": "nvidia", "config_tuned": 1}')
    metas, issues = config_keys(folder)
    assert all(m == {} for m in metas)  # the result is still reported, without what the file would have said
    assert issues == [f"{folder / SIDECAR}: not a config-source file: $.config_tuned: 1 is not true or false"]


def test_the_run_folders_metrics_files_carry_the_keys(tmp_path: Path) -> None:
    folder = result_copy(tmp_path)
    config_sources.write_sidecar(folder, "llama2-70b-99", "Server", UNTUNED)
    out = tmp_path / "run"
    out.mkdir()
    write_outputs(out, collect(folder, host="h1").results, OutputContext(experiment_id="e1"))
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert rows
    for row in rows:
        pairs = dict(p.split("=", 1) for p in row["Metadata"].split(";"))
        assert pairs["config_tuned"] == "False" and pairs["config_untuned_reason"].startswith("NVIDIA's v5.1 configs")
        assert pairs["config_from"].startswith("v5.0 closed/NVIDIA/configs/llama2-70b/")
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert lines and all(line["metadata"]["config_tuned"] is False for line in lines)


def test_nvidias_own_configs_cover_what_is_not_blocked_and_name_the_users() -> None:
    sources = config_sources.nvidia(
        ["Offline", "Server"],
        ["bert-99", "bert-99.9"],
        "DGX_H100x8",
        blocked={("Server", "bert-99.9"): "no config"},
        user=[("Offline", "bert-99.9")],
    )
    assert set(sources) == {("Offline", "bert-99"), ("Offline", "bert-99.9"), ("Server", "bert-99")}
    assert sources[("Offline", "bert-99")] == ConfigSource("nvidia", system="DGX_H100x8", tuned=True)
    assert sources[("Offline", "bert-99.9")] == ConfigSource("user", system="DGX_H100x8")
    assert config_sources.benchmark_of("bert", "k_99_9") == "bert-99.9"
    assert config_sources.benchmark_of("llama2-70b", "k_99") == "llama2-70b-99"


def test_v60_hopper_runs_the_nearest_gpus_values_and_its_results_say_untuned() -> None:
    h200 = HostSystem("NVIDIA H200", 143771, 8, "Intel(R) Xeon(R) Platinum 8480C", 56, 2, 2, 2 * 10**12)
    files = v60_files(h200, load_table(harness_round="v6.0"), "llama2-70b", ["Offline"], ["k_99"], allow_untuned=True)
    sources = _generated(files, "llama2-70b", ("llama2-70b-99", "llama2-70b-99.9"), {})
    assert set(sources) == {("Offline", "llama2-70b-99")}  # the file holds k_99 only: -99.9 is not covered
    labels = sources[("Offline", "llama2-70b-99")].labels()
    assert labels["config_tuned"] is False and labels["config_system"] == "WL_H200-SXM-141GBx8"
    reason = str(labels["config_untuned_reason"])
    assert reason.startswith(
        "NVIDIA publishes no NVIDIA H200 config in v6.0 (the last round NVIDIA tunes it in is v5.0)"
    )
    # Hopper's own last values (v5.0's, fp8), never a Blackwell GPU's; config_from names v5.0's class
    assert "v5.0's H200_SXM_141GB values (Hopper, precision fp8)" in reason
    assert "v5.0 closed/NVIDIA/configs/llama2-70b/Offline/__init__.py H200_SXM_141GBx8" in str(labels["config_from"])
    # blocked results get no source (they have no result)
    assert _generated(files, "llama2-70b", ("llama2-70b-99",), {("Offline", "llama2-70b-99"): "x"}) == {}


def test_v60_a_gpu_nvidia_tunes_says_tuned() -> None:
    b200 = HostSystem("NVIDIA B200", 183359, 4, "AMD EPYC 9575F 64-Core Processor", 64, 2, 1, 2 * 10**12)
    files = v60_files(
        b200, load_table(harness_round="v6.0"), "llama3.1-405b", ["Offline"], ["k_99"], allow_untuned=False
    )
    (source,) = _generated(files, "llama3.1-405b", ("llama3.1-405b",), {}).values()
    assert source.tuned is True and source.untuned_reason is None
    assert "B200-SXM-180GBx4/Offline/llama3_1-405b.py" in str(source.origin)


def test_a_config_source_that_cannot_be_written_fails_the_step_naming_the_result(tmp_path: Path) -> None:
    from typing import Any, cast

    from workload.mlperf.interpreter import Interpreter
    from workload.mlperf.planner import SystemAnswer
    from workload.mlperf.results import Expected

    folder = result_copy(tmp_path)
    (folder / SIDECAR).mkdir()  # a folder where the file goes: the write fails for real (root or not)
    unused = cast(Any, None)  # _record_source reads only the system check's answer and appends to problems
    interpreter = Interpreter(unused, unused, unused, unused, unused)
    expected = Expected("llama2-70b", "llama2-70b-99", "Server", "PerformanceOnly")
    interpreter.answer = SystemAnswer(sources={("Server", "llama2-70b-99"): UNTUNED})
    interpreter._record_source(folder, expected)
    (problem,) = interpreter.problems
    assert problem.startswith(f"could not record the config source of llama2-70b-99 Server PerformanceOnly in {folder}")
    # a result the system check decided nothing for gets no file and no problem
    interpreter._record_source(folder, Expected("llama2-70b", "llama2-70b-99", "Offline", "PerformanceOnly"))
    assert len(interpreter.problems) == 1
