"""Errors carry fields and are rendered from them; intent is a field of the command, not found in argv.

A failed command keeps its result (masked argv, exit code, last lines) on the exception and the CLI
shows it; the engine decides a host's outcome from an error's ``host``/``step`` fields, never from
its text; retry and dpkg-lock waiting follow the command value (the same argv without the intent
is run once, gets no lock wait); hosts are told apart by capabilities, not by their class.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.steptypes import TEST_TYPES, step_context
from workload import registry
from workload.cli import invoke
from workload.commands import RetryPolicy, Secret, cmd
from workload.engine import Engine, RunOptions
from workload.errors import CommandFailed, FactError, StepError, WorkloadError
from workload.hosts.base import HostSpec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder
from workload.steps import Change, Step, StepContext, StepPlan

#: Counts its runs in the file $1, prints 15 lines to stderr (the first says "Connection refused"), exits 3.
COUNTING_FAILURE = (
    'n=$(cat "$1" 2>/dev/null || echo 0); echo $((n + 1)) > "$1"; echo "to stdout"; '
    'echo "fatal: Connection refused" >&2; i=2; while [ $i -le 15 ]; do echo "line $i" >&2; i=$((i + 1)); done; exit 3'
)


def runs_of(counter: Path) -> int:
    return int(counter.read_text()) if counter.exists() else 0


# -- a failed command's result, as fields -------------------------------------------------------
def test_a_failed_command_keeps_exit_code_masked_argv_and_last_lines_as_fields(tmp_path: Path) -> None:
    host = LocalHost("box")
    counter = tmp_path / "n"
    with pytest.raises(CommandFailed) as info:
        host.check(cmd("sh", "-c", COUNTING_FAILURE, "fail", str(counter), Secret("hunter2-secret")))
    err = info.value
    assert (err.host, err.step, err.returncode) == ("box", None, 3)
    assert err.argv[-1] == "***" and "hunter2-secret" not in " ".join(err.argv)
    assert err.stdout == "to stdout\n"
    assert err.tail == [f"line {i}" for i in range(4, 16)]  # the last 12 non-blank lines of stderr
    assert err.duration_s is not None and err.duration_s >= 0
    fields = err.fields()
    assert fields["kind"] == "CommandFailed" and fields["exit_code"] == 3 and fields["last_output"] == err.tail
    text = str(err)
    assert text.startswith("[box] command exited with code 3: sh -c ")
    assert "  last output:\n    line 4\n" in text and text.endswith("    line 15")
    assert "hunter2-secret" not in text


def test_the_text_is_built_from_the_fields_when_it_is_shown() -> None:
    err = WorkloadError("the disk is full", hint="free some space")
    assert str(err) == "the disk is full\n  hint: free some space"
    err.host, err.step = "gpu-1", "Actions[1] LoadGenExecutor"
    assert err.message == "[gpu-1] Actions[1] LoadGenExecutor: the disk is full"
    assert err.problem == "the disk is full"
    # A line that already names the host (and step) says only what it does not name yet.
    assert err.message_in("gpu-1") == "Actions[1] LoadGenExecutor: the disk is full"
    assert err.message_in("gpu-1", "Actions[1] LoadGenExecutor") == "the disk is full"
    assert err.message_in("other", "Actions[1] LoadGenExecutor") == "[gpu-1] the disk is full"
    step_error = StepError("Dependencies[2] X", "cannot plan", host="h")
    assert (step_error.host, step_error.step, step_error.problem) == ("h", "Dependencies[2] X", "cannot plan")
    assert str(step_error) == "[h] Dependencies[2] X: cannot plan"


# -- the engine decides by fields ---------------------------------------------------------------
class LooksPrefixedStep(Step):
    """Fails with an error whose text starts like '[local] ...' but that names no host."""

    type_name: ClassVar[str] = "LooksPrefixedStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        raise WorkloadError(f"[{ctx.host.name}] text that only looks like a host prefix")


class HostFactStep(Step):
    """Fails with a fact error that names its host (a field) but not the step."""

    type_name: ClassVar[str] = "HostFactStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        raise FactError("lscpu failed (exit 1)", host=ctx.host.name)


@pytest.fixture
def field_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    here = {name: f"{__name__}:{name}" for name in ("LooksPrefixedStep", "HostFactStep")}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES, **here})


def run_one(tmp_path: Path, step_type: str) -> Any:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"Description": "x", "Actions": [{"Type": step_type}]}))
    profile = resolve_profile(load_profile(str(path)))
    folder = RunFolder.create(tmp_path / "runs", profile.name)
    engine = Engine(profile, folder, lambda spec: LocalHost(spec.name), RunOptions(state_path=str(tmp_path / "s.json")))
    (outcome,) = engine.run([HostSpec(scheme="local", alias="node-7")])
    return outcome


def test_an_error_naming_no_host_is_placed_by_the_engine_whatever_its_text(tmp_path: Path, field_steps: None) -> None:
    outcome = run_one(tmp_path, "LooksPrefixedStep")
    err = outcome.error
    assert isinstance(err, StepError)  # placed: its text starting with "[node-7]" did not fool the engine
    assert (err.host, err.step) == ("node-7", "Actions[0] LooksPrefixedStep")
    assert err.problem == "[node-7] text that only looks like a host prefix"
    assert outcome.reason == str(err).splitlines()[0]  # it names the step: no second label


def test_an_error_naming_its_host_is_kept_and_the_reason_adds_the_step(tmp_path: Path, field_steps: None) -> None:
    outcome = run_one(tmp_path, "HostFactStep")
    err = outcome.error
    assert type(err) is FactError and (err.host, err.step) == ("node-7", None)
    assert outcome.reason == "Actions[0] HostFactStep: [node-7] lscpu failed (exit 1)"
    assert outcome.to_json()["error_fields"] == {
        "kind": "FactError",
        "host": "node-7",
        "step": None,
        "problem": "lscpu failed (exit 1)",
        "hint": None,
    }


def test_the_cli_shows_a_failed_commands_exit_code_and_last_lines_and_run_json_keeps_them(
    tmp_path: Path, field_steps: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"Description": "x", "Actions": [{"Type": "FailStep"}]}))
    runs = tmp_path / "runs"
    code = invoke(["run", "--profile", str(profile), "--output-dir", str(runs)])
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert code == 4, shown
    assert "[local] command exited with code 3: sh -c 'echo boom >&2; exit 3'" in shown
    assert "last output:" in shown and "    boom" in shown
    (folder,) = runs.iterdir()
    (outcome,) = json.loads((folder / "run.json").read_text())["outcomes"]
    fields = outcome["error_fields"]
    assert (fields["kind"], fields["host"], fields["exit_code"], fields["last_output"]) == (
        "CommandFailed",
        "local",
        3,
        ["boom"],
    )
    assert fields["argv"] == ["sh", "-c", "echo boom >&2; exit 3"]


# -- retry and lock intent come from the command value ------------------------------------------
def test_a_command_is_retried_as_its_policy_says_and_not_without_one(tmp_path: Path) -> None:
    ctx = step_context(LocalHost(), tmp_path)
    transient = RetryPolicy(attempts=3, wait_s=0, when=re.compile("Connection refused"))
    counted = tmp_path / "with-policy"
    with pytest.raises(CommandFailed) as info:
        ctx.check(cmd("sh", "-c", COUNTING_FAILURE, "fail", str(counted), retry=transient))
    assert runs_of(counted) == 3 and info.value.returncode == 3
    assert "retrying (attempt 3 of 3)" in (tmp_path / "step.log").read_text()

    plain = tmp_path / "no-policy"
    with pytest.raises(CommandFailed):
        ctx.check(cmd("sh", "-c", COUNTING_FAILURE, "fail", str(plain)))
    assert runs_of(plain) == 1

    other = tmp_path / "other-failure"
    permanent_only = RetryPolicy(attempts=3, wait_s=0, when=re.compile("Could not resolve host"))
    with pytest.raises(CommandFailed):
        ctx.check(cmd("sh", "-c", COUNTING_FAILURE, "fail", str(other), retry=permanent_only))
    assert runs_of(other) == 1


def test_git_clone_retries_what_its_planner_marked_not_what_says_fetch(tmp_path: Path) -> None:
    from workload.installers.git_clone import GitRepoClone, GitRepoCloneParameters, clone_commands

    params = GitRepoCloneParameters(RepoUri="https://example.invalid/r.git", PackageName="r", Retries=3)
    planned = clone_commands(params, "/opt/r")
    network = [c for c in planned if c.retry is not None]
    assert [str(c.argv[1]) for c in network] == ["clone"]  # only the clone talks to the remote
    assert network[0].retry is not None and network[0].retry.attempts == 3

    step = GitRepoClone(
        params.model_copy(update={"RetryWaitSeconds": 0}), location="Dependencies[1]", kind="dependency"
    )
    ctx = step_context(LocalHost(), tmp_path)
    counter = tmp_path / "n"
    # The argv says "fetch" and "clone", stderr says "Connection refused": without a policy, one run.
    looks_like_git = cmd("sh", "-c", COUNTING_FAILURE, "fetch", str(counter), "clone")
    with pytest.raises(CommandFailed):
        step.apply(ctx, StepPlan(changes=(Change("not a clone", (looks_like_git,)),)))
    assert runs_of(counter) == 1


def test_the_dpkg_lock_wait_follows_the_commands_lock_not_their_program_name() -> None:
    from workload.installers import apt
    from workload.installers.nvidia_cuda import _installs, _put_lock_wait_first

    marked = [Change("hold", (apt.hold(["cuda"]),))]
    _put_lock_wait_first(marked, 60)
    assert [c.kind for c in marked[0].commands] == [apt.LOCK_WAIT, None]

    unmarked = [Change("looks like apt", (cmd("apt-get", "install", "-y", "x"),))]  # same program, no intent
    _put_lock_wait_first(unmarked, 60)
    assert len(unmarked[0].commands) == 1 and not _installs(unmarked[0])

    waiting = [Change("already waits", (apt.wait_for_dpkg_lock(60), apt.install(["x"])))]
    _put_lock_wait_first(waiting, 60)
    assert len(waiting[0].commands) == 2 and _installs(waiting[0])


# -- hosts: capabilities, not classes -----------------------------------------------------------
class NodeHost(LocalHost):
    """A transport that runs like a local host but whose files are not the controller's (a cluster node)."""

    is_local = False
    files_are_local = False


def test_callers_ask_host_capabilities_not_their_class() -> None:
    from workload.actions.loadgen_executor import _is_local
    from workload.monitors.hostmonitor import own_connection

    local = LocalHost("here")
    assert local.is_local and local.files_are_local and local.python == sys.executable and local.has_connected
    assert _is_local(local)
    assert not _is_local(NodeHost("node"))  # an instance of LocalHost, yet its files are elsewhere
    copy = own_connection(local)
    assert isinstance(copy, LocalHost) and copy is not local and copy.name == "here"
