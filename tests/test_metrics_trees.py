"""Published MLPerf submission trees (tests/fixtures/results/trees, see its SOURCES): compliance folders,
system descriptions, v6.1 endpoints results, and folders that cannot be read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.cli.results_cmd import results_command
from workload.metrics import collection as collection_mod
from workload.metrics.collection import collect
from workload.metrics.model import BenchmarkResult
from workload.metrics.verdict import Verdict

TREES = Path(__file__).parent / "fixtures" / "results" / "trees"
ASUS = TREES / "v4.1" / "closed" / "ASUSTeK"
ASUS_SYS = "ESC4000A_E12_4XH100_TRT"
NV = TREES / "v6.1" / "closed" / "NVIDIA"
DSR1 = NV / "results" / "VR-NVL72_VR-288GB_aarch64x72_TRT" / "deepseek-r1" / "Server"


def run(*args: str) -> tuple[int, str]:
    group = click.Group("workload")
    group.add_command(results_command)
    result = CliRunner().invoke(group, ["results", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def by_mode(results: list[BenchmarkResult]) -> dict[tuple[str | None, str | None], BenchmarkResult]:
    return {(r.scenario, r.test_mode): r for r in results}


def metric(result: BenchmarkResult, name: str) -> float:
    return next(m.value for m in result.metrics if m.name == name)


# --- a whole published submission tree (LoadGen results, compliance/, systems/) ---


def test_published_submission_tree_reports_every_result_and_exits_0() -> None:
    code, out = run(str(ASUS))
    assert code == 0, out
    assert "verdict: OK - 7 result(s): 5 VALID, 0 not VALID, 0 accuracy failure(s)" in out
    assert "24,173.20 samples/s" in out and "17,001.59 samples/s" in out
    assert "unreadable" not in out


def test_compliance_folders_give_their_verdict() -> None:
    collection = collect(ASUS)
    assert collection.issues == []
    results = by_mode(collection.results)
    assert set(results) == {
        ("Offline", "TEST01"), ("Offline", "TEST05"), ("Server", "TEST01"),
        ("Offline", "PerformanceOnly"), ("Offline", "AccuracyOnly"),
        ("Server", "PerformanceOnly"), ("Server", "AccuracyOnly"),
    }  # fmt: skip
    test01 = results[("Offline", "TEST01")]
    assert test01.benchmark_full == "bert-99" and test01.system == ASUS_SYS and test01.validity == "VALID"
    assert not test01.failed and test01.invalid_reasons == []
    assert metric(test01, "compliance_pass") == 1.0
    assert metric(test01, "compliance_performance_pass") == 1.0 and metric(test01, "compliance_accuracy_pass") == 1.0
    # the figures of verify_performance.txt, as printed
    assert metric(test01, "compliance_reference_score") == 24173.2
    assert metric(test01, "compliance_test_score") == 24141.4
    meta = test01.metrics[0].metadata
    assert meta["compliance_test"] == "TEST01" and meta["compliance_verdict"] == "PASS"
    assert test01.files == ["verify_performance.txt", "verify_accuracy.txt"]
    # TEST05 has only a performance verification
    test05 = results[("Offline", "TEST05")]
    assert [m.name for m in test05.metrics][:2] == ["compliance_pass", "compliance_performance_pass"]
    assert metric(test05, "compliance_test_score") == 24094.5


def test_system_description_is_in_every_metric() -> None:
    collection = collect(ASUS)
    assert collection.metrics
    for m in collection.metrics:
        assert m.metadata["submitter"] == "ASUSTeK"
        assert m.metadata["system_name"] == "ASUSTeK ESC4000A-E12 (4xH100-NVL-94GB)"
        assert m.metadata["accelerator_model_name"] == "NVIDIA H100-NVL-94GB"
        assert m.metadata["accelerators_per_node"] == 4 and m.metadata["number_of_nodes"] == 1
        assert m.metadata["division"] == "closed" and m.metadata["system"] == ASUS_SYS


def copy_tree(tmp_path: Path) -> Path:
    target = tmp_path / "closed" / "ASUSTeK"
    shutil.copytree(ASUS, target)
    return target


def test_failed_compliance_verification_fails_the_verdict(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    verify = tree / "compliance" / ASUS_SYS / "bert-99" / "Server" / "TEST01" / "verify_performance.txt"
    verify.write_text(verify.read_text().replace("TEST PASS", "TEST FAIL"))
    code, out = run(str(tree))
    assert code == 6
    assert "bert-99 Server TEST01: TEST01 verify_performance.txt: failed (a line containing 'TEST PASS')" in out
    result = by_mode(collect(tree).results)[("Server", "TEST01")]
    assert result.validity == "INVALID" and metric(result, "compliance_pass") == 0.0
    assert metric(result, "compliance_accuracy_pass") == 1.0
    assert result.metrics[0].metadata["compliance_verdict"] == "FAIL"


def test_test01_non_deterministic_fallback_compares_baseline_and_compliance(tmp_path: Path) -> None:
    """No 'TEST PASS': the checker compares accuracy/baseline_accuracy.txt and compliance_accuracy.txt."""
    tree = copy_tree(tmp_path)
    test01 = tree / "compliance" / ASUS_SYS / "bert-99" / "Offline" / "TEST01"
    verify = test01 / "verify_accuracy.txt"
    verify.write_text(verify.read_text().replace("TEST PASS", "TEST FAIL"))
    real = (tree / "results" / ASUS_SYS / "bert-99" / "Offline" / "accuracy" / "accuracy.txt").read_text()
    (test01 / "accuracy" / "baseline_accuracy.txt").write_text(real)
    # F1 90.357 -> 89.9: 0.51 % apart, within bert-99's 1 %
    (test01 / "accuracy" / "compliance_accuracy.txt").write_text(real.replace("90.35676151551918", "89.9"))
    result = by_mode(collect(tree).results)[("Offline", "TEST01")]
    assert result.validity == "VALID", result.invalid_reasons
    # 88.0: 2.68 % apart
    (test01 / "accuracy" / "compliance_accuracy.txt").write_text(real.replace("90.35676151551918", "88.0"))
    result = by_mode(collect(tree).results)[("Offline", "TEST01")]
    assert result.validity == "INVALID"
    assert "F1 baseline 90.3568 vs compliance 88: 2.678 % > 1 %" in result.invalid_reasons[0]


def test_test06_needs_its_three_checks(tmp_path: Path) -> None:
    folder = tmp_path / "results" / "SYS" / "llama2-70b-99" / "Offline" / "TEST06"
    folder.mkdir(parents=True)
    lines = ["First token check pass: Skipped", "EOS check pass: True", "Sample length check pass: True", "TEST06 PASS"]
    (folder / "verify_accuracy.txt").write_text("\n".join(lines) + "\n")
    (result,) = collect(tmp_path).results
    assert result.test_mode == "TEST06" and result.validity == "VALID" and result.benchmark_full == "llama2-70b-99"
    (folder / "verify_accuracy.txt").write_text(
        "\n".join(lines).replace("EOS check pass: True", "EOS check pass: False")
    )
    (result,) = collect(tmp_path).results
    assert result.validity == "INVALID" and "'EOS check pass: True'" in result.invalid_reasons[0]


def test_ranging_runs_and_compliance_logs_are_not_results(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    perf = tree / "results" / ASUS_SYS / "bert-99" / "Offline" / "performance"
    shutil.copytree(perf / "run_1", perf / "ranging")
    logs = tree / "compliance" / ASUS_SYS / "bert-99" / "Offline" / "TEST01" / "performance" / "run_1"
    shutil.copytree(perf / "run_1", logs)
    collection = collect(tree)
    assert len(collection.results) == 7 and collection.issues == []


def test_a_broken_system_description_is_named(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    (tree / "systems" / f"{ASUS_SYS}.json").write_text('{"submitter": "ASUSTeK",')
    collection = collect(tree)
    assert len(collection.results) == 7
    assert [i.path for i in collection.issues] == [str(tree / "systems" / f"{ASUS_SYS}.json")]
    assert collection.issues[0].problem.startswith("not valid JSON")
    assert "submitter" not in collection.metrics[0].metadata


# --- v6.1 endpoints results ---


def test_endpoints_result_is_read_and_judged() -> None:
    code, out = run(str(NV))
    assert code == 0, out
    assert "1,175,890.22 tokens/s" in out and "PASS exact_match 81.427" in out
    (result,) = collect(NV).results
    assert (result.benchmark_full, result.scenario, result.test_mode) == ("deepseek-r1", "Server", "SubmissionRun")
    assert result.validity == "VALID" and result.accuracy_pass is True and not result.failed
    assert result.headline is not None and result.headline.name == "tokens_per_second"
    assert result.headline.value == 1175890.2208168241
    assert metric(result, "samples_per_second") == 310.0842360889801
    assert metric(result, "ttft_p99_early_stopping_ns") == 304652135.0
    assert metric(result, "tpot_p99_early_stopping_ns") == 48224073.2417795
    assert metric(result, "ttft_p99_ns") == 304652135.0  # the early-stopping p99, as ENDPOINTS_MAPPINGS maps it
    assert metric(result, "samples_failed") == 0.0 and metric(result, "duration_ns") == 2318929756903.0
    assert metric(result, "effective_min_duration_ms") == 1800000.0
    # the checker takes an endpoints score of deepseek-r1 when present (accuracy_check.py: only qwen3-vl's is
    # compared with a target), and checks that the accuracy run scored the whole set (4388 samples)
    checks = {c.name: c for c in result.accuracy_checks}
    assert checks["exact_match"].value == 81.42661804922516 and checks["exact_match"].threshold is None
    assert metric(result, "tokens_per_sample") == pytest.approx(16425558 / 4388)
    assert metric(result, "accuracy_samples") == 4388
    meta = result.metrics[0].metadata
    assert "computed" in str(meta["validity_rule"]) and meta["result_format"] == "mlcommons-endpoints"
    assert meta["submitter"] == "NVIDIA" and meta["number_of_nodes"] == 18 and meta["accelerators_per_node"] == 4


def endpoints_copy(tmp_path: Path, scenario: str = "Server") -> Path:
    target = tmp_path / "results" / "SYS" / "deepseek-r1" / scenario
    shutil.copytree(DSR1, target)
    return target


def edit_json(path: Path, change: dict[str, object]) -> None:
    data = json.loads(path.read_text())
    for dotted, value in change.items():
        *parents, last = dotted.split("/")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"n_samples_failed": 3}, "n_samples_failed is 3: every sample must succeed"),
        ({"complete": False, "state": "interrupted"}, "the run did not complete (complete=False, state='interrupted')"),
        ({"n_samples_completed": 599000}, "599000.0 of 600000.0 issued samples completed"),
        ({"duration_ns": 500e9}, "the run lasted 500000000000.0 ns (< 600000 ms)"),
        ({"ttft/early_stopping_percentiles/99.0": 2.5e9}, "early-stopping p99 ttft 2500.00 ms is not below the limit"),
    ],
)
def test_endpoints_validity_follows_the_checker(tmp_path: Path, change: dict[str, object], reason: str) -> None:
    folder = endpoints_copy(tmp_path)
    edit_json(folder / "performance" / "result_summary.json", change)
    (result,) = collect(tmp_path).results
    assert result.validity == "INVALID" and result.failed
    assert any(r.startswith(reason) for r in result.invalid_reasons), result.invalid_reasons


def test_endpoints_interactive_uses_its_own_limits(tmp_path: Path) -> None:
    """The same real run judged as Interactive: deepseek-r1's TPOT limit there is 15 ms (Server: 80 ms)."""
    endpoints_copy(tmp_path, "Interactive")
    (result,) = collect(tmp_path).results
    assert result.scenario == "Interactive" and result.validity == "INVALID"
    assert result.invalid_reasons == ["early-stopping p99 tpot 48.22 ms is not below the limit 15 ms"]
    # RESULT_FIELD_ENDPOINTS["v6.1"]["interactive"]: the checker's Interactive headline is samples/s
    assert result.headline is not None and result.headline.name == "samples_per_second"


