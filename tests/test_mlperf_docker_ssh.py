"""The docker SDK over an SSH host's own connection (``docker system dial-stdio`` on its channel).

Real parts: OpenSSH's sshd on 127.0.0.1 (tests/testbed/sshd.py), real local users with and without
sudo, the test bed's private dockerd (its socket plays the host's daemon socket: the SSH "host" is
this machine), the machine's real ``docker`` CLI running ``system dial-stdio``, the stand-in harness.
What is shown: one SSH login for everything (no second connection with other keys or host-key
rules), sudo when the user may not open the socket, streaming exec output through the channel, an
unknown host key refused, and MLPerfExecutor end to end on an SSH host.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.make_harness import H100X8, make_bare_repo
from tests.testbed.sshd import SshServer, local_user, ssh_host, sshd  # noqa: F401  (fixture)
from workload.commands import cmd
from workload.engine import Engine, RunOptions
from workload.errors import ConnectError
from workload.hosts.base import Host, HostSpec
from workload.mlperf.docker_ssh import connect_over_host
from workload.profile import load_profile, resolve_profile
from workload.rundir import RunFolder

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def docker_cli() -> None:
    if shutil.which("docker") is None:
        pytest.skip("needs the docker CLI (docker system dial-stdio) on this machine")


def logins(server: SshServer, user: str) -> int:
    return server.log_text().count(f"Accepted publickey for {user} ")


@contextlib.contextmanager
def container(client: Any, image: str) -> Iterator[Any]:
    # The fresh-VM image boots a VM by default; here it only needs to stay up.
    box = client.containers.run(image, entrypoint=["sleep", "300"], detach=True, network_mode="none", init=True)
    try:
        yield box
    finally:
        box.remove(force=True)


def test_a_user_without_socket_access_reaches_docker_through_sudo_on_the_same_connection(
    sshd: SshServer,  # noqa: F811
    docker_engine: Any,
    freshvm_image: str,
) -> None:
    with local_user(sudo="nopasswd") as user:
        host = ssh_host(sshd, user=user.name)
        socket = str(docker_engine.socket_path)
        # The socket is root's: the SSH user alone cannot open it (not in a docker group).
        assert not host.run(cmd("test", "-w", socket)).ok
        client = connect_over_host(host, docker_engine.base_url)
        try:
            assert client.ping() is True
            with container(client, freshvm_image) as box:
                api = client.api
                created = api.exec_create(box.id, ["sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 3"])
                out, err = b"", b""
                for stdout, stderr in api.exec_start(created["Id"], stream=True, demux=True):
                    out += stdout or b""
                    err += stderr or b""
                assert (out, err) == (b"one\n", b"two\n")
                assert api.exec_inspect(created["Id"])["ExitCode"] == 3
        finally:
            client.close()
        # Every docker request went over the host's one SSH login (the new user's only one), through sudo.
        assert logins(sshd, user.name) == 1
        assert host.connect_attempts == 1
        host.close()


def test_the_daemon_is_not_reached_without_a_verified_host_key(
    sshd: SshServer,  # noqa: F811
    docker_engine: Any,
    tmp_path: Path,
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = ssh_host(sshd, known_hosts=str(empty))
    before = logins(sshd, "root")
    with pytest.raises(ConnectError) as err:
        connect_over_host(host, docker_engine.base_url)
    assert "host key" in str(err.value).lower()
    assert logins(sshd, "root") == before  # refused before logging in: no docker request was sent


def test_a_missing_daemon_names_the_host_and_the_dial_command(
    sshd: SshServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    host = ssh_host(sshd)
    with pytest.raises(ConnectError) as err:
        connect_over_host(host, f"unix://{tmp_path}/no-docker.sock")
    text = str(err.value)
    assert f"docker -H unix://{tmp_path}/no-docker.sock system dial-stdio" in text
    assert "no-docker.sock" in text and "[127.0.0.1:" in text
    host.close()


def test_mlperf_executor_runs_on_an_ssh_host_over_its_connection(
    sshd: SshServer,  # noqa: F811
    docker_engine: Any,
    freshvm_image: str,
    tmp_path: Path,
) -> None:
    bare, _ = make_bare_repo(tmp_path / "harness.git")
    repo = tmp_path / "packages" / "mlperf"
    subprocess.run(["git", "clone", "-q", str(bare), str(repo)], check=True)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(H100X8))
    profile_path = tmp_path / "profile.json"
    container = f"mlperf-inference-test-{uuid.uuid4().hex[:12]}"  # this test's own (shared test bed)
    parameters = {
        "Scenario": "inferencemodels-bert",
        "Model": "bert",
        "Scenarios": "Offline",
        "TestModes": "PerformanceOnly",
        "Quick": True,
        "UseGpus": False,
        "UnlimitedMemlock": False,
        # A socket path on the SSH host: reached through its connection, not from here.
        "DockerBaseUrl": docker_engine.base_url,
        "BaseImage": freshvm_image,
        "RepoPath": str(repo),
        "ScratchPath": str(scratch),
        "SystemDescription": json.dumps(H100X8),
        "RequireCustomSystemSupport": True,
        "DockerName": container,
    }
    profile_path.write_text(
        json.dumps(
            {"Description": "MLPerf over SSH", "Actions": [{"Type": "MLPerfExecutor", "Parameters": parameters}]}
        )
    )
    profile = resolve_profile(load_profile(str(profile_path)))
    opened: list[Host] = []

    def factory(spec: HostSpec) -> Host:
        host = ssh_host(sshd)
        opened.append(host)
        return host

    before = logins(sshd, "root")
    engine = Engine(
        profile,
        RunFolder.create(tmp_path / "runs", profile.name),
        factory,
        RunOptions(state_path=str(tmp_path / "state.json")),
    )
    try:
        (outcome,) = engine.run([HostSpec(scheme="ssh", hostname="127.0.0.1", port=sshd.port, user="root")])
        assert outcome.status == "ok", outcome.error
        (result,) = outcome.results
        assert result.parts[-3:] == ("WL_H100_SXM_80GBx8_TRT", "bert-99", "Offline")
        assert str(result).startswith(str(tmp_path / "runs"))  # copied back from the host
        # where its config came from is kept beside the copy, so the run folder alone tells (v4.1 tunes H100)
        from workload.metrics import collect

        metadata = collect(result).metrics[0].metadata
        assert (metadata["config_source"], metadata["config_tuned"]) == ("generated", True)
        assert metadata["config_system"] == "WL_H100_SXM_80GBx8"
        assert logins(sshd, "root") - before == 1  # commands, files and docker: one SSH login
        step_log = next((tmp_path / "runs").rglob("01-MLPerfExecutor-*.log")).read_text()
        dial = f"docker -H {docker_engine.base_url} system dial-stdio"
        assert f"Docker daemon on 127.0.0.1:{sshd.port}: over its SSH connection (`{dial}` per request)" in step_log
    finally:
        with contextlib.suppress(Exception):
            docker_engine.client.containers.get(container).remove(force=True)


def test_a_user_without_socket_access_or_sudo_is_told_what_to_allow(
    sshd: SshServer,  # noqa: F811
    docker_engine: Any,
) -> None:
    with local_user(sudo=None) as user:
        host = ssh_host(sshd, user=user.name)
        with pytest.raises(ConnectError) as err:
            connect_over_host(host, docker_engine.base_url)
        host.close()
    text = str(err.value)
    assert f"sudo -n -H -- sh -c 'docker -H {docker_engine.base_url} system dial-stdio'" in text
    assert "is not in the sudoers file" in text or "may not run sudo" in text or "password is required" in text
    assert f"{user.name} may not open the Docker socket, so the dial runs through sudo" in text
