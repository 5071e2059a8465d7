"""Run the ``workload`` CLI in this process and note when each host got its work (bench_fleet's controller).

    python bench/_fleet_trace.py TRACE.json run --profile ... --inventory ...

Everything after ``TRACE.json`` is the ``workload`` command line, run by ``workload.cli.main`` in
this very process, so the bench's CPU and peak-RSS figures are those of the real controller. What
is wrapped records a time, then does exactly what it did before:

* ``Engine.run``: the fan-out's start (the profile is resolved, the inventory read, the run folder
  made; the thread pool starts next);
* the host each ``Engine.open_host`` returns: its transport's operations (``_execute``, which every
  command and identity probe goes through, and the file operations ``read_bytes``, ``_write_bytes``,
  ``exists``, ``_put``, ``get``), wrapped on that instance, so any transport (SSH, local, a
  scheduler's) is traced alike: per host, each operation's start and end. An SSH host connects
  lazily on its first operation, so the first one's end includes the connection;
* ``Engine._run_step``: per host and step, its start and end.

Times are ``time.monotonic()`` seconds since the interpreter reached this module (``t0``), so the
CLI's start-up (imports, profile, inventory) is the gap before ``run_start``. The trace is written
at exit, also when the CLI exits non-zero. Recording costs one lock and one list append per
operation: microseconds, against the milliseconds a remote operation takes.

The trace (JSON)::

    {"t0": 0.0, "run_start": 0.41, "exit": 12.3,
     "operations": {"vm-00": [[start, end], ...], ...},
     "steps": {"vm-00": [[index, start, end], ...], ...}}
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

T0 = time.monotonic()


class Trace:
    """Thread-safe timestamps of one controller run (seconds since :data:`T0`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.run_start: float | None = None
        self.operations: dict[str, list[list[float]]] = {}
        self.steps: dict[str, list[list[float]]] = {}

    @staticmethod
    def now() -> float:
        return time.monotonic() - T0

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {
                "t0": 0.0,
                "run_start": self.run_start,
                "exit": self.now(),
                "operations": {k: list(v) for k, v in self.operations.items()},
                "steps": {k: list(v) for k, v in self.steps.items()},
            }


#: The transport's own operations (``hosts/base.py``): every remote command and file access is one.
OPERATIONS = ("_execute", "read_bytes", "_write_bytes", "exists", "_put", "get")


def trace_host(trace: Trace, host: Any) -> Any:
    """Wrap ``host``'s transport operations (on the instance) so that each records its start and end."""
    name = host.name
    inside = threading.local()  # an operation made of others (a file read as a command) is one

    def traced(op: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if getattr(inside, "depth", 0):
                return op(*args, **kwargs)
            inside.depth = 1
            started = trace.now()
            try:
                return op(*args, **kwargs)
            finally:
                inside.depth = 0
                with trace.lock:
                    trace.operations.setdefault(name, []).append([started, trace.now()])

        return call

    for attribute in OPERATIONS:
        setattr(host, attribute, traced(getattr(host, attribute)))
    return host


def install(trace: Trace) -> None:
    """Wrap ``Engine.__init__`` (its host factory), ``Engine.run`` and ``Engine._run_step`` to record into ``trace``."""
    from workload.engine import Engine

    engine_init: Callable[..., None] = Engine.__init__
    engine_run: Callable[..., Any] = Engine.run
    run_step: Callable[..., Any] = Engine._run_step

    def traced_init(self: Engine, *args: Any, **kwargs: Any) -> None:
        engine_init(self, *args, **kwargs)
        factory = self.open_host
        self.open_host = lambda spec: trace_host(trace, factory(spec))

    def traced_engine_run(self: Engine, *args: Any, **kwargs: Any) -> Any:
        with trace.lock:
            if trace.run_start is None:
                trace.run_start = trace.now()
        return engine_run(self, *args, **kwargs)

    def traced_run_step(self: Engine, host: Any, state: Any, index: int, *args: Any, **kwargs: Any) -> Any:
        started = trace.now()
        try:
            return run_step(self, host, state, index, *args, **kwargs)
        finally:
            with trace.lock:
                trace.steps.setdefault(host.name, []).append([float(index), started, trace.now()])

    Engine.__init__ = traced_init  # type: ignore[method-assign]
    Engine.run = traced_engine_run  # type: ignore[method-assign]
    Engine._run_step = traced_run_step  # type: ignore[method-assign]


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: _fleet_trace.py TRACE.json WORKLOAD-ARGS...")
    out = Path(sys.argv[1])
    trace = Trace()
    install(trace)
    atexit.register(lambda: out.write_text(json.dumps(trace.as_dict())))
    from workload.cli import main as workload_main

    sys.argv = ["workload", *sys.argv[2:]]
    workload_main()


if __name__ == "__main__":
    main()
