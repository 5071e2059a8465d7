"""Issue 16: the host state file under concurrent runs, and state files of the wrong shape.

Two runs on one host each read the state at their start; every change must then be a
read-modify-write on the host under a lock, so neither loses the other's updates. Tested on a
real local host, between real processes, and over real SSH (the test sshd).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.steptypes import TEST_TYPES
from tests.testbed.sshd import SshServer, ssh_host, sshd  # noqa: F401  (fixture)
from workload import registry
from workload.engine import Engine, RunOptions
from workload.hosts.base import Host, HostSpec, parse_host_spec
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder
from workload.steps import HostState


def _both_runs_keep_their_updates(host: Host, path: Path) -> None:
    first, second = HostState(host, str(path)), HostState(host, str(path))  # two runs, both started
    first.set("exports", {"A_PATH": "/a"})
    second.set("GitRepoClone:mlperf", {"path": "/opt/m"})
    first.merge("mlperf-setup", {"bert": "t1"})
    second.merge("mlperf-setup", {"resnet50": "t2"})
    data = json.loads(path.read_text())
    assert data["exports"] == {"A_PATH": "/a"} and data["GitRepoClone:mlperf"] == {"path": "/opt/m"}
    assert data["mlperf-setup"] == {"bert": "t1", "resnet50": "t2"}
    assert second.get("exports") == {"A_PATH": "/a"}  # a change also refreshes what the run knows
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no lock or temporary left


def test_two_runs_on_a_local_host_keep_each_others_updates(tmp_path: Path) -> None:
    _both_runs_keep_their_updates(LocalHost(), tmp_path / "state" / "state.json")


def test_two_runs_over_ssh_keep_each_others_updates(sshd: SshServer, tmp_path: Path) -> None:  # noqa: F811
    host = ssh_host(sshd)
    try:
        _both_runs_keep_their_updates(host, tmp_path / "ssh-state" / "state.json")
    finally:
        host.close()


CHILD = """
import sys
from workload.hosts.local import LocalHost
from workload.steps import HostState
state = HostState(LocalHost(), sys.argv[1])
for n in range(5):
    state.merge("marks", {f"{sys.argv[2]}-{n}": n})
"""


def test_many_processes_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), f"p{i}"]) for i in range(6)]
    assert all(child.wait(timeout=300) == 0 for child in children)
    marks = json.loads(path.read_text())["marks"]
    assert len(marks) == 30 and marks["p5-4"] == 4


def test_threads_of_one_process_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    states = [HostState(LocalHost(), str(path)) for _ in range(4)]
    threads = [threading.Thread(target=s.set, args=(f"key{i}", i)) for i, s in enumerate(states)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert json.loads(path.read_text()) == {f"key{i}": i for i in range(4)}


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[1, 2]", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ("{not json", "not JSON"),
    ],
)
def test_a_state_file_of_the_wrong_shape_warns_and_is_replaced(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    state = HostState(LocalHost(), str(path))
    assert any(str(path) in w and problem in w for w in state.warnings)
    state.set("k", "v")
    assert json.loads(path.read_text()) == {"k": "v"}


@pytest.fixture
def step_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES})


@pytest.mark.usefixtures("step_types")
def test_values_of_the_wrong_shape_do_not_block_a_run(tmp_path: Path) -> None:
    state_path = tmp_path / "state.json"
    bad: dict[str, Any] = {"exports": ["x"], "pending_reboot": "yes", "mlperf": [1], "GitRepoClone:m": 5}
    state_path.write_text(json.dumps(bad))
    profile_path = tmp_path / "p.json"
    profile_path.write_text(json.dumps({"Description": "d", "Actions": [{"Type": "EchoStep"}]}))
    profile = resolve_profile(load_profile(str(profile_path)))

    def factory(spec: HostSpec) -> Host:
        return LocalHost(spec.name)

    folder = RunFolder.create(tmp_path / "runs", profile.name)
    engine = Engine(profile, folder, factory, RunOptions(state_path=str(state_path)))
    outcomes = engine.run([parse_host_spec("local://")])
    assert [o.status for o in outcomes] == ["ok"], [str(o.error) for o in outcomes]
    log = (folder.root / "local" / "host.log").read_text()
    assert f"warning: host state {state_path}: 'exports' is not a JSON object" in log
    state = HostState(LocalHost(), str(state_path))
    assert state.mapping("mlperf") == {} and any("'mlperf'" in w for w in state.warnings)
