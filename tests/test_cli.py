"""The command line as a user meets it: help, profiles, show, plan, errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workload.cli import invoke

ROOT = Path(__file__).resolve().parent.parent
VC_PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "vc" / "PERF-GPU-MLPERF.json"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workload", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_help_teaches_and_imports_nothing_heavy() -> None:
    probe = (
        "import sys, runpy; sys.argv=['workload','--help']\n"
        "try:\n    runpy.run_module('workload', run_name='__main__')\nexcept SystemExit as e:\n    code = e.code\n"
        "heavy = [m for m in ('docker','paramiko','pydantic','rich','jsonpath_ng','tenacity') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT).stdout
    assert "HEAVY=\n" in out or out.rstrip().endswith("HEAVY="), out
    assert "workload run --profile PERF-CPU-MLPERF" in out
    assert "Exit codes" in out
    for command in ("run", "plan", "profiles", "show", "results", "compare", "doctor"):
        assert f"  {command} " in out, command


def test_every_subcommand_has_help() -> None:
    for command in ("run", "plan", "profiles", "show", "results", "compare", "doctor"):
        assert invoke([command, "--help"]) == 0


def test_profiles_lists_shipped_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["profiles"]) == 0
    out = capsys.readouterr().out
    assert "PERF-GPU-MLPERF" in out and "PERF-CPU-MLPERF" in out


def test_show_resolves_parameters_and_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["show", "perf-gpu-mlperf.json", "--parameters", "LinuxDriverVersion=535,,,Username=azureuser"]) == 0
    out = capsys.readouterr().out
    assert 'LinuxDriverVersion = "535"' in out
    assert "Dependencies[3] NvidiaCudaInstallation (InstallNvidiaCuda)" in out
    assert "Actions[1] MLPerfExecutor (inferencemodels-3d-unet)" in out


def test_show_json_is_the_resolved_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["show", "PERF-GPU-MLPERF", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    types = [d["Type"] for d in data["Dependencies"]]
    assert types == [
        "FormatDisks",
        "MountDisks",
        "GitRepoClone",
        "NvidiaCudaInstallation",
        "DockerInstallation",
        "NvidiaContainerToolkitInstallation",
    ]
    assert data["Dependencies"][2]["Parameters"]["Commit"]  # the results repository is pinned
    assert data["Actions"][0]["Parameters"]["Model"] == "bert"


def test_plan_gpu_profile_on_this_machine_exits_0_and_shows_every_step() -> None:
    result = run_cli("plan", "--profile", "PERF-GPU-MLPERF")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for label in (
        "Dependencies[0] FormatDisks",
        "Dependencies[1] MountDisks",
        "Dependencies[2] GitRepoClone",
        "Dependencies[3] NvidiaCudaInstallation",
        "Dependencies[4] DockerInstallation",
        "Dependencies[5] NvidiaContainerToolkitInstallation",
        "Actions[0] MLPerfExecutor",
        "Actions[1] MLPerfExecutor",
    ):
        assert label in out, label
    assert "LinuxDriverVersion = '550'" in out  # resolved parameters are printed with each step
    assert "Traceback" not in out + result.stderr


def test_virtualclient_profile_file_loads_unchanged() -> None:
    result = run_cli("plan", "--profile", str(VC_PROFILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Actions[1] MLPerfExecutor (inferencemodels-3d-unet)" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["show", "NOPE"], 2, "NOPE: no such shipped profile"),
        (["show", "PERF-GPU-MLPERF", "--parameters", "oops"], 2, "'oops' is not key=value"),
        (["plan", "--profile", "PERF-GPU-MLPERF", "--host", "ftp://x"], 2, "unknown scheme 'ftp'"),
        (["plan", "--profile", "PERF-GPU-MLPERF", "--host", "ssh://u:pw@h"], 2, "'ssh://u:***@h': a password in"),
        (["run", "--profile", "PERF-CPU-MLPERF", "--iterations", "2", "--timeout", "1"], 2, "cannot be used together"),
        (["nosuchcommand"], 2, "No such command"),
    ],
)
def test_bad_input_gives_one_message_and_exit_code(
    args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert invoke(args) == code
    captured = capsys.readouterr()
    assert message in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out


def test_bad_profile_through_cli_names_the_json_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "mine.json"
    profile.write_text(
        json.dumps({"Description": "x", "Actions": [{"Type": "MLPerfExecutor", "Parameters": {"Model": "rnnt"}}]})
    )
    assert invoke(["plan", "--profile", str(profile)]) == 2
    err = capsys.readouterr().err
    assert "mine.json: Actions[0].Parameters.Model:" in err
    assert "rnnt" in err
    assert err.count("\n") <= 3, err


def test_only_failed_runs_just_the_hosts_that_did_not_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.steptypes import TEST_TYPES
    from workload import registry

    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"Description": "x", "Actions": [{"Type": "EchoStep"}]}))
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "run.json").write_text(json.dumps({"outcomes": [{"host": "local", "status": "ok"}]}))
    args = ["run", "--profile", str(profile), "--output-dir", str(tmp_path / "runs"), "--only-failed", str(earlier)]
    assert invoke(args) == 2
    assert "no host to run" in capsys.readouterr().err

    (earlier / "run.json").write_text(json.dumps({"outcomes": [{"host": "local", "status": "failed"}]}))
    assert invoke(args) == 0
    (run_json,) = (tmp_path / "runs").glob("*/run.json")
    assert [o["host"] for o in json.loads(run_json.read_text())["outcomes"]] == ["local"]

    (earlier / "run.json").write_text("not json")
    assert invoke(args) == 2
    assert "is not the run.json of a workload run" in capsys.readouterr().err
