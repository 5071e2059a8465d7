"""Fleets on real local hosts: progress rendering, fail-fast, Ctrl-C, merged metrics, re-runs.

Several ``LocalHost`` objects with different names stand in for a fleet (each has its own run
folder, state file and commands); the SSH fleet tests are in ``test_fleet_vms.py``.
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.processes import processes
from tests.steptypes import TEST_TYPES
from tests.test_fleet_steps import FLEET_TYPES
from workload import registry
from workload.cli import invoke
from workload.cli.console import ConsoleReporter, hosts_table
from workload.engine import Engine, HostOutcome, RunOptions, StepOutcome, unfinished_hosts
from workload.errors import StepError, UsageError
from workload.hosts.base import Host, HostSpec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "tests/fixtures/profiles/fleet/run_with_test_steps.py"


@pytest.fixture(autouse=True)
def test_step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES, **FLEET_TYPES})


def write_profile(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"Description": "fleet test", **document}))
    return path


def engine_for(tmp_path: Path, document: dict[str, Any], reporter: Any = None, **options: Any) -> Engine:
    profile = resolve_profile(load_profile(str(write_profile(tmp_path / "profile.json", document))))
    folder = RunFolder.create(tmp_path / "runs", profile.name)
    # Host state in the test's folder, not in /var/lib/workload of the machine running the tests.
    opts = RunOptions(state_path=str(tmp_path / "state.json"), **options)

    def factory(spec: HostSpec) -> Host:
        return LocalHost(spec.name)

    return Engine(profile, folder, factory, opts, reporter)


def local_fleet(*names: str) -> list[HostSpec]:
    return [HostSpec("local", alias=name) for name in names]


def run_fleet(tmp_path: Path, document: dict[str, Any], names: tuple[str, ...], **options: Any) -> list[HostOutcome]:
    engine = engine_for(tmp_path, document, **options)
    return engine.run(local_fleet(*names))


# -- reporter ------------------------------------------------------------------------------------
def test_reporter_without_a_terminal_prints_one_prefixed_line_per_event(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    document = {
        "Dependencies": [
            {"Type": "EchoStep", "Parameters": {"Scenario": "Hello"}},
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken"), "OnlyOn": "b"}},
        ]
    }
    (tmp_path / "broken").touch()
    reporter = ConsoleReporter(console, hosts=["a", "b"], total_steps=2)
    engine = engine_for(tmp_path, document, reporter, parallel=2)
    with reporter:
        outcomes = engine.run(local_fleet("a", "b"))
    text = out.getvalue()
    assert [o.status for o in outcomes] == ["ok", "failed"]
    assert "[a] -> Dependencies[0] EchoStep (Hello)" in text
    assert "[b] -> Dependencies[1] BrokenUntilFixedStep" in text
    assert "[a] Dependencies[1] BrokenUntilFixedStep: no change: only on b" in text
    assert "[b] Dependencies[1] BrokenUntilFixedStep: FAILED" in text
    assert "[b]   " in text and "still broken" in text  # the whole error, prefixed with its host
    assert "[a] ok (2 step(s) done) in" in text
    assert "[b] failed (1 step(s) done): Dependencies[1] BrokenUntilFixedStep: [b] command exited with code 3" in text


class FakeStep:
    """Just what the reporter reads from a step."""

    def __init__(self, label: str) -> None:
        self.label = label


def test_reporter_on_a_terminal_keeps_one_live_line_per_host() -> None:
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    reporter = ConsoleReporter(console, hosts=["vm-01", "vm-02"], total_steps=3)
    assert reporter.progress is not None
    step = FakeStep("Dependencies[1] DockerInstallation")
    with reporter:
        reporter.step_started("vm-01", step)  # type: ignore[arg-type]
        reporter.step_started("vm-01", step)  # type: ignore[arg-type]
        reporter.step_started("vm-02", step)  # type: ignore[arg-type]
        failed = StepOutcome(step.label, "failed", 1.0, message="[vm-02] apt-get exited 100\n  last output:\n   E: x")
        reporter.step_finished("vm-02", step, failed)  # type: ignore[arg-type]
        reporter.host_finished("vm-02", HostOutcome("vm-02", "failed", [failed], StepError(step.label, "boom")))
        time.sleep(0.2)
        lines = {t.fields["host"]: t for t in reporter.progress.tasks}
        assert lines["vm-01"].description == "2/3 Dependencies[1] DockerInstallation"
        assert not lines["vm-01"].finished
        assert lines["vm-02"].finished  # its clock stopped
        frozen = lines["vm-02"].finished_time
    text = out.getvalue()
    assert "vm-01" in text and "2/3 Dependencies[1] DockerInstallation" in text
    assert "[vm-02] Dependencies[1] DockerInstallation FAILED: [vm-02] apt-get exited 100" in text
    assert "failed (0 step(s) done): Dependencies[1] DockerInstallation: boom" in text
    assert lines["vm-02"].finished_time == frozen


def test_hosts_table_shows_steps_result_reason_time_and_metric() -> None:
    ok = HostOutcome("vm-01", "ok", [StepOutcome("s1", "changed"), StepOutcome("s2", "unchanged")], duration_s=12.34)
    bad = HostOutcome("vm-02", "failed", [StepOutcome("s1", "failed")], StepError("s1", "apt-get exited 100"), [], 3.0)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(
        hosts_table([ok, bad], {"vm-01": "offline 6854.84 samples/s"}, total_steps=2)
    )
    rows = {line.split("│")[1].strip(): line for line in out.getvalue().splitlines() if "│ vm-" in line}
    assert [c.strip() for c in rows["vm-01"].split("│")[1:-1]] == [
        "vm-01",
        "2/2",
        "ok",
        "12.3s",
        "offline 6854.84 samples/s",
    ]
    assert [c.strip() for c in rows["vm-02"].split("│")[1:-1]] == [
        "vm-02",
        "0/2",
        "failed: s1: apt-get exited 100",
        "3.0s",
        "-",
    ]
    assert "1 of 2 host(s) ok" in out.getvalue()


# -- failures, fail-fast, stopping ---------------------------------------------------------------
def test_fail_fast_stops_the_other_hosts_and_kills_their_running_commands(tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    document = {
        "Dependencies": [
            {"Type": "SleepStep", "Parameters": {"Seconds": 0.5, "Dir": str(tmp_path), "OnlyOn": "a"}},
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken"), "OnlyOn": "a"}},
            {"Type": "SleepStep", "Parameters": {"Seconds": 97.25, "Dir": str(tmp_path), "OnlyOn": "b,c"}},
            {"Type": "EchoStep"},
        ]
    }
    started = time.monotonic()
    outcomes = run_fleet(tmp_path, document, ("a", "b", "c"), parallel=3, fail_fast=True)
    elapsed = time.monotonic() - started
    assert [o.status for o in outcomes] == ["failed", "interrupted", "interrupted"]
    assert elapsed < 97.25, "the other hosts' 97 s sleeps were not killed"
    for other in outcomes[1:]:
        assert other.steps[-1].status == "interrupted"
        assert "stopped by --fail-fast: a failed" in str(other.error)
        assert other.steps_done == 2  # they got as far as the sleep, and not to the EchoStep
    assert "still broken" in str(outcomes[0].error)
    assert not processes("sleep 97.25"), "a killed command left processes behind"


def test_without_fail_fast_a_failing_host_does_not_stop_the_others(tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    document = {
        "Dependencies": [
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken"), "OnlyOn": "b"}},
            {"Type": "SleepStep", "Parameters": {"Seconds": 0.3, "Dir": str(tmp_path)}},
        ]
    }
    outcomes = run_fleet(tmp_path, document, ("a", "b", "c"), parallel=2)
    assert [o.status for o in outcomes] == ["ok", "failed", "ok"]
    assert (tmp_path / "a.slept").exists() and (tmp_path / "c.slept").exists()
    assert not (tmp_path / "b.slept").exists()


def test_host_log_holds_every_step_and_the_final_error(tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    document = {
        "Dependencies": [
            {"Type": "EchoStep"},
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken")}},
        ]
    }
    engine = engine_for(tmp_path, document)
    (outcome,) = engine.run(local_fleet("vm-07"))
    log = (engine.folder.root / "vm-07" / "host.log").read_text()
    lines = log.splitlines()
    assert all("[vm-07] " in line for line in lines), "every line names its host"
    assert "== Dependencies[0] EchoStep: changed" in log
    assert "-> say 'hello'" in log  # what apply did
    assert "== Dependencies[1] BrokenUntilFixedStep: failed" in log
    assert "== host failed after" in lines[-4]
    assert "still broken" in lines[-1]  # the full error, last output included
    assert outcome.status == "failed"


def test_local_host_interrupt_stops_its_commands_and_leaves_other_children_alone(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)  # not a LocalHost command
    try:
        host = LocalHost("x")
        from threading import Thread

        from workload.commands import cmd

        result: list[Any] = []
        thread = Thread(target=lambda: result.append(host.run(cmd("sh", "-c", "sleep 95.5; echo after"))))
        thread.start()
        deadline = time.monotonic() + 5
        while not processes("sleep 95.5") and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        host.interrupt(grace_s=2.0)
        thread.join(95.5)
        assert not thread.is_alive() and time.monotonic() - started < 95.5  # stopped, not waited for
        assert result[0].returncode in (128 + signal.SIGTERM, 128 + signal.SIGKILL)
        assert "after" not in result[0].stdout
        assert not processes("sleep 95.5")
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_local_host_interrupt_right_after_spawn_still_stops_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """An interrupt that lands between the spawn and the bookkeeping must not miss the command.

    The window is microseconds wide, so a wrapper around Popen holds it open: right after the real
    spawn it fires ``interrupt`` from another thread and gives it time to act.
    """
    import workload.hosts.local as local_module
    from workload.commands import cmd

    host = LocalHost("x")
    real_popen = subprocess.Popen

    def popen_then_interrupt(*args: Any, **kwargs: Any) -> Any:
        proc = real_popen(*args, **kwargs)
        interrupter = threading.Thread(target=host.interrupt, kwargs={"grace_s": 1.0})
        interrupter.start()
        interrupter.join(0.5)  # blocks the full 0.5 s when the interrupt waits for the bookkeeping
        return proc

    monkeypatch.setattr(local_module.subprocess, "Popen", popen_then_interrupt)
    started = time.monotonic()
    result = host.run(cmd("sh", "-c", "sleep 97.5; echo after", timeout=8))  # the bound, were it missed
    # Missed, the command would run to its 8 s timeout (and report timed_out).
    assert not result.timed_out and time.monotonic() - started < 8, "the interrupt missed the command"
    assert result.returncode in (128 + signal.SIGTERM, 128 + signal.SIGKILL)
    assert "after" not in result.stdout
    assert not processes("sleep 97.5")


# -- Ctrl-C on a real `workload run` -------------------------------------------------------------
def test_ctrl_c_stops_every_host_writes_run_json_and_the_next_run_resumes(tmp_path: Path) -> None:
    profile = write_profile(
        tmp_path / "fleet.json",
        {
            "Parameters": {"Seconds": 293.5},
            "Dependencies": [
                # a marker per host: both hosts are this machine, and each must change its own (with one
                # shared marker, the host that plans second may find it written and say "unchanged")
                {"Type": "EchoStep", "Parameters": {"Marker": str(tmp_path / "echo-{host}")}},
                {"Type": "SleepStep", "Parameters": {"Seconds": "$.Parameters.Seconds", "Dir": str(tmp_path)}},
            ],
        },
    )
    inventory = tmp_path / "fleet.txt"
    inventory.write_text("local://  name=h1  rack=r1\nlocal://  name=h2  rack=r2\n")
    argv = [sys.executable, str(RUNNER), "run", "--profile", str(profile), "--inventory", str(inventory)]
    argv += ["--output-dir", str(tmp_path / "runs")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"h{i}.sleeping").exists() for i in (1, 2)):
            assert proc.poll() is None and time.monotonic() < deadline, "the sleeps never started"
            time.sleep(0.1)
        # The marker is written by the shell just before it starts `sleep`: give the fork a moment.
        while len(processes("sleep 293.5")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(processes("sleep 293.5")) == 2
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=293.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert time.monotonic() - stopped_at < 293.5  # the hosts' sleeps were stopped, not waited for
    assert not processes("sleep 293.5"), "Ctrl-C left the hosts' commands running"
    (run_dir,) = (tmp_path / "runs").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    assert [o["status"] for o in run["outcomes"]] == ["interrupted", "interrupted"]
    for outcome in run["outcomes"]:
        assert [s["status"] for s in outcome["steps"]] == ["changed", "interrupted"]
        assert "interrupted (Ctrl-C)" in outcome["error"]
    assert run["hosts"][1]["labels"] == {"rack": "r2"}
    assert "interrupted: finished steps and results are kept" in output

    # The next run re-plans from facts: the echo is done (no-op), the sleep runs again (short now).
    again = subprocess.run([*argv, "--parameters", "Seconds=0.2"], capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 0, again.stdout + again.stderr
    run_dirs = sorted((tmp_path / "runs").iterdir())
    run2 = json.loads((run_dirs[-1] / "run.json").read_text())
    for outcome in run2["outcomes"]:
        assert [s["status"] for s in outcome["steps"]] == ["unchanged", "changed"]


# -- results of a fleet --------------------------------------------------------------------------
def test_fleet_results_are_merged_with_host_and_labels_and_compared_across_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = write_profile(
        tmp_path / "bench.json",
        {"Actions": [{"Type": "ResultStep", "Parameters": {"SlowHosts": "gpu-3", "SlowFactor": 0.8}}]},
    )
    inventory = tmp_path / "fleet.txt"
    inventory.write_text("".join(f"local://  name=gpu-{i}  rack=r{i % 2}  sku=ND96\n" for i in (1, 2, 3)))
    code = invoke(
        ["run", "--profile", str(profile), "--inventory", str(inventory), "--output-dir", str(tmp_path / "runs")]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    (run_dir,) = (tmp_path / "runs").iterdir()
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_host: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_host.setdefault(record["host"], []).append(record)
    assert sorted(by_host) == ["gpu-1", "gpu-2", "gpu-3"]
    for host, items in by_host.items():
        rack = f"r{int(host[-1]) % 2}"
        assert all(r["metadata"]["rack"] == rack and r["metadata"]["sku"] == "ND96" for r in items)
    csv = (run_dir / "metrics.csv").read_text()
    assert "rack=r1" in csv and "gpu-3" in csv
    assert "Hosts" in out and "3 of 3 host(s) ok" in out
    assert "5483.87" in out  # gpu-3's main metric in the hosts table (0.8 x 6854.84)

    assert invoke(["compare", str(run_dir), "--hosts", "--threshold", "30"]) == 0
    assert "gpu-3" in capsys.readouterr().out
    assert invoke(["compare", str(run_dir), "--hosts", "--threshold", "10"]) == 7
    assert "slow hosts: gpu-3" in capsys.readouterr().out


def test_rerun_after_a_failure_finishes_the_failed_host_and_the_others_plan_no_change(tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    document = {
        "Dependencies": [
            {"Type": "EchoStep", "Parameters": {"Marker": str(tmp_path / "m")}},
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken"), "OnlyOn": "b"}},
            {"Type": "SleepStep", "Parameters": {"Seconds": 0.2, "Dir": str(tmp_path)}},
        ]
    }
    first = run_fleet(tmp_path, document, ("a", "b", "c"), parallel=3)
    assert [o.status for o in first] == ["ok", "failed", "ok"]
    (tmp_path / "broken").unlink()  # the operator fixes b
    second = run_fleet(tmp_path, document, ("a", "b", "c"), parallel=3)
    assert [o.status for o in second] == ["ok", "ok", "ok"]
    assert [s.status for s in second[0].steps] == ["unchanged"] * 3
    assert [s.status for s in second[2].steps] == ["unchanged"] * 3
    assert [s.status for s in second[1].steps] == ["unchanged", "unchanged", "changed"]  # only b's sleep ran


def test_unfinished_hosts_of_a_previous_run(tmp_path: Path) -> None:
    (tmp_path / "broken").touch()
    document = {
        "Dependencies": [
            {"Type": "BrokenUntilFixedStep", "Parameters": {"BrokenFlag": str(tmp_path / "broken"), "OnlyOn": "b"}}
        ]
    }
    engine = engine_for(tmp_path, document)
    outcomes = engine.run(local_fleet("a", "b", "c"))
    engine.folder.write_json("run.json", {"outcomes": [o.to_json() for o in outcomes]})
    assert unfinished_hosts(engine.folder.root) == ["b"]
    with pytest.raises(UsageError, match=r"--only-failed .*: cannot read .*run.json"):
        unfinished_hosts(tmp_path / "nowhere")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text("{}")
    with pytest.raises(UsageError, match=r"is not the run\.json of a workload run"):
        unfinished_hosts(tmp_path / "bad")
