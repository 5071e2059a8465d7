"""``--slurm`` targets: the request (pure), and on the real test-bed cluster: pending reasons, verify-only
dependencies, ``doctor`` per node, the scheduler's refusals as clear messages, step overhead."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.output_lines import TimedLines
from tests.test_slurm_run import shared_paths, target
from tests.testbed.dockerd import DockerEngine
from tests.testbed.slurm import SlurmCluster
from workload.cli import invoke
from workload.errors import UsageError
from workload.hosts.slurm_alloc import SlurmRequest, parse_job_status, parse_time_left


# -- the request and squeue's output (pure) ---------------------------------------------------------
def test_salloc_asks_for_whole_nodes_that_survive_a_node_failure() -> None:
    request = SlurmRequest(
        "gpu",
        nodes=4,
        constraint="h100&ib",
        gres="gpu:8",
        account="mlperf",
        time="2:00:00",
        reservation="bench",
        exclude=("gpu07",),
    )
    assert request.salloc_argv("workload-1") == (
        "salloc",
        "--no-shell",
        "--no-kill",
        "--exclusive",
        "--job-name=workload-1",
        "--partition=gpu",
        "--nodes=4",
        "--constraint=h100&ib",
        "--gres=gpu:8",
        "--account=mlperf",
        "--time=2:00:00",
        "--reservation=bench",
        "--exclude=gpu07",
    )
    # A node list alone sets the count (Slurm counts it); neither: one node.
    assert "--nodes=1" not in SlurmRequest("gpu", nodelist="gpu[01-04]").salloc_argv("j")
    assert "--nodes=1" in SlurmRequest("gpu").salloc_argv("j")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"partition": "gpu;rm"}, "--slurm 'gpu;rm': not a partition name"),
        ({"partition": "gpu", "time": "2h"}, "--time '2h': not minutes, HH:MM:SS or D-HH:MM:SS"),
        ({"partition": "gpu", "gres": "gpu"}, "--gres 'gpu': not gpu:N or gpu:TYPE:N"),
        ({"partition": "gpu", "nodes": 0}, "--nodes 0: at least 1"),
        ({"partition": "gpu", "nodelist": "a b"}, "--nodelist 'a b': not node names"),
    ],
)
def test_bad_requests_are_refused_naming_the_option(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as err:
        SlurmRequest(**kwargs)  # type: ignore[arg-type]
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("29:52", 1792.0), ("1:00:00", 3600.0), ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5), ("UNLIMITED", None)],
)
def test_time_left_in_squeue_formats(text: str, seconds: float | None) -> None:
    assert parse_time_left(text) == seconds


def test_squeue_lines() -> None:
    status = parse_job_status("PENDING|Resources|(null)|1:00:00\n")
    assert status is not None and status.state == "PENDING" and status.reason == "Resources"
    assert status.nodelist == "" and status.active and status.time_left_s == 3600.0
    assert parse_job_status("") is None and parse_job_status("a|b") is None


def test_slurm_options_without_slurm_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["doctor", "--nodes", "4", "--gres", "gpu:8"]) == 2
    assert "--nodes, --gres only work(s) with --slurm PARTITION" in capsys.readouterr().err


def test_slurm_takes_one_login_host(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["doctor", "--slurm", "gpu", "--host", "ssh://a@10.0.0.1", "--host", "ssh://a@10.0.0.2"]
    assert invoke(argv) == 2
    err = capsys.readouterr().err
    assert "--slurm: give at most one --host, the login host" in err and "Traceback" not in err


# -- on the real cluster ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(docker_engine: DockerEngine, slurm_image: str, standin_repo: Path) -> Iterator[SlurmCluster]:
    made = SlurmCluster(docker_engine, slurm_image, standin_repo, nodes=4, gpus_per_node=2, shared=shared_paths())
    made.start()
    try:
        yield made
    finally:
        made.remove()


def test_a_pending_allocation_shows_its_reason_then_runs_when_nodes_free_up(cluster: SlurmCluster) -> None:
    # Another user's job holds one node: our 4-node request waits for Resources.
    code, out = cluster.login_exec("salloc", "--no-shell", "-N1", "-J", "someone-else", "-p", cluster.partition)
    assert code == 0, out
    argv = [sys.executable, "-m", "workload", "doctor", "--json", *target(cluster, "--nodes", "4")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    report_lines, progress = TimedLines(proc.stdout), TimedLines(proc.stderr)
    try:
        # The other job holds its node until ours has said why it waits, however long a loaded machine takes.
        shown = progress.wait_for("PENDING (Resources)", 120)
        cluster.login_exec("scancel", "--name=someone-else")
        proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = report_lines.text(), progress.text()
    assert shown, err
    assert "RUNNING on 4 node(s)" in err
    # doctor ran on every node through job steps: its checks, per node.
    report = json.loads(out)
    assert sorted(h["host"] for h in report["hosts"]) == sorted(cluster.node_names)
    reboot = {h["host"]: [c for c in h["checks"] if c["name"] == "no reboot pending"] for h in report["hosts"]}
    assert all(len(checks) == 1 and checks[0]["ok"] for checks in reboot.values()), (reboot, err)
    # The nodes have no Docker, and are the admins' to change: the fix says what to ask them for.
    docker = [c for h in report["hosts"] for c in h["checks"] if c["name"] == "Docker works"]
    assert len(docker) == 4 and all(not c["ok"] and c["fix"].startswith("ask the cluster's admins") for c in docker)
    assert cluster.queue_once_completed() == []


def test_dependencies_are_verify_only_on_slurm_nodes(
    cluster: SlurmCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "docker-only.json"
    profile.write_text(
        json.dumps(
            {
                "Description": "Docker only",
                "Parameters": {},
                "Actions": [],
                "Dependencies": [{"Type": "DockerInstallation", "Parameters": {"Scenario": "InstallDocker"}}],
            }
        )
    )
    out = tmp_path / "runs"
    argv = ["run", "--profile", str(profile), "--output-dir", str(out), *target(cluster, "--nodes", "2")]
    assert invoke(argv) == 4
    err = capsys.readouterr().out
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    outcomes = json.loads((folder / "run.json").read_text())["outcomes"]
    assert len(outcomes) == 2
    for outcome in outcomes:
        assert outcome["status"] == "failed"
        assert "missing on this node (verify-only" in outcome["error"]
        assert "apt-get" in outcome["error"]  # the admin's fix: the plan's own commands
    assert "--slurm-allow-changes" in err
    # Nothing was installed on any node.
    for vm in cluster.computes.values():
        code, _ = vm.exec(["dpkg", "-s", "docker-ce"])
        assert code != 0
    assert cluster.queue_once_completed() == []


def test_an_unknown_partition_is_the_schedulers_own_message(
    cluster: SlurmCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["doctor", *target(cluster)]
    argv[argv.index("--slurm") + 1] = "nosuch"
    assert invoke(argv) == 2
    err = capsys.readouterr().err
    assert "--slurm nosuch: the scheduler refused the request" in err
    assert "invalid partition specified: nosuch" in err.lower() or "invalid partition" in err.lower()
    assert "Traceback" not in err


def test_a_test_longer_than_the_jobs_time_left_is_not_started(
    cluster: SlurmCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    params = f"Scenarios=Offline,,,TestModes=PerformanceOnly,,,MinDurationMs=600000,,,Python={sys.executable}"
    argv = ["run", "--profile", str(python_profile(tmp_path)), "-p", params, "--output-dir", str(out)]
    assert invoke([*argv, *target(cluster, "--nodes", "1", "--time", "2")]) == 4
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    (outcome,) = json.loads((folder / "run.json").read_text())["outcomes"]
    # --time 2 (minutes): squeue's time left (%L) is under 120 s, the test needs over 600 s.
    wanted = r"LoadGen Offline PerformanceOnly needs about 6\d\ds, the job has 1?\d?\ds left: not started"
    assert re.search(wanted, outcome["error"]), outcome["error"]
    assert "longer --time" in capsys.readouterr().out
    assert cluster.queue_once_completed() == []


def test_plan_reads_each_node_through_job_steps(
    cluster: SlurmCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    params = f"Scenarios=Offline,,,TestModes=PerformanceOnly,,,Python={sys.executable}"
    profile = str(python_profile(tmp_path))
    argv = ["plan", "--profile", profile, "-p", params, "--strict", "--details", *target(cluster, "--nodes", "2")]
    assert invoke(argv) == 0
    out = capsys.readouterr().out
    assert "LoadGen Offline PerformanceOnly" in out  # planned on the node: its Python has LoadGen
    hosts = [line.split("== host ")[1].split(" ==")[0] for line in out.splitlines() if "== host " in line]
    assert len(hosts) == 2 and set(hosts) <= set(cluster.node_names)
    assert cluster.queue_once_completed() == []


def python_profile(tmp_path: Path) -> Path:
    """PERF-CPU-MLPERF with a ``Python`` parameter (the nodes share this environment's)."""
    profile = json.loads((Path(__file__).resolve().parent.parent / "profiles" / "PERF-CPU-MLPERF.json").read_text())
    profile["Parameters"]["Python"] = sys.executable
    profile["Actions"][0]["Parameters"]["Python"] = "$.Parameters.Python"
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(profile))
    return path


