"""Each LLM round's shipped profile on NVIDIA's REAL tree, up to NVIDIA's config step (issue 27 "must show", the part
that needs neither a GPU nor the harness container).

For PERF-GPU-MLPERF-LLM (v5.1) and PERF-GPU-MLPERF-LLM-V6.0 (v6.0), every MLPerfExecutor action of the shipped
profile, as ``workload run`` resolves it, on an unknown 8x B200 machine and a staged copy of NVIDIA's published tree:

* the plan is ``plan_ops`` of the action's own parameters (the planner ``workload run`` uses);
* the interpreter's own handlers run the ops up to the system check: ``PrepareTree`` (v5.1 NVIDIA's ``make
  link_dirs``; v6.0 the README's clones, mlcommons/inference pinned) and ``IdentifySystem`` (NVIDIA's detection in
  its tree, then our custom system's config files written for what NVIDIA's code answered);
* the ops after it are planned again as the interpreter plans them (``SYSTEM_NAME`` decided by the check), and the
  RUN_ARGS of every ``make`` target and LLM server those ops run (``generate_engines``, ``run_harness``,
  ``run_llm_server``) go through NVIDIA's ``code/main.py`` ``MainRunner`` and its config step
  (tests/upstream_nvidia_driver.py): our files found, no minimal/empty fallback, NVIDIA's ``HarnessConfig`` built.

Stood in: ``docker exec`` (:class:`LocalHarness` runs each argv in the staged tree instead of a container: the test
bed's Debian container has no Python packages of NVIDIA's image), the network (``git`` clone/fetch:
``upstream_nvidia.GIT_STANDIN``; the checker those clones hold: ``upstream_nvidia.place_checker``), the GPUs (the CUDA
stand-in reports 8x B200) and TensorRT/torch (tests/upstream_standins). Not run here: the setup stages (downloads), the
engine build and the benchmark itself (GPU work; tests/test_upstream_nvidia_run.py runs the whole ``workload run`` of
both profiles in the test bed's container, with those stood in); the v4.1 profile (its system check is
``scripts/get_system_id.py`` and a ``custom_list.py`` registration, covered by tests/test_upstream_nvidia_v41.py; its
whole ``workload run`` is in tests/test_upstream_nvidia_run.py too).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests import upstream_nvidia as up
from tests.steptypes import step_context
from workload.hosts.local import LocalHost
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.interpreter import Interpreter
from workload.mlperf.ops import IdentifySystem, MakeTarget, PrepareTree
from workload.mlperf.planner import MLPerfPlan, SystemAnswer, plan_ops
from workload.mlperf.server_ops import StartServer
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem
from workload.profile import load_profile, resolve_profile

PROFILES = {"v5.1": "PERF-GPU-MLPERF-LLM", "v6.0": "PERF-GPU-MLPERF-LLM-V6.0"}
#: A cloud 8x B200 VM: NVIDIA's detection knows none of its systems in it (not NVIDIA's CPU, no PCI ids).
B200X8 = HostSystem("NVIDIA B200", 183359, 8, "AMD EPYC 9575F 64-Core Processor", 64, 2, 1, 2_200_000_000_000)
GPUS = up.cuda_gpus("NVIDIA B200", 192_265_846_784, (10, 0), 8)


@dataclass(frozen=True)
class _Spec:
    name: str


class LocalHarness:
    """``docker exec`` in the harness container, stood in: ``argv`` run from the staged closed/NVIDIA in NVIDIA's
    environment (tests/upstream_nvidia.py ``run_in_round``), its stderr then stdout as the output."""

    def __init__(self, staged: Path, tmp: Path) -> None:
        self.staged, self.tmp, self.spec = staged, tmp, _Spec("standin-harness")
        #: (argv, exit status, output) of every exec, in order.
        self.ran: list[tuple[list[str], int, str]] = []

    def exec(
        self, argv: list[str], *, on_line: Any, env: Any = None, timeout_s: float | None = None
    ) -> tuple[int, str]:
        extra = up.offline_path(self.tmp) | dict(env or {})
        done = up.run_in_round(self.staged, argv, gpus=GPUS, extra_env=extra)
        if on_line is not None:
            for stream, text in (("stderr", done.stderr), ("stdout", done.stdout)):
                for line in text.splitlines():
                    on_line(stream, line)
        self.ran.append((list(argv), done.returncode, done.stderr + done.stdout))
        return done.returncode, done.stderr + done.stdout


def _runs_after_check(plan: MLPerfPlan, answer: SystemAnswer) -> list[list[str]]:
    """The RUN_ARGS (with make's ``--action``) of every target and server the ops after the check run: the plan's
    deferred tail for the check's answer, as the interpreter runs it (workload/mlperf/interpreter.py ``run``)."""
    runs: list[list[str]] = []
    for op in plan.tail.plan(answer):
        if isinstance(op, MakeTarget) and op.target in ("generate_engines", "run_harness"):
            runs.append([*shlex.split(dict(op.variables)["RUN_ARGS"]), f"--action={op.target}"])
        elif isinstance(op, StartServer):
            make = dict(a.split("=", 1) for a in op.spec.argv[2:] if "=" in a)
            runs.append([*shlex.split(make["RUN_ARGS"]), "--action=run_llm_server"])
    return runs


@pytest.mark.parametrize("round_name", sorted(PROFILES))
def test_each_rounds_profile_plans_checks_and_passes_nvidias_config_step(round_name: str, tmp_path: Path) -> None:
    staged = up.stage_round(round_name, tmp_path, prepared=False)
    profile = resolve_profile(load_profile(PROFILES[round_name]))
    facts = MLPerfFacts(
        nvidia_dir=str(staged),
        nvidia_dir_exists=True,
        version=HarnessVersion.parse(round_name),
        commit="abcdef1234567890",
        scratch_path=str(tmp_path / "scratch"),
        user=UserFacts("alice", 1000, 1000, "alice", "/home/alice"),
        machine="x86_64",
        system=B200X8,
    )
    checked = 0
    for action in profile.actions:
        params = cast(MLPerfParameters, action.params)
        plan = plan_ops(params, facts, run_id="R")
        assert plan.round.name == round_name
        ctx = step_context(LocalHost("local"), tmp_path / params.Model)
        (tmp_path / params.Model).mkdir()
        interp = Interpreter(
            step=action,  # type: ignore[arg-type]
            ctx=ctx,
            plan=plan,
            connect=lambda: None,
            container_spec=lambda image: None,  # type: ignore[arg-type,return-value]
        )
        harness = LocalHarness(staged, tmp_path)
        interp.container = harness  # type: ignore[assignment]
        check = plan.tail.after
        assert isinstance(check, IdentifySystem)
        for op in plan.head:
            if isinstance(op, PrepareTree):
                interp._prepare_tree(op)  # the interpreter's own handler
        interp._identify(check)  # NVIDIA's detection, then our custom system's files written into the tree
        decided = interp.answer
        assert decided is not None
        # NVIDIA's detection (the check's last exec) knows no such system, so ours is a custom one
        log = ctx.log_path.read_text()
        assert harness.ran[-1][0] == list(check.argv), harness.ran[-1]
        assert "UNREGISTERED_x86_64_NVIDIA_B200x8" in harness.ran[-1][2], harness.ran[-1][2][-3000:]
        system_name = decided.system_name
        assert system_name is not None and system_name.startswith("WL_B200"), log[-3000:]
        assert not decided.blocked, decided.blocked
        written = sorted(p.relative_to(staged) for p in (staged / "configs" / system_name).rglob("*.py"))
        assert written, f"no config files written for {system_name}"

        up.place_checker(staged)  # the checker clone's content (v5.1: a setup stage's clone_loadgen, not run here)
        runs = _runs_after_check(plan, decided)
        assert {r[-1] for r in runs} >= {"--action=generate_engines", "--action=run_harness"}, runs
        answer = up.resolve_configs(staged, system_name, runs)
        assert answer["system"]["id"] == system_name
        for result in answer["results"]:
            where = f"{params.Model} {result.get('scenario')} {result['flags']}"
            assert result["problem"] is None, f"{where}: {result['problem']}"
            assert result["fallback"] is None, f"{where}: NVIDIA's code ran {result['fallback']} settings"
            assert result["file"] and f"configs/{system_name}/" in result["file"], where
            assert result["core_type"] == "trtllm_endpoint", where
            checked += 1
    assert checked >= 3 * len(profile.actions)
    print(f"{round_name} {PROFILES[round_name]}: {len(profile.actions)} actions, {checked} runs through NVIDIA's code")
