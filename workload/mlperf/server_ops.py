"""Plan operations for an LLM server beside the harness (v5.1+): :class:`StartServer` and :class:`StopServer`.

A round adapter puts ``StartServer`` before the ``run_harness`` that needs the server and ``StopServer`` after its
``CollectResults``. ``plan`` prints what they run (:mod:`workload.mlperf.llm_server` renders the argv); the
interpreter (:mod:`workload.mlperf.interpreter`) runs them and also stops every server still running when the step
ends otherwise (a failure, Ctrl-C, SIGTERM), so no server outlives its run.
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.commands import Command
from workload.mlperf.llm_server import ServerSpec
from workload.mlperf.ops import ContainerRef, Op


@dataclass(frozen=True)
class StartServer(Op):
    """Start the server detached in the container and wait (bounded, one deadline) until every one of its URLs
    answers."""

    container: ContainerRef
    spec: ServerSpec
    #: What the server serves (``llama2-70b Offline``), for messages.
    what: str

    def summary(self) -> str:
        return (
            f"start the LLM server for {self.what} detached and wait up to {self.spec.ready_timeout_s:g}s until it "
            f"answers on {self.spec.where()} (its log: {self.spec.log_path}); stopped after the run, also on "
            "failure or interrupt"
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
