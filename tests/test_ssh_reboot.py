"""reboot() and wait_for_reboot() against a real sshd whose "machine" goes down and comes back.

A reboot here is simulated the way the container test bed sees one: sshd dies (connections drop),
the marker in the tmpfs disappears, sshd starts again; the kernel boot id stays the same. The
boot-id path (a real machine) is shown with a scripted host, since no test can reboot this kernel.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.testbed.sshd import SshServer, fresh_sshd, ssh_host  # noqa: F401  (fixture)
from workload.commands import cmd
from workload.errors import ConnectError, RebootRequired
from workload.hosts import Host, LocalHost, OutputCollector, SshHost
from workload.hosts.reboot import BOOT_ID_PATH, read_boot_id, reboot, wait_for_reboot


def _simulated_reboot(server: SshServer, marker: Path, *, down_s: float, clear_marker: bool = True) -> None:
    server.kill()
    if clear_marker:
        marker.unlink()
    time.sleep(down_s)
    server.start()


def _host(server: SshServer) -> SshHost:
    return ssh_host(server, connect_timeout_s=2.0)


def test_local_host_is_never_rebooted_from_here() -> None:
    with pytest.raises(RebootRequired) as info:
        reboot(LocalHost())
    assert "re-run" in str(info.value) or "run the same command again" in str(info.value)


def test_reboot_then_wait_until_back(fresh_sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = _host(fresh_sshd)
    marker = tmp_path / "run" / "reboot-pending"
    ticket = reboot(host, command=cmd("true"), marker=str(marker))
    assert ticket.boot_id == Path(BOOT_ID_PATH).read_text().strip()
    assert marker.read_text().startswith(ticket.boot_id)
    down = threading.Thread(target=_simulated_reboot, args=(fresh_sshd, marker), kwargs={"down_s": 1.5})
    started = time.monotonic()
    down.start()
    try:
        wait_for_reboot(host, boot_id_before=ticket.boot_id, marker=ticket.marker, timeout_s=30, first_poll_s=0.2)
    finally:
        down.join()
    assert 1.5 <= time.monotonic() - started < 30  # after the 1.5 s down, within wait_for_reboot's timeout
    assert host.check(cmd("echo", "after")).stdout == "after\n"
    host.close()


def test_disconnect_during_the_reboot_command_is_expected(fresh_sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = _host(fresh_sshd)
    marker = tmp_path / "marker"
    started = tmp_path / "reboot-command-started"
    assert host.is_root  # connected and identified before the clock starts

    def crash_once_the_reboot_command_runs() -> None:
        # Not after a fixed time: on a loaded machine the marker's own command may still be running then.
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        fresh_sshd.kill()

    crash = threading.Thread(target=crash_once_the_reboot_command_runs)
    crash.start()
    # the "machine" drops us mid-command
    ticket = reboot(host, command=cmd("sh", "-c", f"touch {started}; sleep 5"), marker=str(marker))
    crash.join()
    assert started.exists()
    assert ticket.marker == str(marker) and marker.exists()
    host.close()


def test_a_restarted_sshd_is_not_a_reboot(fresh_sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = _host(fresh_sshd)
    marker = tmp_path / "marker"
    ticket = reboot(host, command=cmd("true"), marker=str(marker))
    _simulated_reboot(fresh_sshd, marker, down_s=0.2, clear_marker=False)
    with pytest.raises(ConnectError) as info:
        wait_for_reboot(host, boot_id_before=ticket.boot_id, marker=ticket.marker, timeout_s=2, first_poll_s=0.2)
    assert "did not come back from the reboot within 2s" in str(info.value)
    assert "has not rebooted yet" in str(info.value)
    host.close()


def test_a_host_that_stays_down_times_out_with_the_reason(fresh_sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = _host(fresh_sshd)
    marker = tmp_path / "marker"
    ticket = reboot(host, command=cmd("true"), marker=str(marker))
    fresh_sshd.kill()
    started = time.monotonic()
    with pytest.raises(ConnectError) as info:
        wait_for_reboot(host, boot_id_before=ticket.boot_id, marker=ticket.marker, timeout_s=2, first_poll_s=0.2)
    # Bounded: the 2 s timeout and one refused connect, not a wait without end (the margin is a loaded machine's).
    assert time.monotonic() - started < 30
    assert "unreachable" in str(info.value) and "connection refused" in str(info.value)
    assert "booting" in str(info.value)  # the hint for a host that went down and stayed down


class _ScriptedBootIds(Host):
    """A host whose boot id changes after a few polls: a real reboot, which no test can cause here."""

    def __init__(self, boot_ids: list[str]) -> None:
        self.name = "scripted"
        self.boot_ids = boot_ids
        self.polls = 0

    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        if BOOT_ID_PATH not in shell_line:
            raise AssertionError(f"unexpected command: {shell_line}")  # nothing else may run
        self.polls += 1
        if self.polls == 2:
            raise ConnectError(self.name, "connection refused")  # down for one poll
        stdout.feed((self.boot_ids[min(self.polls, len(self.boot_ids)) - 1] + "\n").encode())
        return 0, False

    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        raise AssertionError("not used")

    def get(self, remote_path: str, local_path: str) -> None:
        raise AssertionError("not used")

    def read_bytes(self, path: str) -> bytes:
        raise AssertionError("not used")

    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        raise AssertionError("not used")

    def exists(self, path: str) -> bool:
        raise AssertionError("not used")


def test_a_new_boot_id_proves_the_reboot_without_a_marker() -> None:
    host = _ScriptedBootIds(["old", "old", "old", "new"])
    wait_for_reboot(host, boot_id_before="old", timeout_s=10, first_poll_s=0.01)
    assert host.polls == 4
    assert read_boot_id(_ScriptedBootIds(["abc"])) == "abc"


class _RebootAtClock(_ScriptedBootIds):
    """Up with the old boot until ``down_at``, unreachable until ``up_at``, then a new boot; on a fake clock."""

    def __init__(self, down_at: float, up_at: float) -> None:
        super().__init__([])
        self.now = 0.0
        self.down_at, self.up_at = down_at, up_at

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def _execute(self, shell_line: str, *, stdout: OutputCollector, **_: object) -> tuple[int, bool]:  # type: ignore[override]
        self.polls += 1
        if self.down_at <= self.now < self.up_at:
            raise ConnectError(self.name, "connection refused")
        stdout.feed(b"old\n" if self.now < self.down_at else b"new\n")
        return 0, False


@pytest.mark.parametrize("up_at", [3.6, 7.6, 40.0, 300.0])
def test_polls_notice_the_return_within_a_quarter_of_the_wait(up_at: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """A quick reboot is noticed quickly (doubling pauses would see one back at 3.6 s only at 7.5 s),
    a long one without a storm of polls, and never more than ``max_poll_s`` late."""
    import workload.hosts.reboot as reboot_module

    host = _RebootAtClock(down_at=1.0, up_at=up_at)
    monkeypatch.setattr(reboot_module, "time", host)
    wait_for_reboot(host, boot_id_before="old", timeout_s=600, first_poll_s=0.5, max_poll_s=5.0)
    late = host.now - up_at
    assert 0 <= late <= min(0.25 * up_at, 5.0) + 1e-9
    assert host.polls <= 12 + up_at / 5.0  # the ramp to max_poll_s, then one poll per max_poll_s