def test_endpoints_accuracy_of_an_llm_is_taken_when_present(tmp_path: Path) -> None:
    """accuracy_check.py accuracy_result_check: of the endpoints models only qwen3-vl's score meets a target."""
    folder = endpoints_copy(tmp_path)
    edit_json(folder / "accuracy" / "accuracy_results.json", {"accuracy_scores/0/score": 79.0})
    (result,) = collect(tmp_path).results
    assert result.accuracy_pass is True and result.validity == "VALID", result.invalid_reasons
    assert any("accuracy.txt's target would be exact_match >= 80.5446" in n for n in result.notes)
    edit_json(folder / "accuracy" / "accuracy_results.json", {"accuracy_scores/0/total_samples": 4000})
    (result,) = collect(tmp_path).results  # dataset_check: the accuracy run must score the whole set
    assert result.accuracy_pass is False and result.validity == "INVALID"
    assert "the accuracy run scored 4000 samples, the benchmark's accuracy set has 4388" in result.invalid_reasons


def test_endpoints_model_outside_the_allowed_list_is_invalid(tmp_path: Path) -> None:
    target = tmp_path / "results" / "SYS" / "some-new-llm" / "Server"
    shutil.copytree(DSR1, target)
    (result,) = collect(tmp_path).results
    assert result.benchmark_full == "some-new-llm" and result.validity == "INVALID"
    assert result.invalid_reasons[0].startswith(
        "some-new-llm is not a model the checker accepts in the endpoints format (wan-2.2-t2v-a14b, "
    )


