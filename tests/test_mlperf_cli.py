"""The MLPerf flow end to end through the real CLI: GitRepoClone, then MLPerfExecutor for bert and 3d-unet.

Real parts: ``workload.cli.invoke`` (the same code path as the console script), a real git clone over
``file://`` of a bare repository holding the stand-in harness, the test bed's private dockerd (image
built from the repository's own docker/ recipe, a detached container, ``docker exec`` of the make
targets), the metrics layer writing metrics.jsonl / metrics.csv / summary.json. No GPU: UseGpus is
false and the system (8x H100 SXM on an AMD host NVIDIA's list does not know) is injected.

The profile (tests/fixtures/profiles/mlperf/TEST-GPU-MLPERF-CHAINED.json) is the GPU profile's clone
step and two actions, with every test value passed through ``--parameters``. Host state goes to a
temporary file through ``WORKLOAD_STATE_PATH``.

What this guards most: after a run the clone carries our custom-system files and ``build/``; the next
run's GitRepoClone must call that clean through ``IgnorePaths`` instead of refusing the clone.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import H100X8, git, make_harness_tree
from tests.processes import processes
from workload.cli import invoke
from workload.errors import EXIT_INVALID_RESULTS, EXIT_STEP_FAILED
from workload.mlperf.custom_system import BLOCK_BEGIN, HEADER

pytestmark = pytest.mark.slow

PROFILE = Path(__file__).resolve().parent / "fixtures" / "profiles" / "mlperf" / "TEST-GPU-MLPERF-CHAINED.json"
#: This test's own container (the harness's DOCKER_NAME): checkouts running these tests at once on the
#: shared test bed must not share (and remove) one container.
CONTAINER = f"mlperf-inference-test-{uuid.uuid4().hex[:12]}"
# closed/NVIDIA/.gitignore as found in a v4.1 results tree (abridged): it ignores byte code but NOT build/,
# so after a run `git status` lists build/ and only IgnorePaths keeps the clone "clean". (The stand-in
# tree's own .gitignore says build/ and misses __pycache__.)
REAL_GITIGNORE = "__pycache__\n*.out\n"
SERVER_TARGET_QPS = 5000  # bert.Server.target_qps (RUN_ARGS --server_target_qps); the stand-in reports 99% of it
# (model, scenario, test mode) the profile asks for: bert 3 scenarios, 3d-unet 2, each in both modes.
EXPECTED = {
    (model, scenario, mode)
    for model, scenarios in (("bert", ("Offline", "Server", "SingleStream")), ("3d-unet", ("Offline", "SingleStream")))
    for scenario in scenarios
    for mode in ("PerformanceOnly", "AccuracyOnly")
}
CUSTOM_CONFIGS = (
    "configs/bert/Offline/custom.py",
    "configs/bert/Server/custom.py",
    "configs/bert/SingleStream/custom.py",
    "configs/3d-unet/Offline/custom.py",
    "configs/3d-unet/SingleStream/custom.py",
)


@dataclass
class Bed:
    tmp: Path
    bare: Path
    commit: str
    scratch: Path
    clone: Path
    state: Path
    runs: Path
    parameters: str
    engine: Any

    def calls(self) -> list[str]:
        """What the stand-in's Makefile recorded (one line per download/preprocess/build/run)."""
        return (self.scratch / "standin_calls.log").read_text().splitlines()


@dataclass
class Run:
    code: int
    out: str
    folder: Path


def make_results_repo(dest: Path) -> tuple[Path, str]:
    """A bare repository of the stand-in harness with the real repository's .gitignore; (bare, commit)."""
    work = dest.with_name(dest.name + "-work")
    make_harness_tree(work)
    (work / "closed" / "NVIDIA" / ".gitignore").write_text(REAL_GITIGNORE)
    git("init", "-q", "-b", "main", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "stand-in harness v4.1", cwd=work)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(dest)], check=True, capture_output=True)
    return dest, git("rev-parse", "HEAD", cwd=work).strip()


