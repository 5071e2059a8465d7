"""`workload results` and `workload compare` through click's CliRunner, on a group built here."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.cli.compare_cmd import compare_command
from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"


@pytest.fixture
def group() -> click.Group:
    cli = click.Group("workload")
    cli.add_command(results_command)
    cli.add_command(compare_command)
    return cli


def run(group: click.Group, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(group, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_results_valid_tree_exits_0_and_writes(group: click.Group, tmp_path: Path) -> None:
    code, out = run(group, "results", str(H200), "--output", str(tmp_path))
    assert code == 0, out
    assert "57,609.27" in out and "29,228.22" in out and "verdict: OK - 3 result(s)" in out
    assert {p.name for p in tmp_path.iterdir()} >= {"metrics.jsonl", "metrics.csv", "summary.json"}


def test_results_invalid_exits_6_with_reason_and_fix(group: click.Group) -> None:
    code, out = run(group, "results", str(FIX / "reference" / "offline_invalid"))
    assert code == 6
    assert "why: min duration not met" in out and "*.Offline.target_qps = 3542" in out
    code, _ = run(group, "results", str(FIX / "reference" / "offline_invalid"), "--allow-invalid")
    assert code == 0


def test_results_json_lines(group: click.Group) -> None:
    result = CliRunner().invoke(
        group, ["results", str(H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"), "--json", "--host", "n1"]
    )
    assert result.exit_code == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["name"] == "samples_per_second" and records[0]["host"] == "n1"


def test_results_missing_or_empty_exit_2(group: click.Group, tmp_path: Path) -> None:
    code, out = run(group, "results", str(tmp_path / "missing"))
    assert code == 2 and "no such file or directory" in out and "Traceback" not in out
    code, out = run(group, "results", str(tmp_path))
    assert code == 2 and "no MLPerf results found" in out


def test_results_reads_previous_run_folder(group: click.Group, tmp_path: Path) -> None:
    write_outputs(tmp_path, collect(H200, host="h1").results, OutputContext())
    code, out = run(group, "results", str(tmp_path))
    assert code == 0 and "h1" in out and "57,609.27" in out


def test_compare_regression_exits_7(group: click.Group, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline", a)
    shutil.copytree(a, b)
    summary = b / "mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Samples per second: 73309.5", "Samples per second: 65000.0"))
    code, out = run(group, "compare", str(a), str(b), "--threshold", "5")
    assert code == 7 and "REGRESSION" in out and "-11.33 %" in out
    code, out = run(group, "compare", str(a), str(b), "--threshold", "20")
    assert code == 0 and "no regression" in out
    code, _ = run(group, "compare", str(a), str(a))
    assert code == 0


def test_compare_hosts_flags_slow_host(group: click.Group, tmp_path: Path) -> None:
    src = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"
    results = []
    for host, qps in (("n1", "73309.5"), ("n2", "73100.0"), ("n3", "60000.0")):
        d = tmp_path / "raw" / host
        shutil.copytree(src, d)
        text = (d / "mlperf_log_summary.txt").read_text().replace("73309.5", qps)
        (d / "mlperf_log_summary.txt").write_text(text)
        results += collect(d, host=host).results
    write_outputs(tmp_path / "run", results, OutputContext())
    code, out = run(group, "compare", str(tmp_path / "run"), "--hosts", "--threshold", "10")
    assert code == 7 and "SLOW" in out and "slow hosts: n3" in out
    code, _ = run(group, "compare", str(tmp_path / "run"), "--hosts", "--threshold", "20")
    assert code == 0


def _valid_and_corrupt(tmp_path: Path) -> Path:
    """A folder with one VALID result and one truncated metadata.json."""
    shutil.copytree(FIX / "loadgen" / "offline_valid", tmp_path / "in" / "good")
    (tmp_path / "in" / "bad").mkdir()
    (tmp_path / "in" / "bad" / "metadata.json").write_text('{"benchmark_full": "bert-99", "scenario": "Off')
    return tmp_path / "in"


def test_results_with_an_unreadable_file_exit_6_and_name_it(group: click.Group, tmp_path: Path) -> None:
    folder = _valid_and_corrupt(tmp_path)
    code, out = run(group, "results", str(folder), "--output", str(tmp_path / "out"))
    assert code == 6, out
    assert "verdict: FAILED - 1 result(s): 1 VALID" in out and "1 unreadable file(s)" in out
    bad = folder / "bad" / "metadata.json"
    assert f"unreadable: {bad}: not valid JSON" in out.replace("\n", "")  # each unread file is named once
    assert out.count(str(bad)) == 1
    verdict = json.loads((tmp_path / "out" / "summary.json").read_text())["verdict"]
    assert verdict["ok"] is False and verdict["unreadable_files"] == 1
    code, out = run(group, "results", str(folder), "--allow-invalid")
    assert code == 0 and "1 unreadable file(s)" in out
    # the written run folder keeps its verdict when read again
    code, out = run(group, "results", str(tmp_path / "out"))
    assert code == 6 and "1 unreadable file(s)" in out


def test_results_nan_headline_of_an_invalid_result_exits_6(group: click.Group, tmp_path: Path) -> None:
    shutil.copytree(FIX / "loadgen" / "offline_valid", tmp_path / "ok")
    src = (FIX / "loadgen" / "offline_invalid" / "mlperf_log_summary.txt").read_text()
    (tmp_path / "nan").mkdir()
    (tmp_path / "nan" / "mlperf_log_summary.txt").write_text(
        re.sub(r"Samples per second: \S+", "Samples per second: nan", src)
    )
    code, out = run(group, "results", str(tmp_path))
    assert code == 6, out
    assert "2 result(s): 1 VALID, 1 not VALID" in out and "could not build" not in out
    assert "(result_samples_per_second) is 'nan', not a finite number" in out.replace("\n", "")
