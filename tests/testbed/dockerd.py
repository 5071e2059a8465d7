"""A private, real Docker Engine for the test bed.

``acquire_engine()`` starts ``dockerd`` (as root) on a unix socket under the state directory, with
no bridge network and no iptables changes (tests only ever talk to 127.0.0.1), or reuses the one
already running there if its socket answers ``/_ping``. Every user holds a *lease* (a file named
after its pid); ``DockerEngine.release()`` drops the lease, and the last live lease holder stops
the daemon ("last one out turns off the lights"), so concurrent sessions never pull the engine
out from under each other. Set ``WORKLOAD_TESTBED_KEEP=1`` to leave it running for fast re-runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import requests

from tests.testbed.state import TestbedError, file_lock, state_dir

LABEL = "workload.testbed"
OWNER_LABEL = "workload.testbed.owner"
START_TIMEOUT_S = 60.0
#: How long a live dockerd may leave pings unanswered before a new session replaces it as wedged.
WEDGED_AFTER_S = 60.0


@dataclass
class DockerEngine:
    """A running private dockerd. ``client`` talks to it; ``release()`` gives our lease back."""

    root: Path
    socket_path: Path
    client: docker.DockerClient
    started_here: bool
    lease: Path = field(repr=False)

    @property
    def base_url(self) -> str:
        return f"unix://{self.socket_path}"

    def release(self) -> None:
        """Drop this session's lease; stop the daemon when no live lease is left (unless KEEP)."""
        with file_lock("dockerd"):
            self.lease.unlink(missing_ok=True)
            self.client.close()
            if os.environ.get("WORKLOAD_TESTBED_KEEP") == "1" or _live_leases(self.root):
                return
            _stop_daemon(self.root)


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs. An exited one is not, though its parent has not reaped it yet: a daemon
    this session started is its child, and ``kill(pid, 0)`` finds its zombie (its stop then waited out its
    whole 30 s bound after a shutdown of milliseconds, at the end of every such session)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False  # our own child, exited (now reaped)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = process_state(pid)
    return state is not None and state != "Z"


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` in /proc (``R``, ``S``, ``Z`` for a zombie...); None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _live_leases(root: Path) -> list[Path]:
    """Leases whose holder process is still alive; dead holders' leases are removed."""
    live = []
    for lease in (root / "leases").glob("*"):
        try:
            pid = int(lease.name.split("-", 1)[0])
        except ValueError:
            lease.unlink(missing_ok=True)
            continue
        if _pid_alive(pid):
            live.append(lease)
        else:
            lease.unlink(missing_ok=True)
    return live


def _ping(socket_path: Path, timeout_s: float = 5.0) -> bool:
    if not socket_path.exists():
        return False
    try:
        client = docker.APIClient(base_url=f"unix://{socket_path}", version="auto", timeout=timeout_s)
    except (docker.errors.DockerException, requests.RequestException):
        return False
    try:
        return bool(client.ping())
    except (docker.errors.DockerException, requests.RequestException):
        return False
    finally:
        client.close()


def _answers_when_less_busy(root: Path, socket_path: Path) -> bool:
    """A live daemon that missed one ping: ask again, patiently, before it is called wedged and replaced.

    On a loaded machine (other sessions, parallel workers) dockerd can take longer than a ping's
    5 s to answer; replacing it then would kill every container other sessions are using.
    """
    if _daemon_pid(root) is None:
        return False
    deadline = time.monotonic() + WEDGED_AFTER_S
    while time.monotonic() < deadline:
        if _ping(socket_path, timeout_s=min(15.0, max(1.0, deadline - time.monotonic()))):
            return True
        time.sleep(1.0)
    return False


def _daemon_pid(root: Path) -> int | None:
    try:
        pid = int((root / "docker.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def _stop_daemon(root: Path) -> None:
    pid = _daemon_pid(root)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.2)
    if _pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def _start_daemon(root: Path, socket_path: Path) -> None:
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise TestbedError("test bed: dockerd is not installed; run `apt-get install -y docker.io` (as .ci/run does)")
    if os.geteuid() != 0:
        raise TestbedError("test bed: dockerd must run as root; run the slow tests as root")
    stale = _daemon_pid(root)
    if stale is not None:  # alive but not answering: wedged, replace it
        _stop_daemon(root)
    socket_path.unlink(missing_ok=True)
    argv = [
        dockerd,
        f"--host=unix://{socket_path}",
        f"--data-root={root / 'data'}",
        f"--exec-root={root / 'exec'}",
        f"--pidfile={root / 'docker.pid'}",
        "--bridge=none",
        "--iptables=false",
        "--ip-masq=false",
        "--ip6tables=false",
    ]
    log = open(root / "dockerd.log", "ab")  # noqa: SIM115 - handed to the daemon for its lifetime
    # A new session: the daemon must outlive this pytest process if another session still leases it.
    proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _ping(socket_path):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = (root / "dockerd.log").read_text(errors="replace")[-2000:]
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise TestbedError(f"test bed: dockerd did not answer /_ping on {socket_path} in {START_TIMEOUT_S:.0f}s:\n{tail}")


def acquire_engine() -> DockerEngine:
    """Start (or reuse) the private dockerd and take a lease on it."""
    root = state_dir() / "docker"
    root.mkdir(exist_ok=True)
    (root / "leases").mkdir(exist_ok=True)
    socket_path = root / "docker.sock"
    with file_lock("dockerd"):
        started = False
        if not _ping(socket_path) and not _answers_when_less_busy(root, socket_path):
            _start_daemon(root, socket_path)
            started = True
        lease = root / "leases" / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        lease.touch()
    client = docker.DockerClient(base_url=f"unix://{socket_path}", version="auto", timeout=120)
    engine = DockerEngine(root=root, socket_path=socket_path, client=client, started_here=started, lease=lease)
    reap_orphans(engine)
    return engine


def reap_orphans(engine: DockerEngine) -> None:
    """Remove test-bed containers whose owning session died without cleaning up.

    Reads the listing's own fields (one API call): docker-py's ``containers.list`` inspects each
    container after listing it, and a container another session removes in between (its test
    ending) failed this whole session's engine with NotFound.
    """
    for summary in engine.client.api.containers(all=True, filters={"label": LABEL}):
        owner = (summary.get("Labels") or {}).get(OWNER_LABEL, "")
        if owner.isdigit() and not _pid_alive(int(owner)):
            with contextlib.suppress(docker.errors.APIError):
                engine.client.api.remove_container(summary["Id"], force=True)
            for name in summary.get("Names") or []:
                shutil.rmtree(state_dir() / "vms" / name.lstrip("/"), ignore_errors=True)
