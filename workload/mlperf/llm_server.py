"""An LLM server's lifecycle beside the harness: start it detached, wait until it answers, stop it whatever happens.

From v5.1 NVIDIA's harness runs LLM benchmarks against a server: ``make run_llm_server RUN_ARGS="..."`` starts
``trtllm-serve`` (port 30000 by default, ``code/llmlib/fields.py`` ``trtllm_server_urls``), and ``make run_harness``
with ``--trtllm_server_urls=<host:port>`` sends LoadGen's queries to it (NVIDIA's
``scripts/slurm_llm/local_node_instance/run_servers_and_harness.sh`` does the same on Slurm, ending with
``pkill -9 make``). This module does it on one machine with a bounded wait and a stop that runs on every way out.

Every step is an argv tuple run by the caller's ``exec`` (a ``docker exec`` in the harness container, or any other
transport): :class:`ServerSpec` renders them, so ``plan`` prints exactly what :func:`serving` runs.

- **start** first checks that nothing listens on the server's port yet (a leftover server would answer the probes
  in our server's place), then runs the server command under ``setsid`` (its own process group, so a stop reaches
  make, its Python and every worker it spawns) in the background with its output in ``log_path`` and its group id
  in ``pid_path``; the exec itself returns at once.
- **probe** asks ``http://<url><health_path>`` (trtllm-serve's ``/health``): exit 0 when it answers 200, 3 when
  the server's process group is gone (it died: waiting longer is pointless), 5 when the group answers on another
  port instead (below), anything else when not ready yet.
- **another port**: a server whose config names another port than ours (NVIDIA's or the user's ``server.py``
  with ``trtllm_server_urls`` other than ``LLMServerPort``) never answers on ours, and the wait would last the whole
  ``ready_timeout_s``. When ours does not answer, the probe reads the TCP ports the server's process group listens
  on (``/proc/net/tcp{,6}`` rows in state LISTEN whose socket inode is an open fd of a process of the group) and
  asks each for ``health_path``; one that answers 200, while our port is not listened on and named by no process
  of the group's command line (a ``--port P``, ``host:P`` or ``--port=P`` argument: a server that will listen on
  ours, still loading beside one that is up, is waited for), ends the wait at once naming both ports.
- **stop** sends SIGTERM to the group, waits up to ``stop_grace_s``, then SIGKILL, and removes the pid file; it
  is a no-op when no server was started (no pid file), so it is safe to run twice.

:func:`serving` starts, probes every ``poll_s`` until ``ready_timeout_s`` (a :class:`~workload.errors.BenchmarkFailed`
with the server log's last lines on timeout or death), yields, and stops in ``finally`` — after a failed harness,
an exception or Ctrl-C (``KeyboardInterrupt``, :class:`~workload.errors.Interrupted`) alike.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from workload.errors import BenchmarkFailed

#: Runs one argv where the server lives; returns (exit code, output).
Exec = Callable[[Sequence[str]], tuple[int, str]]

#: trtllm-serve's default endpoint in NVIDIA's v5.1 harness (``trtllm_server_urls`` "default=0.0.0.0:30000").
DEFAULT_URL = "127.0.0.1:30000"
#: The endpoint trtllm-serve (TensorRT-LLM's OpenAI-compatible server) answers 200 on once the model is loaded.
HEALTH_PATH = "/health"
#: Exit code of the probe when the server's process group no longer exists.
DEAD = 3
#: Exit code of the port check when something already listens there (another server would answer our probes).
BUSY = 4
#: Exit code of the probe when the server answers on another port than ours (printed: ``answers on P...``).
ELSEWHERE = 5
#: The parameter that sets the port the rounds' servers are waited for on.
PORT_PARAMETER = "LLMServerPort"

_START = (
    'log=$1; pid=$2; shift 2; mkdir -p -- "$(dirname -- "$log")" "$(dirname -- "$pid")" || exit 1; '
    'setsid "$@" >"$log" 2>&1 </dev/null & echo $! >"$pid"'
)
# Python instead of curl: NVIDIA's image always has python3, not always curl. The program is one argument (shown
# as it is by `plan`); argv: the health URL, the group id. See the module docstring for "another port".
_PROBE = (
    'p=$(cat "$1" 2>/dev/null) || exit 3; kill -0 -- "-$p" 2>/dev/null || exit 3; '
    'exec python3 -c "$3" "$2" "$p" 2>/dev/null'
)
_PROBE_PY = """import os, sys, urllib.request as u
url, group = sys.argv[1], sys.argv[2]
def ok(address):
    try:
        return u.urlopen(address, timeout=2).status == 200
    except Exception:
        return False
