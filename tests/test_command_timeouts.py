"""Every command a step runs has a finite timeout, and the SSH transport enforces it on the remote side.

A fleet run once sat 12 minutes in the NVIDIA driver install of one VM with no timeout firing.
What is checked: (1) every command the installers, actions and the MLPerf executor build sets its
own timeout (a source audit, so a new command without one fails here); (2) a step's command that
sets none still gets :data:`~workload.steps.DEFAULT_COMMAND_TIMEOUT_S`; (3) over the real sshd of
a fresh test-bed VM, a command that goes silent past its timeout is reported as a timeout naming
host, command and its last output lines, within seconds, and nothing of it is left running there.
"""

from __future__ import annotations

import ast
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.dockerexec import is_exec_wrapper
from workload import steps
from workload.commands import cmd
from workload.errors import CommandTimeout
from workload.hosts.local import LocalHost
from workload.hoststate import HostState
from workload.steps import StepContext

ROOT = Path(__file__).resolve().parents[1]
#: Commands built without a timeout on purpose (file:function-free reason).
NOT_RUN_WITH_A_TIMEOUT = {
    # ``docker system dial-stdio``: the line of a long-lived byte stream (the docker API connection), never host.run.
    "workload/mlperf/docker_ssh.py",
    # ContainerRef.command: what ``plan`` prints for an in-container exec; the docker SDK runs it.
    "workload/mlperf/ops.py",
}


def _commands_without_timeout(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        keywords = {k.arg for k in node.keywords}
        # ``**options`` passes the caller's timeout on (e.g. workload.installers.git_clone.git)
        if name in ("cmd", "shell", "Command") and "timeout" not in keywords and None not in keywords:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    return found


def test_every_command_the_project_builds_sets_a_timeout() -> None:
    missing = []
    for folder in ("installers", "workload"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if str(path.relative_to(ROOT)) in NOT_RUN_WITH_A_TIMEOUT or path.name == "commands.py":
                continue
            missing += _commands_without_timeout(path)
    assert not missing, "commands without a timeout:\n" + "\n".join(missing)


def test_a_step_command_without_a_timeout_gets_the_finite_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert 3600 <= steps.DEFAULT_COMMAND_TIMEOUT_S < float("inf")  # generous (installs) but finite
    monkeypatch.setattr(steps, "DEFAULT_COMMAND_TIMEOUT_S", 0.5)  # the same rule, at test speed
    host = LocalHost("local")
    ctx = StepContext(host=host, host_dir=tmp_path, log_path=tmp_path / "step.log", state=HostState(host))
    started = time.monotonic()
    result = ctx.run(cmd("sleep", "30"))
    assert result.timed_out and time.monotonic() - started < 30  # killed, not waited for (the sleep's 30 s)
    assert "# killed at its timeout (0.5s)" in (tmp_path / "step.log").read_text()


@pytest.mark.slow
def test_a_silent_command_past_its_timeout_over_ssh_is_killed_on_the_vm(
    fresh_vm: Callable[..., Any], tmp_path: Path
) -> None:
    from tests.test_installers_e2e import open_vm

    vm = fresh_vm(gpus=0, nvswitch=False)
    host = open_vm(vm)
    marker = f"workload-timeout-{uuid.uuid4().hex[:8]}"
    # Connected, SFTP open: sshd's session and sftp-server processes are there before and after.
    host.check(cmd("true", timeout=60))
    host.exists("/etc/hostname")
    before = processes(vm)
    try:
        ctx = StepContext(host=host, host_dir=tmp_path, log_path=tmp_path / "step.log", state=HostState(host))
        # Prints, then goes silent in a child (no output at all until the deadline), like a stuck dkms build.
        script = f"echo 'Building module {marker}'; echo 'DKMS: build started'; sleep 317; echo never"
        started = time.monotonic()
        with pytest.raises(CommandTimeout) as info:
            ctx.check(cmd("sh", "-c", script, timeout=2))
        elapsed = time.monotonic() - started
        # Nothing of the command is left on the VM (its shells, its sleep, the wrapper's watchdog), with
        # the connection still open: the timeout killed it there (not sshd or the watchdog at disconnect).
        end = time.monotonic() + 5
        while (left := processes(vm) - before) and time.monotonic() < end:
            time.sleep(0.2)
        assert not left, f"still running on the VM: {sorted(left)}"
    finally:
        host.close()
    assert 2 <= elapsed < 317, elapsed  # not before its 2 s timeout; killed, not waited for (the sleep's 317 s)
    text = str(info.value)
    assert text.startswith(f"[{host.name}] command was killed at its timeout after ")
    assert "sleep 317; echo never" in text.splitlines()[0]  # the command
    tail = text.split("last output:", 1)[1]
    assert f"Building module {marker}" in tail and "DKMS: build started" in tail and "never" not in tail


def processes(vm: Any) -> set[tuple[int, str]]:
    """(pid, command line) of every process in the VM, except the ``ps`` that lists them and its exec's shell."""
    out = vm.exec(["ps", "-eo", "pid=,args="])[1]
    found = set()
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit() and not args.startswith("ps -eo") and not is_exec_wrapper(args):
            found.add((int(pid), args.strip()))
    return found
