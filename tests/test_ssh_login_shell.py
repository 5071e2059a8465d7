"""A login shell that prints at startup: its lines are not the command's, and the command can still be stopped.

sshd runs the user's shell with ``-c`` and bash reads ``~/.bashrc`` for it; whatever that prints to
stderr comes ahead of the wrapper's ``workload-pgid:N`` line. Seen on this test bed's own machine:
pyenv's ``command pyenv rehash`` in root's .bashrc, racing another session's rehash, printed
``pyenv: cannot rehash: /root/.pyenv/shims isn't writable`` (CI run of 2026-11-29, a fact's stderr
came back with it and with our own announce line). The announce was then not found, so neither a
timeout nor an interrupt could stop the command's process group.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import processes
from tests.testbed.sshd import LocalUser, SshServer, local_user, ssh_host, sshd  # noqa: F401  (fixture)
from workload.commands import Secret, cmd
from workload.hosts.result import CommandResult, OutputCollector
from workload.hosts.ssh import SshHost
from workload.hosts.ssh_process import _PREAMBLE_LIMIT, LOGIN_SHELL_LABEL, _Counter, _StderrHead

NOISE = ["pyenv: cannot rehash: /home/x/.pyenv/shims isn't writable", "conda: base environment ready ünï"]


@pytest.fixture
def noisy_user() -> Iterator[LocalUser]:
    """A throwaway user whose login shell is bash and whose ~/.bashrc prints two lines to stderr."""
    with local_user(sudo=None) as user:
        subprocess.run(["usermod", "-s", "/bin/bash", user.name], check=True)
        rc = Path(user.home) / ".bashrc"
        rc.write_text("".join(f"echo {line!r} >&2\n" for line in NOISE), encoding="utf-8")
        os.chmod(rc, 0o644)
        yield user


def _host(server: SshServer, user: LocalUser) -> SshHost:
    return ssh_host(server, user=user.name, key_filename=None, password=Secret(user.password))


def test_the_login_shell_lines_are_shown_but_are_not_the_command_s_stderr(
    sshd: SshServer,  # noqa: F811
    noisy_user: LocalUser,
) -> None:
    shown: list[tuple[str, str]] = []
    with _host(sshd, noisy_user) as host:
        result = host.run(
            cmd("sh", "-c", "echo out; echo err >&2; exit 3"), on_line=lambda s, line: shown.append((s, line))
        )
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    # in order within each stream (the two streams' lines may interleave either way)
    assert [line for stream, line in shown if stream == "stderr"] == [f"{LOGIN_SHELL_LABEL} {n}" for n in NOISE] + [
        "err"
    ]
    assert [line for stream, line in shown if stream == "stdout"] == ["out"]


def test_a_command_behind_a_noisy_login_shell_is_still_stopped(
    sshd: SshServer,  # noqa: F811
    noisy_user: LocalUser,
) -> None:
    """The interrupt finds the command's process group and ends it; before, it signalled nothing."""
    seconds = "31.7"  # a duration no other test sleeps
    with _host(sshd, noisy_user) as host:
        results: list[CommandResult] = []
        worker = threading.Thread(target=lambda: results.append(host.run(cmd("sleep", seconds, timeout=30))))
        worker.start()
        end = time.monotonic() + 10
        while not processes(f"sleep {seconds}") and time.monotonic() < end:
            time.sleep(0.1)
        assert processes(f"sleep {seconds}"), "the remote sleep never started"
        host.interrupt(grace_s=0.5)
        worker.join(40)
        end = time.monotonic() + 5
        while processes(f"sleep {seconds}") and time.monotonic() < end:
            time.sleep(0.1)
        assert not processes(f"sleep {seconds}"), "the interrupt left the remote command running"
    assert results and not results[0].timed_out and results[0].returncode != 0


def _head() -> tuple[_StderrHead, OutputCollector, list[str], set[int]]:
    shown: list[str] = []
    collector = OutputCollector("stderr", lambda _s, line: shown.append(line), [], 1 << 20)
    running: set[int] = set()
    return _StderrHead(collector, running, _Counter()), collector, shown, running


@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_the_announce_is_found_behind_login_lines_in_chunks_of_any_size(size: int) -> None:
    head, collector, shown, running = _head()
    stream = b"warn one\nwarn two\nworkload-pgid:4242\nerr\nworkload-pgid:7\n"  # the second mark is the command's
    for i in range(0, len(stream), size):
        head.feed(stream[i : i + size])
    head.close()
    collector.close()
    assert head.pgid == 4242 and running == {4242}
    assert collector.text() == "err\nworkload-pgid:7\n"
    assert shown == [f"{LOGIN_SHELL_LABEL} warn one", f"{LOGIN_SHELL_LABEL} warn two", "err", "workload-pgid:7"]


def test_without_an_announce_everything_is_the_command_s_stderr() -> None:
    """A login shell that failed before the wrapper ran: its message is the command's error."""
    head, collector, _, running = _head()
    head.feed(b"bash: /bin/sh: No such file or directory\npartial")
    head.close()
    collector.close()
    assert head.pgid is None and not running
    assert collector.text() == "bash: /bin/sh: No such file or directory\npartial"


def test_a_login_shell_that_never_stops_talking_is_not_held_forever() -> None:
    head, collector, shown, _ = _head()
    line = b"x" * 1023 + b"\n"
    for _ in range(_PREAMBLE_LIMIT // len(line) + 2):
        head.feed(line)
    assert len(shown) >= _PREAMBLE_LIMIT // len(line)  # given up: passed through as stderr, not held
    head.feed(b"workload-pgid:5\n")
    collector.close()
    assert head.pgid is None and collector.text().endswith("workload-pgid:5\n")
