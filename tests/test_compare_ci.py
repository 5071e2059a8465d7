"""`workload compare` as CI uses it, JUnit XML, readable units, and --json on the listing commands."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.cli import invoke
from workload.cli.compare_cmd import compare_command
from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.compare import compare
from workload.metrics.outputs import OutputContext, write_outputs
from workload.metrics.units import readable

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
OFFLINE = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"


def cli(*args: str) -> tuple[int, str]:
    group = click.Group("workload")
    group.add_command(results_command)
    group.add_command(compare_command)
    result = CliRunner().invoke(group, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout


def run_folder(root: Path, name: str, qps_by_iteration: list[str], *, source: Path = H200, host: str = "n1") -> Path:
    """A run folder with one copy of ``source`` per iteration, the Offline figure set per iteration."""
    results = []
    for i, qps in enumerate(qps_by_iteration, 1):
        raw = root / "raw" / name / f"run_{i}"
        shutil.copytree(source, raw)
        for summary in raw.rglob("mlperf_log_summary.txt"):
            summary.write_text(summary.read_text().replace("Samples per second: 73309.5", f"Samples per second: {qps}"))
        results += collect(raw, host=host).results
    write_outputs(root / name, results, OutputContext())
    return root / name


def test_a_result_missing_from_the_new_run_fails_unless_allowed(tmp_path: Path) -> None:
    full = run_folder(tmp_path, "full", ["73309.5"])
    partial = tmp_path / "partial"
    shutil.copytree(H200, tmp_path / "raw" / "partial")
    shutil.rmtree(next((tmp_path / "raw" / "partial").rglob("llama2-70b-99")))
    write_outputs(partial, collect(tmp_path / "raw" / "partial", host="n1").results, OutputContext())
    code, out = cli("compare", str(full), str(partial))
    assert code == 7
    # the headline figure and the validity (their VirtualClient aliases folded)
    assert "missing from the new run: [n1] llama2-70b-99 Server PerformanceOnly (2 metric(s))" in out
    assert "2 metric(s) missing from the new run (1 whole result(s))" in out and "no regression" not in out
    code, out = cli("compare", str(full), str(partial), "--allow-missing")
    assert code == 0 and "allowed by --allow-missing" in out and "no regression" in out
    # the other way round, the extra result of the new run is only information
    code, out = cli("compare", str(partial), str(full))
    assert code == 0 and "new in the new run: [n1] llama2-70b-99 Server PerformanceOnly tokens_per_second" in out


def test_headline_metrics_by_default_all_with_all_and_readable_units(tmp_path: Path) -> None:
    a = run_folder(tmp_path, "a", ["73309.5"])
    code, out = cli("compare", str(a), str(a))
    assert code == 0
    # headline figure, validity, accuracy; no percentile that is not the headline, no VirtualClient alias
    assert "samples_per_second" in out and "tokens_per_second" in out and "PerformanceOnly: valid" in out
    assert "latency_p99_ns" not in out and "latency_p50_ns" not in out and "effective_target_qps" not in out
    assert "samples_per_second_p99" not in out and "PerformanceMode_p99" not in out
    assert "e+" not in out and " ns " not in out
    code, out = cli("compare", str(a), str(a), "--all")
    assert code == 0 and "latency_p50_ns" in out and "effective_target_qps" in out
    assert "80.79 ms" in out  # Server p99 latency 80785950 ns
    assert "samples_per_second_p99" not in out and "PerformanceMode_p99" not in out  # still each figure once
    assert "600 s" in out or "600,000 ms" not in out  # effective_min_duration_ms shown scaled


def test_iterations_are_compared_by_median_with_best_and_count(tmp_path: Path) -> None:
    base = run_folder(tmp_path, "base", ["70000", "71000", "72000"])
    new = run_folder(tmp_path, "new", ["60000", "71500", "99000"])  # median 71500: no regression
    result = compare(collect_run(base), collect_run(new), 5.0, headline_only=True)
    (change,) = [
        c for c in result.changes if c.key[1:] == ("bert-99", "Offline", "PerformanceOnly", "samples_per_second")
    ]
    assert change.a is not None and change.b is not None
    assert (change.before, change.after, change.a.n, change.b.n, change.b.best) == (71000.0, 71500.0, 3, 3, 99000.0)
    assert not change.regression
    code, out = cli("compare", str(base), str(new), "--iterations", "3")
    assert code == 0 and "A and B are medians; best and N (A/B) beside them" in out
    row = next(line for line in out.splitlines() if "[n1] bert-99 Offline" in line and "samples/s" in line)
    cells = [cell.strip() for cell in row.split("│")[2:11]]
    assert cells == [
        "71,000 samples/s",
        "72,000 samples/s",
        "71,500 samples/s",
        "99,000 samples/s",
        "3/3",
        "+0.70 %",
        "-43.6 .. +98.6 %",  # the interval of the change (ratio of the mean logs, + better) at 95 % confidence
        # the copies share one log's times: not interleaved, so unpaired; 3 and 3 are too few for ranks
        "unpaired t-log, 3/3, 0.95",
        "cannot tell",  # it reaches past -5 %: these three iterations cannot say
    ]
    # a new run with fewer iterations than asked for is incomplete: a failure
    short = run_folder(tmp_path, "short", ["71000", "71000"])
    code, out = cli("compare", str(base), str(short), "--iterations", "3")
    assert code == 7 and "has 2 of 3 iterations" in out
    code, out = cli("compare", str(base), str(short), "--iterations", "3", "--json")
    assert code == 7 and json.loads(out)["incomplete"][0]["n"] == 2


def collect_run(path: Path):  # type: ignore[no-untyped-def]
    from workload.metrics.outputs import load_run

    return load_run(path)


def test_compare_json_is_one_document_with_every_change(tmp_path: Path) -> None:
    a = run_folder(tmp_path, "a", ["73309.5"])
    b = run_folder(tmp_path, "b", ["65000"])
    code, out = cli("compare", str(a), str(b), "--json")
    document = json.loads(out)
    assert code == 7 and document["exit_code"] == 7 and document["scope"] == "headline"
    (offline,) = [c for c in document["changes"] if c["scenario"] == "Offline" and c["metric"] == "samples_per_second"]
    assert offline["before"]["median"] == 73309.5 and offline["after"]["median"] == 65000.0
    assert offline["regression"] is True and round(offline["change_pct"], 2) == -11.33
    assert document["missing"] == [] and document["regressions"] >= 1


def test_junit_of_results_names_the_invalid_reason_and_fix(tmp_path: Path) -> None:
    junit = tmp_path / "out" / "results.xml"
    code, _ = cli("results", str(FIX / "loadgen"), "--junit", str(junit), "--host", "h1")
    assert code == 6
    root = ET.parse(junit).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == int(root.attrib["tests"]) == len({(c.get("classname"), c.get("name")) for c in cases})
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(root.attrib["failures"]) == len(failed) >= 3
    texts = [c.find("failure").text or "" for c in failed]  # type: ignore[union-attr]
    assert all("why:" in t and "fix:" in t for t in texts if "INVALID" in t or "min duration" in t)
    offline = next(
        c for c in failed if "Offline" in (c.get("name") or "") and "min duration" in (c.findtext("failure") or "")
    )
    failure = offline.find("failure")
    assert failure is not None and failure.get("message", "").startswith("min duration not met")
    assert "target_qps" in (failure.text or "")
    assert all(c.get("classname", "").startswith("h1.") for c in cases)


def test_junit_of_compare_fails_the_regressed_and_missing_cases(tmp_path: Path) -> None:
    a = run_folder(tmp_path, "a", ["73309.5"])
    b = run_folder(tmp_path, "b", ["65000"])
    junit = tmp_path / "compare.xml"
    code, _ = cli("compare", str(a), str(b), "--junit", str(junit))
    assert code == 7
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(junit).getroot().iter("testcase")}
    offline = cases[("n1.bert-99", "Offline PerformanceOnly")]
    assert "regression past 5 %" in (offline.findtext("failure") or "")
    assert (
        offline.find("failure") is not None and cases[("n1.bert-99", "Server PerformanceOnly")].find("failure") is None
    )


def test_readable_units() -> None:
    assert readable(1.82466e10, "ns") == "18.25 s"
    assert readable(80785950.0, "ns") == "80.79 ms"
    assert readable(2500.0, "ns") == "2.5 µs"
    assert readable(600000.0, "ms") == "600 s"
    assert readable(57609.27, "samples/s") == "57,609.27 samples/s"
    assert readable(1.0, "VALID/INVALID") == "VALID" and readable(0.0, "PASS/FAIL") == "FAIL"
    # one scale for a group: 0.5 ms next to 20 ms reads 0.5 ms, not 500 µs
    assert readable(500000.0, "ns", like=[20000000.0]) == "0.5 ms"


def test_profiles_doctor_and_plan_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["profiles", "--json"]) == 0
    names = [p["name"] for p in json.loads(capsys.readouterr().out)]
    assert {"PERF-CPU-MLPERF", "PERF-GPU-MLPERF"} <= set(names)

    code = invoke(["doctor", "--json"])
    doc = json.loads(capsys.readouterr().out)
    (host,) = doc["hosts"]
    assert host["host"] == "local" and {"name", "status", "detail", "fix", "ok"} <= set(host["checks"][0])
    assert code == (4 if doc["failed"] else 0)

    assert invoke(["plan", "--profile", "PERF-CPU-MLPERF", "--json"]) == 0
    captured = capsys.readouterr()
    plan = json.loads(captured.out)  # only JSON on stdout; the progress went to stderr
    assert plan["profile"] == "PERF-CPU-MLPERF" and plan["exit_code"] == 0
    steps = plan["hosts"][0]["steps"]
    assert steps and all(s["status"] == "planned" for s in steps)
    assert any("--scenario Offline" in cmd for s in steps for ch in s["changes"] for cmd in ch["commands"])
    assert "PERF-CPU-MLPERF" in captured.err
