"""The harness's container runtime on Slurm nodes (Docker or enroot + pyxis), chosen by facts.

The test bed's cluster has no pyxis (Debian does not package it): the pyxis side is covered by the
planner on facts; the Docker side for real (installed on a node through job steps, then detected).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_slurm_run import target
from tests.testbed.slurm import SlurmCluster
from workload.cli import invoke
from workload.errors import StepError
from workload.hosts import ConnectOptions, open_host, parse_host_spec
from workload.hosts.slurm import SlurmHost
from workload.hosts.slurm_alloc import SlurmAllocation, SlurmRequest
from workload.mlperf.slurm_runtime import (
    RuntimeFacts,
    choose_runtime,
    enroot_uri,
    pyxis_srun_options,
    read_runtime_facts,
)

PYXIS_CLUSTER = RuntimeFacts(slurm_node=True, pyxis=True, enroot=True, docker=True)


@pytest.mark.parametrize(
    ("facts", "runtime"),
    [
        (PYXIS_CLUSTER, "pyxis"),  # the cluster's convention wins over a Docker that is also there
        (RuntimeFacts(slurm_node=True, pyxis=True, enroot=False, docker=True), "docker"),  # pyxis needs enroot
        (RuntimeFacts(slurm_node=True, pyxis=False, enroot=True, docker=True), "docker"),
        (RuntimeFacts(slurm_node=False, pyxis=False, enroot=False, docker=True), "docker"),
    ],
)
def test_the_runtime_follows_the_facts(facts: RuntimeFacts, runtime: str) -> None:
    assert choose_runtime(facts) == runtime


def test_no_runtime_or_a_missing_wanted_one_is_a_clear_error() -> None:
    bare = RuntimeFacts(slurm_node=True, pyxis=False, enroot=False, docker=False)
    with pytest.raises(StepError, match=r"\[gpu01\] no container runtime for the harness: `docker info` fails"):
        choose_runtime(bare, node="gpu01")
    with pytest.raises(StepError, match="pyxis was asked for but there is no pyxis, no enroot"):
        choose_runtime(RuntimeFacts(True, False, False, True), "pyxis")
    assert choose_runtime(PYXIS_CLUSTER, "docker") == "docker"
    with pytest.raises(StepError, match="'podman' is not auto, docker or pyxis"):
        choose_runtime(PYXIS_CLUSTER, "podman")


def test_pyxis_step_options_use_enroot_uris() -> None:
    assert enroot_uri("nvcr.io/nvidia/mlperf/mlperf-inference:v4.1") == "nvcr.io#nvidia/mlperf/mlperf-inference:v4.1"
    assert enroot_uri("localhost:5000/x:1") == "localhost:5000#x:1"
    assert enroot_uri("ubuntu:22.04") == "ubuntu:22.04" and enroot_uri("library/ubuntu") == "library/ubuntu"
    options = pyxis_srun_options("nvcr.io/nvidia/x:1", {"/scratch": "/work"}, "/work", "mlperf")
    assert options == (
        "--container-image=nvcr.io#nvidia/x:1",
        "--container-name=mlperf",
        "--container-mounts=/scratch:/work",
        "--container-workdir=/work",
    )
    allocation = SlurmAllocation(login=None, request=SlurmRequest("gpu"), job_name="j", job_id="7")  # type: ignore[arg-type]
    host = SlurmHost("gpu01", allocation, login=None).with_step_options(*options)  # type: ignore[arg-type]
    argv = host.srun_argv("make run")
    # The pyxis options are srun options of the step, before the command.
    assert argv[argv.index("--") - 4 : argv.index("--")] == list(options)
    assert argv[:2] == ["srun", "--jobid=7"] and argv[-3:] == ["/bin/sh", "-c", "make run"]


def test_docker_installed_through_job_steps_is_then_the_nodes_runtime(
    slurm_cluster: Callable[..., SlurmCluster], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = slurm_cluster(nodes=1, gpus_per_node=1)
    login = open_host(
        parse_host_spec(cluster.login.host_spec),
        ConnectOptions(key_filename=str(cluster.login.key_path), known_hosts=str(cluster.login.known_hosts_path)),
    )
    allocation = SlurmAllocation(login, SlurmRequest(cluster.partition, nodes=1), "runtime-test")
    try:
        (node,) = allocation.allocate(lambda _line: None)
        host = SlurmHost(node, allocation, login)
        facts = read_runtime_facts(host)
        assert facts == RuntimeFacts(slurm_node=True, pyxis=False, enroot=False, docker=False)
        with pytest.raises(StepError, match="no pyxis in srun"):
            choose_runtime(facts, node=node)
    finally:
        allocation.release()
    # The user allows changes: the installer installs Docker on the node, through job steps.
    profile = tmp_path / "docker.json"
    profile.write_text(
        json.dumps(
            {
                "Description": "Docker",
                "Parameters": {},
                "Actions": [],
                "Dependencies": [{"Type": "DockerInstallation", "Parameters": {"Scenario": "InstallDocker"}}],
            }
        )
    )
    argv = ["run", "--profile", str(profile), "--output-dir", str(tmp_path / "runs")]
    assert invoke([*argv, *target(cluster, "--slurm-allow-changes")]) == 0, capsys.readouterr()
    allocation = SlurmAllocation(login, SlurmRequest(cluster.partition, nodes=1), "runtime-test-2")
    try:
        (node,) = allocation.allocate(lambda _line: None)
        facts = read_runtime_facts(SlurmHost(node, allocation, login))
        assert facts.docker and not facts.pyxis
        assert choose_runtime(facts, node=node) == "docker"
    finally:
        allocation.release()
        login.close()
    assert cluster.queue() == []
