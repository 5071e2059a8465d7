"""Small step types used only by the engine and profile tests (registered by a fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from workload.commands import cmd
from workload.hosts.base import Host
from workload.steps import Change, HostState, Step, StepContext, StepParameters, StepPlan


def step_context(host: Host, tmp_path: Path) -> StepContext:
    """A context to drive one step by hand on ``host``: its log and state file under ``tmp_path``."""
    return StepContext(
        host=host,
        host_dir=tmp_path,
        log_path=tmp_path / "step.log",
        state=HostState(host, str(tmp_path / "state.json")),
    )


class EchoParameters(StepParameters):
    Message: str = "hello"
    Count: int = Field(default=1, ge=1, le=10)
    Marker: str | None = None


class EchoStep(Step):
    """Writes Message to a marker file unless the file already holds it (idempotent)."""

    type_name: ClassVar[str] = "EchoStep"
    Parameters: ClassVar[type[StepParameters]] = EchoParameters

    @staticmethod
    def marker(params: EchoParameters, ctx: StepContext) -> str | None:
        """The marker file; ``{host}`` in it is the host's name (local hosts of a fleet share one filesystem, and
        a test that asserts each host's own outcome needs a marker per host)."""
        return params.Marker.replace("{host}", ctx.host.name) if params.Marker else None

    def plan(self, ctx: StepContext) -> StepPlan:
        params = self.params
        assert isinstance(params, EchoParameters)
        marker = self.marker(params, ctx)
        if marker and ctx.host.exists(marker) and ctx.host.read_text(marker) == params.Message:
            return StepPlan.noop(f"{marker} already says {params.Message!r}")
        commands = [cmd("echo", params.Message) for _ in range(params.Count)]
        if marker:
            # Write-then-rename: hosts of a fleet test may share one marker, and a reader must never
            # see it truncated by another host's write.
            script = 'printf %s "$1" > "$2.$$" && mv -f "$2.$$" "$2"'
            commands.append(cmd("sh", "-c", script, "sh", params.Message, marker))
        return StepPlan(changes=(Change(f"say {params.Message!r}", tuple(commands)),))

    def verify(self, ctx: StepContext) -> None:
        params = self.params
        assert isinstance(params, EchoParameters)
        marker = self.marker(params, ctx)
        if marker and ctx.host.read_text(marker) != params.Message:
            raise self.fail(f"{marker} does not hold {params.Message!r}", ctx)

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, EchoParameters)
        if params.Message == "forbidden":
            raise ValueError(f"Message: unknown message {params.Message!r}")


class FailStep(Step):
    """Always fails at apply (a command that exits 3)."""

    type_name: ClassVar[str] = "FailStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change("fail on purpose", (cmd("sh", "-c", "echo boom >&2; exit 3"),)),))


class RebootStep(Step):
    """Wants a reboot until a marker exists (simulates a driver install)."""

    type_name: ClassVar[str] = "RebootStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(
            changes=(Change("install something that needs a reboot", (cmd("true"),)),), reboot_required=True
        )


TEST_TYPES = {
    "EchoStep": "tests.steptypes:EchoStep",
    "FailStep": "tests.steptypes:FailStep",
    "RebootStep": "tests.steptypes:RebootStep",
}
