"""The harness container, through the docker SDK: build the image, run it detached, exec make targets.

The container is started the way NVIDIA's ``make launch_docker`` starts it (same mounts, limits and
options; notes §1.3) but by us, with a fixed name and detached, so that every make target is a
``docker exec`` run by the host's own transport (:mod:`workload.hosts.container`): its output
streams line by line, its exit code is checked, and a timeout or Ctrl-C ends it in the container.
The lifecycle stays on the docker SDK: inspecting labels and image ids, creating with device
requests and ulimits, and reading a failed start's logs are structured API calls there. Before every
exec the container is checked and recreated when it is gone (a reboot removes it) or runs an old
image. A launch that fails is an error with the container's last log lines, never ignored.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workload.commands import Command, cmd
from workload.errors import BenchmarkFailed, ConnectError, Interrupted
from workload.hosts.base import DEFAULT_CAPTURE_LIMIT, CommandResult, Host, LineSink, OutputCollector, raise_for_result
from workload.hosts.container import ContainerHost
from workload.mlperf.docker_errors import DockerError
from workload.mlperf.harness import CONTAINER_WORKDIR

LABEL = "workload.mlperf"
#: Digest of the ContainerSpec a container was started from: a different spec (repo moved) recreates it.
SPEC_LABEL = "workload.mlperf.spec"
#: The timeout of one exec in the harness container (a setup stage downloading a data set, an
#: engine build, a run): long, since a stage may take hours, but finite, so a hung harness ends.
EXEC_TIMEOUT_S = 24 * 3600.0
#: How long a fresh container must stay up before we call the launch good.
SETTLE_S = 1.0


@dataclass(frozen=True)
class ContainerSpec:
    """Everything ``docker run`` needs; :func:`run_options` turns it into docker SDK arguments."""

    name: str
    image: str
    #: Host path of closed/NVIDIA, mounted at /work (code is mounted, not copied; build/ stays on the host).
    nvidia_dir: str
    #: MLPERF_SCRATCH_PATH, mounted at the same path.
    scratch_path: str
    #: ``uid:gid`` of the real user the harness runs as.
    user: str
    use_gpus: bool = True
    #: ``--ulimit memlock=-1`` (needs CAP_SYS_RESOURCE where dockerd runs; nested test daemons lack it).
    unlimited_memlock: bool = True
    visible_devices: str = "all"
    #: Extra read-only or read-write mounts: (host path, container path, "ro"|"rw").
    mounts: tuple[tuple[str, str, str], ...] = ()
    devices: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def container_name(user: str, machine: str) -> str:
    """``mlperf-inference-<user>-<uname -m>``; arm64 is spelled aarch64 like NVIDIA's Makefile (uname -p)."""
    arch = "aarch64" if machine in ("arm64", "aarch64") else machine
    return f"mlperf-inference-{user}-{arch}"