def remove_container(engine: Any) -> None:
    with contextlib.suppress(Exception):
        engine.client.containers.get(CONTAINER).remove(force=True)


@pytest.fixture
def bed(tmp_path: Path, docker_engine: Any, freshvm_image: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bed]:
    bare, commit = make_results_repo(tmp_path / "harness.git")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    # The stand-in harness "detects" this system inside the container (no nvidia-smi there).
    (scratch / "standin_detected_system.json").write_text(json.dumps(H100X8))
    parameters = ",,,".join(
        [
            f"ResultsRepoUri=file://{bare}",
            f"ResultsRepoCommit={commit}",
            f"PackageDir={tmp_path / 'packages'}",
            f"ScratchPath={scratch}",
            f"DockerBaseUrl={docker_engine.base_url}",
            f"BaseImage={freshvm_image}",
            f"SystemDescription={json.dumps(H100X8)}",
            f"DockerName={CONTAINER}",
            # A LoadGen key given as is: no step refers to it, yet it reaches bert's Server run only.
            f"bert.Server.target_qps={SERVER_TARGET_QPS}",
            "Quick=true",  # the harness's real short run (--test_run): results are INVALID by design
            "UseGpus=false",
            "UnlimitedMemlock=false",  # the nested test daemon cannot raise memlock
        ]
    )
    state = tmp_path / "state.json"
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(state))
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps at the terminal width; keep each message on one line
    remove_container(docker_engine)  # another test's container would be recreated anyway; start clean
    yield Bed(
        tmp=tmp_path,
        bare=bare,
        commit=commit,
        scratch=scratch,
        clone=tmp_path / "packages" / "mlperf",
        state=state,
        runs=tmp_path / "runs",
        parameters=parameters,
        engine=docker_engine,
    )
    remove_container(docker_engine)


def cli(bed: Bed, command: str, capsys: pytest.CaptureFixture[str], profile: Path = PROFILE, extra: str = "") -> Run:
    """``workload COMMAND --profile P --parameters ... --output-dir RUNS``; the new run folder, if any."""
    before = set(bed.runs.iterdir()) if bed.runs.exists() else set()
    capsys.readouterr()
    parameters = bed.parameters + (",,," + extra if extra else "")
    details = ["--details"] if command == "plan" else []  # the tests read plan's commands, not its summary
    argv = [command, "--profile", str(profile), "--parameters", parameters, "--output-dir", str(bed.runs), *details]
    code = invoke(argv)
    captured = capsys.readouterr()
    new = sorted(set(bed.runs.iterdir()) - before) if bed.runs.exists() else []
    return Run(code, captured.out + captured.err, new[-1] if new else bed.runs / "(no new run folder)")


def step_statuses(run: Run) -> list[str]:
    """Each step's status as run.json records it (the engine's own account, not console text)."""
    (outcome,) = json.loads((run.folder / "run.json").read_text())["outcomes"]
    return [step["status"] for step in outcome["steps"]]


def step_log(run: Run, prefix: str) -> str:
    (path,) = (run.folder / "local").glob(f"{prefix}-*.log")
    return path.read_text()


