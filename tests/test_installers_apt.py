"""apt/dpkg helpers and the resumable download, run for real on this machine.

* The dpkg-lock wait runs against a real fcntl lock held by a real process named like Ubuntu's
  unattended-upgrades ("unattended-upgr" in /proc/PID/comm): it names the holder, delays while the
  lock is held, then succeeds; with a shorter bound it fails naming the holder.
* The download runs real curl (and wget) against a local HTTP server that cuts the first transfer
  in the middle; the next attempt resumes with a Range request and the checksum passes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.steptypes import step_context
from workload.commands import Command, cmd
from workload.errors import CommandFailed
from workload.hosts.local import LocalHost
from workload.installers import apt
from workload.installers.download import download_commands, parse_download_state, read_download_state
from workload.steps import Change, StepPlan

HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
open(sys.argv[1] + ".ready", "w").close()
time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def host() -> LocalHost:
    return LocalHost()


@pytest.fixture
def lock_holder(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A copy of the Python interpreter named unattended-upgrade, so its comm is 'unattended-upgr'."""
    real = Path(os.path.realpath(sys.executable))
    exe = tmp_path / "unattended-upgrade"
    shutil.copy(real, exe)
    yield exe, tmp_path / "lock-frontend"


def _hold(exe: Path, lock: Path, seconds: float) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(exe), "-c", HOLDER, str(lock), str(seconds)])
    deadline = time.monotonic() + 10
    while not Path(str(lock) + ".ready").exists():
        assert time.monotonic() < deadline, "the lock holder did not start"
        time.sleep(0.05)
    return proc


def test_lock_wait_names_the_holder_then_succeeds_when_it_exits(
    host: LocalHost, lock_holder: tuple[Path, Path]
) -> None:
    exe, lock = lock_holder
    proc = _hold(exe, lock, 3)
    try:
        started = time.monotonic()
        result = host.check(apt.wait_for_dpkg_lock(30, [str(lock)]))
        waited = time.monotonic() - started
    finally:
        proc.wait(timeout=10)
    assert 1.5 <= waited < 15
    assert f"waiting for the apt/dpkg lock: unattended-upgr (pid {proc.pid}) holds {lock}" in result.stdout
    assert "the apt/dpkg locks are free after" in result.stdout


def test_lock_wait_fails_after_its_bound_naming_the_holder(host: LocalHost, lock_holder: tuple[Path, Path]) -> None:
    exe, lock = lock_holder
    proc = _hold(exe, lock, 8)
    try:
        with pytest.raises(CommandFailed) as info:
            host.check(apt.wait_for_dpkg_lock(1, [str(lock)]))
    finally:
        proc.kill()
        proc.wait(timeout=10)
    message = str(info.value)
    assert "exited with code 75" in message
    assert f"the apt/dpkg lock is still held after 1s: unattended-upgr (pid {proc.pid}) holds {lock}" in message


def test_the_wait_covers_apts_own_locks_not_only_dpkgs() -> None:
    """DPkg::Lock::Timeout waits for dpkg's locks only: `apt-get update` fails at once on the lists
    lock apt-daily holds, and downloads on the archives lock. The explicit wait takes all four."""
    argv = apt.wait_for_dpkg_lock(30).argv
    assert argv[-4:] == (
        "/var/lib/dpkg/lock-frontend",
        "/var/lib/dpkg/lock",
        "/var/lib/apt/lists/lock",
        "/var/cache/apt/archives/lock",
    )
    refresh = apt.refresh_change(lock_timeout=30)
    assert refresh.commands[0].argv == argv  # the wait comes before `apt-get update`


def test_lock_wait_names_the_lock_that_is_held(host: LocalHost, lock_holder: tuple[Path, Path]) -> None:
    exe, _ = lock_holder
    lists = exe.parent / "lists-lock"
    proc = _hold(exe, lists, 3)
    try:
        result = host.check(apt.wait_for_dpkg_lock(30, [str(exe.parent / "dpkg-lock"), str(lists)]))
    finally:
        proc.wait(timeout=10)
    assert f"waiting for the apt/dpkg lock: unattended-upgr (pid {proc.pid}) holds {lists}" in result.stdout


def test_lock_wait_is_instant_when_free(host: LocalHost, tmp_path: Path) -> None:
    (tmp_path / "lock").touch()
    result = host.check(apt.wait_for_dpkg_lock(5, [str(tmp_path / "lock"), str(tmp_path / "missing")]))
    # A held lock is named at the first look ("waiting for ..."), then looked at every 2 s: nothing printed is no wait.
    assert result.ok and result.stdout == "" and not apt.waited_for_lock(result)


def test_apt_commands_are_bounded_and_noninteractive() -> None:
    install = apt.install(["nvidia-driver-550-server=550.127.05-0ubuntu1"], allow_downgrades=True, lock_timeout=42)
    argv = [str(a) for a in install.argv]
    assert argv[:3] == ["apt-get", "-o", "DPkg::Lock::Timeout=42"]
    assert argv[-2:] == ["--allow-downgrades", "nvidia-driver-550-server=550.127.05-0ubuntu1"]
    assert install.env["DEBIAN_FRONTEND"] == "noninteractive" and install.sudo
    with pytest.raises(ValueError, match="non-idempotent"):
        apt.with_retry(cmd("dpkg", "-i", "x.deb", idempotent=False))


