"""Files on a host that has no file channel of its own: moved through a command's stdin and stdout.

A Slurm node (a job step through the login host) and a container (a ``docker exec`` through the
host that runs its daemon) carry bytes only as a command's streams, so their file primitives are
shell lines: ``base64`` out (the collectors are built for text lines, not raw bytes) followed by an
end mark, ``cat`` in to a temporary name, then ``mv``. :class:`FilesThroughCommands` gives a
:class:`Host` subclass those primitives once; it only needs :meth:`_execute`.

A copy out is whole only when its end mark arrived: a stream cut short (a step whose last output was
lost on the way) still decodes when it ends on a 4-character boundary, and the result file would be
short without a word. Such a copy is made once more, then refused.
"""

from __future__ import annotations

import base64
import binascii
import logging
import shlex

from workload.hosts.base import FileTransferError, Host, OutputCollector

#: How long one file command may take (a large file through a slow login host, say).
FILE_COMMAND_TIMEOUT_S = 3600.0
#: Printed after a file's base64: its arrival proves the copy is whole (base64 never contains a space).
END_MARK = b" workload-end"
#: Copies of one file made before a copy cut short is an error.
COPY_ATTEMPTS = 2
#: The largest copy out (base64 bytes held in memory).
COPY_LIMIT = 1 << 30

log = logging.getLogger(__name__)


class BytesCollector(OutputCollector):
    """Keeps stdout as raw bytes (file contents), up to ``limit``; nothing goes to a sink."""

    def __init__(self, limit: int) -> None:
        super().__init__("stdout", None, [], limit)
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        room = self.limit - self._size
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self._size += len(chunk)
        self._chunks.append(chunk)

    def close(self) -> None:
        pass

    def data(self) -> bytes:
        return b"".join(self._chunks)


class FilesThroughCommands(Host):
    """The file primitives of :class:`Host` as shell lines run by the host's own :meth:`_execute`."""

    def _raw(self, shell_line: str, *, stdin: bytes | None = None) -> tuple[int, bytes, str]:
        """Run one of our own shell lines on the host; return (exit code, raw stdout, stderr).

        Stdout beyond :data:`COPY_LIMIT` is dropped (a copy out then lacks its end mark)."""
        out = BytesCollector(COPY_LIMIT)
        err = OutputCollector("stderr", None, [], 1 << 20)
        code, timed_out = self._execute(shell_line, stdin=stdin, timeout=FILE_COMMAND_TIMEOUT_S, stdout=out, stderr=err)
        err.close()
        return (124 if timed_out else code), out.data(), err.text()

    def read_bytes(self, path: str) -> bytes:
        quoted = shlex.quote(path)
        # Only a regular file: a FIFO or a device would block the copy (or never end).
        line = (
            f"[ -e {quoted} ] || exit 44; [ -f {quoted} ] || {{ echo 'not a regular file' >&2; exit 45; }}; "
            f"base64 -w 0 < {quoted} && printf %s {shlex.quote(END_MARK.decode())}"
        )
        for attempt in range(1, COPY_ATTEMPTS + 1):
            code, data, err = self._raw(line)
            if code == 44:
                raise FileNotFoundError(f"[{self.name}] {path}")
            if code != 0:
                said = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
                raise FileTransferError(self.name, path, said)
            if data.endswith(END_MARK):
                try:
                    return base64.b64decode(data[: -len(END_MARK)], validate=True)
                except binascii.Error as e:
                    problem = f"the copy arrived damaged ({e})"
            elif len(data) >= COPY_LIMIT:
                raise FileTransferError(
                    self.name, path, f"larger than a copy through commands carries ({COPY_LIMIT} bytes of base64)"
                )
            else:
                problem = f"the copy was cut short ({len(data)} bytes of base64 arrived without the end mark)"
            if attempt < COPY_ATTEMPTS:
                log.warning("[%s] %s: %s; copying it again", self.name, path, problem)
        hint = "the command's output was lost on the way; re-run the step"
        raise FileTransferError(self.name, path, problem, hint=hint)

    def get(self, remote_path: str, local_path: str) -> None:
        from workload.safefile import atomic_write_bytes

        atomic_write_bytes(local_path, self.read_bytes(remote_path))

    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        quoted = shlex.quote(path)
        tmp = shlex.quote(f"{path}.workload-tmp")
        chmod = f"chmod {mode:o} {tmp} && " if mode is not None else ""
        line = f"umask 077; cat > {tmp} && {chmod}mv -f {tmp} {quoted}"
        code, _data, err = self._raw(line, stdin=data)
        if code != 0:
            raise FileTransferError(self.name, path, err.strip().splitlines()[-1] if err.strip() else f"exit {code}")

    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        with open(local_path, "rb") as fh:
            self._write_bytes(remote_path, fh.read(), mode=mode)

    def exists(self, path: str) -> bool:
        code, _data, _err = self._raw(f"test -e {shlex.quote(path)}")
        return code == 0