def spec_digest(spec: ContainerSpec) -> str:
    """A short stable digest of everything in the spec except the image (compared separately)."""
    import hashlib

    text = repr(
        (
            spec.name,
            spec.nvidia_dir,
            spec.scratch_path,
            spec.user,
            spec.use_gpus,
            spec.visible_devices,
            spec.mounts,
            spec.devices,
            sorted(spec.env.items()),
        )
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_options(spec: ContainerSpec) -> dict[str, Any]:
    """The keyword arguments of ``client.containers.run`` for ``spec`` (pure; tests compare them)."""
    import docker

    volumes = {
        spec.nvidia_dir: {"bind": CONTAINER_WORKDIR, "mode": "rw"},
        spec.scratch_path: {"bind": spec.scratch_path, "mode": "rw"},
    }
    for host_path, container_path, mode in spec.mounts:
        volumes[host_path] = {"bind": container_path, "mode": mode}
    env = {"MLPERF_SCRATCH_PATH": spec.scratch_path, "NVIDIA_VISIBLE_DEVICES": spec.visible_devices, **spec.env}
    options: dict[str, Any] = {
        "name": spec.name,
        "detach": True,
        # launch_docker keeps an interactive shell alive with -it; detached, we keep a TTY open the same way.
        "tty": True,
        "stdin_open": True,
        "working_dir": CONTAINER_WORKDIR,
        "user": spec.user,
        "network_mode": "host",
        "shm_size": "32g",
        "cap_add": ["SYS_ADMIN", "SYS_TIME"],
        "security_opt": ["apparmor=unconfined", "seccomp=unconfined"],
        "volumes": volumes,
        "environment": env,
        "devices": [f"{d}:{d}:rwm" for d in spec.devices],
        "labels": {LABEL: spec.name, SPEC_LABEL: spec_digest(spec)},
    }
    if spec.unlimited_memlock:
        options["ulimits"] = [docker.types.Ulimit(name="memlock", soft=-1, hard=-1)]
    if spec.use_gpus:
        options["device_requests"] = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return options


def connect(base_url: str | None, *, host_name: str, timeout: int = 600) -> Any:
    """A docker client for ``base_url`` (``unix://``, ``ssh://user@host``, ``tcp://``) or the environment's."""
    import docker

    try:
        if base_url:
            client = docker.DockerClient(base_url=base_url, version="auto", timeout=timeout, use_ssh_client=False)
        else:
            client = docker.from_env(timeout=timeout)
        client.ping()
    except docker.errors.DockerException as exc:
        where = base_url or os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
        raise ConnectError(
            host_name,
            f"cannot reach the Docker daemon at {where}: {unreachable_reason(exc)}",
            hint="check DockerBaseUrl (e.g. unix:///var/run/docker.sock or ssh://user@host) and that dockerd runs",
        ) from None
    return client


def unreachable_reason(exc: BaseException) -> str:
    """Why a daemon did not answer, in words: the socket error docker-py wraps (in its message, its
    cause, and the ``requests``/``urllib3`` exceptions inside) is named by what it means; any other
    failure keeps docker-py's own text."""
    reasons: tuple[tuple[type[OSError], str], ...] = (
        (FileNotFoundError, "there is no such socket (Docker is not installed here, or its service never started)"),
        (ConnectionRefusedError, "the socket refuses connections (the Docker service is stopped)"),
        (PermissionError, "this user may not open the socket (join the docker group, or run as root)"),
    )
    todo: list[object] = [exc]
    seen: set[int] = set()
    while todo:
        item = todo.pop()
        if id(item) in seen or not isinstance(item, BaseException):
            continue
        seen.add(id(item))
        for kind, text in reasons:
            if isinstance(item, kind):
                return text
        todo += [*item.args, item.__cause__, item.__context__]
    return str(exc)


def tar_context(files: Mapping[str, bytes]) -> bytes:
    """A build context tarball from {path: content}."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def image_label(client: Any, tag: str, key: str) -> str | None:
    """The value of label ``key`` on image ``tag``, or None when the image is absent."""
    import docker

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    return str((image.labels or {}).get(key, ""))


def build_image(
    client: Any,
    *,
    context: bytes,
    dockerfile: str,
    tag: str,
    buildargs: Mapping[str, str],
    labels: Mapping[str, str],
    on_line: LineSink | None,
) -> None:
    """``docker build`` from a context tarball; streams the build log; BenchmarkFailed with its tail."""
    import docker

    tail = OutputCollector("stdout", on_line, [], 64 * 1024)
    try:
        for chunk in client.api.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile=dockerfile,
            tag=tag,
            buildargs=dict(buildargs),
            labels=dict(labels),
            rm=True,
            forcerm=True,
            network_mode="host",
            decode=True,
        ):
            if "stream" in chunk:
                tail.feed(str(chunk["stream"]).encode())
            if "error" in chunk:
                tail.close()
                raise BenchmarkFailed(
                    f"building the harness image {tag} from {dockerfile} failed: {chunk['error'].strip()}\n"
                    + _indent(tail.text())
                )
    except docker.errors.APIError as exc:
        raise BenchmarkFailed(f"building the harness image {tag} failed: {exc}") from None
    tail.close()


#: ``COPY --from=NAME`` / ``RUN --mount=...,from=NAME`` that no ``FROM ... AS NAME`` stage defines:
#: a BuildKit *named build context* (NVIDIA's v4.1 release Dockerfile uses ``common``).
_FROM_REFERENCE = re.compile(r"(?:--from=|[,\s]from=)([^\s,]+)")
_STAGE = re.compile(r"^\s*FROM\s+\S+\s+AS\s+([A-Za-z0-9_.-]+)", re.IGNORECASE | re.MULTILINE)


def named_contexts(dockerfile: str) -> list[str]:
    """Named build contexts a Dockerfile needs (references that are not stages or images)."""
    stages = {name.lower() for name in _STAGE.findall(dockerfile)}
    names = []
    for name in _FROM_REFERENCE.findall(dockerfile):
        if name.lower() not in stages and "/" not in name and ":" not in name and not name.isdigit():
            names.append(name)
    return sorted(set(names))


def cli_build_command(
    *,
    context_dir: str,
    dockerfile: str,
    tag: str,
    contexts: Mapping[str, str],
    buildargs: Mapping[str, str],
    labels: Mapping[str, str],
) -> Command:
    """``docker build`` through the host's CLI with BuildKit, for recipes that need named contexts.

    The docker SDK talks to the Engine API, which has no named build contexts; NVIDIA's own
    Makefile builds the same way (``DOCKER_BUILDKIT=1 docker build --build-context common=...``).
    """
    argv: list[str] = ["docker", "build", "--network", "host", "-t", tag, "-f", dockerfile]
    for name, path in sorted(contexts.items()):
        argv += ["--build-context", f"{name}={path}"]
    for key, value in sorted(buildargs.items()):
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in sorted(labels.items()):
        argv += ["--label", f"{key}={value}"]
    argv.append(context_dir)
    return cmd(*argv, env={"DOCKER_BUILDKIT": "1"}, sudo=True, timeout=4 * 3600)


def _indent(text: str, lines: int = 15) -> str:
    kept = [line for line in text.splitlines() if line.strip()][-lines:]
    return "\n".join(f"    {line}" for line in kept)


class HarnessContainer:
    """The running harness container of one host (created on demand), and the host inside it.

    Its lifecycle (inspect, create, start, remove) goes through the docker SDK ``client``; every
    command inside it goes through :attr:`host`, a :class:`~workload.hosts.container.ContainerHost`
    layered on the real host ``outer`` (``docker exec`` run by that host's transport, as the spec's
    user at /work), so it gives a :class:`~workload.hosts.base.CommandResult` like any command.

    :meth:`stop` (called from another thread on Ctrl-C, through :meth:`Host.on_interrupt`) ends the
    running commands; every exec after that raises :class:`~workload.errors.Interrupted` instead of
    starting (or recreating the container).
    """

    def __init__(
        self,
        client: Any,
        spec: ContainerSpec,
        log: Callable[[str], None],
        *,
        outer: Host,
        docker_url: str | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.log = log
        self.stopped = False
        #: The container as a host: ``docker [-H docker_url] exec`` run by ``outer``.
        self.host = ContainerHost(outer, spec.name, user=spec.user, workdir=CONTAINER_WORKDIR, docker_url=docker_url)

    @property
    def host_name(self) -> str:
        """The real host's name (errors about the container's lifecycle name it)."""
        return self.host.outer.name

    def status(self) -> str | None:
        """``running``, ``exited``, ... or None when no container has our name."""
        import docker

        try:
            return str(self.client.containers.get(self.spec.name).status)
        except docker.errors.NotFound:
            return None

    def ensure_running(self) -> bool:
        """Make sure the container runs our image; return True if it had to be (re)created."""
        import docker

        wanted = self.client.images.get(self.spec.image).id
        try:
            current = self.client.containers.get(self.spec.name)
        except docker.errors.NotFound:
            current = None
        if current is not None:
            same_spec = (current.labels or {}).get(SPEC_LABEL) == spec_digest(self.spec)
            if current.status == "running" and current.image.id == wanted and same_spec:
                return False
            if current.status != "running":
                why = f"is {current.status}"
            else:
                why = "runs an older image" if current.image.id != wanted else "has other mounts or options"
            self.log(f"container {self.spec.name} {why}; recreating it")
            current.remove(force=True)
        else:
            self.log(f"container {self.spec.name} is not there; starting it")
        self._start()
        return True

    def _start(self) -> None:
        import docker

        try:
            container = self.client.containers.run(self.spec.image, **run_options(self.spec))
        except docker.errors.APIError as exc:
            raise BenchmarkFailed(
                f"cannot start the harness container {self.spec.name}: {exc.explanation or exc}"
            ) from None
        deadline = time.monotonic() + SETTLE_S
        while True:
            container.reload()
            if container.status != "running":
                logs = container.logs(tail=20).decode("utf-8", "replace")
                code = container.attrs.get("State", {}).get("ExitCode")
                raise BenchmarkFailed(
                    f"the harness container {self.spec.name} stopped right after starting "
                    f"(status {container.status}, exit code {code})"
                    + (f"; last lines:\n{_indent(logs)}" if logs else "")
                )
            if time.monotonic() >= deadline:
                return
            time.sleep(0.2)

    def run(
        self, command: Command, *, on_line: LineSink | None, capture_limit: int = DEFAULT_CAPTURE_LIMIT
    ) -> CommandResult:
        """Run ``command`` in the container (checked, and recreated if gone, first); its result, whatever the exit.

        Raises :class:`~workload.errors.Interrupted` when :meth:`stop` was called before or during it,
        and :class:`~workload.mlperf.docker_errors.DockerError` when it failed because the container
        itself went away meanwhile (removed or stopped by another client).
        """
        shown = shlex.join(command.masked_argv())
        self._check_not_stopped(shown)
        self.ensure_running()
        result = self.host.run(command, on_line=on_line, capture_limit=capture_limit)
        self._check_not_stopped(shown)
        if not result.ok and (status := self.status()) != "running":
            raise DockerError(
                self.host_name,
                f"docker exec {self.spec.name} {shown}",
                f"the container is {status or 'gone'} (the command ended with exit {result.returncode})",
                doing=None,
                hint="the container was removed or stopped meanwhile (docker rm, a prune, another run, a reboot); "
                "re-run to recreate it",
            )
        return result

    def check(self, command: Command, *, on_line: LineSink | None, hint: str | None = None) -> CommandResult:
        """Run ``command`` in the container (see :meth:`run`); raise ``CommandFailed`` unless it exits 0."""
        result = self.run(command, on_line=on_line)
        raise_for_result(result, hint=hint)
        return result

    def exec(
        self,
        argv: Sequence[str],
        *,
        on_line: LineSink | None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = EXEC_TIMEOUT_S,
    ) -> tuple[int, str]:
        """Run ``argv`` in the container (see :meth:`run`); return (exit code, output: stdout, then stderr).

        For callers that judge the exit code themselves. Raises
        :class:`~workload.errors.CommandTimeout` (host, argv, last output) when it ran past
        ``timeout_s``: its processes in the container are ended then (see ``hosts/container.py``).
        """
        result = self.run(cmd(*argv, env=dict(env or {}), timeout=timeout_s), on_line=on_line)
        if result.timed_out:
            raise_for_result(
                result, hint="a harness stage that really needs longer can be re-run; it resumes from what it finished"
            )
        return result.returncode, result.stdout + result.stderr

    def root_exec(self, argv: Sequence[str], *, timeout_s: float = 300.0) -> tuple[int, str]:
        """Run ``argv`` in the container as root, also after :meth:`stop` (to stop what must not outlive a run)."""
        result = self.host.as_root().run(cmd(*argv, timeout=timeout_s))
        return result.returncode, result.stdout + result.stderr

    def _check_not_stopped(self, shown: str) -> None:
        if self.stopped:
            raise Interrupted(f"stopped: {shown} in the container {self.spec.name} was stopped")

    def stop(self, grace_s: float) -> None:
        """End every command running in the container now: SIGTERM to their process groups, SIGKILL after ``grace_s``.

        Safe from any thread and more than once. The groups get SIGTERM together, as from a
        terminal's Ctrl-C (make passes it on, the harness exits); the container stays up for the next run.
        """
        self.stopped = True
        if self.host.busy:
            self.log(f"stopping the commands running in the container {self.spec.name}")
        self.host.interrupt(grace_s=grace_s)

    def remove(self) -> None:
        import docker

        with contextlib.suppress(docker.errors.NotFound):
            self.client.containers.get(self.spec.name).remove(force=True)