def test_single_endpoints_file_as_target() -> None:
    (result,) = collect(DSR1 / "performance" / "result_summary.json").results
    assert result.test_mode == "PerformanceOnly" and result.validity == "VALID"


# --- folders that cannot be read ---


def test_a_folder_that_cannot_be_listed_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Permissions cannot hide a folder from root (the tests' user), so the listing error is injected."""
    tree = copy_tree(tmp_path)
    hidden = str(tree / "results" / ASUS_SYS / "bert-99" / "Server")
    real_scandir = os.scandir

    def scandir(path: str) -> object:
        if str(path) == hidden:
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(collection_mod.os, "scandir", scandir)
    collection = collect(tree)
    assert [(i.path, i.problem) for i in collection.issues] == [(hidden, "folder cannot be listed: Permission denied")]
    verdict = Verdict.from_results(collection.results, collection.issues)
    assert not verdict.ok and f"unreadable: {hidden}: folder cannot be listed: Permission denied" in verdict.failures


def test_a_folder_of_result_files_giving_nothing_fails(tmp_path: Path) -> None:
    folder = tmp_path / "SYS" / "bert-99" / "Offline"
    folder.mkdir(parents=True)
    (folder / "effective_settings.json").write_text("{}")
    code, out = run(str(tmp_path))
    assert code == 2  # nothing parseable at all
    assert "holds result files (effective_settings.json) but none gave a result" in out
    shutil.copytree(ASUS, tmp_path / "closed" / "ASUSTeK")
    code, out = run(str(tmp_path))
    assert code == 6 and "verdict: FAILED - 7 result(s)" in out
    assert f"unreadable: {folder}: holds result files (effective_settings.json) but none gave a result" in out


def test_measurement_description_is_in_the_metadata(tmp_path: Path) -> None:
    (result,) = collect(NV).results  # v6.0 on: results/<system>/<benchmark>/<scenario>/measurements.json
    meta = result.metrics[0].metadata
    assert (meta["weight_data_types"], meta["input_data_types"], meta["retraining"]) == ("fp4", "int32", "No")
    tree = copy_tree(
        tmp_path
    )  # up to v5.1: measurements/<system>/<benchmark>/<scenario>/<system>_<impl>_<scenario>.json
    folder = tree / "measurements" / ASUS_SYS / "bert-99" / "Offline"  # holds the published user.conf
    (folder / f"{ASUS_SYS}_TRT_Offline.json").write_text('{"weight_data_types": "int8", "input_data_types": "int32"}')
    results = by_mode(collect(tree).results)
    assert results[("Offline", "PerformanceOnly")].metrics[0].metadata["weight_data_types"] == "int8"
    assert results[("Offline", "TEST01")].metrics[0].metadata["weight_data_types"] == "int8"
    assert "weight_data_types" not in results[("Server", "PerformanceOnly")].metrics[0].metadata
    (folder / f"{ASUS_SYS}_TRT_Offline.json").write_text("[1, 2")
    collection = collect(tree)
    assert [i.path for i in collection.issues] == [str(folder / f"{ASUS_SYS}_TRT_Offline.json")]


def test_result_files_that_are_not_files_are_named(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    scenario = tree / "results" / ASUS_SYS / "bert-99" / "Server" / "performance" / "run_1"
    (scenario / "mlperf_log_detail.txt").symlink_to(tmp_path / "gone")
    os.mkfifo(scenario / "accuracy.txt")
    collection = collect(tree)
    assert sorted((i.path, i.problem) for i in collection.issues) == [
        (str(scenario / "accuracy.txt"), "not a readable regular file"),
        (str(scenario / "mlperf_log_detail.txt"), "not a readable regular file"),
    ]
    assert len(collection.results) == 7  # the summary next to them is still read


def test_endpoints_audit_files_give_their_verdict(tmp_path: Path) -> None:
    """compliance_endpoints_check: <scenario>/audit/audit_<test>.json passes with its test named and passed true."""
    audit = endpoints_copy(tmp_path) / "audit"
    audit.mkdir()
    (audit / "audit_TEST04.json").write_text(json.dumps({"test": "TEST04", "passed": True}))
    results = by_mode(collect(tmp_path).results)
    verdict = results[("Server", "audit")]
    assert verdict.validity == "VALID" and verdict.benchmark_full == "deepseek-r1"
    assert metric(verdict, "compliance_pass") == 1.0 and metric(verdict, "compliance_TEST04_pass") == 1.0
    (audit / "audit_TEST04.json").write_text(json.dumps({"test": "TEST01", "passed": True}))
    verdict = by_mode(collect(tmp_path).results)[("Server", "audit")]
    assert verdict.validity == "INVALID"
    assert verdict.invalid_reasons == ["audit audit_TEST04.json: failed (its test is 'TEST01', not 'TEST04')"]
    (audit / "audit_TEST04.json").write_text('{"test": "TEST04", "passed": "yes"}')
    collection = collect(tmp_path)
    assert [i.path for i in collection.issues] == [str(audit / "audit_TEST04.json")]
    assert ("Server", "audit") not in by_mode(collection.results)


def test_endpoints_online_run_in_an_offline_folder_is_not_an_offline_result(tmp_path: Path) -> None:
    """performance_check.py inferred_check: config.yaml's type online is a Server run; on a datacenter system an
    Offline result cannot be inferred from it."""
    endpoints_copy(tmp_path, "Offline")
    (result,) = collect(tmp_path).results
    assert result.scenario == "Offline" and result.validity == "INVALID"
    assert result.invalid_reasons == [
        "config.yaml's type makes this a Server run, from which the checker infers no Offline result on a datacenter "
        "system"
    ]
