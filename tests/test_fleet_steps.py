"""Step types for the fleet tests (registered by the tests; a real ``workload run`` subprocess
registers them through ``tests/fixtures/profiles/fleet/run_with_test_steps.py``).

Each one does something real on its host (sleep, ``apt-get install``, a file check) and can be
aimed at one host with ``OnlyOn`` (the profile is the same for every host of a fleet).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from workload.commands import cmd
from workload.hosts.base import probe
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan

FIXTURES = Path(__file__).parent / "fixtures"

#: What the registry needs to know about the types below (``registry.STEP_TYPES.update(...)``).
FLEET_TYPES = {
    "SleepStep": "tests.test_fleet_steps:SleepStep",
    "BrokenUntilFixedStep": "tests.test_fleet_steps:BrokenUntilFixedStep",
    "AptPackageStep": "tests.test_fleet_steps:AptPackageStep",
    "ResultStep": "tests.test_fleet_steps:ResultStep",
}


class FleetParameters(StepParameters):
    #: Host names (comma-separated) this step applies to; every host when empty.
    OnlyOn: str | None = None


def _skipped_here(params: FleetParameters, ctx: StepContext) -> bool:
    return bool(params.OnlyOn) and ctx.host.name not in [h.strip() for h in (params.OnlyOn or "").split(",")]


class SleepParameters(FleetParameters):
    Seconds: float = Field(default=1.0, ge=0)
    #: Written when the sleep starts (a test waits for it), relative to the state directory.
    Dir: str = "/tmp"


class SleepStep(Step):
    """Sleeps ``Seconds`` once per host (a long-running command); done once ``Dir/<host>.slept`` exists."""

    type_name: ClassVar[str] = "SleepStep"
    Parameters: ClassVar[type[StepParameters]] = SleepParameters

    def plan(self, ctx: StepContext) -> StepPlan:
        params = self.params
        assert isinstance(params, SleepParameters)
        if _skipped_here(params, ctx):
            return StepPlan.noop(f"only on {params.OnlyOn}")
        done = f"{params.Dir}/{ctx.host.name}.slept"
        if ctx.host.exists(done):
            return StepPlan.noop(f"{done} exists")
        started = f"{params.Dir}/{ctx.host.name}.sleeping"
        script = 'echo $$ > "$1" && sleep "$2" && touch "$3"'
        command = cmd("sh", "-c", script, "sh", started, f"{params.Seconds:g}", done)
        return StepPlan(changes=(Change(f"sleep {params.Seconds:g}s", (command,)),))


class BrokenParameters(FleetParameters):
    #: While this file exists on the host, the step fails.
    BrokenFlag: str = "/tmp/broken"


class BrokenUntilFixedStep(Step):
    """Fails (exit 3, "still broken") while ``BrokenFlag`` exists on the host; a no-op otherwise."""

    type_name: ClassVar[str] = "BrokenUntilFixedStep"
    Parameters: ClassVar[type[StepParameters]] = BrokenParameters

    def plan(self, ctx: StepContext) -> StepPlan:
        params = self.params
        assert isinstance(params, BrokenParameters)
        if _skipped_here(params, ctx):
            return StepPlan.noop(f"only on {params.OnlyOn}")
        if not ctx.host.exists(params.BrokenFlag):
            return StepPlan.noop("not broken")
        command = cmd("sh", "-c", 'echo "still broken: $1" >&2; exit 3', "sh", params.BrokenFlag)
        return StepPlan(changes=(Change("fail on purpose", (command,)),))


class AptParameters(FleetParameters):
    Package: str = "nvidia-container-toolkit-base"


class AptPackageStep(Step):
    """A real ``apt-get install`` of one package, planned from ``dpkg-query`` (no-op when installed)."""

    type_name: ClassVar[str] = "AptPackageStep"
    Parameters: ClassVar[type[StepParameters]] = AptParameters

    def _installed(self, ctx: StepContext, package: str) -> bool:
        result = probe(ctx.host, "dpkg-query", "-W", "-f", "${Status}", package)
        return result.ok and result.stdout.strip() == "install ok installed"

    def plan(self, ctx: StepContext) -> StepPlan:
        params = self.params
        assert isinstance(params, AptParameters)
        if _skipped_here(params, ctx):
            return StepPlan.noop(f"only on {params.OnlyOn}")
        if self._installed(ctx, params.Package):
            return StepPlan.noop(f"{params.Package} is installed")
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        return StepPlan(
            changes=(
                Change(
                    f"install {params.Package}",
                    (
                        cmd("apt-get", "update", sudo=True, env=env, timeout=300),
                        cmd("apt-get", "install", "-y", "--no-install-recommends", params.Package, sudo=True, env=env),
                    ),
                ),
            )
        )

    def verify(self, ctx: StepContext) -> None:
        params = self.params
        assert isinstance(params, AptParameters)
        if not _skipped_here(params, ctx) and not self._installed(ctx, params.Package):
            raise self.fail(f"{params.Package} is not installed after apt-get install", ctx)


class ResultParameters(FleetParameters):
    #: Hosts (comma-separated) whose throughput is ``SlowFactor`` times the others'.
    SlowHosts: str = ""
    SlowFactor: float = 0.5


class ResultStep(Step):
    """An action that "benchmarks": copies a real LoadGen Offline result into the host's results.

    Throughput is 6854.84 samples/s, times ``SlowFactor`` on ``SlowHosts``.
    """

    type_name: ClassVar[str] = "ResultStep"
    Parameters: ClassVar[type[StepParameters]] = ResultParameters

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change("copy a LoadGen result", ()),))

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        params = self.params
        assert isinstance(params, ResultParameters)
        target = ctx.host_dir / "results" / f"offline-{ctx.iteration}"
        shutil.copytree(FIXTURES / "results/loadgen/offline_valid", target, dirs_exist_ok=True)
        if ctx.host.name in [h.strip() for h in params.SlowHosts.split(",") if h.strip()]:
            value = f"{6854.84 * params.SlowFactor:.2f}"
            for path in target.iterdir():
                path.write_text(path.read_text().replace("6854.84", value))
        ctx.log(f"-> result in {target}")
        ctx.results.append(target)
