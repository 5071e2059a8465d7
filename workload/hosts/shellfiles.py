"""Files on a host that has no file channel of its own: moved through a command's stdin and stdout.

A Slurm node (a job step through the login host) and a container (a ``docker exec`` through the
host that runs its daemon) carry bytes only as a command's streams, so their file primitives are
shell lines: ``base64`` out (the collectors are built for text lines, not raw bytes), ``cat`` in
to a temporary name, then ``mv``. :class:`FilesThroughCommands` gives a :class:`Host` subclass
those primitives once; it only needs :meth:`_execute`.
"""

from __future__ import annotations

import base64
import shlex

from workload.hosts.base import FileTransferError, Host, OutputCollector

#: How long one file command may take (a large file through a slow login host, say).
FILE_COMMAND_TIMEOUT_S = 3600.0


class BytesCollector(OutputCollector):
    """Keeps stdout as raw bytes (file contents), up to ``limit``; nothing goes to a sink."""

    def __init__(self, limit: int) -> None:
        super().__init__("stdout", None, [], limit)
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self.limit:
            self.truncated = True
            return
        self._chunks.append(chunk)

    def close(self) -> None:
        pass

    def data(self) -> bytes:
        return b"".join(self._chunks)


class FilesThroughCommands(Host):
    """The file primitives of :class:`Host` as shell lines run by the host's own :meth:`_execute`."""

    def _raw(self, shell_line: str, *, stdin: bytes | None = None, limit: int = 1 << 30) -> tuple[int, bytes, str]:
        """Run one of our own shell lines on the host; return (exit code, raw stdout, stderr)."""
        out = BytesCollector(limit)
        err = OutputCollector("stderr", None, [], 1 << 20)
        code, timed_out = self._execute(shell_line, stdin=stdin, timeout=FILE_COMMAND_TIMEOUT_S, stdout=out, stderr=err)
        err.close()
        return (124 if timed_out else code), out.data(), err.text()

    def read_bytes(self, path: str) -> bytes:
        quoted = shlex.quote(path)
        code, data, err = self._raw(f"[ -e {quoted} ] || exit 44; base64 -w 0 < {quoted}")
        if code == 44:
            raise FileNotFoundError(f"[{self.name}] {path}")
        if code != 0:
            raise FileTransferError(self.name, path, err.strip().splitlines()[-1] if err.strip() else f"exit {code}")
        return base64.b64decode(data)

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
