"""The engine on real local hosts: order, idempotency, failures, reboots, many hosts, run folder."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.steptypes import TEST_TYPES, EchoParameters
from workload import registry
from workload.commands import cmd
from workload.engine import PREFLIGHT_NOTE, Engine, HostOutcome, RunOptions, StepOutcome, read_boot_id
from workload.errors import ConnectError, ProfileError, RebootRequired, StepError
from workload.hosts.base import Host, HostSpec, parse_host_spec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan


class RefreshThenRebootStep(Step):
    """Like an apt installer: its first plan only refreshes (no reboot known yet); apply plans again
    from the "refreshed lists" and that plan installs a driver that needs a reboot."""

    type_name: ClassVar[str] = "RefreshThenRebootStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change("refresh the package lists", (cmd("true"),)),))

    def apply(self, ctx: StepContext, plan: StepPlan) -> StepPlan:
        super().apply(ctx, plan)
        refreshed = StepPlan(changes=(Change("install driver 550.144.03", (cmd("true"),)),), reboot_required=True)
        super().apply(ctx, refreshed)
        return refreshed


class NeverHereStep(Step):
    """A step whose preflight says this host can never run it (like a driver step on a GPU-less host)."""

    type_name: ClassVar[str] = "NeverHereStep"
    Parameters: ClassVar[type[StepParameters]] = EchoParameters

    def preflight(self, ctx: StepContext) -> None:
        raise self.fail("this host has no NVIDIA GPU", ctx, hint="run it on a GPU machine")

    def plan(self, ctx: StepContext) -> StepPlan:
        raise self.fail("plan must not be reached after a failed preflight", ctx)


class FactReadingStep(Step):
    """Reads one fact (a readonly command that counts its runs in ``Marker``) in preflight, plan and
    verify, like an installer; apply runs a command that is not readonly (none when Message=noop)."""

    type_name: ClassVar[str] = "FactReadingStep"
    Parameters: ClassVar[type[StepParameters]] = EchoParameters

    def _read_fact(self, ctx: StepContext) -> None:
        params = self.params
        assert isinstance(params, EchoParameters) and params.Marker
        ctx.host.run(cmd("sh", "-c", 'echo read >> "$1"', "fact", params.Marker, readonly=True))

    def preflight(self, ctx: StepContext) -> None:
        self._read_fact(ctx)

    def plan(self, ctx: StepContext) -> StepPlan:
        self._read_fact(ctx)
        params = self.params
        assert isinstance(params, EchoParameters)
        if params.Message == "noop":
            return StepPlan.noop("nothing to do")
        return StepPlan(changes=(Change("change something", (cmd("true"),)),))

    def verify(self, ctx: StepContext) -> None:
        self._read_fact(ctx)


@pytest.fixture(autouse=True)
def test_step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    names = ("RefreshThenRebootStep", "NeverHereStep", "FactReadingStep")
    here = {name: f"tests.test_engine:{name}" for name in names}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES, **here})


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def step_started(self, host: str, step: Step) -> None:
        self.events.append((host, "start", step.label))

    def step_finished(self, host: str, step: Step, outcome: StepOutcome) -> None:
        self.events.append((host, outcome.status, step.label))

    def line(self, host: str, text: str) -> None:
        pass

    def host_finished(self, host: str, outcome: HostOutcome) -> None:
        self.events.append((host, "host", outcome.status))


def make_profile(tmp_path: Path, document: dict[str, Any]) -> Any:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(document))
    return resolve_profile(load_profile(str(path)))


def local_factory(spec: HostSpec) -> Host:
    if spec.name == "unreachable":
        raise ConnectError(spec.name, "connection refused")
    return LocalHost(spec.name)


def engine_for(tmp_path: Path, profile: Any, **options: Any) -> tuple[Engine, Recorder]:
    recorder = Recorder()
    opts = RunOptions(state_path=str(tmp_path / "state.json"), **options)
    folder = RunFolder.create(tmp_path / "runs", profile.name)
    return Engine(profile, folder, local_factory, opts, recorder), recorder


def test_steps_run_in_order_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    profile = make_profile(
        tmp_path,
        {
            "Description": "t",
            "Dependencies": [{"Type": "EchoStep", "Parameters": {"Scenario": "Dep", "Marker": str(marker)}}],
            "Actions": [{"Type": "EchoStep", "Parameters": {"Scenario": "Act", "Message": "bench", "Count": 2}}],
        },
    )
    engine, recorder = engine_for(tmp_path, profile)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "ok", outcome.error
    assert [s.status for s in outcome.steps] == ["changed", "changed"]
    assert marker.read_text() == "hello"
    assert [e[2] for e in recorder.events if e[1] == "start"] == [
        "Dependencies[0] EchoStep (Dep)",
        "Actions[0] EchoStep (Act)",
    ]
    log = engine.folder.root / "local" / "02-EchoStep-Act.log"
    assert log.read_text().count("\nbench\n") == 2  # both commands' output is in the step log

    engine2, _ = engine_for(tmp_path, profile)
    (again,) = engine2.run([parse_host_spec("local://")])
    assert [s.status for s in again.steps] == ["unchanged", "changed"]
    assert "already says 'hello'" in again.steps[0].message


def test_plan_only_changes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    profile = make_profile(
        tmp_path, {"Description": "t", "Dependencies": [{"Type": "EchoStep", "Parameters": {"Marker": str(marker)}}]}
    )
    engine, _ = engine_for(tmp_path, profile)
    (outcome,) = engine.run([parse_host_spec("local://")], plan_only=True)
    assert [s.status for s in outcome.steps] == ["planned"]
    plan = outcome.steps[0].plan
    assert plan is not None and plan.changed
    assert "printf %s" in plan.commands[-1].display()
    assert not marker.exists()


def test_failed_dependency_stops_the_host_with_a_located_error(tmp_path: Path) -> None:
    profile = make_profile(
        tmp_path,
        {
            "Description": "t",
            "Dependencies": [{"Type": "FailStep", "Parameters": {"Scenario": "Broken"}}],
            "Actions": [{"Type": "EchoStep"}],
        },
    )
    engine, _ = engine_for(tmp_path, profile)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "failed"
    assert [s.status for s in outcome.steps] == ["failed"]  # the action never ran
    message = str(outcome.error)
    assert "[local]" in message and "exited with code 3" in message and "boom" in message


def test_failed_action_does_not_stop_the_next_unless_fail_fast(tmp_path: Path) -> None:
    document = {
        "Description": "t",
        "Actions": [{"Type": "FailStep"}, {"Type": "EchoStep", "Parameters": {"Scenario": "After"}}],
    }
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert [s.status for s in outcome.steps] == ["failed", "changed"]
    assert outcome.status == "failed"

    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document), fail_fast=True)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert [s.status for s in outcome.steps] == ["failed"]


def test_iterations_repeat_the_actions(tmp_path: Path) -> None:
    profile = make_profile(tmp_path, {"Description": "t", "Actions": [{"Type": "EchoStep"}]})
    engine, _ = engine_for(tmp_path, profile, iterations=3)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert [s.status for s in outcome.steps] == ["changed"] * 3


def test_local_reboot_stops_with_exit_5_and_stays_pending_until_a_reboot(tmp_path: Path) -> None:
    profile = make_profile(tmp_path, {"Description": "t", "Dependencies": [{"Type": "RebootStep"}]})
    engine, _ = engine_for(tmp_path, profile)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "reboot-required"
    assert isinstance(outcome.error, RebootRequired) and outcome.error.exit_code == 5
    assert "run the same command again" in str(outcome.error)
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["pending_reboot"]["step"] == "Dependencies[0] RebootStep"
    assert state["pending_reboot"]["boot_id"]


def test_one_failing_host_does_not_stop_the_others(tmp_path: Path) -> None:
    profile = make_profile(tmp_path, {"Description": "t", "Actions": [{"Type": "EchoStep"}]})
    engine, _ = engine_for(tmp_path, profile, parallel=3)
    specs = [HostSpec("local", alias=name) for name in ("a", "unreachable", "c")]
    outcomes = engine.run(specs)
    assert [o.status for o in outcomes] == ["ok", "failed", "ok"]
    assert "connection refused" in str(outcomes[1].error)
    assert (engine.folder.root / "a" / "01-EchoStep.log").exists()
    assert (engine.folder.root / "c" / "01-EchoStep.log").exists()


def test_dependencies_only(tmp_path: Path) -> None:
    profile = make_profile(
        tmp_path,
        {"Description": "t", "Dependencies": [{"Type": "EchoStep"}], "Actions": [{"Type": "FailStep"}]},
    )
    engine, _ = engine_for(tmp_path, profile, dependencies_only=True)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "ok" and len(outcome.steps) == 1


def test_the_reboot_is_decided_by_the_plan_applied_not_the_first_one(tmp_path: Path) -> None:
    """The audit's case: the pre-refresh plan says "no reboot", the plan applied after the refresh
    installs a new driver. The engine must stop for the reboot instead of verifying a stale driver."""
    profile = make_profile(tmp_path, {"Description": "t", "Dependencies": [{"Type": "RefreshThenRebootStep"}]})
    engine, _ = engine_for(tmp_path, profile)
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "reboot-required", outcome.error
    assert isinstance(outcome.error, RebootRequired)
    log = (engine.folder.root / "local" / "01-RefreshThenRebootStep.log").read_text()
    assert "plan: 1 change(s), 1 command(s)\n" in log
    assert "applied: 1 change(s), 1 command(s); then a reboot\n" in log


def write_state(tmp_path: Path, pending: dict[str, str]) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"pending_reboot": pending}))


def pending_reboot(tmp_path: Path) -> Any:
    return json.loads((tmp_path / "state.json").read_text()).get("pending_reboot")


def test_a_resumed_reboot_is_cleared_and_a_later_step_may_ask_for_its_own(tmp_path: Path) -> None:
    """Resumed after the reboot EchoStep asked for (an old boot id): the key goes, and RebootStep's
    own reboot is asked for (exit 5), not refused as "still needs a reboot after rebooting"."""
    marker = tmp_path / "marker"
    document = {
        "Description": "t",
        "Dependencies": [{"Type": "EchoStep", "Parameters": {"Marker": str(marker)}}, {"Type": "RebootStep"}],
    }
    write_state(tmp_path, {"step": "Dependencies[0] EchoStep", "boot_id": "boot-before-the-reboot"})
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "reboot-required", outcome.error
    assert pending_reboot(tmp_path) == {"step": "Dependencies[1] RebootStep", "boot_id": read_boot_id(LocalHost())}


def test_a_resumed_reboot_leaves_no_pending_key_behind(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    document = {"Description": "t", "Dependencies": [{"Type": "EchoStep", "Parameters": {"Marker": str(marker)}}]}
    write_state(tmp_path, {"step": "Dependencies[0] EchoStep", "boot_id": "boot-before-the-reboot"})
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "ok", outcome.error
    assert pending_reboot(tmp_path) is None


def test_the_step_that_asked_still_wanting_a_reboot_after_it_fails(tmp_path: Path) -> None:
    document = {"Description": "t", "Dependencies": [{"Type": "RebootStep"}]}
    write_state(tmp_path, {"step": "Dependencies[0] RebootStep", "boot_id": "boot-before-the-reboot"})
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "failed"
    assert "Dependencies[0] RebootStep: the host still needs a reboot after rebooting" in str(outcome.error)
    # Not rebooted yet (same boot id): asked again, not refused.
    write_state(tmp_path, {"step": "Dependencies[0] RebootStep", "boot_id": read_boot_id(LocalHost())})
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "reboot-required", outcome.error


def test_preflight_stops_the_run_before_any_step_changes_the_host(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    document = {
        "Description": "t",
        "Dependencies": [
            {"Type": "EchoStep", "Parameters": {"Scenario": "FormatFirst", "Marker": str(marker)}},
            {"Type": "NeverHereStep", "Parameters": {"Scenario": "Driver"}},
        ],
    }
    engine, recorder = engine_for(tmp_path, make_profile(tmp_path, document))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "failed"
    assert ("local", "start", "Dependencies[0] EchoStep (FormatFirst)") not in recorder.events
    assert not marker.exists(), "the first step ran although the run could never finish"
    assert [(s.label, s.status) for s in outcome.steps] == [("Dependencies[1] NeverHereStep (Driver)", "failed")]
    assert isinstance(outcome.error, StepError)
    assert str(outcome.error) == (
        "[local] Dependencies[1] NeverHereStep (Driver): this host has no NVIDIA GPU\n"
        f"{PREFLIGHT_NOTE}\n"
        "  hint: run it on a GPU machine"
    )
    assert outcome.reason == "[local] Dependencies[1] NeverHereStep (Driver): this host has no NVIDIA GPU"

    # `plan` shows the same: the first step's plan, and the impossible one with the reason.
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, document))
    (planned,) = engine.run([parse_host_spec("local://")], plan_only=True)
    assert [s.status for s in planned.steps] == ["planned", "failed"]
    assert planned.steps[1].message == str(outcome.error)


def test_facts_are_read_again_after_every_change_and_once_in_between(tmp_path: Path) -> None:
    reads = tmp_path / "reads"
    step = {"Type": "FactReadingStep", "Parameters": {"Marker": str(reads)}}
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, {"Description": "t", "Dependencies": [step, step]}))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "ok", outcome.error
    # The preflight reads once for both steps and the first step's plan reuses it; its apply
    # changes the host, so its verify reads again, and the second step's plan uses that (nothing
    # changed since); the second apply changes the host, so the last verify reads again.
    # (Without the memo: 2 preflights + 2 plans + 2 verifies = 6 reads.)
    assert reads.read_text().splitlines() == ["read"] * 3

    # A provisioned host: nothing changes, so one read serves the whole run.
    reads.unlink()
    noop = {"Type": "FactReadingStep", "Parameters": {"Marker": str(reads), "Message": "noop"}}
    engine, _ = engine_for(tmp_path, make_profile(tmp_path, {"Description": "t", "Dependencies": [noop, noop]}))
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert [s.status for s in outcome.steps] == ["unchanged", "unchanged"]
    assert reads.read_text().splitlines() == ["read"]


def test_minimum_execution_interval_spaces_the_rounds_of_actions(tmp_path: Path) -> None:
    document = {
        "Description": "t",
        "MinimumExecutionInterval": "00:00:01.5",
        "Actions": [{"Type": "EchoStep", "Parameters": {"Scenario": "Act"}}],
    }
    profile = make_profile(tmp_path, document)
    assert profile.minimum_interval_s == 1.5
    assert profile.to_json()["MinimumExecutionInterval"] == "00:00:01.5"
    starts: list[float] = []

    class Starts(Recorder):
        def step_started(self, host: str, step: Step) -> None:
            if not starts:
                # A slow first announcement (a loaded machine): the interval counts from the
                # announced start, so this delay must not shorten the gap to round 2.
                time.sleep(0.5)
            starts.append(time.monotonic())

    opts = RunOptions(state_path=str(tmp_path / "state.json"), iterations=3)
    engine = Engine(profile, RunFolder.create(tmp_path / "runs", profile.name), local_factory, opts, Starts())
    (outcome,) = engine.run([parse_host_spec("local://")])
    assert outcome.status == "ok", outcome.error
    assert len(starts) == 3
    # Each round starts at least the interval after the one before (a lower bound, not a timing).
    assert all(b - a >= 1.5 for a, b in itertools.pairwise(starts))
    assert "MinimumExecutionInterval" in (engine.folder.root / "local" / "host.log").read_text()


@pytest.mark.parametrize("bad", ["10 minutes", "00:61:00", "1:2:3:4"])
def test_a_bad_minimum_execution_interval_names_the_field(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ProfileError, match=r"profile.json: MinimumExecutionInterval: .*timespan"):
        make_profile(tmp_path, {"Description": "t", "MinimumExecutionInterval": bad})