def test_a_step_killed_at_its_timeout_leaves_nothing_running_on_the_node(cluster: SlurmCluster) -> None:
    from workload.commands import cmd
    from workload.hosts import ConnectOptions, open_host, parse_host_spec
    from workload.hosts.slurm import SlurmHost
    from workload.hosts.slurm_alloc import SlurmAllocation

    vm = cluster.login
    options = ConnectOptions(key_filename=str(vm.key_path), known_hosts=str(vm.known_hosts_path))
    login = open_host(parse_host_spec(vm.host_spec), options)
    allocation = SlurmAllocation(login, SlurmRequest(cluster.partition, nodes=1), "timeout-test")
    try:
        (node,) = allocation.allocate(lambda _line: None)
        host = SlurmHost(node, allocation, login)
        assert host.run(cmd("false")).returncode == 1  # the command's failure, not the node's
        result = host.run(cmd("sleep", "123", timeout=3))
        assert result.timed_out
        deadline = time.monotonic() + 20
        while cluster.computes[node].exec(["pgrep", "-f", "sleep 123"])[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cluster.computes[node].exec(["pgrep", "-f", "sleep 123"])[0] != 0  # the step was cancelled
        assert host.run(cmd("true")).ok  # and the node takes the next step
    finally:
        allocation.release()
        login.close()
    assert cluster.queue_once_completed() == []