def test_retry_wrapper_reruns_until_success(host: LocalHost, tmp_path: Path) -> None:
    counter = tmp_path / "n"
    flaky = cmd(
        "sh", "-c", 'n=$(cat "$1" 2>/dev/null || echo 0); echo $((n+1)) > "$1"; [ "$n" -ge 2 ]', "flaky", str(counter)
    )
    result = host.check(apt.with_retry(flaky, attempts=4, delay_s=0))
    assert counter.read_text().strip() == "3"
    assert result.stderr.count("attempt") == 2
    with pytest.raises(CommandFailed, match="gave up after 2 attempts"):
        host.check(apt.with_retry(cmd("false"), attempts=2, delay_s=0))


# -- resumable download ------------------------------------------------------------------------------
class _Server:
    """HTTP server with Range support that cuts the first transfer after ``cut`` bytes."""

    def __init__(self, payload: bytes, cut: int) -> None:
        self.payload = payload
        self.cut = cut
        self.ranges: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                rng = self.headers.get("Range")
                server.ranges.append(rng)
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                body = server.payload[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(server.payload) - 1}/{len(server.payload)}")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if len(server.ranges) == 1 and server.cut:
                    self.wfile.write(body[: server.cut])
                    self.wfile.flush()
                    self.connection.shutdown(2)  # the network drops mid-transfer
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/cuda_12.4.0_550.54.14_linux.run"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[_Server]:
    payload = os.urandom(3 * 1024 * 1024 + 17)
    srv = _Server(payload, cut=1024 * 1024)
    yield srv
    srv.httpd.shutdown()


@pytest.mark.parametrize("tool", ["curl", "wget"])
def test_download_cut_in_the_middle_is_resumed_and_verified(
    host: LocalHost, server: _Server, tmp_path: Path, tool: str
) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    dest = str(tmp_path / "cache" / "cuda_12.4.0_550.54.14_linux.run")
    sha = hashlib.sha256(server.payload).hexdigest()
    for command in download_commands(server.url, dest, sha256=sha, tool=tool):  # type: ignore[arg-type]
        host.check(command)
    assert Path(dest).read_bytes() == server.payload
    assert not Path(dest + ".part").exists()
    assert server.ranges[0] is None and server.ranges[-1] is not None  # the second request resumed
    assert server.ranges[-1] == f"bytes={1024 * 1024}-"
    assert read_download_state(host, dest).complete


def test_download_checksum_mismatch_removes_the_partial_file(host: LocalHost, server: _Server, tmp_path: Path) -> None:
    server.cut = 0
    dest = str(tmp_path / "f.run")
    commands = download_commands(server.url, dest, sha256="0" * 64, tool="curl")
    host.check(commands[0])
    host.check(commands[1])
    with pytest.raises(CommandFailed, match="sha256 mismatch"):
        host.check(commands[2])
    assert not Path(dest + ".part").exists() and not Path(dest).exists()


def test_download_state_parser() -> None:
    state = parse_download_state("partial 1048576\ntool wget\n")
    assert (state.complete, state.partial_bytes, state.tool) == (False, 1048576, "wget")
    assert parse_download_state("complete\ntool curl\n").complete


# -- facts remembered across a refresh -----------------------------------------------------------
def _counting_fact(counter: Path, **scope: str) -> Command:
    return cmd("sh", "-c", 'echo x >> "$1"', "fact", str(counter), readonly=True, **scope)


@pytest.mark.parametrize("held", [False, True], ids=["lock free", "lock held"])
def test_a_refresh_forgets_only_the_package_lists_unless_the_lock_wait_waited(
    tmp_path: Path, lock_holder: tuple[Path, Path], held: bool
) -> None:
    """After ``apt-get update`` only what apt offers is read again; after a wait for a lock that
    another process held, everything is (that process changed packages meanwhile)."""
    exe, lock = lock_holder
    ctx = step_context(LocalHost(), tmp_path)
    installed, offered = tmp_path / "installed-reads", tmp_path / "offered-reads"

    def read_facts() -> StepPlan:
        ctx.host.run(_counting_fact(installed))  # like dpkg-query: a general fact
        ctx.host.run(_counting_fact(offered, scope=apt.APT_LISTS))  # like apt-cache policy
        return StepPlan.noop("installed")

    # apt-get update itself is stood in for by a command of the same scope (no apt here).
    refresh = apt.AptRefresh(
        "refresh",
        (apt.wait_for_dpkg_lock(30, [str(lock)]), cmd("true", scope=apt.APT_LISTS)),
    )
    plan = StepPlan(changes=(refresh, Change("install", (cmd("true"),))))
    holder = _hold(exe, lock, 2) if held else None
    try:
        with ctx.host.remembering_facts():
            read_facts()
            apt.apply_with_refresh(ctx, plan, read_facts, label="t")
    finally:
        if holder is not None:
            holder.wait(timeout=10)
    assert offered.read_text().count("x") == 2  # the lists were refreshed: read again
    assert installed.read_text().count("x") == (2 if held else 1)
