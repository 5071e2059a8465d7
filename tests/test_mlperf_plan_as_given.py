"""The MLPerf action executes the plan it made (issue 28, item 2): ``plan`` carries the typed ops as the
StepPlan's payload, ``apply`` runs them without gathering facts or planning again, and what only the system check
can decide is an explicit deferred tail that ``plan`` labels as such.

Real local hosts and folders; the harness container (docker + NVIDIA's image) is stood in for only where the
interpreter's data flow between ops is judged (its exec returns the text a harness run prints).
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.fixtures.facts.builders import host_system, recorded_inventory
from tests.fixtures.facts.builders import mlperf_facts as facts
from tests.steptypes import step_context
from workload.actions.mlperf_executor import MLPerfExecutor, plan_mlperf
from workload.cli.console import render_plan
from workload.cli.plan_json import _step as plan_json_step
from workload.engine import StepOutcome
from workload.errors import StepError
from workload.hosts.local import LocalHost
from workload.mlperf.container import ContainerSpec
from workload.mlperf.interpreter import Interpreter
from workload.mlperf.ops import CollectResults, IdentifySystem, MakeTarget, Op
from workload.mlperf.planner import MLPerfPlan, SystemAnswer, plan_ops
from workload.mlperf.settings import MLPerfParameters
from workload.steps import StepPlan


def params(**extra: Any) -> MLPerfParameters:
    return MLPerfParameters.model_validate({"Model": "bert", "Scenarios": "Offline", **extra})


def checkout(tmp_path: Path) -> Path:
    """A v4.1 closed/NVIDIA folder (its VERSION file), as GitRepoClone leaves it before anything else ran."""
    nvidia = tmp_path / "repo" / "closed" / "NVIDIA"
    nvidia.mkdir(parents=True)
    (nvidia / "VERSION").write_text("4.1\n")
    return nvidia


def step_for(nvidia: Path, tmp_path: Path) -> MLPerfExecutor:
    values = {
        "Model": "bert",
        "Scenarios": "Offline",
        "RepoPath": str(nvidia),
        "ScratchPath": str(tmp_path / "scratch"),
        "DockerBaseUrl": "tcp://127.0.0.1:9",  # nothing listens: plan notes it, apply must not get that far here
    }
    return MLPerfExecutor(MLPerfParameters.model_validate(values), location="Actions[0]", kind="action")


# -- plan carries what apply runs ---------------------------------------------------------------------------------
def test_plan_carries_its_typed_ops_and_the_run_id_chosen_while_planning(tmp_path: Path) -> None:
    nvidia = checkout(tmp_path)
    step = step_for(nvidia, tmp_path)
    ctx = step_context(LocalHost(), tmp_path)
    plan = step.plan(ctx)
    planned = plan.payload
    assert isinstance(planned, MLPerfPlan)
    run_id = planned.inputs.run_id
    assert re.fullmatch(r"\d{8}-\d{6}-1", run_id), run_id  # <date>-<time>-<iteration>, not a placeholder
    # The printed changes are rendered from the payload: the LOG_DIR shown is the one apply uses.
    shown = " ".join(c.display() for c in plan.commands)
    assert f"LOG_DIR=build/logs/workload-{run_id}-bert-perf" in shown
    assert plan == plan_mlperf(step.p, planned.inputs.facts, run_id=run_id)  # same changes, same notes


def test_plan_before_the_clone_shows_the_run_id_placeholder(tmp_path: Path) -> None:
    step = step_for(tmp_path / "not-cloned" / "closed" / "NVIDIA", tmp_path)
    planned = step.plan(step_context(LocalHost(), tmp_path)).payload
    assert isinstance(planned, MLPerfPlan)
    assert planned.inputs.run_id == "<run id>"


def test_apply_executes_the_plan_it_is_handed_not_the_host_as_it_is_now(tmp_path: Path) -> None:
    """A plan made before the clone says the checkout is missing; apply goes by that plan even after the folder
    appears (it gathers nothing again), so what runs is what was shown."""
    nvidia = tmp_path / "repo" / "closed" / "NVIDIA"
    step = step_for(nvidia, tmp_path)
    ctx = step_context(LocalHost(), tmp_path)
    plan = step.plan(ctx)
    checkout(tmp_path)  # the host changed after planning
    with pytest.raises(StepError, match=r"the harness repository is not there"):
        step.apply(ctx, plan)
    assert not (tmp_path / "scratch").exists()


def test_apply_refuses_a_plan_without_this_actions_payload(tmp_path: Path) -> None:
    step = step_for(checkout(tmp_path), tmp_path)
    with pytest.raises(StepError, match=r"internal: apply was handed a plan this action did not make"):
        step.apply(step_context(LocalHost(), tmp_path), StepPlan())


# -- the deferred tail --------------------------------------------------------------------------------------------
def test_the_ops_after_the_system_check_are_a_deferred_tail_after_it() -> None:
    planned = plan_ops(params(ConfigVersion="default,high_accuracy", TestModes="PerformanceOnly"), facts())
    assert isinstance(planned.tail.after, IdentifySystem)
    assert not any(isinstance(op, IdentifySystem) for op in (*planned.head, *planned.tail.preview))
    assert planned.ops == (*planned.head, planned.tail.after, *planned.tail.preview)
    # An answer that decides nothing runs the tail as shown.
    assert planned.tail.plan(SystemAnswer()) is planned.tail.preview
    # An answer with a result blocked plans the tail again without it.
    answer = SystemAnswer(blocked={("Offline", "bert-99.9"): "no config"})
    expected = {e for op in planned.tail.plan(answer) if isinstance(op, CollectResults) for e in op.expected}
    assert {e.benchmark for e in expected} == {"bert-99"}
    shown = {e for op in planned.tail.preview if isinstance(op, CollectResults) for e in op.expected}
    assert {e.benchmark for e in shown} == {"bert-99", "bert-99.9"}


def test_the_system_id_the_check_decides_replaces_the_placeholder_in_the_tail() -> None:
    p = params(Model="llama2-70b", HarnessRound="v6.1", RequireCustomSystemSupport=True, Quick=True)
    planned = plan_ops(p, facts(system=host_system(recorded_inventory("h200-x1-real"))), run_id="R")

    def system_names(ops: tuple[Op, ...]) -> set[str]:
        return {v for op in ops if isinstance(op, MakeTarget) for k, v in op.variables if k == "SYSTEM_NAME"}

    assert system_names(planned.tail.preview) == {"<system id from the system check>"}
    assert system_names(planned.tail.plan(SystemAnswer(system_name="WL_H200x1"))) == {"WL_H200x1"}


def test_plan_labels_the_deferred_tail_once_in_text_and_json() -> None:
    plan = plan_mlperf(params(), facts(), run_id="R")
    out = io.StringIO()
    render_plan(Console(file=out, width=400, no_color=True, color_system=None, highlight=False), plan, full=True)
    lines = out.getvalue().splitlines()
    labels = [i for i, line in enumerate(lines) if line.startswith("decided after the system check")]
    assert len(labels) == 1
    # Right after the system check's change and its command, before the first change it decides.
    assert lines[labels[0] - 2].startswith("+ ask the harness which system this is")
    assert lines[labels[0] + 1].startswith("+ ")
    outcome = StepOutcome("Actions[0] MLPerfExecutor", "planned", 0.0, plan=plan)
    entry = plan_json_step(outcome, None)
    decided = [c["decided_after"] for c in json.loads(json.dumps(entry))["changes"]]
    head = sum(1 for c in plan.changes if c.decided_after is None)
    assert decided[:head] == [None] * head and head >= 3
    assert set(decided[head:]) == {plan.changes[-1].decided_after} and plan.changes[-1].decided_after


# -- the interpreter: what a CollectResults explains with is the output of the run of its own LOG_DIR --------------
class _Harness:
    """Stands in for the harness container (docker and NVIDIA's image): each run prints a traceback naming it."""

    spec = ContainerSpec("standin-harness", "image", "/r/closed/NVIDIA", "/mnt/scratch", "1000:1000")

    def exec(self, argv: list[str], *, on_line: Any = None, **_: Any) -> tuple[int, str]:
        log_dir = next(a.split("=", 1)[1] for a in argv if a.startswith("LOG_DIR="))
        return 1, f"Traceback (most recent call last)\nValueError: crashed in {log_dir}\n"


class _NoCheck(Interpreter):
    def _identify(self, op: Op) -> None:
        self.answer = SystemAnswer()  # NVIDIA's check needs the container: its answer here changes nothing


def test_each_collect_explains_its_own_runs_output_not_the_last_ones(tmp_path: Path) -> None:
    p = params(TestModes="PerformanceOnly,AccuracyOnly")
    planned = plan_ops(p, facts(nvidia_dir=str(tmp_path)), run_id="R")
    runs = [op for op in planned.tail.preview if isinstance(op, MakeTarget) and op.log_dir]
    collects = [op for op in planned.tail.preview if isinstance(op, CollectResults)]
    assert len(runs) == len(collects) == 2
    # Both runs first, then both collects: the last run's output must not explain the first run's results.
    tail = dataclasses.replace(planned.tail, preview=(*runs, *collects))
    plan = dataclasses.replace(planned, head=(), tail=tail)
    ctx = step_context(LocalHost(), tmp_path)
    interpreter = _NoCheck(MLPerfExecutor(p, location="Actions[0]", kind="action"), ctx, plan, None, None)  # type: ignore[arg-type]
    interpreter.container = _Harness()  # type: ignore[assignment]
    with pytest.raises(StepError) as failed:
        interpreter.run()
    missing = [m for m in failed.value.problem.split("; ") if m.startswith("no result for")]
    assert len(missing) == 2
    for run, collect, why in zip(runs, collects, missing, strict=True):
        assert collect.log_dir.endswith("/" + str(run.log_dir))
        assert why.endswith(f"the harness crashed: ValueError: crashed in {run.log_dir}"), why
