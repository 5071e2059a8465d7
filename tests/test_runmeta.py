"""run.json's record of the run itself, telemetry of a CLI run with a Monitors section, and its report.html."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from tests.test_cli import run_json, test_steps, write_profile
from workload import DISTRIBUTION, __version__
from workload.cli import invoke
from workload.runmeta import cpu_model, memory_total_gib

__all__ = ["test_steps"]  # the fixture, used by name below


def test_run_json_records_times_command_line_exit_code_and_machine(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-nvidia-smi") + os.pathsep + "/usr/bin:/bin")
    document = {
        "Description": "x",
        "Parameters": {"ApiToken": ""},
        "Actions": [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters.ApiToken"}}, {"Type": "FailStep"}],
        "Monitors": [{"Type": "NvidiaSmiMonitor", "Parameters": {"MonitorFrequency": "00:00:00.2"}}],
    }
    profile = write_profile(tmp_path, document)
    argv = ["run", "--profile", profile, "--parameters", "ApiToken=s3cr3t-value", "--output-dir", str(test_steps)]
    assert invoke(argv) == 4  # FailStep
    data = run_json(test_steps)
    assert data["exit_code"] == 4
    started = datetime.fromisoformat(str(data["started_at"]))
    ended = datetime.fromisoformat(str(data["ended_at"]))
    assert started.tzinfo is not None and started <= ended
    line = data["command_line"]
    assert isinstance(line, list) and line[:3] == ["workload", "run", "--profile"]
    assert "s3cr3t-value" not in json.dumps(data) and "ApiToken=***" in line
    assert data["tool"] == {"name": "workload", "distribution": DISTRIBUTION, "version": __version__}
    controller = data["controller"]
    assert isinstance(controller, dict)
    assert controller["cpu_count"] == os.cpu_count() and len(controller["load_average"]) == 3
    assert controller["packages"]["onnxruntime"] and controller["packages"]["mlcommons-loadgen"]
    # the monitor sampled the host (no nvidia-smi on PATH) while the actions ran
    (folder,) = test_steps.glob("*")
    summary = json.loads((folder / "telemetry" / "summary.json").read_text())
    assert summary["gpus"] == 0 and summary["interval_s"] == 0.2 and "host" in summary["hosts"]["local"]["devices"]
    out = capsys.readouterr().out
    assert "telemetry host (host) min/avg/max: cpu_utilization" in out
    # and the run folder has its report, with the exit code in it
    page = (folder / "report.html").read_text()
    assert "exit code 4" in page and "s3cr3t-value" not in page


def test_machine_facts_parsers() -> None:
    assert cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7V13 64-Core Processor\n") == (
        "AMD EPYC 7V13 64-Core Processor"
    )
    assert cpu_model("processor : 0\nBogoMIPS : 50.00\n") is None
    assert memory_total_gib("MemTotal:       16318412 kB\nMemFree: 1 kB\n") == 15.56
