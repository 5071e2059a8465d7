"""Text from outside (host names, paths, profiles, result files) is printed literally, never as rich markup.

``[/]`` made rich raise MarkupError in ``results``, ``compare``, ``plan`` and ``run`` (after the
benchmark had finished, losing the verdict); ``[bold]`` silently restyled output. Every command is
driven through :func:`workload.cli.invoke`, the console script's own entry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from rich.console import Console

from workload.cli import invoke
from workload.steps import Change, Step, StepContext, StepPlan

FIX = Path(__file__).parent / "fixtures" / "results"
H200_OFFLINE = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28" / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"
CPU_RESULTS = FIX / "cpu" / "minilm"
MARKUP = "[/] [bold]x[/bold] [red"


class ResultStep(Step):
    """An action that 'produces' a copy of the CPU result fixture (test only)."""

    type_name: ClassVar[str] = "ResultStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change(f"copy results {MARKUP}", ()),))

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        target = ctx.host_dir / "results"
        shutil.copytree(CPU_RESULTS, target, dirs_exist_ok=True)
        ctx.log(f"copied {MARKUP}")
        ctx.results.append(target)


@pytest.fixture
def result_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.steptypes import TEST_TYPES
    from workload import registry

    types = {**TEST_TYPES, "ResultStep": "tests.test_robust_console:ResultStep"}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **types})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))


def test_results_with_markup_in_host_and_path_print_literally(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "[/]logs[bold]"
    shutil.copytree(H200_OFFLINE, folder)
    assert invoke(["results", str(folder), "--host", MARKUP]) == 0
    out = capsys.readouterr().out
    assert MARKUP in out and "verdict: OK" in out


def test_compare_with_markup_in_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a[/]", tmp_path / "[red]b"
    shutil.copytree(H200_OFFLINE, a)
    shutil.copytree(H200_OFFLINE, b)
    assert invoke(["compare", str(a), str(b), "--all"]) == 0
    out = capsys.readouterr().out
    assert "no regression" in out and "a[/]" in out.replace("\n", "")


def test_plan_with_markup_in_description_and_scenario(
    tmp_path: Path, result_steps: None, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(
        json.dumps({"Description": MARKUP, "Actions": [{"Type": "EchoStep", "Parameters": {"Scenario": "s[/]"}}]})
    )
    assert invoke(["plan", "--profile", str(profile)]) == 0
    out = capsys.readouterr().out
    assert MARKUP in out and "EchoStep (s[/])" in out


def test_run_with_markup_everywhere_keeps_the_verdict(
    tmp_path: Path, result_steps: None, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.json"
    profile.write_text(
        json.dumps({"Description": MARKUP, "Actions": [{"Type": "ResultStep", "Parameters": {"Scenario": "[/]"}}]})
    )
    runs = tmp_path / "runs[/]"
    assert invoke(["run", "--profile", str(profile), "--output-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    (summary,) = runs.glob("*/summary.json")
    assert json.loads(summary.read_text())["verdict"]["ok"] is True
    assert f"run folder: {summary.parent}" in out.replace("\n", "")


def test_reporter_prints_markup_literally_on_any_console() -> None:
    """The reporter builds Text, so even a console with markup on shows host names as they are."""
    from tests.steptypes import EchoParameters, EchoStep
    from workload.cli.console import ConsoleReporter, hosts_table
    from workload.engine import HostOutcome, StepOutcome
    from workload.errors import StepError

    console = Console(record=True, width=300, markup=True)
    hosts = ["[/]", "n[bold]2"]
    reporter = ConsoleReporter(console, hosts=hosts, verbose=1)
    step = EchoStep(EchoParameters(Scenario="[/]"), location="Actions[0]", kind="action")
    for host in hosts:
        reporter.step_started(host, step)
        reporter.line(host, "out [/] put")
        reporter.step_finished(host, step, StepOutcome(step.label, "failed", message="bad [/] thing"))
        error = StepError(step.label, "bad [/] thing", host=host)
        reporter.host_finished(host, HostOutcome(host, "failed", error=error))
    console.print(hosts_table([HostOutcome(h, "failed", error=StepError("s", "[/]", host=h)) for h in hosts], {}))
    text = console.export_text()
    assert "[[/]] out [/] put" in text and "[n[bold]2]" in text and "bad [/] thing" in text
