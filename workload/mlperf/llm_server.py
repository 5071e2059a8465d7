"""An LLM server's lifecycle beside the harness: start it detached, wait until it answers, stop it whatever happens.

From v5.1 NVIDIA's harness runs LLM benchmarks against a server: ``make run_llm_server RUN_ARGS="..."`` starts
``trtllm-serve`` (port 30000 by default, ``code/llmlib/fields.py`` ``trtllm_server_urls``), and ``make run_harness``
with ``--trtllm_server_urls=<host:port>`` sends LoadGen's queries to it (NVIDIA's
``scripts/slurm_llm/local_node_instance/run_servers_and_harness.sh`` does the same on Slurm, ending with
``pkill -9 make``). In v6.1 one ``make run_llm_server`` starts one trtllm-serve per URL of its config (one per
data-parallel rank, ports P, P+1...; :mod:`workload.mlperf.server_urls`), all in the make's process group. This
module does it on one machine with one bounded wait for every server and a stop that runs on every way out.

Every step is an argv tuple run by the caller's ``exec`` (a ``docker exec`` in the harness container, or any other
transport): :class:`ServerSpec` renders them, so ``plan`` prints exactly what :func:`serving` runs.

- **start** first checks that nothing listens on any of the servers' ports yet (a leftover server would answer the
  probes in ours' place), then runs the server command under ``setsid`` (its own process group, so a stop reaches
  make, its Python and every server and worker it spawns) in the background with its output in ``log_path`` and
  its group id in ``pid_path``; the exec itself returns at once.
- **probe** asks every ``http://<url><health_path>`` (trtllm-serve's ``/health``) in one exec: exit 0 when all
  answer 200 (else it prints which answer and which not), 3 when the server's process group is gone (it died:
  waiting longer is pointless), 5 when the group will never answer on the missing ones (below), anything else when
  not ready yet. :func:`wait_ready` polls it against one deadline for all servers and names the URLs that never
  answered.
- **never**: a server whose config names other ports than ours never answers on ours, and the wait would last the
  whole ``ready_timeout_s``. When some of ours do not answer, the probe reads the TCP ports the server's process
  group listens on (``/proc/net/tcp{,6}`` rows in state LISTEN whose socket inode is an open fd of a process of the
  group) and the ports its processes' command lines name (a ``--port P``, ``host:P`` or ``--port=P`` argument). A
  missing port the group listens on or names is waited for (a server still loading beside one that is up);
  when none is, and the group answers on another port (printed ``elsewhere: P...``) or on some of ours (a rank
  that exited, or one its config does not start), the wait ends at once naming them.
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
from workload.mlperf.server_urls import describe

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
#: Exit code of the probe when the group will never answer on the missing URLs (printed: ``elsewhere: P...``).
ELSEWHERE = 5
#: The parameter that sets the port the rounds' servers are waited for on.
PORT_PARAMETER = "LLMServerPort"

# The background child makes its own process group only once it runs setsid; on a loaded machine that can be after
# this exec returned and the first probe asked for the group (which then looked dead). So the start waits, bounded
# (50 x 0.1 s), until the group exists or the child is gone; the probe still counts the child itself as alive.
_START = (
    'log=$1; pid=$2; shift 2; mkdir -p -- "$(dirname -- "$log")" "$(dirname -- "$pid")" || exit 1; '
    'setsid "$@" >"$log" 2>&1 </dev/null & p=$!; echo "$p" >"$pid"; n=0; '
    'while ! kill -0 -- "-$p" 2>/dev/null && kill -0 "$p" 2>/dev/null && [ "$n" -lt 50 ]; do sleep 0.1; n=$((n+1)); '
    "done; exit 0"
)
# Python instead of curl: NVIDIA's image always has python3, not always curl. The program is one argument (shown
# as it is by `plan`); argv: the health URL, the group id. See the module docstring for "another port".
_PROBE = (
    'p=$(cat "$1" 2>/dev/null) || exit 3; kill -0 -- "-$p" 2>/dev/null || kill -0 "$p" 2>/dev/null || exit 3; shift; '
    'exec python3 -c "$1" "$p" "${@:2}" 2>/dev/null'
)
# argv: the group id, the health path, then every server's host:port. Prints "answering: ..." and "waiting: ..."
# (host:port each) and, when it gives up, "elsewhere: <port>..." (ports of the group answering that are not ours).
_PROBE_PY = """import os, sys, urllib.request as u
group, path, urls = sys.argv[1], sys.argv[2], sys.argv[3:]
def ok(where):
    try:
        return u.urlopen(f"http://{where}{path}", timeout=2).status == 200
    except Exception:
        return False
waiting = [w for w in urls if not ok(w)]
if not waiting:
    sys.exit(0)
