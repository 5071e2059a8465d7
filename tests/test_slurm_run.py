"""``workload run/plan/doctor --slurm`` on the test bed's real Slurm cluster (no mocks of sbatch/srun/squeue).

The login node is reached over SSH (``--host``), as on a real cluster; the compute nodes share this
repository (and its virtual environment) at the same path, as clusters share /home, so the CPU
profile's Python with LoadGen and onnxruntime is there on every node.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.testbed.slurm import SlurmCluster
from workload.cli import invoke
from workload.rundir import remote_run_name

REPO = Path(__file__).resolve().parent.parent
#: The CPU profile, small: one Offline performance run of a few samples per node.
SMALL = (
    "MinDurationMs=300,,,SampleCount=8,,,Scenarios=Offline,,,TestModes=PerformanceOnly,,,"
    "FindPeakPerformance=false,,,OfflineTargetQps=4"
)

#: Needs the test bed's Docker Engine (a Slurm cluster of containers): handed out with the other test-bed tests.
pytestmark = pytest.mark.slow


def shared_paths() -> tuple[Path, ...]:
    """What the nodes mount from this machine: the repository (with .venv) and a Python outside /usr."""
    paths = [REPO]
    base = Path(sys.base_prefix).resolve()
    if not str(base).startswith("/usr") and REPO not in base.parents:
        paths.append(base)
    return tuple(paths)


@pytest.fixture
def cluster(slurm_cluster: Callable[..., SlurmCluster]) -> SlurmCluster:
    return slurm_cluster(nodes=4, gpus_per_node=2, shared=shared_paths())


@pytest.fixture
def cpu_profile(tmp_path: Path) -> Path:
    """PERF-CPU-MLPERF with its runner's Python set to this environment's (shared with the nodes)."""
    profile = json.loads((REPO / "profiles" / "PERF-CPU-MLPERF.json").read_text())
    profile["Parameters"]["Python"] = sys.executable
    profile["Actions"][0]["Parameters"]["Python"] = "$.Parameters.Python"
    path = tmp_path / "PERF-CPU-MLPERF.json"
    path.write_text(json.dumps(profile))
    return path


def target(cluster: SlurmCluster, *extra: str) -> list[str]:
    login = cluster.login
    return [
        "--slurm",
        cluster.partition,
        "--host",
        login.host_spec,
        "-i",
        str(login.key_path),
        "--known-hosts",
        str(login.known_hosts_path),
        *extra,
    ]


def run_json(output: Path) -> dict:
    (folder,) = [p for p in output.iterdir() if p.is_dir()]
    return json.loads((folder / "run.json").read_text())


def run_story(output: Path, captured: tuple[str, str], cluster: SlurmCluster | None = None) -> str:
    """A failed run as text, in full: its stdout and stderr, each node's outcome, the verdict's failures and, given
    ``cluster``, the Slurm daemons' logs. (pytest shortens an assertion message that is not a string to one line.)"""
    out, err = captured
    parts = [f"--- stdout\n{out}", f"--- stderr\n{err}"]
    folders = [p for p in output.iterdir() if p.is_dir()] if output.is_dir() else []
    for folder in folders:
        for name in ("run.json", "summary.json"):
            path = folder / name
            if not path.is_file():
                parts.append(f"--- {name}: not written")
                continue
            record = json.loads(path.read_text())
            shown = record.get("outcomes") if name == "run.json" else record.get("verdict")
            parts.append(f"--- {name}\n{json.dumps(shown, indent=1)}")
    if cluster is not None:
        parts.append(cluster.logs())
    return "\n".join(parts)


def run_valid_on_every_node(
    cluster: SlurmCluster, profile: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Path, str]:
    """Run the small CPU profile on every node of ``cluster``; check each node's step and VALID headline.

    Returns the run folder and what the run wrote to stderr.
    """
    argv = ["run", "--profile", str(profile), "-p", SMALL, "--output-dir", str(out)]
    argv += target(cluster, "--nodes", str(len(cluster.node_names)))
    code = invoke(argv)
    captured = capsys.readouterr()
    assert code == 0, run_story(out, captured, cluster)
    err = captured.err
    record = run_json(out)
    assert sorted(o["host"] for o in record["outcomes"]) == sorted(cluster.node_names)
    assert {o["status"] for o in record["outcomes"]} == {"ok"}
    folder = next(p for p in out.iterdir() if p.is_dir())
    # Per-node result files, copied back from each node through job steps, merged into one metrics file.
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    headline = {m["host"]: m for m in metrics if m["name"] == "samples_per_second"}
    assert sorted(headline) == sorted(cluster.node_names)
    assert all(m["metadata"]["validity"] == "VALID" and m["value"] > 0 for m in headline.values())
    return folder, err


