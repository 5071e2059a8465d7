"""Writing files safely in folders that other users may be able to write to, and reading input trees.

Every file ``workload`` writes on the controller goes through here: the run folder (``profile.json``,
``run.json``, step and host logs, result files), ``results --output`` folders (``metrics.*``,
``summary.json``) and a local host's state file. A run is often made as root in a folder someone
else can write (a shared ``/tmp/out``); whoever plants a symbolic link there must not be able to make
``workload`` overwrite the file it points at. The rules:

* A replaced file is written to a temporary file made with ``O_CREAT | O_EXCL`` (``tempfile``'s
  unpredictable names, never following a link) in the target's own folder, flushed, and then
  renamed over the target (:func:`atomic_write_bytes`): a rename replaces a link, it never writes
  through one, and readers see the old file or the new one, never half of it.
* An appended file (a log) is opened with ``O_NOFOLLOW`` (:func:`append_text`): a link planted in its
  place makes the write fail instead of landing elsewhere.
* Writers of one folder are serialised with ``flock`` on the folder itself (:func:`locked_folder`),
  so no lock file is created, followed or left behind.

Every file of an input tree (a results folder, a run folder for ``report``, a profile, an inventory)
is read with :func:`read_regular`: a FIFO, a device or a socket planted under a name ``workload``
reads is refused without blocking (opened ``O_NONBLOCK``, judged by ``fstat`` before any read),
and the read stops past a size limit instead of filling the memory.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

__all__ = [
    "NotRegularFile",
    "TooLarge",
    "append_text",
    "atomic_write_bytes",
    "atomic_write_text",
    "current_umask",
    "locked_folder",
    "new_temporary",
    "read_regular",
    "read_regular_text",
]

#: what :func:`read_regular` reads at most unless told otherwise (every input file is far smaller)
DEFAULT_READ_LIMIT = 64 * 1024 * 1024


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: nothing an input tree's file may be.

    An ``OSError`` (``EINVAL``), so every reader's ``except OSError`` names the file and this reason.
    """

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", path)


class TooLarge(OSError):
    """The file is larger than its reader's limit (``EFBIG``); ``size`` is what was seen."""

    def __init__(self, path: str, limit: int, size: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit} bytes, not read", path)
        self.size = size


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def read_regular(path: Path | str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed), read without blocking on anything else.

    Raises ``FileNotFoundError`` and the other ``OSError`` of ``open`` as they are, :class:`NotRegularFile`
    for a FIFO/device/socket/folder (opened ``O_NONBLOCK``, so a FIFO without a writer never blocks,
    and closed unread), :class:`TooLarge` past ``limit`` bytes. One ``read`` of the size ``fstat``
    gives: ``read(limit)`` would allocate ``limit`` bytes up front.
    """
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(name, _kind(st.st_mode))
        if st.st_size > limit:
            raise TooLarge(name, limit, st.st_size)
        data = os.read(fd, st.st_size + 1)
        if len(data) != st.st_size:  # short read, or the file changed under us: read on to the end (or the limit)
            parts, total = [data], len(data)
            while chunk := os.read(fd, 1 << 20):
                parts.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise TooLarge(name, limit, total)
            data = b"".join(parts)
        return data
    finally:
        os.close(fd)


def read_regular_text(path: Path | str, limit: int = DEFAULT_READ_LIMIT, *, errors: str = "strict") -> str:
    """:func:`read_regular` decoded as UTF-8 (a byte-order mark dropped); ``UnicodeDecodeError`` if not UTF-8."""
    return read_regular(path, limit).decode("utf-8-sig", errors=errors)


def new_temporary(directory: Path | str, name: str) -> tuple[int, Path]:
    """An open, new, private (0600) temporary file in ``directory`` for a later rename over ``name``.

    Made with ``O_EXCL`` under an unpredictable name: it cannot be a file or link someone prepared.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=os.fspath(directory))
    return fd, Path(tmp)


def atomic_write_bytes(
    path: Path | str,
    data: bytes | Callable[[IO[bytes]], object],
    *,
    mode: int | None = None,
    fsync: bool = False,
) -> Path:
    """Replace ``path`` with ``data`` (bytes, or a function that writes into the open file) atomically.

    The new file gets ``mode`` if given, else the mode of the file it replaces, else 0666 less the
    umask. A symbolic link at ``path`` is replaced by the file, never written through. ``fsync``
    flushes the data to disk before the rename (for state that must survive a crash).
    """
    path = Path(path)
    directory = path.parent
    fd, tmp = new_temporary(directory, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), _final_mode(path, mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: Path | str, text: str, *, mode: int | None = None, fsync: bool = False) -> Path:
    """:func:`atomic_write_bytes` of ``text`` as UTF-8 (undecodable surrogates become ``?``)."""
    return atomic_write_bytes(path, text.encode("utf-8", errors="replace"), mode=mode, fsync=fsync)


def append_text(path: Path | str, text: str) -> None:
    """Append ``text`` (UTF-8) to ``path``, creating it (0666 less the umask); never through a link.

    Raises ``OSError`` (``ELOOP``) when ``path`` is a symbolic link.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.fspath(path), flags, 0o666)
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as handle:
        handle.write(text)


@contextlib.contextmanager
def locked_folder(directory: Path | str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` itself while the with-block runs.

    Cooperating writers (two ``workload`` processes merging into one output folder) take turns;
    the lock goes with the process, so a killed writer leaves nothing behind. The folder is the one
    the user named (it may be a link to a folder, like ``--output out`` with ``out -> /data/out``);
    what is guarded is what lies inside it.
    """
    fd = os.open(os.fspath(directory), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _final_mode(path: Path, mode: int | None) -> int:
    if mode is not None:
        return mode
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise
    else:
        if not stat.S_ISLNK(st.st_mode):
            return st.st_mode & 0o7777
    return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` would race with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