if ok(url):
    sys.exit(0)
scheme, rest = url.split("://", 1)
where, _, path = rest.partition("/")
host, _, port = where.rpartition(":")
inodes, named = set(), False
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[2] != group:
            continue
        args = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split(chr(0))
        named = named or any(a == port or a.endswith(":" + port) or a == "--port=" + port for a in args)
        for fd in os.listdir(f"/proc/{pid}/fd"):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except (OSError, IndexError):
        continue
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    for f in (row.split() for row in rows):
        if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
            listening.add(int(f[1].rsplit(":", 1)[1], 16))
if named or int(port) in listening:
    sys.exit(1)
others = [p for p in sorted(listening) if ok(f"{scheme}://{host}:{p}/{path}")]
if others:
    print("answers on", *others)
    sys.exit(5)
sys.exit(1)
"""
_FREE = (
    "exec python3 -c \"import socket, sys; h, p = sys.argv[1].rsplit(':', 1); s = socket.socket(); "
    's.settimeout(2); sys.exit(4 if s.connect_ex((h, int(p))) == 0 else 0)" "$1"'
)
_STOP = (
    'p=$(cat "$1" 2>/dev/null) || exit 0; kill -TERM -- "-$p" 2>/dev/null; n=0; '
    'while kill -0 -- "-$p" 2>/dev/null && [ "$n" -lt "$2" ]; do sleep 0.1; n=$((n+1)); done; '
    'kill -KILL -- "-$p" 2>/dev/null; rm -f -- "$1"; exit 0'
)


@dataclass(frozen=True)
class ServerSpec:
    """One server: its command, where it answers and where its log and process group id are kept."""

    #: The server command, e.g. ``("make", "run_llm_server", "RUN_ARGS=--benchmarks=llama2-70b ...")``.
    argv: tuple[str, ...]
    #: ``host:port`` the server listens on (what the harness gets as ``--trtllm_server_urls``).
    url: str = DEFAULT_URL
    log_path: str = "build/logs/llm_server.log"
    pid_path: str = "build/logs/llm_server.pgid"
    health_path: str = HEALTH_PATH
    ready_timeout_s: float = 1800.0
    poll_s: float = 2.0
    stop_grace_s: float = 30.0

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a server needs a command")
        if self.ready_timeout_s <= 0 or self.poll_s <= 0 or self.stop_grace_s < 0:
            raise ValueError("ready_timeout_s and poll_s must be positive, stop_grace_s not negative")

    def start_argv(self) -> tuple[str, ...]:
        return ("bash", "-c", _START, "llm-server", self.log_path, self.pid_path, *self.argv)

    def free_argv(self) -> tuple[str, ...]:
        return ("bash", "-c", _FREE, "llm-server-port", self.url)

    def probe_argv(self) -> tuple[str, ...]:
        url = f"http://{self.url}{self.health_path}"
        return ("bash", "-c", _PROBE, "llm-server-probe", self.pid_path, url, _PROBE_PY)

    def stop_argv(self) -> tuple[str, ...]:
        ticks = str(int(self.stop_grace_s * 10))
        return ("bash", "-c", _STOP, "llm-server-stop", self.pid_path, ticks)

    def log_tail_argv(self, lines: int = 40) -> tuple[str, ...]:
        return ("tail", "-n", str(lines), "--", self.log_path)

    def summary(self) -> str:
        return f"start {' '.join(self.argv[:2])} detached, wait up to {self.ready_timeout_s:g}s for {self.url}"


def start(exec_: Exec, spec: ServerSpec) -> None:
    """Start the server detached; BenchmarkFailed when its port is taken (something else would answer our probes)
    or even the start fails (bash missing, the log folder not creatable)."""
    code, out = exec_(spec.free_argv())
    if code == BUSY:
        raise BenchmarkFailed(
            f"something already listens on {spec.url} (another LLM server?); not starting ours there, its answers "
            "would be taken for our server's"
        )
    code, out = exec_(spec.start_argv())
    if code != 0:
        raise BenchmarkFailed(f"could not start the LLM server ({' '.join(spec.argv)}): exit {code}: {out.strip()}")


def wait_ready(
    exec_: Exec,
    spec: ServerSpec,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Probe until the server answers; return the seconds it took. BenchmarkFailed with its log when it died or
    did not answer within ``spec.ready_timeout_s``."""
    began = clock()
    deadline = began + spec.ready_timeout_s
    while True:
        code, out = exec_(spec.probe_argv())
        if code == 0:
            return clock() - began
        if code == ELSEWHERE:
            raise BenchmarkFailed(_elsewhere(spec, out) + _log_tail(exec_, spec))
        if code == DEAD:
            raise BenchmarkFailed(
                f"the LLM server ({' '.join(spec.argv)}) exited before answering on {spec.url}" + _log_tail(exec_, spec)
            )
        if clock() >= deadline:
            raise BenchmarkFailed(
                f"the LLM server ({' '.join(spec.argv)}) did not answer on http://{spec.url}{spec.health_path} "
                f"within {spec.ready_timeout_s:g}s" + _log_tail(exec_, spec)
            )
        sleep(min(spec.poll_s, max(0.0, deadline - clock())))


