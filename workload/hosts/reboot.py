"""Reboot a remote host and wait until it is back.

How "it rebooted" is decided
    1. ``/proc/sys/kernel/random/boot_id`` changed. The kernel makes a new one at every boot, so on
       a real machine or VM this alone is proof.
    2. Or a marker file that :func:`prepare_reboot` wrote in ``/run`` before the reboot is gone.
       ``/run`` is a tmpfs on systemd machines (and in the container test bed's "VMs"), so only a
       restart of the machine (or container) empties it. This is needed because a container shares
       the host kernel: restarting it does not change ``boot_id``.

    The marker only counts when the caller passes its path (``marker=ticket.marker``): a marker that
    was never written is "absent" from the start and would otherwise read as an instant reboot. So
    ``wait_for_reboot`` without ``marker`` trusts ``boot_id`` alone.

    Merely seeing the host unreachable is not used as proof: a network blip is not a reboot, and a
    fast reboot can come back between two polls. The pause between polls is a quarter of the time
    waited so far, between ``first_poll_s`` and ``max_poll_s``: a host back after T seconds is
    noticed by about 1.25 T (at most ``max_poll_s`` late), where doubling pauses could notice a
    3-second reboot only after 7. Each poll makes one connect attempt (no tenacity retries inside
    the wait), so the whole wait is bounded by ``timeout_s`` plus at most one poll.

The local machine cannot be rebooted from here (the controller runs on it): :func:`reboot` on a
:class:`~workload.hosts.local.LocalHost` raises :class:`~workload.errors.RebootRequired`, which the
CLI turns into exit code 5, "reboot and re-run".
"""

from __future__ import annotations

import logging
import shlex
import time
import uuid
from dataclasses import dataclass

from workload.commands import Command, cmd
from workload.errors import CommandFailed, ConnectError, RebootRequired
from workload.hosts.base import ConnectionLost, Host, raise_for_result

log = logging.getLogger(__name__)

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
#: Read-only: within a memo of facts a second read before any change is not sent again; the reboot
#: command, like every command that is not read-only, makes the memo forget it.
BOOT_ID_QUERY = cmd("cat", BOOT_ID_PATH, timeout=30, readonly=True)
#: The pause between polls as a share of the time waited so far (see the module doc).
POLL_PAUSE_SHARE = 0.25
#: Written before a reboot; its disappearance proves the machine restarted (see the module doc).
DEFAULT_MARKER = "/run/workload/reboot-pending"

#: Detached, so the command returns (and its channel closes cleanly) before the machine goes down.
#: ``systemctl reboot`` first (clean shutdown); plain ``reboot`` where there is no systemd.
DEFAULT_REBOOT = cmd(
    "sh",
    "-c",
    "nohup sh -c 'sleep 1; systemctl reboot || reboot' </dev/null >/dev/null 2>&1 &",
    sudo=True,
    timeout=60,
)


@dataclass(frozen=True)
class RebootTicket:
    """What :func:`wait_for_reboot` needs to recognise the reboot: the old boot id and the marker."""

    host: str
    boot_id: str
    marker: str


def read_boot_id(host: Host) -> str:
    """The kernel's boot id (a new random UUID at every boot)."""
    result = host.run(BOOT_ID_QUERY)
    raise_for_result(result)
    return result.stdout.strip()


def prepare_reboot(host: Host, *, marker: str = DEFAULT_MARKER) -> RebootTicket:
    """Read the boot id and write the marker file; call just before rebooting by other means.

    (For example when a test bed restarts a container from outside.)
    """
    if host.is_local:
        raise RebootRequired(
            "this machine must be rebooted to go on",
            hint="reboot it, then run the same command again: finished steps are skipped",
            host=host.name,
        )
    boot_id = read_boot_id(host)
    token = f"{boot_id} {uuid.uuid4().hex}\n"
    script = 'mkdir -p "$(dirname "$1")" && printf %s "$2" > "$1" && chmod 644 "$1"'
    host.check(cmd("sh", "-c", script, "sh", marker, token, sudo=True, timeout=60))
    return RebootTicket(host=host.name, boot_id=boot_id, marker=marker)


def reboot(
    host: Host, *, command: Command | None = None, marker: str = DEFAULT_MARKER, ticket: RebootTicket | None = None
) -> RebootTicket:
    """Issue a reboot without waiting for the machine to go down; return the ticket for the wait.

    ``ticket`` is what :func:`prepare_reboot` returned just before (for a caller that records the
    boot id first); without it the reboot is prepared here, with ``marker``. The connection
    breaking while the command runs is expected and not an error. A non-zero exit (sudo refused,
    no reboot command) raises :class:`~workload.errors.CommandFailed`.
    """
    if ticket is None:
        ticket = prepare_reboot(host, marker=marker)
    reboot_cmd = command or DEFAULT_REBOOT
    try:
        result = host.run(reboot_cmd)
    except ConnectionLost:
        log.info("[%s] connection closed by the reboot, as expected", host.name)
        return ticket
    if result.timed_out:
        # Some `reboot` implementations block until the connection is torn down; by the time our
        # timeout fires the shutdown is under way, so this is not a failure.
        log.info("[%s] reboot command still running at its timeout; assuming shutdown is under way", host.name)
        return ticket
    raise_for_result(result, sudo_used=reboot_cmd.sudo)
    return ticket


def wait_for_reboot(
    host: Host,
    *,
    boot_id_before: str,
    timeout_s: float,
    marker: str | None = None,
    first_poll_s: float = 0.5,
    max_poll_s: float = 5.0,
) -> None:
    """Wait until ``host`` has rebooted and accepts commands again.

    Raises :class:`~workload.errors.ConnectError` after ``timeout_s`` with what the last poll saw
    (still the old boot, or the error that kept us out).
    """
    started = time.monotonic()
    deadline = started + timeout_s
    last = "no poll finished"
    seen_down = False
    while True:
        try:
            host.connect(attempts=1)
            boot_id, marker_present = _probe(host, marker)
            if boot_id != boot_id_before:
                log.info("[%s] back after %.1fs with a new boot id", host.name, time.monotonic() - started)
                return
            if marker is not None and not marker_present:
                log.info("[%s] back after %.1fs (reboot marker cleared)", host.name, time.monotonic() - started)
                return
            last = "it is up but has not rebooted yet (same boot id" + (", marker still present)" if marker else ")")
        except ConnectError as e:
            seen_down = True
            last = f"it is unreachable: {e.message}"
        except CommandFailed as e:
            last = f"the boot id could not be read: {e.message.splitlines()[0]}"
        now = time.monotonic()
        if now >= deadline:
            raise ConnectError(
                host.name,
                f"did not come back from the reboot within {timeout_s:g}s; at the last poll {last}",
                hint=(
                    "the machine may still be booting or stuck (check its console); "
                    "raise the reboot timeout if it is just slow"
                    if seen_down
                    else "it never went down: check that the reboot command works (sudo, systemd) on this machine"
                ),
            )
        pause = min(max_poll_s, max(first_poll_s, (now - started) * POLL_PAUSE_SHARE))
        time.sleep(min(pause, max(0.0, deadline - now)))


def _probe(host: Host, marker: str | None) -> tuple[str, bool]:
    """One round trip: the boot id, and whether the marker exists."""
    script = f"cat {BOOT_ID_PATH}"
    if marker is not None:
        script += f"; if [ -e {shlex.quote(marker)} ]; then echo marker; fi"
    result = host.run(cmd("sh", "-c", script, timeout=20))
    raise_for_result(result)
    lines = result.stdout.split()
    return (lines[0] if lines else ""), "marker" in lines[1:]