def test_cpu_profile_on_four_nodes_merges_every_nodes_results(
    cluster: SlurmCluster, cpu_profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, err = run_valid_on_every_node(cluster, cpu_profile, tmp_path / "runs", capsys)
    run_1 = Path("results/loadgen/minilm-int8/Offline/performance/run_1")
    for node in cluster.node_names:
        assert (folder / node / run_1 / "mlperf_log_summary.txt").is_file()
        assert f"[{node}]" in (folder / node / "host.log").read_text()
    assert "RUNNING on 4 node(s)" in err
    # The job was given back: nothing of ours is left in the queue.
    assert "cancelled (scancel)" in err
    assert cluster.queue_once_completed() == []


#: Long enough that a node can be set DOWN (or the run interrupted) while the benchmark runs.
LONG = SMALL.replace("MinDurationMs=300", "MinDurationMs=20000")


def start_run(cluster: SlurmCluster, profile: Path, out: Path, params: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(profile), "-p", params]
    argv += ["--output-dir", str(out), *target(cluster, "--nodes", str(len(cluster.node_names)))]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_benchmarks_running(proc: subprocess.Popen[str], out: Path, nodes: list[str], timeout: float = 240) -> Path:
    """Block until every node's step log shows the LoadGen runner started; return the run folder."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        folders = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
        if folders:
            logs = [next(iter((folders[0] / n).glob("01-*.log")), None) for n in nodes]
            if all(log is not None and "workload.loadgen.runner" in log.read_text() for log in logs):
                return folders[0]
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"the benchmark did not start on every node:\n{proc.communicate()[0]}")


def runners_left(cluster: SlurmCluster) -> list[str]:
    """Nodes where a LoadGen runner process still exists."""
    left = []
    for name, vm in cluster.computes.items():
        code, _out = vm.exec(["pgrep", "-f", "workload.loadgen.runner"])
        if code == 0:
            left.append(name)
    return left


def test_a_node_set_down_mid_run_is_reported_for_that_node_while_the_others_finish(
    cluster: SlurmCluster, cpu_profile: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    proc = start_run(cluster, cpu_profile, out, LONG)
    folder = wait_benchmarks_running(proc, out, cluster.node_names)
    down = cluster.node_names[1]
    cluster.scontrol("update", f"nodename={down}", "state=down", "reason=maintenance-test")
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 3, output  # a host lost (ConnectError), not a crash
    outcomes = {o["host"]: o for o in json.loads((folder / "run.json").read_text())["outcomes"]}
    assert outcomes[down]["status"] == "failed"
    assert f"node {down} failed in slurm job" in outcomes[down]["error"]
    assert "DOWN" in outcomes[down]["error"] and "maintenance-test" in outcomes[down]["error"]
    for node in cluster.node_names:
        if node != down:
            assert outcomes[node]["status"] == "ok", outcomes[node]
            assert outcomes[node]["results"]
    assert cluster.queue_once_completed() == []
    assert cluster.node_states()[down].startswith("down")
    # Back in service, --only-failed asks for that node again and runs its work alone.
    cluster.scontrol("update", f"nodename={down}", "state=resume")
    again = tmp_path / "again"
    argv = ["run", "--profile", str(cpu_profile), "-p", SMALL, "--output-dir", str(again), "--allow-invalid"]
    assert invoke([*argv, "--only-failed", str(folder), *target(cluster)]) == 0
    assert [(o["host"], o["status"]) for o in run_json(again)["outcomes"]] == [(down, "ok")]
    assert cluster.queue_once_completed() == []


def test_ctrl_c_cancels_the_job_and_nothing_is_left_running(
    cluster: SlurmCluster, cpu_profile: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    proc = start_run(cluster, cpu_profile, out, LONG)
    wait_benchmarks_running(proc, out, cluster.node_names)
    assert len(cluster.queue()) == 1  # our allocation
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "cancelled (scancel)" in output
    assert cluster.queue_once_completed() == []
    deadline = time.monotonic() + 20  # slurmd kills the steps' processes (KillWait) after the job ends
    while runners_left(cluster) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert runners_left(cluster) == []


def test_with_requeue_a_lost_nodes_work_runs_again_on_another_node(
    cluster: SlurmCluster, cpu_profile: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs"
    argv = [sys.executable, "-m", "workload", "run", "--profile", str(cpu_profile), "-p", LONG]
    argv += ["--output-dir", str(out), "--allow-invalid", *target(cluster, "--nodes", "2", "--slurm-requeue")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first_two = cluster.node_names[:2]  # an idle cluster gives the first nodes
    folder = wait_benchmarks_running(proc, out, first_two)
    down = first_two[0]
    cluster.scontrol("update", f"nodename={down}", "state=down", "reason=requeue-test")
    output, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, output
    assert f"requeue: 1 node(s) lost ({down})" in output
    outcomes = json.loads((folder / "run.json").read_text())["outcomes"]
    assert [o["status"] for o in outcomes] == ["ok", "ok"]
    replacement = next(o for o in outcomes if o["labels"].get("requeued_from") == down)
    assert replacement["host"] not in first_two and replacement["results"]
    # The lost node's own log says what happened to it.
    assert "failed in slurm job" in (folder / down / "host.log").read_text()
    assert cluster.queue_once_completed() == []


def test_cpu_profile_on_three_nodes_sharing_one_home_gives_three_result_sets(
    slurm_cluster: Callable[..., SlurmCluster], cpu_profile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: the usual HPC setup, one $HOME on every node (here a folder every VM mounts as the
    user's home). Each node's LoadGen results were written to one folder under that home and three
    nodes reported the same detail log; now each node writes in its own folder and reports its own."""
    import os

    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 1000, 1000)  # the uid of the user on every VM
    cluster = slurm_cluster(nodes=3, gpus_per_node=1, shared=shared_paths(), user="hpc", shared_home=home)
    for vm in [cluster.login, *cluster.computes.values()]:
        assert vm.check(["id", "-u", "hpc"]).strip() == "1000"
    folder, _err = run_valid_on_every_node(cluster, cpu_profile, tmp_path / "runs", capsys)
    run_1 = Path("loadgen/minilm-int8/Offline/performance/run_1")
    details = {}
    for node in cluster.node_names:
        copied = (folder / node / "results" / run_1 / "mlperf_log_detail.txt").read_bytes()
        # the node's own folder in the shared home holds exactly what was copied back for that node
        remote = home / ".local/state/workload/nodes" / node / "loadgen" / remote_run_name(folder) / run_1
        assert (remote / "mlperf_log_detail.txt").read_bytes() == copied
        details[node] = copied
    assert len(set(details.values())) == 3, "two nodes reported the same detail log"
