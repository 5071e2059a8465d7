"""Several read-only shell lines in one round trip, each with its own stdout, stderr and exit code.

Used by :meth:`workload.hosts.base.Host.prefetch`: an installer reads a dozen facts before it
plans, and on a remote host each separate read costs a round trip (tens of milliseconds across
regions) plus a login shell on the host. One script runs them in order; each line runs as it would
alone (``/bin/sh -c LINE``, so even the shell's own messages are the same), with stdin from
``/dev/null``. Both streams carry markers around each
line's output; the markers hold a random boundary, so no output can forge one.

Framing, for line ``i`` (``B`` the boundary)::

    stdout: "B i\\n" <its stdout> "\\nB i exit <code>\\n"
    stderr: "B i\\n" <its stderr> "\\nB i end\\n"

The newline before each closing marker is ours: output without a final newline stays exact.
"""

from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchedResult:
    returncode: int
    stdout: str
    stderr: str


def new_boundary() -> str:
    return "workload-batch-" + secrets.token_hex(12)


def batch_script(lines: list[str], boundary: str) -> str:
    """The shell script that runs ``lines`` one after another with the framing above."""
    parts = []
    for i, line in enumerate(lines):
        mark = shlex.quote(f"{boundary} {i}")
        parts.append(
            f"printf '%s\\n' {mark}; printf '%s\\n' {mark} >&2; "
            f"/bin/sh -c {shlex.quote(line)} </dev/null; "
            f"printf '\\n%s exit %s\\n' {mark} \"$?\"; printf '\\n%s end\\n' {mark} >&2"
        )
    return "\n".join(parts) + "\n"


def split_batch(stdout: str, stderr: str, boundary: str, count: int) -> list[BatchedResult] | None:
    """Each line's result from the batch's two streams; None when the framing is not complete.

    (A batch cut short, by a timeout or a lost connection, gives None: the caller then runs the
    lines one by one, as if there had been no batch.)
    """
    results = []
    out_pos = err_pos = 0
    for i in range(count):
        opening = f"{boundary} {i}\n"
        if not stdout.startswith(opening, out_pos) or not stderr.startswith(opening, err_pos):
            return None
        out_start, err_start = out_pos + len(opening), err_pos + len(opening)
        exit_mark = f"\n{boundary} {i} exit "
        out_end = stdout.find(exit_mark, out_start)
        err_end = stderr.find(f"\n{boundary} {i} end\n", err_start)
        if out_end < 0 or err_end < 0:
            return None
        code_end = stdout.find("\n", out_end + len(exit_mark))
        code = stdout[out_end + len(exit_mark) : code_end]
        if code_end < 0 or not code.isdigit():
            return None
        results.append(BatchedResult(int(code), stdout[out_start:out_end], stderr[err_start:err_end]))
        out_pos = code_end + 1
        err_pos = err_end + len(f"\n{boundary} {i} end\n")
    return results
