"""What a new user meets in the first hour (issue 34), each asserted on the CLI's output:
``--scenarios`` given an MLPerf scenario, the profile as argument or option on every command, the
``profiles`` columns, what a "changed" step changed, where the history is, and VirtualClient's older
``PERF-GPU-MLPERF.json`` (the form with ``Benchmarks``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workload.cli import invoke
from workload.cli.history_hook import history_location

ROOT = Path(__file__).resolve().parent.parent
VC = ROOT / "tests" / "fixtures" / "profiles" / "vc"
OLDER_VC = VC / "older" / "PERF-GPU-MLPERF.json"


@pytest.fixture
def echo_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test step types registered; a profile of one EchoStep action (writes a marker file)."""
    from tests.steptypes import TEST_TYPES
    from workload import registry

    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    profile = tmp_path / "echo.json"
    step = {"Type": "EchoStep", "Parameters": {"Scenario": "hello", "Message": "hi", "Marker": str(tmp_path / "m")}}
    profile.write_text(json.dumps({"Description": "echo", "Actions": [step]}))
    return profile


@pytest.mark.parametrize(
    ("profile", "meant"),
    [
        ("PERF-CPU-MLPERF", 'pass -p "Scenarios=Offline"'),
        ("PERF-GPU-MLPERF", 'pass -p "BertScenarios=Offline,,,UnetScenarios=Offline"'),
    ],
)
def test_scenarios_given_an_mlperf_scenario_points_to_the_parameter(
    profile: str, meant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert invoke(["plan", "--profile", profile, "--scenarios", "Offline"]) == 2
    err = capsys.readouterr().err
    assert "--scenarios Offline: no action has this Scenario" in err
    assert f"Offline: an MLPerf scenario of the actions' Scenarios parameter; to run only Offline, {meant}" in err
    # The hint is right: what it says to pass keeps Offline alone in every action, with no warning.
    value = meant.split('"')[1]
    assert invoke(["show", profile, "-p", value, "--json"]) == 0
    captured = capsys.readouterr()
    actions = json.loads(captured.out)["Actions"]
    assert actions and all(a["Parameters"]["Scenarios"] == "Offline" for a in actions)
    assert "warning" not in captured.err


def test_scenarios_written_in_the_action_name_the_action_to_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.json"
    action = {"Type": "MLPerfExecutor", "Parameters": {"Scenario": "b", "Model": "bert", "Scenarios": "Offline,Server"}}
    profile.write_text(json.dumps({"Description": "x", "Actions": [action]}))
    assert invoke(["plan", "--profile", str(profile), "--scenarios", "Server"]) == 2
    err = capsys.readouterr().err
    assert 'to run only Server, set "Scenarios": "Server" in the Parameters of Actions[0]' in err


def test_scenarios_that_nothing_lists_keep_the_plain_hint(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["plan", "--profile", "PERF-GPU-MLPERF", "--scenarios", "Nope"]) == 2
    err = capsys.readouterr().err
    assert "the actions' scenarios are: inferencemodels-bert, inferencemodels-3d-unet" in err
    assert "MLPerf scenario" not in err


def test_every_command_takes_the_profile_as_argument_or_option(
    echo_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert invoke(["show", "--profile", "PERF-CPU-MLPERF", "--json"]) == 0
    by_option = capsys.readouterr().out
    assert invoke(["show", "PERF-CPU-MLPERF", "--json"]) == 0
    assert capsys.readouterr().out == by_option
    assert invoke(["plan", str(echo_steps)]) == 0
    assert "Actions[0] EchoStep (hello): say 'hi'" in capsys.readouterr().out
    runs = tmp_path / "runs"
    assert invoke(["run", str(echo_steps), "--output-dir", str(runs), "--history", "off"]) == 0
    assert (tmp_path / "m").read_text() == "hi"
    capsys.readouterr()
    # The same name twice is one profile; two names, or none, is bad input with one message.
    assert invoke(["plan", str(echo_steps), "--profile", str(echo_steps)]) == 0
    capsys.readouterr()
    assert invoke(["plan", "PERF-CPU-MLPERF", "--profile", "PERF-GPU-MLPERF"]) == 2
    assert "two profiles given: PERF-CPU-MLPERF (argument) and PERF-GPU-MLPERF (--profile)" in capsys.readouterr().err
    for command in ("show", "plan", "run"):
        assert invoke([command]) == 2
        assert "error: no profile given" in capsys.readouterr().err


def test_profiles_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["profiles", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert invoke(["profiles"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(listing) >= 5
    starts = {line.index(entry["description"]) for line, entry in zip(lines, listing, strict=True)}
    assert len(starts) == 1  # every description starts in the same column
    assert starts.pop() >= max(len(entry["name"]) for entry in listing) + 2


def test_a_changed_step_says_what_changed_and_the_history_is_a_path(
    echo_steps: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "h.sqlite"
    argv = ["run", "--profile", str(echo_steps), "--output-dir", str(tmp_path / "runs")]
    assert invoke([*argv, "--history", f"sqlite:///{history}"]) == 0
    out = capsys.readouterr().out
    assert "    changed: say 'hi' (" in out  # not just "changed (0.1s)"
    assert f"recorded in history {history} as " in out and "sqlite:" not in out
    # Run again: nothing to change, and the line says why.
    assert invoke([*argv, "--history", "off"]) == 0
    assert f"    no change: {tmp_path / 'm'} already says 'hi' (" in capsys.readouterr().out


def test_history_location_keeps_other_urls() -> None:
    assert history_location("sqlite:////var/lib/h.sqlite") == "/var/lib/h.sqlite"
    assert history_location("sqlite:///relative.sqlite") == "relative.sqlite"
    assert history_location("postgresql://ci:***@db/hist") == "postgresql://ci:***@db/hist"


def test_older_virtualclient_profile_is_refused_with_the_change_that_makes_it_current(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in (["show", str(OLDER_VC)], ["plan", "--profile", str(OLDER_VC)]):
        assert invoke(argv) == 2
        err = capsys.readouterr().err
        assert "PERF-GPU-MLPERF.json: Actions[1].Parameters.Model" in err and "unknown model 'rnnt'" in err
        assert (
            "hint: PERF-GPU-MLPERF.json is an older VirtualClient form of this profile (Benchmarks); "
            "its current form ships with workload: --profile PERF-GPU-MLPERF"
        ) in err
        assert "Traceback" not in err and "unknown parameter" not in err
    # The change works: the shipped profile of that name loads.
    assert invoke(["show", "--profile", "PERF-GPU-MLPERF"]) == 0


def test_older_form_with_current_models_is_read_with_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Benchmarks`` alone does not make a profile unreadable: it is read, named, and changes nothing."""
    doc = json.loads((VC / "PERF-GPU-MLPERF.json").read_text())
    doc["Parameters"]["Benchmarks"] = "bert,3d-unet"
    for action in doc["Actions"]:
        action["Parameters"]["Benchmarks"] = "$.Parameters.Benchmarks"
    path = tmp_path / "PERF-GPU-MLPERF.json"
    path.write_text(json.dumps(doc))
    assert invoke(["show", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: PERF-GPU-MLPERF.json: Actions[0].Parameters.Benchmarks, Actions[1].Parameters.Benchmarks: "
        "Benchmarks is ignored: older VirtualClient releases set up every benchmark of this list before the "
        "first run; here each MLPerfExecutor sets up its own Model only, so it changes nothing (delete it to "
        "silence this)"
    ]
    shown = json.loads(captured.out)
    assert [a["Parameters"]["Model"] for a in shown["Actions"]] == ["bert", "3d-unet"]
    assert all("Benchmarks" not in a["Parameters"] for a in shown["Actions"])


def test_what_ran_where_names_only_sources_that_exist() -> None:
    """The README's "What ran where" table: every file or folder a row names as its record exists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What ran where", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `") or line.startswith("| every")]
    assert len(rows) >= 8
    named = {token for row in rows for token in re.findall(r"`((?:tests|bench|\.ci)/[^`]*)`", row)}
    assert "tests/test_gpu.py" in named and "tests/fixtures/monitors/h200-580.159.04/" in named
    for token in named:
        assert list(ROOT.glob(token.rstrip("/"))), token
    for row in rows:
        assert re.search(r"\| (since )?2026-\d\d-\d\d", row), row  # each row says when
