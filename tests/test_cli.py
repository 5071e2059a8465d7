"""The command line as a user meets it: help, profiles, show, plan, errors and exit codes."""

from __future__ import annotations

import json
import re
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
    # --details: this test reads each step's parameters, which the default summary leaves out
    result = run_cli("plan", "--profile", "PERF-GPU-MLPERF", "--details")
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
    # A step that cannot be planned here is said to be one that would fail, not one that failed.
    failing = int(re.search(r", (\d+) would fail if run now\.", out).group(1))  # type: ignore[union-attr]
    assert failing >= 1  # no machine of this kind has an NVIDIA GPU for the driver step
    # the summary after the steps adds the steps that need a GPU on a host without one
    assert out.count("would fail if run now:") + out.count("needs an NVIDIA GPU, and this host has none") == failing
    assert "FAILED" not in out


def test_virtualclient_profile_file_loads_unchanged() -> None:
    result = run_cli("plan", "--profile", str(VC_PROFILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Actions[1] MLPerfExecutor (inferencemodels-3d-unet)" in result.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["show", "NOPE"], 2, "NOPE: no such shipped profile"),
        (["show", "PERF-GPU-MLPERF", "--parameters", "oops"], 2, "item 1 is not key=value"),
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


# -- profiles run through the CLI with the test step types ---------------------------------------


@pytest.fixture
def test_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Register the test step types; host state in tmp_path. Returns the runs folder."""
    from tests.steptypes import TEST_TYPES
    from workload import registry

    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    return tmp_path / "runs"


def write_profile(tmp_path: Path, document: dict[str, object]) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document))
    return str(path)


def run_json(runs: Path) -> dict[str, object]:
    (path,) = runs.glob("*/run.json")
    data: dict[str, object] = json.loads(path.read_text())
    return data


def step_labels(runs: Path) -> list[tuple[str, str]]:
    (outcome,) = run_json(runs)["outcomes"]  # type: ignore[misc]
    return [(s["step"], s["status"]) for s in outcome["steps"]]


TWO_ACTIONS = {
    "Description": "x",
    "Dependencies": [{"Type": "EchoStep", "Parameters": {"Scenario": "Prepare"}}],
    "Actions": [
        {"Type": "EchoStep", "Parameters": {"Scenario": "first", "Message": "one"}},
        {"Type": "EchoStep", "Parameters": {"Scenario": "second", "Message": "two"}},
    ],
}


def test_scenarios_filter_through_the_cli(tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path, TWO_ACTIONS)
    # Nothing matches: nothing would run, so it is an error that lists the scenarios there are.
    assert invoke(["run", "--profile", profile, "--scenarios", "nosuch", "--output-dir", str(test_steps)]) == 2
    err = capsys.readouterr().err
    assert "--scenarios nosuch: no action has this Scenario" in err and "first, second" in err
    assert not test_steps.exists()
    # One of two matches: that one runs (with the dependencies), the other name is a warning.
    assert invoke(["run", "--profile", profile, "--scenarios", "Second,nosuch", "--output-dir", str(test_steps)]) == 0
    captured = capsys.readouterr()
    assert "warning: --scenarios nosuch: no action has Scenario 'nosuch'" in captured.err
    assert [label for label, _ in step_labels(test_steps)] == [
        "Dependencies[0] EchoStep (Prepare)",
        "Actions[1] EchoStep (second)",
    ]


def test_scenario_exclusion_that_matches_nothing_warns(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = write_profile(tmp_path, TWO_ACTIONS)
    assert invoke(["show", profile, "--scenarios", "-prepare,-nosuch"]) == 0
    captured = capsys.readouterr()
    assert "warning: --scenarios -nosuch: no step has Scenario 'nosuch', so nothing is excluded" in captured.err
    assert "Prepare" not in captured.out and "Actions[0] EchoStep (first)" in captured.out


def test_unknown_parameters_key_is_a_warning_with_a_suggestion(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = {**TWO_ACTIONS, "Parameters": {"Greeting": "hi"}}
    document["Actions"] = [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters.Greeting"}}]
    profile = write_profile(tmp_path, document)
    assert invoke(["show", profile, "--parameters", "Greting=hello"]) == 0
    err = capsys.readouterr().err
    assert "warning: --parameters Greting: the profile has no parameter 'Greting'" in err
    assert "did you mean 'Greeting'?" in err
    # A key the profile refers to (but does not declare) is what the reference needs: no warning.
    document["Actions"] = [{"Type": "EchoStep", "Parameters": {"Message": "$.Parameters.Extra"}}]
    profile = write_profile(tmp_path, document)
    assert invoke(["show", profile, "--parameters", "extra=yes"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and 'Message = "yes"' in captured.out


def test_unknown_type_suggests_and_lists_the_known_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path, {"Description": "x", "Actions": [{"Type": "MLPerfExecuter"}]})
    assert invoke(["plan", "--profile", profile]) == 2
    err = capsys.readouterr().err
    assert "p.json: Actions[0].Type: unknown step type 'MLPerfExecuter' (did you mean 'MLPerfExecutor'?)" in err
    known = "DockerInstallation, FormatDisks, GitRepoClone, GpuQualifyExecutor, LoadGenExecutor, MLPerfExecutor"
    assert f"hint: known types: {known}" in err


def test_timeout_repeats_action_rounds_until_the_deadline(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = write_profile(tmp_path, TWO_ACTIONS)
    # 0.05 min = 3 s; each round of two echo actions takes a fraction of that.
    assert invoke(["run", "--profile", profile, "--timeout", "0.05", "--output-dir", str(test_steps)]) == 0
    labels = [label for label, _ in step_labels(test_steps)]
    assert labels[0] == "Dependencies[0] EchoStep (Prepare)" and labels.count("Dependencies[0] EchoStep (Prepare)") == 1
    rounds = labels.count("Actions[0] EchoStep (first)")
    assert rounds >= 2 and labels.count("Actions[1] EchoStep (second)") == rounds  # whole rounds only
    assert run_json(test_steps)["options"]["timeout_s"] == pytest.approx(3.0)  # type: ignore[index]


def test_timeout_rounds_go_on_after_a_failed_action_like_virtualclient(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # VirtualClient swallows an action's failure and goes on to the next action and round until the
    # timeout (only --fail-fast or a step's FailFast ends the run); the exit code reports the failure.
    document = {"Description": "x", "Actions": [{"Type": "FailStep"}, {"Type": "EchoStep"}]}
    profile = write_profile(tmp_path, document)
    assert invoke(["run", "--profile", profile, "--timeout", "0.03", "--output-dir", str(test_steps)]) == 4
    steps = step_labels(test_steps)
    failed = [s for s in steps if s == ("Actions[0] FailStep", "failed")]
    echoed = [s for s in steps if s[0] == "Actions[1] EchoStep" and s[1] in ("changed", "unchanged")]
    assert len(failed) >= 2 and len(echoed) == len(failed)


def test_step_fail_fast_stops_the_remaining_actions(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    actions: list[dict[str, object]] = [{"Type": "FailStep"}, {"Type": "EchoStep"}]
    profile = write_profile(tmp_path, {"Description": "x", "Actions": actions})
    assert invoke(["run", "--profile", profile, "--output-dir", str(test_steps / "a")]) == 4
    assert [s for _, s in step_labels(test_steps / "a")] == ["failed", "changed"]  # without FailFast: goes on
    actions[0]["Parameters"] = {"FailFast": True}
    profile = write_profile(tmp_path, {"Description": "x", "Actions": actions})
    assert invoke(["run", "--profile", profile, "--output-dir", str(test_steps / "b")]) == 4
    assert step_labels(test_steps / "b") == [("Actions[0] FailStep", "failed")]


def test_secrets_are_masked_in_show_plan_logs_and_the_run_folder(
    tmp_path: Path, test_steps: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = {
        "Description": "x",
        "Parameters": {"ApiToken": "tok-ABCDEF-987", "MirrorKey": "https://keys.example.invalid/gpg"},
        "Actions": [
            {"Type": "EchoStep", "Parameters": {"Scenario": "token", "Message": "$.Parameters.ApiToken"}},
            {"Type": "EchoStep", "Parameters": {"Message": "https://user:ghp_SECRET123@example.invalid/r.git"}},
        ],
    }
    profile = write_profile(tmp_path, document)
    secrets = ("tok-ABCDEF-987", "ghp_SECRET123")
    shown: list[str] = []
    for argv in (["show", profile], ["show", profile, "--json"], ["plan", "--profile", profile, "-v"]):
        assert invoke(argv) == 0
        captured = capsys.readouterr()
        shown.append(captured.out + captured.err)
    assert 'ApiToken = "***"' in shown[0] and 'Message = "https://user:***@example.invalid/r.git"' in shown[0]
    assert '"MirrorKey": "https://keys.example.invalid/gpg"' in shown[1]  # a URL-valued *Key is not a secret
    assert "$ echo 'https://user:***@example.invalid/r.git'" in shown[2]
    assert invoke(["run", "--profile", profile, "-v", "--output-dir", str(test_steps)]) == 0
    captured = capsys.readouterr()
    shown.append(captured.out + captured.err)
    files = [p for p in test_steps.rglob("*") if p.is_file()]
    assert any(p.name == "profile.json" for p in files) and any(p.suffix == ".log" for p in files)
    for text in [*shown, *(p.read_text() for p in files)]:
        for secret in secrets:
            assert secret not in text
    (saved,) = test_steps.glob("*/profile.json")
    assert json.loads(saved.read_text())["Parameters"]["ApiToken"] == "***"


def test_ask_sudo_password_without_a_terminal_suggests_the_env_option(tmp_path: Path) -> None:
    # A new session has no controlling terminal (like CI or nohup); stdin is not a terminal either.
    result = subprocess.run(
        [sys.executable, "-m", "workload", "plan", "--profile", "PERF-CPU-MLPERF", "--ask-sudo-password"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--ask-sudo-password: there is no terminal to prompt on" in result.stderr
    assert "--sudo-password-env" in result.stderr and "aborted" not in result.stderr


def test_plan_writes_nothing_to_output_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # plan takes run's --output-dir (one command line for both) but writes no run folder.
    runs = tmp_path / "runs"
    assert invoke(["plan", "--profile", "PERF-CPU-MLPERF", "--output-dir", str(runs)]) == 0
    assert not runs.exists()
    assert invoke(["plan", "--help"]) == 0
    assert "Ignored: plan writes no run folder" in capsys.readouterr().out
