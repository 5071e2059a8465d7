"""The harness container, through the docker SDK: build the image, run it detached, exec make targets.

The container is started the way NVIDIA's ``make launch_docker`` starts it (same mounts, limits and
options; notes §1.3) but by us, with a fixed name and detached, so that every make target is a
``docker exec`` whose output streams line by line and whose exit code is checked. Before every
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workload.commands import Command, cmd
from workload.errors import BenchmarkFailed, CommandTimeout, ConnectError, Interrupted
from workload.hosts.base import DEFAULT_CAPTURE_LIMIT, LineSink, OutputCollector
from workload.mlperf.docker_errors import docker_failures
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
    """The running harness container of one host (created on demand).

    :meth:`stop` (called from another thread on Ctrl-C, through :meth:`Host.on_interrupt`) ends the
    running execs; every exec after that raises :class:`~workload.errors.Interrupted` instead of
    starting (or recreating the container).
    """

    def __init__(
        self, client: Any, spec: ContainerSpec, log: Callable[[str], None], *, host_name: str = "local"
    ) -> None:
        self.client = client
        #: Names the host in errors (the daemon's host).
        self.host_name = host_name
        self.spec = spec
        self.log = log
        self.stopped = False
        self._running: set[str] = set()
        self._lock = threading.Lock()

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

    def exec(
        self,
        argv: Sequence[str],
        *,
        on_line: LineSink | None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = EXEC_TIMEOUT_S,
    ) -> tuple[int, str]:
        """Run ``argv`` in the container at /work as the spec's user; return (exit code, output tail).

        The container is checked (and recreated if gone) first. Output goes to ``on_line`` line by line.
        Raises :class:`~workload.errors.Interrupted` when :meth:`stop` was called before or during it,
        and :class:`~workload.errors.CommandTimeout` (host, command, last output) when it ran past
        ``timeout_s``: its processes in the container are then ended as by :meth:`stop`.
        """
        self._check_not_stopped(argv)
        self.ensure_running()
        # An SSH host's client (mlperf.docker_ssh) guards each exec so that a lost connection ends it.
        guard = getattr(self.client, "workload_exec_guard", None)
        expired = threading.Event()
        timer = None
        if timeout_s is not None:
            timer = threading.Timer(timeout_s, self._expire, args=(expired,))
            timer.daemon = True
            timer.start()
        started = time.monotonic()
        try:
            with guard(self.spec.name) if guard is not None else contextlib.nullcontext():
                code, output = self._exec(argv, on_line=on_line, env=env)
        finally:
            if timer is not None:
                timer.cancel()
        if expired.is_set():
            raise CommandTimeout(
                self.host_name,
                f"docker exec {self.spec.name} {shlex.join(argv)}",
                None,
                output,
                reason=f"was killed at its timeout ({timeout_s:g}s) after {time.monotonic() - started:.1f}s",
                hint="a harness stage that really needs longer can be re-run; it resumes from what it finished",
            )
        return code, output

    def _expire(self, expired: threading.Event) -> None:
        """The exec ran past its timeout: end what runs in the container (SIGTERM, SIGKILL after 10 s)."""
        expired.set()
        self._signal_all(10.0, f"the command in the container {self.spec.name} ran past its timeout; stopping it")

    def _exec(self, argv: Sequence[str], *, on_line: LineSink | None, env: Mapping[str, str] | None) -> tuple[int, str]:
        api = self.client.api
        created = api.exec_create(
            self.spec.name,
            cmd=list(argv),
            user=self.spec.user,
            workdir=CONTAINER_WORKDIR,
            environment=dict(env or {}),
            stdout=True,
            stderr=True,
        )
        exec_id = created["Id"]
        with self._lock:
            self._running.add(exec_id)
        out = OutputCollector("stdout", on_line, [], DEFAULT_CAPTURE_LIMIT)
        err = OutputCollector("stderr", on_line, [], 256 * 1024)
        try:
            self._check_not_stopped(argv)  # stop() ran between the check above and now
            for stdout, stderr in api.exec_start(exec_id, stream=True, demux=True):
                if stdout:
                    out.feed(stdout)
                if stderr:
                    err.feed(stderr)
        finally:
            with self._lock:
                self._running.discard(exec_id)
        out.close()
        err.close()
        self._check_not_stopped(argv)
        code = api.exec_inspect(exec_id).get("ExitCode")
        return (code if isinstance(code, int) else -1), out.text() + err.text()

    def _check_not_stopped(self, argv: Sequence[str]) -> None:
        if self.stopped:
            raise Interrupted(f"stopped: {' '.join(argv)} in the container {self.spec.name} was stopped")

    def stop(self, grace_s: float) -> None:
        """End every exec running in the container now: SIGTERM to all of its processes, SIGKILL after ``grace_s``.

        Safe from any thread and more than once. The processes get SIGTERM together, as from a
        terminal's Ctrl-C (make passes it on, the harness exits); what is left after the grace
        period dies with the container (``docker kill``), which the next run recreates.
        """
        self.stopped = True
        self._signal_all(grace_s, f"stopping the commands running in the container {self.spec.name}")

    def _signal_all(self, grace_s: float, why: str) -> None:
        with self._lock:
            running = list(self._running)
        if not running:
            return
        self.log(why)
        try:
            # As root: the exec'd commands may run as another user. kill -1 spares PID 1 and itself.
            created = self.client.api.exec_create(self.spec.name, cmd=["sh", "-c", "kill -TERM -1"], user="0:0")
            self.client.api.exec_start(created["Id"])
        except docker_failures() as exc:
            self.log(f"could not signal the container's processes: {exc}")
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self._any_running(running):
            time.sleep(0.1)
        if self._any_running(running):
            self.log(f"the commands did not stop within {grace_s:g}s; killing the container {self.spec.name}")
            with contextlib.suppress(*docker_failures()):
                self.client.containers.get(self.spec.name).kill()

    def _any_running(self, exec_ids: Sequence[str]) -> bool:

        for exec_id in exec_ids:
            try:
                if self.client.api.exec_inspect(exec_id).get("Running"):
                    return True
            except docker_failures():
                continue
        return False

    def remove(self) -> None:
        import docker

        with contextlib.suppress(docker.errors.NotFound):
            self.client.containers.get(self.spec.name).remove(force=True)
