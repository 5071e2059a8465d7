"""Where the test bed keeps its state, and the file lock that makes building it concurrency-safe.

Everything lives under one state directory (``$WORKLOAD_TESTBED_DIR``, default
``/var/tmp/workload-testbed``) so that the expensive parts (the debootstrap root filesystem, the
Docker data root, the stand-in apt repositories) are built once per machine and shared by every
test session, including sessions started at the same time by other engineers or CI jobs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_STATE_DIR = Path("/var/tmp/workload-testbed")
STANDINS_DIR = Path(__file__).resolve().parent / "standins"


class TestbedError(RuntimeError):
    """The test bed could not be set up; the message names the part and what to do."""

    __test__ = False  # not a pytest test class despite the name


def state_dir() -> Path:
    """Return (and create) the state directory shared by all test sessions on this machine."""
    path = Path(os.environ.get("WORKLOAD_TESTBED_DIR") or DEFAULT_STATE_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def file_lock(name: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<state>/locks/<name>.lock`` for the ``with`` body.

    flock locks die with the process, so a crashed session never leaves a stale lock behind.
    """
    lock_dir = state_dir() / "locks"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"{name}.lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def digest(*parts: bytes | str) -> str:
    """A short, stable content hash used to name cached artifacts."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()[:16]


def tree_digest(root: Path) -> str:
    """Hash every file (path, mode bit for exec, content) under ``root``; used for cache keys."""
    parts: list[bytes | str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        parts.append(str(path.relative_to(root)))
        parts.append("x" if os.access(path, os.X_OK) else "-")
        parts.append(path.read_bytes())
    return digest(*parts)
