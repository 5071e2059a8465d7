"""``docker exec`` for the test bed's own commands and assertions, with output that is never lost silently.

Docker Engine now and then hands back no output for a short-lived exec'd process that ran and wrote
(moby/moby#27289, docker/docker-py#2042). Here, beside a busy core, ``id -u hpc`` in a fresh VM came back
as '' with exit status 0, and a test failed on a VM that was fine.

So the command writes its output (stdout and stderr, as ``exec_run`` interleaves them) to a file in the
container and appends a mark with its exit status. That file is what the exec prints. When the mark is
missing from what arrived, the file is read again through Docker's archive API (``get_archive``: no exec,
no attached stream, so not the path that lost the output), a read that may be repeated. The command itself
never runs twice. The files are small and stay in the container's /tmp, so a read can always be repeated;
the container goes with its test. When no read holds the mark, the error shows the end of what each way
returned (once, beside a busy core, an exec's re-read ``cat`` returned 19 bytes five times without it).
"""

from __future__ import annotations

import io
import re
import shlex
import tarfile
import time
import uuid
from collections.abc import Sequence

import docker.errors
from docker.models.containers import Container

from tests.testbed.state import TestbedError

#: Ends a command's output in its file: the record separator, the mark's word, then the exit status.
_MARKED = re.compile(rb"\x1etestbed-exec-end (\d+)\Z")
#: Reads of the output file after the exec's own output arrived without the mark (0.05 s apart, doubling).
READS = 5
#: ``sh -c`` line: $1 is the output file; the command comes quoted in the environment, not as arguments, so the
#: wrapper's own command line never holds it (``pgrep -f PATTERN`` would find the wrapper).
_ARGV_VAR = "TESTBED_EXEC_ARGV"
_RUN = (
    f'c="${_ARGV_VAR}"; unset {_ARGV_VAR}; eval "$c" >"$1" 2>&1; rc=$?; '
    'printf "\\036testbed-exec-end %d" "$rc" >>"$1"; cat "$1"'
)


def is_exec_wrapper(args: str) -> bool:
    """Whether a process's command line (``ps -o args``) is the shell :func:`exec_output` runs a command in."""
    return _ARGV_VAR in args


def exec_output(
    container: Container,
    argv: Sequence[str],
    *,
    user: str = "root",
    environment: dict[str, str] | None = None,
    workdir: str | None = None,
) -> tuple[int, str]:
    """Run ``argv`` in ``container`` as ``user``; return its exit status and output (stdout and stderr).

    Raises :class:`TestbedError` when the output could not be read back at all.
    """
    spool = f"/tmp/testbed-exec-{uuid.uuid4().hex}"
    env = {**(environment or {}), _ARGV_VAR: shlex.join(argv)}
    result = container.exec_run(["/bin/sh", "-c", _RUN, "sh", spool], user=user, environment=env, workdir=workdir)
    arrived = data = bytes(result.output or b"")
    for attempt in range(READS + 1):
        marked = _MARKED.search(data)
        if marked:
            return int(marked.group(1)), data[: marked.start()].decode(errors="replace")
        if attempt == READS:
            break
        time.sleep(0.05 * 2**attempt)
        data = _read_back(container, spool)
    raise TestbedError(
        f"docker exec in {container.name}: the output of {' '.join(argv)} (exit {result.exit_code}) never arrived "
        f"whole: the exec returned {len(arrived)} bytes ending {arrived[-60:]!r}; {spool}, read {READS} times "
        f"through the archive API, holds {len(data)} bytes ending {data[-60:]!r}"
    )


def _read_back(container: Container, spool: str) -> bytes:
    """The output file's bytes through ``get_archive``; b"" when it cannot be read (the error says how many)."""
    try:
        stream, _stat = container.get_archive(spool)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None else None
            return handle.read() if handle is not None else b""
    except (docker.errors.APIError, tarfile.TarError):  # one more attempt used; the error names what arrived
        return b""
