"""The guard: a command that runs a stop line first when it is told to end (SIGTERM, SIGHUP).

Work a command starts elsewhere (a ``docker exec``'s process in a container) does not end when the
command is killed. A transport's watchdog TERMs a command when its connection drops (the SSH
wrapper, see :mod:`workload.hosts.ssh_process`), and then nothing on the controller can reach
that work any more; the guard runs the stop line there, on the host, before it exits.
:meth:`~workload.hosts.base.Host._execute_guarded` decides where the guard runs on each transport
(a Slurm node's runs on the login host, beside srun, since srun answers the TERM by killing its step).
"""

from __future__ import annotations

#: ``$1`` the stop line, the rest the command's argv. The command runs in the background (its
#: streams passed on through fds 3-5: a background job's stdin is /dev/null otherwise) so that a
#: SIGTERM or SIGHUP reaches the trap at once. The guard's own streams then go to /dev/null: they
#: may belong to a connection that is gone, and a write there (dash reporting the killed job) would
#: end the shell with SIGPIPE before its trap ran. Without a signal the guard is transparent: the
#: command's exit code is the guard's.
GUARD_SCRIPT = (
    "k=$1; shift; "
    'trap \'trap "" TERM HUP; sh -c "$k" </dev/null >/dev/null 2>&1; exit 143\' TERM HUP; '
    "exec 3<&0 4>&1 5>&2; "
    '"$@" <&3 >&4 2>&5 3<&- 4>&- 5>&- & p=$!; '
    'exec 3<&- 4>&- 5>&- </dev/null >/dev/null 2>&1; wait "$p"'
)

#: Runs the shell line ``$1`` in a session of its own where util-linux's setsid is there: a
#: watchdog KILLs the guard's process group some seconds after its TERM, and a stop that takes
#: longer (an srun job step on a busy cluster) must not die with the group.
DETACHED = 'if command -v setsid >/dev/null 2>&1; then exec setsid -w sh -c "$1"; fi; exec sh -c "$1"'


def guarded_argv(stop_line: str, argv: list[str]) -> list[str]:
    """``argv`` under the guard: ``stop_line`` (a shell line) runs when the guard gets SIGTERM or SIGHUP."""
    return ["sh", "-c", GUARD_SCRIPT, "workload-guard", stop_line, *argv]
