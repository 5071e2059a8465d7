"""Docker SDK failures end as the project's errors (host, Docker operation, container/image, hint).

Real parts where one can produce the failure: the test bed's private dockerd (a pull it cannot do,
a container removed by another client while an exec runs), a unix socket nobody listens on (the
daemon gone). A stand-in only for the 409 "removal ... already in progress", which needs two
clients racing on one removal: the daemon's answer is built the way docker-py builds it from an
HTTP 409 (``docker.errors.create_api_error_from_http_exception``).
"""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import requests

from tests.test_mlperf_executor import action, bed, run  # noqa: F401  (bed is a fixture)
from workload.commands import cmd
from workload.errors import EXIT_CONNECT, EXIT_STEP_FAILED, CommandFailed, CommandTimeout, HostBug, WorkloadError
from workload.hosts.local import LocalHost
from workload.mlperf.container import ContainerSpec, HarnessContainer, tar_context
from workload.mlperf.docker_errors import DockerConnectionLost, DockerError, docker_boundary, operation_of


def spec(name: str, image: str, tmp_path: Path) -> ContainerSpec:
    return ContainerSpec(
        name=name,
        image=image,
        nvidia_dir=str(tmp_path),
        scratch_path=str(tmp_path),
        user="0:0",
        use_gpus=False,
        unlimited_memlock=False,
    )


def on_engine(engine: Any, container: ContainerSpec, host: str) -> HarnessContainer:
    """The harness container on the test bed's dockerd, its commands run by this machine named ``host``."""
    return HarnessContainer(
        engine.client, container, lambda line: None, outer=LocalHost(host), docker_url=engine.base_url
    )


# -- the operation is read from the failed request -------------------------------------------------
@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("GET", "http+docker://ssh/v1.43/containers/mlperf-x/logs?tail=20", "docker logs mlperf-x"),
        ("DELETE", "http+docker://localhost/v1.41/containers/mlperf-x?v=False&force=True", "docker rm mlperf-x"),
        ("POST", "http://127.0.0.1:2375/v1.41/images/create?tag=1&fromImage=nvcr.io%2Fx", "docker pull nvcr.io/x"),
        ("GET", "http+docker://localhost/v1.41/images/a/b:c/json", "docker image inspect a/b:c"),
        ("POST", "http+docker://localhost/v1.41/containers/create?name=box", "docker create --name box"),
        ("GET", "http+docker://localhost/v1.41/exec/abc123/json", "docker exec (reading the exit code of exec abc123)"),
        ("PUT", "http+docker://localhost/v1.41/volumes/x", "PUT /volumes/x"),
    ],
)
def test_the_docker_operation_is_named_from_the_engine_api_request(method: str, url: str, expected: str) -> None:
    assert operation_of(method, url) == expected


# -- real daemon -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_pull_the_daemon_cannot_do_fails_the_step_not_the_program(bed: dict[str, Any]) -> None:  # noqa: F811
    # A registry on 127.0.0.1 where nothing listens: the real daemon answers 500 for the pull.
    image = f"127.0.0.1:9/workload-test/missing-{uuid.uuid4().hex[:8]}:1"
    outcome = run(bed, [action(bed, "bert", "Offline", ContainerImage=image)])
    assert outcome.status == "failed"
    error = outcome.error
    assert not isinstance(error, HostBug), error
    assert isinstance(error, WorkloadError) and error.exit_code == EXIT_STEP_FAILED
    text = str(error)
    assert text.startswith("[local] ")  # the host
    assert f"docker pull 127.0.0.1:9/workload-test/{image.split('/')[-1].split(':')[0]}" in text  # operation, image
    assert "failed while " in text and "hint:" in text
    assert "Traceback" not in text


@pytest.fixture
def sleeper(docker_engine: Any, freshvm_image: str) -> Iterator[str]:
    """The fresh-VM image, only staying up (its own entrypoint boots a VM and needs a VM config).

    One tag per Dockerfile content, kept like the test bed's other images and never removed: tests on parallel
    workers build the same content, which Docker gives one image id, so removing it after one test deleted the image
    another worker's build was about to tag ("unable to find image sha256:..."; seen in a parallel CI run)."""
    dockerfile = f'FROM {freshvm_image}\nENTRYPOINT ["sleep", "300"]\n'.encode()
    tag = f"workload-test/sleeper:{hashlib.sha256(dockerfile).hexdigest()[:12]}"
    docker_engine.client.images.build(
        fileobj=io.BytesIO(tar_context({"Dockerfile": dockerfile})), custom_context=True, tag=tag
    )
    yield tag


