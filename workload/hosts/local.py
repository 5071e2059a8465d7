"""``LocalHost``: run commands on the machine the controller runs on.

Each command is ``/bin/sh -c LINE`` in a new session (so it is its own process group): at its
timeout the whole group gets SIGKILL, children included. stdout and stderr are read through one
selector loop, line by line into the collectors, so neither pipe can fill up and block the other
(the classic two-pipe deadlock) and nothing is held beyond the collectors' limits.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

from workload.commands import Secret
from workload.hosts.base import FileTransferError, Host, OutputCollector
from workload.hosts.drain import DrainClock
from workload.hosts.stophooks import interrupt_exempt_now
from workload.safefile import atomic_write_bytes

_CHUNK = 64 * 1024
#: Longest sleep in the loop while nothing happens; bounds how late an exit or timeout is noticed.
_TICK_S = 0.2


class LocalHost(Host):
    """The local machine, through ``subprocess``."""

    is_local = True
    files_are_local = True

    @property
    def python(self) -> str:
        return sys.executable  # the controller's own interpreter (its packages are this project's)

    @property
    def has_connected(self) -> bool:
        return True

    def sampling_copy(self) -> Host:
        return LocalHost(self.name)

    def __init__(self, name: str = "local", *, sudo_password: Secret | None = None) -> None:
        self.name = name
        self.sudo_password = sudo_password
        #: Process groups of the commands running now (each command leads its own group).
        self._running: set[int] = set()
        self._running_lock = threading.Lock()

    # -- commands --------------------------------------------------------------------------------
    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        # Spawned under the lock: once the command exists, ``interrupt`` sees its group (were it
        # added after Popen returns, an interrupt in between would miss a command already running).
        with self._running_lock:
            proc = subprocess.Popen(
                ["/bin/sh", "-c", shell_line],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own session and process group: killpg reaches the children
                close_fds=True,
            )
            if not interrupt_exempt_now():
                self._running.add(proc.pid)
        try:
            return self._pump(proc, stdin, timeout, stdout, stderr)
        finally:
            with self._running_lock:
                self._running.discard(proc.pid)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            if proc.poll() is None:
                # Only reached on an exception inside the loop (KeyboardInterrupt): leave nothing behind.
                self._kill_group(proc.pid)
                proc.wait()

    def _pump(
        self,
        proc: subprocess.Popen[bytes],
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = memoryview(stdin or b"")
        with selectors.DefaultSelector() as sel:
            for pipe, collector in ((proc.stdout, stdout), (proc.stderr, stderr)):
                os.set_blocking(pipe.fileno(), False)
                sel.register(pipe, selectors.EVENT_READ, collector)
            if proc.stdin is not None:
                os.set_blocking(proc.stdin.fileno(), False)
                if pending:
                    sel.register(proc.stdin, selectors.EVENT_WRITE, None)
                else:
                    proc.stdin.close()
            timed_out = False
            drain = DrainClock()
            while True:
                now = time.monotonic()
                if proc.poll() is not None:
                    drain.exited(now)
                    # Done when both pipes are at end of file, or output stopped coming (workload/hosts/drain.py).
                    if not _has_readers(sel) or drain.over(now):
                        break
                if deadline is not None and not timed_out and now >= deadline:
                    self._kill_group(proc.pid)
                    timed_out = True
                    proc.wait()
                    continue
                wait = _TICK_S
                if deadline is not None and not timed_out:
                    wait = max(0.0, min(wait, deadline - now))
                if not sel.get_map():
                    # Both pipes are closed: only the exit (or the deadline) is left to wait for.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(wait)
                    continue
                for key, _ in sel.select(wait):
                    fileobj: IO[bytes] = key.fileobj  # type: ignore[assignment]
                    if key.data is None:
                        pending = _write_some(sel, fileobj, pending)
                        continue
                    try:
                        data = os.read(fileobj.fileno(), _CHUNK)
                    except BlockingIOError:
                        continue
                    if data:
                        key.data.feed(data)
                        drain.output(time.monotonic())
                    else:
                        sel.unregister(fileobj)
        code = proc.returncode
        # Killed by signal N: report 128+N like a shell does (and like SshHost's wrapper shell).
        return (128 - code if code < 0 else code), timed_out

    def interrupt(self, *, grace_s: float = 2.0) -> None:
        """SIGTERM the process groups of the running commands, SIGKILL what is left after ``grace_s``.

        The grace period lets apt/dpkg and docker exit cleanly (a SIGKILLed dpkg leaves packages
        half-configured; the next run repairs that, but a clean stop is better).
        """
        with self._running_lock:
            groups = sorted(self._running)
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        end = time.monotonic() + grace_s
        while time.monotonic() < end:
            with self._running_lock:
                if not self._running.intersection(groups):
                    return
            time.sleep(0.05)
        for pgid in groups:
            self._kill_group(pgid)

    def _kill_group(self, pgid: int) -> None:
        """SIGKILL the command's process group.

        A non-root user cannot signal the root-owned processes of a ``sudo`` command in the group
        (sudo itself can be signalled, its command cannot); when such processes remain, they are
        killed through sudo, with the same password rule as :meth:`Host.wrap`.
        """
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        if os.geteuid() == 0 or not _foreign_members(pgid):
            return
        argv = ["sudo", "-n"]
        stdin = None
        if self.sudo_password is not None and not self._sudo_is_passwordless():
            argv = ["sudo", "-S", "-k", "-p", ""]
            stdin = (self.sudo_password.value + "\n").encode()
        # The shell's kill builtin: /usr/bin/kill (procps) is missing from minimal images.
        subprocess.run(
            [*argv, "sh", "-c", f"kill -KILL -{pgid}"],
            input=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
            timeout=30,
        )

    # -- files -----------------------------------------------------------------------------------
    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        with self._file_errors(remote_path), open(local_path, "rb") as src:
            self._atomic_write(remote_path, lambda dst: shutil.copyfileobj(src, dst, _CHUNK), mode)

    def get(self, remote_path: str, local_path: str) -> None:
        # into a temporary made with O_EXCL beside the target, then renamed: never through a link
        with self._file_errors(remote_path), open(remote_path, "rb") as src:
            atomic_write_bytes(local_path, lambda dst: shutil.copyfileobj(src, dst, _CHUNK))

    def read_bytes(self, path: str) -> bytes:
        with self._file_errors(path), open(path, "rb") as f:
            return f.read()

    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        with self._file_errors(path):
            self._atomic_write(path, lambda dst: dst.write(data), mode)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    @staticmethod
    def _atomic_write(path: str, fill: Callable[[IO[bytes]], object], mode: int | None) -> None:
        # keeps the mode of the file it replaces; a temporary made with O_EXCL, never through a link
        atomic_write_bytes(os.path.abspath(path), fill, mode=mode)

    @contextlib.contextmanager
    def _file_errors(self, path: str) -> Iterator[None]:
        """Keep FileNotFoundError (callers test for it); turn other OS errors into FileTransferError."""
        try:
            yield
        except FileNotFoundError as e:
            raise FileNotFoundError(errno.ENOENT, f"[{self.name}] no such file", e.filename or path) from None
        except OSError as e:
            raise FileTransferError(self.name, path, e.strerror or str(e)) from None


def _foreign_members(pgid: int) -> bool:
    """Whether live processes of another user are in the process group (read from /proc)."""
    me = os.geteuid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # fields[0] is the state, fields[2] the process group; zombies hold nothing.
            if int(fields[2]) == pgid and fields[0] != "Z" and os.stat(f"/proc/{entry}").st_uid != me:
                return True
        except (OSError, IndexError, ValueError):
            continue
    return False


def _has_readers(sel: selectors.BaseSelector) -> bool:
    return any(key.data is not None for key in sel.get_map().values())


def _write_some(sel: selectors.BaseSelector, pipe: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the stdin pipe takes now; close it when all is written or the reader is gone."""
    try:
        written = os.write(pipe.fileno(), pending[:_CHUNK])
        pending = pending[written:]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        pending = pending[:0]  # the command stopped reading; that is its business, not an error
    if not pending:
        sel.unregister(pipe)
        pipe.close()
    return pending