print("answering:", *[w for w in urls if w not in waiting])
print("waiting:", *waiting)
ours = {w.rpartition(":")[2] for w in urls}
inodes, named = set(), set()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[2] != group:
            continue
        args = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split(chr(0))
        for a in args:
            named.update(p for p in ours if a == p or a.endswith(":" + p) or a == "--port=" + p)
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
            listening.add(str(int(f[1].rsplit(":", 1)[1], 16)))
if any(w.rpartition(":")[2] in named | listening for w in waiting):
    sys.exit(1)
host = urls[0].rpartition(":")[0]
others = [p for p in sorted(listening - ours, key=int) if ok(f"{host}:{p}")]
print("elsewhere:", *others)
sys.exit(5 if others or len(waiting) < len(urls) else 1)
"""
_FREE = 'exec python3 -c "$1" "${@:2}"'
# argv: every server's host:port; prints those something already listens on.
_FREE_PY = """import socket, sys
busy = []
for where in sys.argv[1:]:
    host, port = where.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        if s.connect_ex((host, int(port))) == 0:
            busy.append(where)
print(*busy)
sys.exit(4 if busy else 0)
"""
_STOP = (
    'p=$(cat "$1" 2>/dev/null) || exit 0; kill -TERM -- "-$p" 2>/dev/null; n=0; '
    'while kill -0 -- "-$p" 2>/dev/null && [ "$n" -lt "$2" ]; do sleep 0.1; n=$((n+1)); done; '
    'kill -KILL -- "-$p" 2>/dev/null; rm -f -- "$1"; exit 0'
)


@dataclass(frozen=True)
class ServerSpec:
    """One server command: where its servers answer, and where its log and process group id are kept."""

    #: The server command, e.g. ``("make", "run_llm_server", "RUN_ARGS=--benchmarks=llama2-70b ...")``.
    argv: tuple[str, ...]
    #: ``host:port`` of every server the command starts (what the harness sends to), all waited for.
    urls: tuple[str, ...] = (DEFAULT_URL,)
    log_path: str = "build/logs/llm_server.log"
    pid_path: str = "build/logs/llm_server.pgid"
    health_path: str = HEALTH_PATH
    ready_timeout_s: float = 1800.0
    poll_s: float = 2.0
    stop_grace_s: float = 30.0
    #: Where the URLs come from, for messages (empty: the parameter :data:`PORT_PARAMETER`).
    origin: str = ""
    #: Where the servers' own logs are (v6.1: ``trtllm_serve_<i>.log`` in the server's LOG_DIR), for messages.
    server_logs: str = ""

    def __post_init__(self) -> None:
        if not self.argv:
            raise ValueError("a server needs a command")
        if not self.urls or any(":" not in u for u in self.urls):
            raise ValueError("a server needs at least one host:port")
        if self.ready_timeout_s <= 0 or self.poll_s <= 0 or self.stop_grace_s < 0:
            raise ValueError("ready_timeout_s and poll_s must be positive, stop_grace_s not negative")

    def where(self) -> str:
        """The URLs in words (``127.0.0.1:30000-30007 (8 servers)`` for consecutive ports)."""
        return describe(self.urls)

    def start_argv(self) -> tuple[str, ...]:
        return ("bash", "-c", _START, "llm-server", self.log_path, self.pid_path, *self.argv)

    def free_argv(self) -> tuple[str, ...]:
        return ("bash", "-c", _FREE, "llm-server-port", _FREE_PY, *self.urls)

    def probe_argv(self) -> tuple[str, ...]:
        return ("bash", "-c", _PROBE, "llm-server-probe", self.pid_path, _PROBE_PY, self.health_path, *self.urls)

    def stop_argv(self) -> tuple[str, ...]:
        ticks = str(int(self.stop_grace_s * 10))
        return ("bash", "-c", _STOP, "llm-server-stop", self.pid_path, ticks)

    def log_tail_argv(self, lines: int = 40) -> tuple[str, ...]:
        return ("tail", "-n", str(lines), "--", self.log_path)

    def summary(self) -> str:
        return f"start {' '.join(self.argv[:2])} detached, wait up to {self.ready_timeout_s:g}s for {self.where()}"


def start(exec_: Exec, spec: ServerSpec) -> None:
    """Start the server detached; BenchmarkFailed when one of its ports is taken (something else would answer our
    probes) or even the start fails (bash missing, the log folder not creatable)."""
    code, out = exec_(spec.free_argv())
    if code == BUSY:
        taken = out.split() or list(spec.urls)
        raise BenchmarkFailed(
            f"something already listens on {', '.join(taken)} (another LLM server?); not starting ours there, its "
            "answers would be taken for our server's"
        )
    code, out = exec_(spec.start_argv())
    if code != 0:
        raise BenchmarkFailed(f"could not start the LLM server ({' '.join(spec.argv)}): exit {code}: {out.strip()}")


@dataclass(frozen=True)
class _Probe:
    """One probe's answer: the exit code and the URLs it printed as answering / waiting, ports elsewhere."""

    code: int
    answering: tuple[str, ...]
    waiting: tuple[str, ...]
    elsewhere: tuple[str, ...]

    @classmethod
    def of(cls, code: int, output: str) -> _Probe:
        lines: dict[str, tuple[str, ...]] = {}
        for line in output.splitlines():
            key, sep, rest = line.partition(":")
            if sep and key in ("answering", "waiting", "elsewhere"):
                lines[key] = tuple(rest.split())
        return cls(code, lines.get("answering", ()), lines.get("waiting", ()), lines.get("elsewhere", ()))


