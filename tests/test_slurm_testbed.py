"""The test bed's real Slurm cluster: Debian's slurmctld/slurmd/munge, started by the fixture itself."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.testbed.slurm import SlurmCluster

#: Needs the test bed's Docker Engine (a Slurm cluster of containers): handed out with the other test-bed tests.
pytestmark = pytest.mark.slow


def test_cluster_has_four_idle_nodes_and_runs_a_step_on_each(slurm_cluster: Callable[..., SlurmCluster]) -> None:
    cluster = slurm_cluster(nodes=4, gpus_per_node=2)
    assert cluster.node_states() == dict.fromkeys(cluster.node_names, "idle")
    # Each node has its own slurmd port on 127.0.0.1.
    assert len(set(cluster.node_ports.values())) == 4
    code, out = cluster.login_exec("srun", "-N4", "hostname")
    assert code == 0, out
    # Every compute container answered with its own host name: four real slurmd daemons ran the step.
    assert sorted(out.split()) == sorted(cluster.node_names)
    assert cluster.queue_once_completed() == []


def test_gpus_are_generic_resources_backed_by_device_files(slurm_cluster: Callable[..., SlurmCluster]) -> None:
    cluster = slurm_cluster(nodes=1, gpus_per_node=2)
    node = cluster.node_names[0]
    assert "Gres=gpu:h100:2" in cluster.scontrol("show", "node", node)
    # A step asking for one GPU gets one device from gres.conf (Slurm sets CUDA_VISIBLE_DEVICES).
    code, out = cluster.login_exec("srun", "-N1", "--gres=gpu:1", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
    assert code == 0, out
    assert out.strip() == "0"
    # More GPUs than a node has is refused by the real scheduler.
    code, out = cluster.login_exec("srun", "-N1", "--gres=gpu:3", "--immediate=5", "true")
    assert code != 0
    assert "Requested node configuration is not available" in out
