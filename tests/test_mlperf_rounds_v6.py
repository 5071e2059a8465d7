"""The v6.0 and v6.1 round adapters, pure: detection, the ops and exact commands ``plan`` prints, what they refuse.

Upstream behaviour per round: tests/fixtures/harness/rounds/v6.0/UPSTREAM.md and v6.1/UPSTREAM.md. The files a
custom system gets, and that the stand-in harnesses accept them: tests/test_mlperf_v6_configs.py.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from workload.errors import ProfileError
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import (
    BuildImage,
    CollectResults,
    IdentifySystem,
    MakeTarget,
    PrepareTree,
    SetupStage,
    UseImage,
    to_changes,
)
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds import Checkout, choose_round
from workload.mlperf.rounds.v6_0 import MLC_INFERENCE_COMMIT, clone_argv
from workload.mlperf.rounds.v6_1 import DEFAULT_IMAGE, SYSTEM_CHECK, system_name_of
from workload.mlperf.server_ops import StartServer, StopServer
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts, tree_key
from workload.mlperf.space_check import CheckFreeSpace
from workload.mlperf.system import HostSystem

ALICE = UserFacts("alice", 1000, 1000, "alice", "/home/alice")


def facts(version: tuple[int, int]) -> MLPerfFacts:
    return MLPerfFacts(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(*version),
        commit="abcdef1234567890",
        scratch_path="/mnt/scratch",
        user=ALICE,
        machine="x86_64",
    )


def params(**extra: Any) -> MLPerfParameters:
    base: dict[str, Any] = {"Model": "llama2-70b", "Scenarios": "Offline,Interactive", "Quick": True}
    base.update(extra)
    return MLPerfParameters.model_validate(base)


def commands(ops: Any) -> list[str]:
    return [c.display() for change in to_changes(ops) for c in change.commands]


def test_the_checkout_chooses_v60_and_v61() -> None:
    assert choose_round(Checkout(HarnessVersion(6, 0))).round.name == "v6.0"
    assert choose_round(Checkout(HarnessVersion(6, 1))).round.name == "v6.1"
    assert choose_round(Checkout(HarnessVersion(5, 1)), "v6.1").round.name == "v6.1"


def test_v60_plan_pulls_the_given_image_serves_each_scenario_and_uses_accuracy_target() -> None:
    image = "nvcr.io/nvidia/mlperf/mlperf-inference:mlpinf-v6.0-llm"
    plan = plan_ops(
        params(ContainerImage=image, RequireCustomSystemSupport=True, LLMServerPort=31555), facts((6, 0)), run_id="r1"
    )
    assert plan.round.name == "v6.0"
    images = [op for op in plan.ops if isinstance(op, (UseImage, BuildImage))]
    assert images == [UseImage(image)]
    kinds = [type(op).__name__ for op in plan.ops]
    runs = kinds[kinds.index("StartServer") :]
    assert runs.count("StartServer") == runs.count("StopServer") == 4  # 2 scenarios x 2 test modes
    assert runs[:4] == ["StartServer", "MakeTarget", "CollectResults", "StopServer"]
    start = next(op for op in plan.ops if isinstance(op, StartServer))
    assert start.spec.urls == ("127.0.0.1:31555",)
    assert (
        "RUN_ARGS=--benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99 --core_type=trtllm_endpoint "
        "--server_in_foreground --trtllm_server_urls=127.0.0.1:31555"
    ) in start.spec.argv
    runs_ = [op for op in plan.ops if isinstance(op, MakeTarget) and op.target == "run_harness"]
    first = dict(runs_[0].variables)
    assert first["RUN_ARGS"].startswith("--benchmarks=llama2-70b --scenarios=Offline --accuracy_target=0.99")
    assert "--test_run" in first["RUN_ARGS"] and "--config_ver" not in first["RUN_ARGS"]
    assert first["SYSTEM_NAME"] == "<system id from the system check>"
    # plan prints exactly the argv apply runs: the server's start and probe, the harness, the stop.
    shown = commands(plan.ops)
    assert any("make run_llm_server" in c for c in shown) and any("llm-server-stop" in c for c in shown)
    assert any(
        c.startswith("docker exec -u 1000:1000 -w /work mlperf-inference-alice-x86_64 make run_harness") for c in shown
    )


def test_v60_without_an_image_builds_the_recipe_like_prebuild() -> None:
    plan = plan_ops(params(), facts((6, 0)))
    (build,) = [op for op in plan.ops if isinstance(op, (UseImage, BuildImage))]
    assert isinstance(build, BuildImage) and build.tag.endswith("-llama2-70b")


def test_v61_plan_pulls_nvidias_image_installs_nv_mlpinf_and_has_no_engine_step() -> None:
    plan = plan_ops(params(RequireCustomSystemSupport=True), facts((6, 1)), run_id="r1")
    assert plan.round.name == "v6.1"
    assert [op for op in plan.ops if isinstance(op, UseImage)] == [UseImage(DEFAULT_IMAGE)]
    check = next(op for op in plan.ops if isinstance(op, IdentifySystem))
    assert check.argv == SYSTEM_CHECK
    stages = [op.stage for op in plan.ops if isinstance(op, SetupStage)]
    assert stages == ["ensure_installed", "download_data", "download_model", "preprocess_data"]
    assert not [op for op in plan.ops if isinstance(op, MakeTarget) and op.target == "generate_engines"]
    harness = [op for op in plan.ops if isinstance(op, MakeTarget)]
    assert [dict(op.variables)["LOG_DIR"] for op in harness] == [
        "build/logs/workload-r1-llama2-70b-perf-offline",
        "build/logs/workload-r1-llama2-70b-perf-interactive",
        "build/logs/workload-r1-llama2-70b-acc-offline",
        "build/logs/workload-r1-llama2-70b-acc-interactive",
    ]
    collect = [op for op in plan.ops if isinstance(op, CollectResults)]
    assert [str(e) for op in collect for e in op.expected][:2] == [
        "llama2-70b-99 Offline PerformanceOnly",
        "llama2-70b-99 Interactive PerformanceOnly",
    ]
    stops = [op for op in plan.ops if isinstance(op, StopServer)]
    assert len(stops) == 4 and all("--server_in_foreground" in " ".join(s.spec.argv) for s in stops)


def test_v61_high_accuracy_is_its_own_run() -> None:
    plan = plan_ops(params(ConfigVersion="default,high_accuracy", Scenarios="Offline"), facts((6, 1)), run_id="r")
    args = [dict(op.variables)["RUN_ARGS"] for op in plan.ops if isinstance(op, MakeTarget)]
    assert any("--accuracy_target=0.999" in a for a in args) and any("--accuracy_target=0.99 " in a for a in args)
    benchmarks = {e.benchmark for op in plan.ops if isinstance(op, CollectResults) for e in op.expected}
    assert benchmarks == {"llama2-70b-99", "llama2-70b-99.9"}


def runs_of(plan: Any) -> list[tuple[str, str]]:
    """(scenarios, accuracy target) of every harness run and engine build, in order."""
    out = []
    for op in plan.ops:
        if isinstance(op, MakeTarget) and op.target in ("run_harness", "generate_engines"):
            args = dict(op.variables)["RUN_ARGS"]
            target = args.split("--accuracy_target=")[1].split()[0]
            out.append((f"{op.target} {','.join(op.scenarios)}", target))
    return out


def test_v61_a_blocked_accuracy_target_leaves_that_run_out_and_the_others_in() -> None:
    p = params(ConfigVersion="default,high_accuracy", TestModes="PerformanceOnly")
    blocked = frozenset({("Offline", "llama2-70b-99.9", "0.999")})
    plan = plan_ops(p, facts((6, 1)), run_id="r", blocked_targets=blocked)
    assert runs_of(plan) == [
        ("run_harness Offline", "0.99"),
        ("run_harness Interactive", "0.99"),
        ("run_harness Interactive", "0.999"),
    ]
    # its server is not started either, and no result of it is expected
    starts = [" ".join(op.spec.argv) for op in plan.ops if isinstance(op, StartServer)]
    assert len(starts) == 3 and not any("--scenarios=Offline --accuracy_target=0.999" in a for a in starts)
    expected = {str(e) for op in plan.ops if isinstance(op, CollectResults) for e in op.expected}
    assert "llama2-70b-99.9 Offline PerformanceOnly" not in expected
    assert "llama2-70b-99.9 Interactive PerformanceOnly" in expected
    # the run folders of what is left keep their names
    logs = [dict(op.variables)["LOG_DIR"] for op in plan.ops if isinstance(op, MakeTarget)]
    assert logs[-1] == "build/logs/workload-r-llama2-70b-perf-interactive-999"
    # every target of every scenario blocked: no run at all
    every = frozenset(
        (s, b, t)
        for s in ("Offline", "Interactive")
        for b, t in (("llama2-70b-99", "0.99"), ("llama2-70b-99.9", "0.999"))
    )
    assert runs_of(plan_ops(p, facts((6, 1)), run_id="r", blocked_targets=every)) == []


def test_v60_a_blocked_accuracy_target_builds_and_runs_only_what_is_left() -> None:
    model = {"Model": "gpt-oss-120b", "Scenarios": "Offline,Server", "TestModes": "PerformanceOnly"}
    p = params(ConfigVersion="default,high_accuracy", **model)
    # gpt-oss-120b has one benchmark whatever the target: the target tells its runs apart
    blocked = frozenset({("Offline", "gpt-oss-120b", "0.999"), ("Server", "gpt-oss-120b", "0.999")})
    plan = plan_ops(p, facts((6, 0)), run_id="r", blocked_targets=blocked)
    assert runs_of(plan) == [
        ("generate_engines Offline,Server", "0.99"),
        ("run_harness Offline", "0.99"),
        ("run_harness Server", "0.99"),
    ]
    half = plan_ops(p, facts((6, 0)), run_id="r", blocked_targets=frozenset({("Server", "gpt-oss-120b", "0.999")}))
    assert runs_of(half) == [
        ("generate_engines Offline,Server", "0.99"),
        ("generate_engines Offline", "0.999"),
        ("run_harness Offline", "0.99"),
        ("run_harness Server", "0.99"),
        ("run_harness Offline", "0.999"),
    ]


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("mixtral-8x7b", "mixtral-8x7b is not a v6.1 benchmark for one node"),
        ("bert", "bert is not a v6.1 benchmark for one node"),
    ],
)
def test_v61_refuses_what_it_cannot_run_on_one_node(model: str, problem: str) -> None:
    with pytest.raises(ProfileError, match=problem):
        plan_ops(params(Model=model, Scenarios="Offline"), facts((6, 1)))


def test_v61_system_check_answers() -> None:
    known = "  system_name                = B300-SXM-270GBx8                              [auto-detected]\n"
    assert system_name_of("nv_mlpinf path configuration\n\n" + known) == "B300-SXM-270GBx8"
    assert system_name_of("[I] Detected system did not match any known systems. Exiting. System(...)") is None


def test_v61_endpoints_client_plan_writes_its_config_and_runs_it_between_server_start_and_stop() -> None:
    from workload.mlperf.endpoint_ops import RunEndpointsClient

    plan = plan_ops(
        params(Scenarios="Offline", Client="endpoints", TestModes="PerformanceOnly"), facts((6, 1)), run_id="r"
    )
    kinds = [type(op).__name__ for op in plan.ops]
    assert kinds[-4:] == ["StartServer", "RunEndpointsClient", "CollectResults", "StopServer"]
    (client,) = [op for op in plan.ops if isinstance(op, RunEndpointsClient)]
    assert client.argv[:5] == ("inference-endpoint", "benchmark", "from-config", "-c", f"/work/{client.config_path}")
    assert '"report_dir": "/work/build/logs/workload-r-llama2-70b-perf-offline/' in client.config_text
    assert "make run_harness" not in " ".join(commands(plan.ops))


def test_v61_endpoints_client_refuses_server_scenarios_it_has_no_target_for() -> None:
    # no ServerTargetQps and no GPUs known (so no NVIDIA server_target_qps): one message naming the parameter
    with pytest.raises(ProfileError, match="endpoints client runs llama2-70b Server as a Poisson load") as caught:
        plan_ops(params(Scenarios="Server", Client="endpoints", TestModes="PerformanceOnly"), facts((6, 1)))
    assert caught.value.location == "ServerTargetQps"


# One NVIDIA v6.0 system per SKU (its config file: gbeezybez/inference_results_v6.0 @ ab33b214, closed/NVIDIA/configs/
# <system>/Server/<benchmark>.py; tests/test_mlperf_v6_configs.py checks the values): the adapter's custom system for
# an unknown machine with those GPUs is named as NVIDIA names that system, with NVIDIA's values (tuned).
@pytest.mark.parametrize(
    ("gpu", "mib", "count", "model", "nvidia_system"),
    [
        ("NVIDIA B200", 183359, 4, "llama3.1-405b", "B200-SXM-180GBx4"),
        ("NVIDIA B300 SXM6 AC", 275040, 8, "deepseek-r1", "B300-SXM-270GBx8"),
        ("NVIDIA GB200", 189471, 4, "llama3.1-405b", "GB200-NVL72_GB200-186GB_aarch64x4"),
        ("NVIDIA GB300", 294912, 2, "llama3.1-405b", "GB300-NVL72_GB300-288GB_aarch64x2"),
    ],
)
def test_v60_custom_system_of_each_sku_is_named_like_nvidias_and_tuned(
    gpu: str, mib: int, count: int, model: str, nvidia_system: str
) -> None:
    adapter = choose_round(Checkout(HarnessVersion(6, 0))).round
    system = HostSystem(gpu, mib, count, "Neoverse-V2", 72, 1, 1, 900_000_000_000)
    files = adapter.system_files(system, model, ["Server"], ["k_99"], allow_untuned=False)
    assert files.tuned and files.system_id == f"WL_{nvidia_system}"
    (config,) = files.files
    assert f"# from closed/NVIDIA/configs/{nvidia_system}/Server/{model.replace('.', '_')}.py" in config.text


# -- the folders NVIDIA's README makes before anything imports its code (issue 27 item 1) ---------------------------
def _tree_ops(planned: Any) -> list[Any]:
    check = next(i for i, op in enumerate(planned.ops) if isinstance(op, IdentifySystem))
    return [op for op in planned.ops[:check] if isinstance(op, PrepareTree | CheckFreeSpace)]


def test_v60_clones_the_readmes_3rdparty_after_a_space_check_before_the_system_check() -> None:
    ops = _tree_ops(plan_ops(params(), facts((6, 0)), run_id="r"))
    space, *clones = ops
    assert isinstance(space, CheckFreeSpace) and space.folders() == ("/r/closed/NVIDIA/.",)
    assert space.summary().startswith("check the harness checkout's disk has room for NVIDIA's v6.0 3rdparty clones")
    assert [(c.folder, *c.argv[-2:]) for c in clones] == [
        ("3rdparty/trtllm", "https://github.com/NVIDIA/TensorRT-LLM.git", ""),
        # issue 27 item 4: MLCommons' repository pinned (its newest checker lost v6.0's llama3.1-405b)
        ("3rdparty/mlc-inference", "https://github.com/mlcommons/inference.git", MLC_INFERENCE_COMMIT),
    ]
    assert MLC_INFERENCE_COMMIT in clones[1].summary()
    assert all(c.done is None and c.argv[:2] == ("bash", "-c") for c in clones)
    assert not _tree_ops(plan_ops(params(HarnessRound="v6.1"), facts((6, 1)), run_id="r"))


def _git(*args: str, cwd: Path) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_v60_pinned_clone_checks_out_the_pinned_commit_not_the_newest_and_resumes(tmp_path: Path) -> None:
    # The clone script run for real (git, bash) against a local repository with a newer commit on top of the pinned
    # one: the folder holds the pinned commit alone (shallow), a cut-off clone's leftovers are redone, a finished
    # folder is kept.
    origin = tmp_path / "origin"
    origin.mkdir()
    _git("init", "-q", "-b", "main", cwd=origin)
    for text in ("v6.0 checker", "v6.1 checker"):
        (origin / "constants.py").write_text(text)
        _git("add", "constants.py", cwd=origin)
        _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", text, cwd=origin)
    pinned, newest = _git("rev-parse", "HEAD~1", cwd=origin), _git("rev-parse", "HEAD", cwd=origin)
    tree = tmp_path / "closed-NVIDIA"
    (tree / "3rdparty" / "mlc-inference.partial" / "junk").mkdir(parents=True)  # a clone cut off before
    argv = clone_argv("3rdparty/mlc-inference", f"file://{origin}", pinned)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    run = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    clone = tree / "3rdparty" / "mlc-inference"
    assert (clone / "constants.py").read_text() == "v6.0 checker"
    assert _git("rev-parse", "HEAD", cwd=clone) == pinned != newest
    assert _git("rev-list", "--count", "HEAD", cwd=clone) == "1"  # shallow: the pinned commit only
    assert not (tree / "3rdparty" / "mlc-inference.partial").exists()
    (clone / "constants.py").write_text("the user's own")  # a finished folder is kept as it is
    again = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0 and (clone / "constants.py").read_text() == "the user's own"


def test_v60_clones_done_for_this_commit_are_skipped_while_their_folders_are_there() -> None:
    base = facts((6, 0))
    done = {tree_key("/r/closed/NVIDIA", base.commit, f): "t" for f in ("3rdparty/trtllm", "3rdparty/mlc-inference")}
    there = replace(base, done=done, present=frozenset({"3rdparty/trtllm", "3rdparty/mlc-inference"}))
    ops = _tree_ops(plan_ops(params(), there, run_id="r"))
    assert [type(op) for op in ops] == [PrepareTree, PrepareTree] and all(op.done == "t" for op in ops)
    # One folder removed since (make clean): made again, and the space check counts it alone.
    gone = replace(there, present=frozenset({"3rdparty/mlc-inference"}))
    space, trtllm, mlc = _tree_ops(plan_ops(params(), gone, run_id="r"))
    assert isinstance(space, CheckFreeSpace) and [n.stage for n in space.needs] == ["clone 3rdparty/trtllm"]
    assert trtllm.done is None and mlc.done == "t"
    skipped = _tree_ops(plan_ops(params(SkipFreeSpaceCheck=True), facts((6, 0)), run_id="r"))
    assert [type(op) for op in skipped] == [PrepareTree, PrepareTree]


def test_v51_makes_build_by_make_link_dirs_before_the_system_check() -> None:
    (prepare,) = _tree_ops(plan_ops(params(HarnessRound="v5.1", Scenarios="Offline"), facts((5, 1)), run_id="r"))
    assert prepare.folder == "build" and prepare.argv == ("make", "link_dirs", "EXTERNAL_USER=1")
