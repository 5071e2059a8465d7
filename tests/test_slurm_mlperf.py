"""The GPU profile's action (MLPerfExecutor, stand-in harness) on Slurm nodes, Docker reached through job steps.

Real parts: the test bed's Slurm cluster (slurmctld/slurmd/munge, srun), its login node reached over
SSH, this machine's real ``docker`` CLI on every node (mounted at the same path, as an admin would
have installed it) running ``docker system dial-stdio`` in a job step, the test bed's dockerd (its
socket mounted on every node: the nodes share one daemon here, where a real cluster has one per
node), the stand-in harness (v4.1) in its built image. Each node works in its own folder of a
shared writable folder and its own container (``{host}`` in RepoPath, ScratchPath, DockerName),
because here the nodes share the daemon, and the daemon binds the node's paths as its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import H100X8, make_bare_repo
from tests.test_mlperf_docker_errors import sleeper, spec  # noqa: F401  (sleeper is a fixture)
from tests.test_mlperf_exec_guard import wait_for
from tests.test_slurm_run import run_json, run_story, shared_paths, target
from tests.testbed.slurm import SlurmCluster
from workload.cli import invoke
from workload.doctor import ADMIN_DOCKER_FIX, ADMIN_TOOLKIT_FIX, check_container_toolkit, check_docker
from workload.errors import EXIT_INVALID_RESULTS
from workload.facts.docker import DockerInfo
from workload.hosts import ConnectOptions, open_host, parse_host_spec
from workload.hosts.slurm import SlurmHost
from workload.hosts.slurm_alloc import SlurmAllocation, SlurmRequest
from workload.mlperf.container import HarnessContainer
from workload.mlperf.docker_ssh import connect_over_host

pytestmark = pytest.mark.slow

#: Nodes of the run: 4 where the machine bears it (WORKLOAD_SLURM_MLPERF_NODES lowers it on a busy machine).
NODES = int(os.environ.get("WORKLOAD_SLURM_MLPERF_NODES", "4"))


@pytest.fixture(autouse=True)
def docker_cli() -> None:
    if shutil.which("docker") is None:
        pytest.skip("needs the docker CLI (docker system dial-stdio) on this machine")


def test_a_node_offers_channels_where_its_login_does() -> None:
    class Login:
        can_open_channels = True
        connection_generation = 3

        def __init__(self) -> None:
            self.lines: list[str] = []

        def exec_channel(self, line: str, *, timeout: float | None = None) -> str:
            self.lines.append(line)
            return "channel"

    from workload.hosts.slurm_alloc import SlurmAllocation, SlurmRequest

    login: Any = Login()
    allocation = SlurmAllocation(login=login, request=SlurmRequest("gpu"), job_name="j", job_id="42")
    node = SlurmHost("gpu07", allocation, login)
    assert node.can_open_channels
    assert node.exec_channel("docker system dial-stdio") == "channel"
    (line,) = login.lines
    # The job step of the line on that node, in the run's job, beside the node's other steps; no pty.
    assert line.startswith("srun --jobid=42 --job-name=workload-")
    assert "--nodelist=gpu07 --overlap" in line and "--pty" not in line
    assert "--unbuffered -- /bin/sh" in line  # slurmstepd would hold a reply back until its newline
    assert line.endswith("-- /bin/sh -c 'docker system dial-stdio'")
    assert node.connection_generation == 3
    login.can_open_channels = False
    assert not node.can_open_channels


def test_doctor_on_an_admin_managed_node_says_what_to_ask_the_admins_for() -> None:
    docker = DockerInfo(installed=False)
    own = check_docker(docker)
    admin = check_docker(docker, admin_managed=True)
    assert own.fix == "run the DockerInstallation step"
    assert admin.fix == ADMIN_DOCKER_FIX and "DockerInstallation" not in admin.fix
    assert "docker-ce docker-ce-cli containerd.io" in admin.fix and "--slurm-allow-changes" in admin.fix
    toolkit = check_container_toolkit(None, docker, admin_managed=True)
    assert toolkit.fix == ADMIN_TOOLKIT_FIX and "nvidia-ctk runtime configure --runtime=docker" in toolkit.fix
    assert "NvidiaContainerToolkitInstallation" in check_container_toolkit(None, docker).fix


def test_mlperf_executor_runs_on_slurm_nodes_over_job_steps_and_merges_their_results(
    slurm_cluster: Callable[..., SlurmCluster],
    docker_engine: Any,
    freshvm_image: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bed = tmp_path / "bed"
    bed.mkdir()
    docker_bin = Path(shutil.which("docker") or "").resolve()
    started = time.monotonic()
    cluster = slurm_cluster(
        nodes=NODES,
        gpus_per_node=1,
        shared=(*shared_paths(), docker_bin, docker_engine.socket_path),
        shared_rw=(bed,),
    )
    cluster_s = time.monotonic() - started
    bare, _ = make_bare_repo(tmp_path / "harness.git")
    for node in cluster.node_names:
        subprocess.run(["git", "clone", "-q", str(bare), str(bed / node / "mlperf")], check=True)
        (bed / node / "scratch").mkdir()
        (bed / node / "scratch" / "standin_detected_system.json").write_text(json.dumps(H100X8))
    tag = uuid.uuid4().hex[:8]
    parameters = {
        "Scenario": "inferencemodels-bert",
        "Model": "bert",
        "Scenarios": "Offline",
        "TestModes": "PerformanceOnly",
        "Quick": True,
        "UseGpus": False,
        "UnlimitedMemlock": False,
        "DockerBaseUrl": docker_engine.base_url,
        "BaseImage": freshvm_image,
        "RepoPath": f"{bed}/{{host}}/mlperf",
        "ScratchPath": f"{bed}/{{host}}/scratch",
        "SystemDescription": json.dumps(H100X8),
        "RequireCustomSystemSupport": True,
        "DockerName": f"mlperf-slurm-{tag}-{{host}}",
    }
    profile = tmp_path / "mlperf.json"
    profile.write_text(
        json.dumps(
            {"Description": "MLPerf on Slurm", "Actions": [{"Type": "MLPerfExecutor", "Parameters": parameters}]}
        )
    )
    out = tmp_path / "runs"
    argv = ["run", "--profile", str(profile), "--output-dir", str(out), *target(cluster, "--nodes", str(NODES))]
    started = time.monotonic()
    try:
        code = invoke(argv)
        run_s = time.monotonic() - started
        captured = capsys.readouterr()
        # Every node ran; the verdict is the harness's own: a Quick run is INVALID (10-min runtime not met).
        record = run_json(out)
        story = run_story(out, captured, cluster)
        assert code == EXIT_INVALID_RESULTS, story

        assert sorted(o["host"] for o in record["outcomes"]) == sorted(cluster.node_names), story
        assert {o["status"] for o in record["outcomes"]} == {"ok"}, story
        folder = next(p for p in out.iterdir() if p.is_dir())
        for node in cluster.node_names:
            # Each node's own results, written by its own container into its own folder, copied back.
            results = list((folder / node).rglob("mlperf_log_detail.txt"))
            assert results, f"no results of {node}"
            assert all(r.parent.parts[-3:] == ("WL_H100_SXM_80GBx8_TRT", "bert-99", "Offline") for r in results)
            step_log = next((folder / node).glob("01-MLPerfExecutor-*.log")).read_text()
            assert f"Docker daemon on {node}: over its SSH connection" in step_log
            calls = (bed / node / "scratch" / "standin_calls.log").read_text()
            assert "run_harness" in calls
            # The container of this node, by its node's name, made by the daemon the node reached.
            box = docker_engine.client.containers.get(f"mlperf-slurm-{tag}-{node}")
            assert box.attrs["Config"]["Labels"] is not None
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        assert {m["host"] for m in metrics} == set(cluster.node_names)
        assert cluster.queue_once_completed() == []
        print(f"\n{NODES} Slurm nodes: cluster up in {cluster_s:.0f}s, MLPerfExecutor run in {run_s:.0f}s")
    finally:
        for node in cluster.node_names:
            with contextlib.suppress(Exception):
                docker_engine.client.containers.get(f"mlperf-slurm-{tag}-{node}").remove(force=True)


def test_a_lost_login_connection_ends_the_exec_on_the_node(
    slurm_cluster: Callable[..., SlurmCluster],
    docker_engine: Any,
    sleeper: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The container host's guard on a node: a job step whose srun the login's watchdog TERMs when the
    connection goes; srun passes the signal to the step, whose trap ends the exec'd processes in the container."""
    docker_bin = Path(shutil.which("docker") or "").resolve()
    cluster = slurm_cluster(nodes=1, gpus_per_node=1, shared=(docker_bin, docker_engine.socket_path))
    login = open_host(
        parse_host_spec(cluster.login.host_spec),
        ConnectOptions(key_filename=str(cluster.login.key_path), known_hosts=str(cluster.login.known_hosts_path)),
    )
    allocation = SlurmAllocation(login, SlurmRequest(cluster.partition, nodes=1), "guard-test")
    direct = docker_engine.client
    name = f"workload-test-slurm-guard-{uuid.uuid4().hex[:10]}"
    marker = f"sleep 4{uuid.uuid4().int % 1000}.5"

    def in_container() -> bool:
        return marker in str(direct.containers.get(name).top(ps_args="-eo pid,args")["Processes"])

    try:
        (node_name,) = allocation.allocate(lambda _line: None)
        node = SlurmHost(node_name, allocation, login)
        client = connect_over_host(node, docker_engine.base_url)
        box = HarnessContainer(
            client, spec(name, sleeper, tmp_path), lambda line: None, outer=node, docker_url=docker_engine.base_url
        )
        box.ensure_running()

        def harness() -> None:
            with contextlib.suppress(Exception):  # the connection goes: the exec fails, the test checks the box
                box.exec(["sh", "-c", f"echo started; {marker}"], on_line=None)

        runner = threading.Thread(target=harness, daemon=True)
        runner.start()
        assert wait_for(in_container, 60), "the exec did not start"
        transport = login._client.get_transport() if login._client else None  # type: ignore[attr-defined]
        assert transport is not None
        transport.sock.close()  # the controller vanishes: crash, kill -9, network cut
        assert wait_for(lambda: not in_container(), 30), "the exec'd process still runs in the container"
        assert direct.containers.get(name).status == "running"  # only the exec'd processes were ended
        runner.join(10)
    finally:
        with contextlib.suppress(Exception):
            direct.containers.get(name).remove(force=True)
        allocation.release()
        login.close()
    # cancelled; Slurm may hold the job COMPLETING while slurmd ends the killed steps (KillWait, 30 s by default)
    assert wait_for(lambda: cluster.queue() == [], 90), cluster.queue()