def stop(exec_: Exec, spec: ServerSpec) -> None:
    """Stop the server's whole process group (TERM, then KILL after the grace period); safe when none runs."""
    code, out = exec_(spec.stop_argv())
    if code != 0:
        raise BenchmarkFailed(f"could not stop the LLM server (pid file {spec.pid_path}): exit {code}: {out.strip()}")


@contextmanager
def serving(
    exec_: Exec,
    spec: ServerSpec,
    *,
    stop_exec: Exec | None = None,
    log: Callable[[str], None] = lambda _line: None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[float]:
    """Run the body while the server answers; yield the seconds it took to answer.

    ``stop_exec`` runs the stop when the normal ``exec_`` refuses work after an interrupt (a stopped container
    runner); the stop runs on every way out of the body and of the wait, and a failing stop is logged, never
    hiding the body's own exception.
    """
    started = False
    try:
        start(exec_, spec)
        started = True
        log(f"LLM server starting: {' '.join(spec.argv)} (log {spec.log_path})")
        took = wait_ready(exec_, spec, clock=clock, sleep=sleep)
        log(f"LLM server answers on {spec.url} after {took:.0f}s")
        yield took
    finally:
        if started:
            try:
                stop(stop_exec or exec_, spec)
                log("LLM server stopped")
            except Exception as exc:  # the body's own error matters more: report and go on
                log(f"could not stop the LLM server: {exc}")


def _elsewhere(spec: ServerSpec, output: str) -> str:
    """The message of a server that answers on other ports (the probe's ``answers on P...``) than ``spec.url``."""
    ports = [w for w in output.split() if w.isdigit()]
    host, _, port = spec.url.rpartition(":")
    where = " and ".join(f"{host}:{p}" for p in ports) or "another port"
    return (
        f"the LLM server ({' '.join(spec.argv)}) answers on {where}, not on {spec.url} where this run waits for it "
        f"(the parameter {PORT_PARAMETER} is {port}); set {PORT_PARAMETER}={ports[0] if ports else '<its port>'}, "
        f"or make the server's config (its trtllm_server_urls) use port {port}"
    )


def _log_tail(exec_: Exec, spec: ServerSpec) -> str:
    code, out = exec_(spec.log_tail_argv())
    text = out.strip()
    if code != 0 or not text:
        return f" (no log at {spec.log_path})"
    lines = "\n".join("    " + line for line in text.splitlines())
    return f"; last lines of {spec.log_path}:\n{lines}"