def wait_ready(
    exec_: Exec,
    spec: ServerSpec,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = lambda _line: None,
) -> float:
    """Probe until every server answers; return the seconds it took. One deadline for all: BenchmarkFailed with the
    log and the URLs that never answered when the group died, will never answer there, or ``ready_timeout_s``
    passed. ``log`` hears each change of how many answer (several servers load one after another)."""
    began = clock()
    deadline = began + spec.ready_timeout_s
    last: tuple[str, ...] | None = None
    while True:
        probe = _Probe.of(*exec_(spec.probe_argv()))
        if probe.code == 0:
            return clock() - began
        if probe.code == ELSEWHERE:
            raise BenchmarkFailed(_never(spec, probe) + _log_tail(exec_, spec))
        if probe.code == DEAD:
            raise BenchmarkFailed(
                f"the LLM server ({' '.join(spec.argv)}) exited before answering on {_missing(spec, probe)}"
                + _answered(probe)
                + _log_tail(exec_, spec)
            )
        if len(spec.urls) > 1 and probe.answering != last and probe.answering:
            log(f"LLM server: {len(probe.answering)} of {len(spec.urls)} answer ({describe(probe.answering)})")
        last = probe.answering
        if clock() >= deadline:
            health = ", ".join(f"http://{u}{spec.health_path}" for u in (probe.waiting or spec.urls))
            raise BenchmarkFailed(
                f"the LLM server ({' '.join(spec.argv)}) did not answer on {health} within {spec.ready_timeout_s:g}s"
                + _answered(probe)
                + _log_tail(exec_, spec)
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
    """Run the body while every server answers; yield the seconds it took to answer.

    ``stop_exec`` runs the stop when the normal ``exec_`` refuses work after an interrupt (a stopped container
    runner); the stop runs on every way out of the body and of the wait, and a failing stop is logged, never
    hiding the body's own exception.
    """
    started = False
    try:
        start(exec_, spec)
        started = True
        log(f"LLM server starting: {' '.join(spec.argv)} (log {spec.log_path})")
        took = wait_ready(exec_, spec, clock=clock, sleep=sleep, log=log)
        log(f"LLM server answers on {spec.where()} after {took:.0f}s")
        yield took
    finally:
        if started:
            try:
                stop(stop_exec or exec_, spec)
                log("LLM server stopped")
            except Exception as exc:  # the body's own error matters more: report and go on
                log(f"could not stop the LLM server: {exc}")


def _missing(spec: ServerSpec, probe: _Probe) -> str:
    return describe(probe.waiting or spec.urls)


def _answered(probe: _Probe) -> str:
    return f" (answered: {describe(probe.answering)})" if probe.answering else ""


def _never(spec: ServerSpec, probe: _Probe) -> str:
    """The message of a server group that will never answer on ``probe.waiting``: it answers on other ports (the
    probe's ``elsewhere``), or on some of ours while nothing of it listens on or names the rest."""
    command = " ".join(spec.argv)
    missing = probe.waiting or spec.urls
    host = missing[0].rpartition(":")[0]
    if probe.elsewhere and not probe.answering:
        where = " and ".join(f"{host}:{p}" for p in probe.elsewhere)
        text = f"the LLM server ({command}) answers on {where}, not on {describe(missing)} where this run waits for it"
        if spec.origin:
            return text + f" ({spec.origin})"
        port = missing[0].rpartition(":")[2]
        return text + (
            f" (the parameter {PORT_PARAMETER} is {port}); set {PORT_PARAMETER}={probe.elsewhere[0]}, or make the "
            f"server's config (its trtllm_server_urls) use port {port}"
        )
    text = (
        f"the LLM server ({command}) answers on {describe(probe.answering or probe.elsewhere)} but nothing in its "
        f"process group listens on or names {describe(missing)}: a server that exited, or one its config does not "
        "start"
    )
    if spec.origin:
        text += f" ({spec.origin})"
    if spec.server_logs:
        text += f"; each server's log is in {spec.server_logs}"
    return text


def _log_tail(exec_: Exec, spec: ServerSpec) -> str:
    code, out = exec_(spec.log_tail_argv())
    text = out.strip()
    if code != 0 or not text:
        return f" (no log at {spec.log_path})"
    lines = "\n".join("    " + line for line in text.splitlines())
    return f"; last lines of {spec.log_path}:\n{lines}"
