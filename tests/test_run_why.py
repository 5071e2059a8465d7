"""A run that is not OK says why: in the console's verdict, in summary.json (always written) and in
the report, looked at in headless Chromium.

Three real runs of the CPU profile: one refused before it measured anything (its Python cannot run
the benchmark: exit 4), one stopped by SIGTERM during its LoadGen test (exit 130), one INVALID (a
Server target far above what 2 cores serve: exit 6; a short min_duration: a test run). Each report
is rendered by Chromium (screenshot kept under the test's tmp dir, DOM checked for the reason).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_report import CHROMIUM, chromium
from tests.test_robust_interrupts import ROOT, processes_mentioning, wait_for
from workload.cli import invoke
from workload.history import open_history

FAST = "TestModes=PerformanceOnly,,,MinDurationMs=500,,,FindPeakPerformance=false,,,SampleCount=64"


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = {
        "WORKLOAD_STATE_PATH": str(tmp_path / "state.json"),
        "WORKLOAD_HISTORY": f"sqlite:///{tmp_path / 'history.sqlite'}",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


def looked_at(run: Path, tmp_path: Path, name: str) -> str:
    """report.html as headless Chromium parsed it (its DOM); a screenshot is kept as ``tmp_path/name.png``."""
    url = (run / "report.html").as_uri()
    shot = tmp_path / f"{name}.png"
    shown = chromium(tmp_path / f"profile-{name}-shot", f"--screenshot={shot}", "--window-size=1200,1600", url)
    assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", shown.stderr[-2000:]
    dom = chromium(tmp_path / f"profile-{name}-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def only_run(runs: Path) -> tuple[Path, dict[str, object], dict[str, object]]:
    (folder,) = runs.iterdir()
    return folder, json.loads((folder / "run.json").read_text()), json.loads((folder / "summary.json").read_text())


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package")


@needs_chromium
@pytest.mark.timeout(300)
def test_a_refused_run_names_the_host_step_and_problem_everywhere(
    tmp_path: Path, isolated: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads((ROOT / "profiles" / "PERF-CPU-MLPERF.json").read_text())
    document["Actions"][0]["Parameters"]["Python"] = str(tmp_path / "no-such-python")
    profile = tmp_path / "PERF-CPU-REFUSED.json"
    profile.write_text(json.dumps(document))
    code = invoke(["run", "--profile", str(profile), "--output-dir", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    why = (
        f"[local] Actions[0] LoadGenExecutor (mlperf-loadgen-minilm-int8): {tmp_path / 'no-such-python'} cannot import"
    )
    assert code == 4
    folder, _, summary = only_run(tmp_path / "runs")
    verdict = summary["verdict"]
    assert isinstance(verdict, dict) and verdict["ok"] is False and verdict["exit_code"] == 4
    assert str(verdict["failures"][0]).startswith(why)
    assert f"verdict: FAILED (exit code 4) - {why}" in out
    dom = looked_at(folder, tmp_path, "refused")
    assert "FAILED: no results (exit code 4)" in dom and f"why: {why}" in dom
    assert "No result to judge" in dom and "Every result VALID" not in dom


@needs_chromium
@pytest.mark.timeout(300)
def test_an_invalid_test_run_gives_its_reasons_and_the_test_run_note(
    tmp_path: Path, isolated: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    parameters = f"Scenarios=Server,,,ServerTargetQps=1500,,,{FAST}"  # the README's INVALID demo, word for word
    argv = ["run", "--profile", "PERF-CPU-MLPERF", "--parameters", parameters, "--output-dir", str(tmp_path / "runs")]
    code = invoke(argv)
    out = capsys.readouterr().out
    assert code == 6, out
    folder, _, summary = only_run(tmp_path / "runs")
    verdict = summary["verdict"]
    assert isinstance(verdict, dict) and verdict["test_runs"] == 1 and verdict["exit_code"] == 6
    (failure,) = verdict["failures"]
    assert "minilm-int8 Server PerformanceOnly: latency constraint not met" in failure
    assert "verdict: FAILED - 1 result(s): 0 VALID, 1 not VALID" in out
    assert "fix: lower the Server target QPS (about 10 % per try until VALID): `--parameters ServerTargetQps=" in out
    assert "note: 1 result(s) ran shorter than the round's min_duration: a test run, not valid for submission" in out
    dom = looked_at(folder, tmp_path, "invalid")
    assert "why: [local] minilm-int8 Server PerformanceOnly: latency constraint not met" in dom
    assert 'id="test-run"' in dom and "a test run, not valid for submission" in dom


@needs_chromium
@pytest.mark.timeout(300)
def test_a_run_stopped_by_sigterm_names_the_signal_and_the_test_it_stopped(
    tmp_path: Path, isolated: dict[str, str]
) -> None:
    runs = tmp_path / "runs"
    parameters = f"Scenarios=Offline,Server,,,OfflineTargetQps=50,,,ServerTargetQps=20,,,{FAST}"
    parameters = parameters.replace("MinDurationMs=500", "MinDurationMs=60000")
    argv = [sys.executable, "-m", "workload", "run", "--profile", "PERF-CPU-MLPERF", "--parameters", parameters]
    env = {**os.environ, **isolated, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [*argv, "--output-dir", str(runs)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        wait_for(lambda: bool(list(runs.glob("*/*/*LoadGenExecutor*.log"))), 60, "the LoadGen step")
        (folder,) = runs.iterdir()
        wait_for(
            lambda: bool(processes_mentioning(f"--out {folder}/")),  # a local run writes into its own folder
            60,
            "the LoadGen runner",
        )
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    folder, run, summary = only_run(runs)
    assert summary["interrupted"] is True and summary["interrupt_reason"] == "interrupted (SIGTERM)"
    verdict = summary["verdict"]
    assert isinstance(verdict, dict) and verdict["ok"] is False
    stopped = "the run was interrupted (SIGTERM): not every planned step ran"
    assert verdict["failures"][0] == stopped
    assert "stopped during LoadGen Offline PerformanceOnly: interrupted (SIGTERM)" in verdict["failures"][1]
    assert f"verdict: FAILED (exit code 130) - {stopped}" in out
    assert "verdict: OK" not in out and "Ctrl-C" not in out
    outcomes = run["outcomes"]
    assert isinstance(outcomes, list) and "LoadGen Server" not in str(outcomes[0]["error"])
    with open_history(isolated["WORKLOAD_HISTORY"]) as history:
        (recorded,) = history.runs()
    assert (recorded.exit_code, recorded.ok, recorded.interrupted) == (130, False, "interrupted (SIGTERM)")
    dom = looked_at(folder, tmp_path, "interrupted")
    assert f"why: {stopped}" in dom and "(exit code 130)" in dom