@pytest.mark.slow
def test_a_container_removed_by_another_client_during_an_exec_is_a_docker_error(
    docker_engine: Any, sleeper: str, tmp_path: Path
) -> None:
    client = docker_engine.client
    name = f"workload-test-gone-{uuid.uuid4().hex[:10]}"
    box = on_engine(docker_engine, spec(name, sleeper, tmp_path), "vm1")

    def remove_meanwhile(stream: str, line: str) -> None:
        # Another client removes the container while our exec streams its output (a real race, made certain).
        client.containers.get(name).remove(force=True)

    try:
        with pytest.raises(DockerError) as info, docker_boundary("vm1", doing="running make bert"):
            box.exec(["sh", "-c", "echo started; sleep 30"], on_line=remove_meanwhile)
    finally:
        box.remove()
    error = info.value
    assert error.exit_code == EXIT_STEP_FAILED and not isinstance(error, DockerConnectionLost)
    text = str(error)
    # The exec ended (its process was killed with the container); what failed is the container, not the command.
    expected = (
        f"[vm1] Docker operation `docker exec {name} sh -c 'echo started; sleep 30'` failed: the container is gone"
    )
    assert text.startswith(expected), text
    assert "hint: the container was removed or stopped meanwhile" in text and "re-run" in text


class _RemovedAfterInspect:
    """The real client, except that another client removes a new container once our inspect sees it stopped."""

    def __init__(self, client: Any) -> None:
        self.real = client
        self.api = client.api
        self.images = client.images
        self.containers = self

    def get(self, name: str) -> Any:
        return self.real.containers.get(name)

    def run(self, image: str, **options: Any) -> Any:
        box = self.real.containers.run(image, **options)
        inspect = box.reload

        def reload() -> None:
            inspect()
            if box.status != "running":  # it stopped: we read its logs next, and now it is being removed
                self.real.api.remove_container(box.id, force=True)

        box.reload = reload
        return box


@pytest.mark.slow
def test_logs_of_a_container_being_removed_are_a_docker_error(
    docker_engine: Any, freshvm_image: str, tmp_path: Path
) -> None:
    # Without its VM config the fresh-VM image exits at once, so _start reads its logs: 404 from the real daemon.
    name = f"workload-test-logs-{uuid.uuid4().hex[:10]}"
    box = HarnessContainer(
        _RemovedAfterInspect(docker_engine.client),
        spec(name, freshvm_image, tmp_path),
        print,
        outer=LocalHost("vm1"),
        docker_url=docker_engine.base_url,
    )
    try:
        with pytest.raises(DockerError) as info, docker_boundary("vm1", doing="starting the harness container"):
            box.ensure_running()
    finally:
        box.remove()
    text = str(info.value)
    # docker-py's logs() inspects the container first (is it a TTY?): that request gets the daemon's 404.
    assert text.startswith(("[vm1] Docker operation `docker logs ", "[vm1] Docker operation `docker inspect ")), text
    assert "failed while starting the harness container" in text
    assert "404" in text and "No such container" in text and "hint: the container is gone" in text


def test_a_daemon_that_is_gone_is_a_lost_connection_naming_the_container(tmp_path: Path) -> None:
    socket = tmp_path / "docker.sock"  # nobody listens here: the real connect() fails
    socket.touch()
    client = docker.DockerClient(base_url=f"unix://{socket}", version="1.41", timeout=5)
    box = HarnessContainer(client, spec("mlperf-box", "img", tmp_path), lambda line: None, outer=LocalHost("vm2"))
    with pytest.raises(DockerConnectionLost) as info, docker_boundary("vm2", doing="checking the container"):
        box.status()
    text = str(info.value)
    assert info.value.exit_code == EXIT_CONNECT
    assert text.startswith("[vm2] Docker operation `docker inspect mlperf-box` failed while checking the container:")
    assert "ConnectionError" in text and "hint: the connection to the Docker daemon broke" in text


