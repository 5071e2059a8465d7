"""Plan operations for an LLM server beside the harness (v5.1+): :class:`StartServer` and :class:`StopServer`.

A round adapter puts ``StartServer`` before the ``run_harness`` that needs the server and ``StopServer`` after its
``CollectResults``. ``plan`` prints what they run (:mod:`workload.mlperf.llm_server` renders the argv); ``apply``
runs them with :func:`run_with_servers`, which also stops every server still running when an op fails or the run is
interrupted (Ctrl-C, SIGTERM), so no server outlives its run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workload.commands import Command
from workload.mlperf import llm_server
from workload.mlperf.llm_server import ServerSpec
from workload.mlperf.ops import ContainerRef, Op


@dataclass(frozen=True)
class StartServer(Op):
    """Start the server detached in the container and wait (bounded) until it answers."""

    container: ContainerRef
    spec: ServerSpec
    #: What the server serves (``llama2-70b Offline``), for messages.
    what: str

    def summary(self) -> str:
        return (
            f"start the LLM server for {self.what} detached and wait up to {self.spec.ready_timeout_s:g}s until it "
            f"answers on {self.spec.url} (its log: {self.spec.log_path}); stopped after the run, also on failure "
            "or interrupt"
        )

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.spec.start_argv()), self.container.command(self.spec.probe_argv()))


@dataclass(frozen=True)
class StopServer(Op):
    """Stop the server's process group (TERM, then KILL after the grace period)."""

    container: ContainerRef
    spec: ServerSpec
    what: str

    def summary(self) -> str:
        return f"stop the LLM server for {self.what} (TERM, KILL after {self.spec.stop_grace_s:g}s)"

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.spec.stop_argv()),)


def run_with_servers(
    ops: Sequence[Op],
    handle: Callable[[Op], None],
    exec_for: Callable[[ContainerRef], llm_server.Exec],
    *,
    stop_exec_for: Callable[[ContainerRef], llm_server.Exec] | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> None:
    """Run ``ops`` in order: server ops here, every other op through ``handle``.

    ``exec_for(container)`` runs an argv in that container. A server started here and not yet stopped when an op
    raises (any exception, KeyboardInterrupt included) is stopped before the exception goes on, through
    ``stop_exec_for`` when given (an exec that still works after the runner was told to stop).
    """
    running: list[StartServer] = []
    try:
        for op in ops:
            if isinstance(op, StartServer):
                llm_server.start(exec_for(op.container), op.spec)
                running.append(op)
                took = llm_server.wait_ready(exec_for(op.container), op.spec)
                log(f"LLM server for {op.what} answers on {op.spec.url} after {took:.0f}s")
            elif isinstance(op, StopServer):
                llm_server.stop(exec_for(op.container), op.spec)
                running[:] = [s for s in running if s.spec != op.spec]
                log(f"LLM server for {op.what} stopped")
            else:
                handle(op)
    finally:
        for started in reversed(running):
            stopper = (stop_exec_for or exec_for)(started.container)
            try:
                llm_server.stop(stopper, started.spec)
                log(f"LLM server for {started.what} stopped")
            except Exception as exc:  # the op's own error matters more: report and go on
                log(f"could not stop the LLM server for {started.what}: {exc}")
