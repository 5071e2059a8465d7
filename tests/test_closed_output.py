"""A reader that closes the pipe early (``| head -1``) costs a command its printing, never its work.

Real processes on real pipes: ``workload run`` of the CPU profile (a short Offline run), ``results
--record`` and ``compare``, each with its stdout's reader gone (after the first line, or before the
first write) and, once, stderr's too. Each must write its files, record its run, exit with its own
exit code and leave no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import workload
from workload.history import open_history

ROOT = Path(workload.__file__).resolve().parent.parent
H200 = ROOT / "tests" / "fixtures" / "results" / "nvidia" / "logs" / "2024.07.24-15.41.28"
NOTE = "note: standard output was closed before the command finished"


def env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "WORKLOAD_STATE_PATH": str(tmp_path / "state.json"),
        "WORKLOAD_HISTORY": f"sqlite:///{tmp_path / 'history.sqlite'}",
        "TMPDIR": str(tmp_path),  # a debug log (a traceback file) would land here
    }


def head_1(
    argv: list[str], tmp_path: Path, *, read_first: bool = True, close_stderr: bool = False
) -> tuple[int, str, str]:
    """Run ``workload ARGV | head -1``: read one line of stdout (``read_first``; else none: the reader is
    gone before the first write, which a short output would otherwise beat), close it; the exit code,
    that line, stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "workload", *argv],
        env=env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline() if read_first else ""
    proc.stdout.close()
    if close_stderr:
        proc.stderr.close()
        err = ""
    else:
        err = proc.stderr.read()
    return proc.wait(timeout=300), first, err


def test_run_into_head_writes_its_folder_records_and_exits_with_its_verdict(tmp_path: Path) -> None:
    parameters = (
        "Scenarios=Offline,,,TestModes=PerformanceOnly,,,MinDurationMs=1000,,,FindPeakPerformance=false,,,"
        "OfflineTargetQps=50,,,SampleCount=64"
    )
    argv = ["run", "--profile", "PERF-CPU-MLPERF", "--parameters", parameters, "--output-dir", str(tmp_path / "runs")]
    code, first, err = head_1(argv, tmp_path)
    assert first.startswith("PERF-CPU-MLPERF on 1 host(s); run folder")
    (folder,) = (tmp_path / "runs").iterdir()
    run = json.loads((folder / "run.json").read_text())
    summary = json.loads((folder / "summary.json").read_text())
    assert code == run["exit_code"] and code in (0, 6)  # the verdict's code, as the README lists it
    assert summary["verdict"]["ok"] is (code == 0) and (folder / "metrics.jsonl").stat().st_size > 0
    assert (folder / "report.html").is_file()
    assert NOTE in err and f"(exit code {code})" in err and "Traceback" not in err
    assert not list(tmp_path.glob("workload-debug-*.log"))
    with open_history(env(tmp_path)["WORKLOAD_HISTORY"]) as history:
        (recorded,) = history.runs()
    assert recorded.run_id == folder.name and recorded.exit_code == code


def test_results_and_compare_with_closed_stdout_and_stderr_keep_their_work_and_exit_codes(tmp_path: Path) -> None:
    good, slow = tmp_path / "good", tmp_path / "slow"
    shutil.copytree(H200, good)
    shutil.copytree(H200, slow)
    for summary in slow.rglob("mlperf_log_summary.txt"):
        summary.write_text(summary.read_text().replace("Samples per second: 73309.5", "Samples per second: 60000"))
    argv = ["results", str(good), "--record", "--output", str(tmp_path / "out")]
    code, _, err = head_1(argv, tmp_path, read_first=False)
    assert code == 0 and NOTE in err and "Traceback" not in err
    assert (tmp_path / "out" / "summary.json").is_file()
    # both streams closed: nothing can be said, the work is still done
    code, _, _ = head_1(
        ["results", str(slow), "--record", "--tag", "next"], tmp_path, read_first=False, close_stderr=True
    )
    assert code == 0
    with open_history(env(tmp_path)["WORKLOAD_HISTORY"]) as history:
        assert sorted((r.run_id, r.tag) for r in history.runs()) == [("good", None), ("slow", "next")]
    code, _, err = head_1(["compare", "--all", str(good), str(slow)], tmp_path, read_first=False)
    assert code == 7 and NOTE in err and "(exit code 7)" in err and "Traceback" not in err
    assert not list(tmp_path.glob("workload-debug-*.log"))