# -- stand-in: a removal already in progress (409) ---------------------------------------------------
def conflict(name: str) -> docker.errors.APIError:
    """The daemon's 409 as docker-py raises it (its explanation is the daemon's JSON ``message``)."""
    response = requests.Response()
    response.status_code = 409
    response.reason = "Conflict"
    response._content = json.dumps(
        {"message": f"removal of container {name} is already in progress"}
    ).encode()  # the daemon's text (moby daemon/delete.go)
    response.request = requests.Request("DELETE", f"http+docker://ssh/v1.43/containers/{name}?force=True").prepare()
    try:
        response.raise_for_status()
    except requests.HTTPError as exc:
        return docker.errors.create_api_error_from_http_exception(exc)  # type: ignore[no-any-return]
    raise AssertionError("409 did not raise")


class _Racing:
    """A container a second client is removing: inspect says exited, our removal gets 409."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.status = "exited"
        self.labels: dict[str, str] = {}

    def remove(self, force: bool = False) -> None:
        try:
            raise conflict(self.name)
        except docker.errors.APIError as exc:
            raise exc from None


class _Client:
    def __init__(self, name: str) -> None:
        box = _Racing(name)
        image = type("Image", (), {"id": "sha256:1"})()
        self.images = type("Images", (), {"get": staticmethod(lambda tag: image)})()
        self.containers = type("Containers", (), {"get": staticmethod(lambda n: box)})()


def test_a_removal_already_in_progress_is_a_conflict_with_a_hint(tmp_path: Path) -> None:
    box = HarnessContainer(
        _Client("mlperf-x"), spec("mlperf-x", "img", tmp_path), lambda line: None, outer=LocalHost("vm3")
    )
    with pytest.raises(DockerError) as info, docker_boundary("vm3", doing="starting the harness container"):
        box.ensure_running()
    text = str(info.value)
    assert text.startswith("[vm3] Docker operation `docker rm mlperf-x` failed while starting the harness container")
    assert "409" in text and "removal of container mlperf-x is already in progress" in text
    assert "another client is changing the same container" in text


@pytest.mark.slow
def test_an_exec_past_its_timeout_is_killed_in_the_container_and_named(
    docker_engine: Any, sleeper: str, tmp_path: Path
) -> None:
    client = docker_engine.client
    name = f"workload-test-timeout-{uuid.uuid4().hex[:10]}"
    box = on_engine(docker_engine, spec(name, sleeper, tmp_path), "vm4")
    try:
        started = time.monotonic()
        with pytest.raises(CommandTimeout) as info:
            # Prints, then goes silent: no output reaches us until the deadline.
            box.exec(["sh", "-c", "echo generating engines; sleep 61.5; echo never"], on_line=None, timeout_s=2)
        assert time.monotonic() - started < 61.5  # killed at its 2 s timeout, not waited for (the sleep's 61.5 s)
        top = str(client.containers.get(name).top(ps_args="-eo pid,args")["Processes"])
        assert "sleep 61.5" not in top  # ended in the container, which stays up for the next run
        assert client.containers.get(name).status == "running"
    finally:
        box.remove()
    text = str(info.value)
    # The one CommandTimeout of every transport: the host is the container on vm4, the command its argv.
    assert text.startswith(f"[vm4/{name}] command was killed at its timeout after "), text
    assert text.splitlines()[0].endswith(": sh -c 'echo generating engines; sleep 61.5; echo never'")
    assert info.value.argv == ("sh", "-c", "echo generating engines; sleep 61.5; echo never")
    assert info.value.returncode is None and "resumes from what it finished" in text
    assert text.split("last output:", 1)[1].split("hint:")[0].strip() == "generating engines"
    assert info.value.exit_code == EXIT_STEP_FAILED


@pytest.mark.slow
def test_a_failed_command_in_the_harness_container_is_command_failed_with_its_fields(
    docker_engine: Any, sleeper: str, tmp_path: Path
) -> None:
    name = f"workload-test-failed-{uuid.uuid4().hex[:10]}"
    box = on_engine(docker_engine, spec(name, sleeper, tmp_path), "vm5")
    try:
        with pytest.raises(CommandFailed) as info:
            box.check(cmd("sh", "-c", "pwd; echo 'no such model' >&2; exit 4", timeout=60), on_line=None, hint="h")
        assert box.check(cmd("id", "-u", timeout=60), on_line=None).stdout == "0\n"  # the spec's user
    finally:
        box.remove()
    failed = info.value
    assert (failed.host, failed.returncode) == (f"vm5/{name}", 4)
    assert failed.argv == ("sh", "-c", "pwd; echo 'no such model' >&2; exit 4")
    assert failed.stdout == "/work\n" and failed.tail == ["no such model"]  # run at /work, as the harness expects
    assert failed.hint == "h"