def check_results(bed: Bed, run: Run) -> list[dict[str, Any]]:
    """The run folder's metrics files hold one result per (model, scenario, mode) asked for; returns the metrics."""
    assert run.code == EXIT_INVALID_RESULTS, run.out  # Quick=true: --test_run results are INVALID by design
    assert "verdict: FAILED - 10 result(s): 0 VALID, 5 not VALID, 0 accuracy failure(s)" in run.out
    assert "bert-99 Server PerformanceOnly: min duration not met" in run.out
    metrics = [json.loads(line) for line in (run.folder / "metrics.jsonl").read_text().splitlines()]
    assert metrics
    for metric in metrics:
        meta = metric["metadata"]
        assert metric["host"] == "local" and meta["host"] == "local", metric
        assert meta["model"] in ("bert", "3d-unet") and meta["scenario"] and meta["test_mode"], metric
        assert meta["system"] == "WL_H100_SXM_80GBx8_TRT", metric  # our custom system ran, not an NVIDIA entry
        assert "/build/logs/workload-" in meta["source"] and str(bed.clone) in meta["source"]
    assert {
        (m["metadata"]["model"], m["metadata"]["scenario"], m["metadata"]["test_mode"]) for m in metrics
    } == EXPECTED
    with (run.folder / "metrics.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(metrics)
    assert all(r["ProfileName"] == "TEST-GPU-MLPERF-CHAINED" and "host=local" in r["Metadata"] for r in rows)
    summary = json.loads((run.folder / "summary.json").read_text())
    assert summary["counts"] == {"results": 10, "metrics": len(metrics), "issues": 0, "hosts": 1}
    by_key = {(r["model"], r["scenario"], r["test_mode"]): r for r in summary["results"]}
    assert set(by_key) == EXPECTED
    assert all(by_key[k]["accuracy_pass"] is True for k in EXPECTED if k[2] == "AccuracyOnly")
    assert "changes nothing" not in run.out  # the LoadGen key given through --parameters is not "unused"
    # The override reached LoadGen: the stand-in reports 99% of the Server target.
    assert by_key[("bert", "Server", "PerformanceOnly")]["headline"]["value"] == pytest.approx(SERVER_TARGET_QPS * 0.99)
    for prefix in ("01-GitRepoClone", "02-MLPerfExecutor", "03-MLPerfExecutor"):
        assert step_log(run, prefix).strip(), prefix
    return metrics


def run_sources(metrics: list[dict[str, Any]]) -> set[str]:
    return {m["metadata"]["source"] for m in metrics}


def test_profile_chained_behind_git_clone_runs_reruns_and_survives_a_reboot(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    # -- plan on the fresh machine: previews, nothing changed ----------------------------------------
    planned = cli(bed, "plan", capsys)
    assert planned.code == 0, planned.out
    assert f"clone file://{bed.bare} at {bed.commit} into {bed.clone}" in planned.out
    assert "MLPerfExecutor (inferencemodels-bert)" in planned.out
    assert "MLPerfExecutor (inferencemodels-3d-unet)" in planned.out
    assert "set up bert: download_data, download_model, preprocess_data" in planned.out
    assert "run bert Offline,Server,SingleStream PerformanceOnly (quick: --test_run)" in planned.out
    assert "run 3d-unet Offline,SingleStream AccuracyOnly (quick: --test_run)" in planned.out
    assert "3 step(s) on 1 host(s): 3 would change, 0 no change, 0 would fail if run now." in planned.out
    assert not bed.clone.exists() and not bed.state.exists() and not bed.scratch.joinpath("data").exists()

    # -- first run: clone at the pinned commit, set up, build once, run 5 scenarios x 2 modes --------
    first = cli(bed, "run", capsys)
    metrics = check_results(bed, first)
    assert step_statuses(first) == ["changed", "changed", "changed"]
    head = subprocess.run(["git", "-C", str(bed.clone), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head.stdout.strip() == bed.commit
    state = json.loads(bed.state.read_text())
    assert state["GitRepoClone:mlperf"]["commit"] == bed.commit
    assert state["GitRepoClone:mlperf"]["path"] == str(bed.clone)
    nvidia = bed.clone / "closed" / "NVIDIA"
    assert BLOCK_BEGIN in (nvidia / "code/common/systems/custom_list.py").read_text()
    for relative in CUSTOM_CONFIGS:
        assert (nvidia / relative).read_text().startswith(HEADER), relative
    assert (nvidia / "build").is_dir()
    calls = Counter(bed.calls())
    assert calls["build"] == 1 and calls["download_data bert"] == 1 and calls["download_data 3d-unet"] == 1
    # Engines once per model, then run_harness per test mode (no `make run`: it would build them again).
    assert sum(n for line, n in calls.items() if line.startswith("generate_engines ")) == 2
    assert sum(n for line, n in calls.items() if line.startswith("run_harness ")) == 4  # 2 models x 2 test modes
    assert not any(line.startswith("run ") for line in calls)
    # The clone is not clean by git's measure: exactly what IgnorePaths has to cover on the next run.
    status = subprocess.run(["git", "-C", str(bed.clone), "status", "--porcelain"], capture_output=True, text=True)
    dirty = {line[3:] for line in status.stdout.splitlines()}
    assert "closed/NVIDIA/build/" in dirty and "closed/NVIDIA/code/common/systems/custom_list.py" in dirty
    assert "closed/NVIDIA/configs/bert/Server/custom.py" in dirty

    # -- second run: the clone is "no change", setup and build are skipped, new results --------------
    second = cli(bed, "run", capsys)
    metrics2 = check_results(bed, second)
    assert second.folder != first.folder
    assert step_statuses(second) == ["unchanged", "changed", "changed"]
    assert not run_sources(metrics2) & run_sources(metrics)  # collected from this run's own LOG_DIRs
    clone_log = step_log(second, "01-GitRepoClone")
    assert f"{bed.clone} is a clean clone at {bed.commit}" in clone_log, clone_log
    assert f"no change: {bed.clone} is a clean clone at {bed.commit}" in second.out, second.out
    bert_log = step_log(second, "02-MLPerfExecutor")
    for stage in ("download_data", "download_model", "preprocess_data"):
        assert f"{stage} for bert: already done" in bert_log
    assert "make build: already done for commit" in bert_log
    calls = Counter(bed.calls())
    assert calls["build"] == 1 and calls["download_data bert"] == 1 and calls["preprocess_data 3d-unet"] == 1
    assert sum(n for line, n in calls.items() if line.startswith("run_harness ")) == 8
    assert "is not there; starting it" not in bert_log  # the running container was kept

    # -- "reboot": the container is gone; the third run recreates it and still skips setup -----------
    bed.engine.client.containers.get(CONTAINER).remove(force=True)
    third = cli(bed, "run", capsys)
    metrics3 = check_results(bed, third)
    assert third.folder not in (first.folder, second.folder)
    assert not run_sources(metrics3) & (run_sources(metrics) | run_sources(metrics2))
    bert_log = step_log(third, "02-MLPerfExecutor")
    assert f"container {CONTAINER} is not there; starting it" in bert_log
    assert "download_data for bert: already done" in bert_log
    calls = Counter(bed.calls())
    assert calls["build"] == 1 and calls["download_data bert"] == 1 and calls["download_data 3d-unet"] == 1
    assert sum(n for line, n in calls.items() if line.startswith("run_harness ")) == 12
    assert bed.engine.client.containers.get(CONTAINER).status == "running"

    # -- plan after the runs: the clone is no change, setup is done, only the runs remain ------------
    replanned = cli(bed, "plan", capsys)
    assert replanned.code == 0, replanned.out
    assert f"{bed.clone} is a clean clone at {bed.commit}" in replanned.out
    assert "setup of bert already done" in replanned.out and "setup of 3d-unet already done" in replanned.out
    assert f"make build already done for commit {bed.commit[:12]}" in replanned.out
    assert f"container {CONTAINER}: keep it running" in replanned.out
    assert "set up bert:" not in replanned.out and "set up 3d-unet:" not in replanned.out
    assert "run bert Offline,Server,SingleStream PerformanceOnly" in replanned.out
    assert calls == Counter(bed.calls())  # planning ran nothing in the container


def test_a_clone_with_unexpected_changes_is_refused_by_name_before_anything_runs(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    # The clone exists at the pinned commit but someone edited NVIDIA's own Makefile: not covered by IgnorePaths.
    subprocess.run(["git", "clone", "-q", str(bed.bare), str(bed.clone)], check=True)
    makefile = bed.clone / "closed" / "NVIDIA" / "Makefile"
    makefile.write_text(makefile.read_text() + "\n# local edit\n")
    run = cli(bed, "run", capsys)
    assert run.code == EXIT_STEP_FAILED, run.out
    assert f"{bed.clone} has local changes (1: closed/NVIDIA/Makefile)" in run.out
    assert "MLPerfExecutor" not in step_names(run)
    assert not (bed.scratch / "standin_calls.log").exists()  # no setup, no run
    assert not (run.folder / "metrics.jsonl").exists()


def step_names(run: Run) -> str:
    return " ".join(p.name for p in (run.folder / "local").glob("*.log"))


def test_two_actions_of_one_model_in_the_same_second_keep_their_own_results(
    bed: Bed, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A profile may split one model over two actions (here bert Offline, then bert Server). The stand-in
    # runs each in well under a second; a real clock can't be made to hit the same second on demand, so
    # the executor's clock is frozen: both actions get the same timestamp, as fast actions do by chance.
    from workload.actions import mlperf_executor

    frozen = time.localtime()
    monkeypatch.setattr(mlperf_executor, "time", SimpleNamespace(strftime=lambda fmt, *_: time.strftime(fmt, frozen)))
    profile = json.loads(PROFILE.read_text())
    offline, server = (json.loads(json.dumps(profile["Actions"][0])) for _ in range(2))
    offline["Parameters"]["Scenarios"] = "Offline"
    server["Parameters"].update(Scenarios="Server", Scenario="inferencemodels-bert-server")
    profile["Actions"] = [offline, server]
    path = bed.tmp / "TEST-BERT-SPLIT.json"
    path.write_text(json.dumps(profile))
    run = cli(bed, "run", capsys, profile=path, extra="TestModes=PerformanceOnly")
    assert run.code == EXIT_INVALID_RESULTS, run.out
    summary = json.loads((run.folder / "summary.json").read_text())
    # Each result once: the Server action did not pick up the Offline action's result as its own.
    assert sorted(r["scenario"] for r in summary["results"]) == ["Offline", "Server"]
    stamp = time.strftime("%Y%m%d-%H%M%S", frozen)
    logs = sorted(p.name for p in (bed.clone / "closed/NVIDIA/build/logs").iterdir())
    assert logs == [f"workload-{stamp}-1-bert-perf", f"workload-{stamp}-1.1-bert-perf"]


def test_ctrl_c_stops_the_harness_running_in_the_container(bed: Bed) -> None:
    # A long make run_harness: the stand-in sleeps in the container (its processes are on this kernel).
    (bed.scratch / "standin_run_harness_sleep").write_text("391.5")
    started = bed.scratch / "standin_run_harness_started"
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(PROFILE), "--parameters"]
    argv += [bed.parameters + ",,,TestModes=PerformanceOnly,AccuracyOnly", "--output-dir", str(bed.runs)]
    env = {**os.environ, "WORKLOAD_STATE_PATH": str(bed.state), "COLUMNS": "250"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not (started.exists() and processes("sleep 391.5")):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the harness never started"
            time.sleep(0.2)
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=391.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    assert time.monotonic() - stopped_at < 391.5, output  # the harness was stopped, not waited for
    assert not processes("sleep 391.5"), "Ctrl-C left the harness running in the container"
    (run_dir,) = bed.runs.iterdir()
    (outcome,) = json.loads((run_dir / "run.json").read_text())["outcomes"]
    assert outcome["status"] == "interrupted"
    assert [s["status"] for s in outcome["steps"]] == ["changed", "interrupted"]
    assert "interrupted (Ctrl-C)" in outcome["error"]
    # The step stopped there: no AccuracyOnly run, no 3d-unet action, no container recreated behind it.
    assert [line for line in bed.calls() if line.startswith("run_harness ")] == [
        line for line in bed.calls() if line.startswith("run_harness ") and "PerformanceOnly" in line
    ]
    assert len([line for line in bed.calls() if line.startswith("run_harness ")]) == 1
    assert "download_data 3d-unet" not in bed.calls()
