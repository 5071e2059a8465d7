"""The HTML report (workload.report, `workload report`), opened in a real headless Chromium.

The run folder is made the way a fleet run leaves one: three hosts' LoadGen result folders (the
recorded LoadGen logs of tests/fixtures, one host made 30 % slower), run.json naming the hosts,
`workload results RUN --output RUN` writing metrics.jsonl and summary.json, and telemetry sampled
for real (host /proc and the test bed's stand-in nvidia-smi reporting a power-capped GPU). Then
`workload report RUN` writes report.html, and Chromium (Debian's package; .ci/run installs it)
renders it: a screenshot (kept under test-artifacts/), the DOM holding the key numbers, and no
console error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_monitors import gpu, install_standin
from workload.cli import invoke
from workload.monitors.sampler import MonitorSettings, TelemetryMonitor, wait_for_samples
from workload.report.data import ResultRow, load_run
from workload.report.html import outliers, render
from workload.report.svg import esc
from workload.rundir import safe_name

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "results" / "loadgen"
ARTIFACTS = ROOT / "test-artifacts"
HOSTS = ("vm-01", "vm-02", "vm-03 <b>&")  # a host name with markup: it must come out as text


def make_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "20261123-140000-PERF-CPU-MLPERF"
    for n, host in enumerate(HOSTS):
        for scenario, fixture in (("Offline", "offline_valid"), ("Server", "server_invalid")):
            parts = ("results", "loadgen", "minilm-int8", scenario, "performance", "run_1")
            folder = run.joinpath(safe_name(host), *parts)  # the engine's host folder name
            shutil.copytree(FIXTURES / fixture, folder)
            if n == 2 and scenario == "Offline":  # the slow host: 30 % fewer samples per second
                for name in ("mlperf_log_detail.txt", "mlperf_log_summary.txt"):
                    path = folder / name
                    path.write_text(path.read_text().replace("6854.84", "4798.39"))
    hosts = [{"name": h, "labels": {}} for h in HOSTS]
    (run / "run.json").write_text(
        json.dumps(
            {
                "run_id": run.name,
                "profile": "PERF-CPU-MLPERF",
                "started_at": "2026-11-23T14:00:00.000+00:00",
                "ended_at": "2026-11-23T14:01:10.000+00:00",
                "exit_code": 6,
                "command_line": ["workload", "run", "--profile", "PERF-CPU-MLPERF"],
                "tool": {"name": "workload", "version": "0.1.0"},
                "controller": {"cpu_model": "Test CPU <script>alert(1)</script>", "cpu_count": 2},
                "hosts": hosts,
            }
        )
    )
    assert invoke(["results", str(run), "--output", str(run)]) == 6  # the Server results are INVALID
    exe = install_standin(tmp_path, [gpu(0, clocks_event_reasons=0x4, util=93, power_w=688.1), gpu(1, util=95)])
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    monitor = TelemetryMonitor(run, MonitorSettings(interval_s=0.1)).start()
    wait_for_samples(monitor, 4)
    monitor.stop()
    return run


def test_outliers_are_hosts_far_below_the_fleet_median() -> None:
    def row(host: str, value: float) -> ResultRow:
        headline = {"name": "samples_per_second", "value": value, "unit": "samples/s", "relativity": "HigherIsBetter"}
        return ResultRow("r", host, "bert-99", "Offline", "PerformanceOnly", "VALID", None, headline)

    rows = [row("a", 100), row("b", 98), row("c", 85), row("d", 101)]
    flagged = outliers(rows)
    assert list(flagged) == [id(rows[2])] and "14 % worse than the fleet median 99" in flagged[id(rows[2])]
    assert outliers(rows[:2]) == {}  # two hosts make no fleet


def test_the_report_of_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, monkeypatch)
    assert invoke(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    # verdict first: before any table
    assert page.index('id="verdict"') < page.index('id="results"')
    assert f"<h1>workload report: PERF-CPU-MLPERF - {run.name}</h1>" in page
    assert "FAILED: 3 of 6 performance result(s) VALID" in page
    assert "vm-03 &lt;b&gt;&amp;" in page and "vm-03 <b>&" not in page
    assert esc("Test CPU <script>alert(1)</script>") in page and "<script" not in page
    assert "outlier: 30 % worse than the fleet median" in page
    assert "latency constraint not met" in page and "fix: lower the Server target QPS" in page
    assert "GPU throttling seen" in page and "SW power cap" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
    assert "https://" not in page
    run_data = load_run(run)
    assert {r.host for r in run_data.results} == set(HOSTS)
    assert all(r.percentiles.get("p99") for r in run_data.results)
    trends = {("samples_per_second", "samples/s"): {"vm-01": [(1_700_000_000.0, 6500.0), (1_700_086_400.0, 6854.84)]}}
    assert "Trends" in render([run_data], trends=trends) and 'id="trends"' in render([run_data], trends=trends)


def test_report_errors_name_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["report", str(tmp_path)]) == 2
    assert f"{tmp_path}: not a run folder (no summary.json or run.json)" in capsys.readouterr().err
    (tmp_path / "summary.json").write_text("{not json")
    assert invoke(["report", str(tmp_path)]) == 2
    assert "summary.json: not a readable JSON file" in capsys.readouterr().err
    assert invoke(["report", str(tmp_path), str(tmp_path)]) == 2
    assert "--output FILE" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (bash .ci/run installs it)")
@pytest.mark.timeout(300)
def test_the_report_renders_in_headless_chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path, monkeypatch)
    assert invoke(["report", str(run)]) == 0
    url = (run / "report.html").as_uri()
    shot = tmp_path / "report.png"
    result = chromium(tmp_path / "profile-shot", f"--screenshot={shot}", "--window-size=1200,2600", url)
    assert shot.is_file() and shot.stat().st_size > 20_000, result.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "report.png")
    dom = chromium(tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the key numbers, as the browser parsed the page
    assert "6,855 samples/s" in dom.stdout and "4,798 samples/s" in dom.stdout
    assert "FAILED: 3 of 6 performance result(s) VALID" in dom.stdout
    assert dom.stdout.count("<svg") >= 4 and "vm-03 &lt;b&gt;&amp;" in dom.stdout
    for output in (result.stderr, dom.stderr):
        errors = [line for line in output.splitlines() if "CONSOLE" in line or "Uncaught" in line]
        assert errors == []


def test_trends_are_one_plot_per_metric_and_unit_with_distinct_times_and_the_whole_legend(tmp_path: Path) -> None:
    from workload.report.html import time_labels

    (tmp_path / "summary.json").write_text(json.dumps({"results": []}))
    start = 1_800_000_000.0  # 2027-01-15 08:00 UTC
    sku = "minilm-int8 Offline (Standard_ND96isr_H100_v5-with-a-long-name)"
    trends = {
        ("samples_per_second", "samples/s"): {sku: [(start, 6500.0), (start + 3 * 3600, 6854.84)]},
        ("latency_p90_ns", "ns"): {"minilm-int8 SingleStream (local)": [(start, 1.9e6), (start + 3 * 3600, 2.1e6)]},
    }
    page = render([load_run(tmp_path)], trends=trends)
    section = page.split('id="trends"', 1)[1].split("<h2>", 1)[0]
    assert section.count("<svg") == 2  # throughput and latency never share an axis
    assert "samples_per_second (samples/s)" in section and "latency_p90_ns (ns)" in section
    assert esc(sku) in section  # the legend in full, not cut at 22 characters
    labels = [text for _, text in time_labels(start, start + 3 * 3600)]
    assert labels == ["01-15 08:00", "01-15 09:00", "01-15 10:00", "01-15 11:00"]
    assert all(f">{label}<" in section for label in labels)
    days = [text for _, text in time_labels(start, start + 30 * 86400)]
    assert days == ["2027-01-15", "2027-01-25", "2027-02-04", "2027-02-14"]
    assert [text for _, text in time_labels(start, start + 90)] == ["08:00:00", "08:00:30", "08:01:00", "08:01:30"]
