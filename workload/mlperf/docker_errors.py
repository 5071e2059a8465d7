"""Docker SDK failures as the project's errors: one boundary, naming host, operation, object and a hint.

The docker SDK (docker-py) raises its own exceptions from every call: ``docker.errors.APIError``
for an answer of the daemon (404 "No such container" when a container was removed meanwhile, 409
"removal of container ... is already in progress" when another client removes it), other
``DockerException`` for client-side problems, and ``requests``/``urllib3``/``paramiko``/socket
exceptions when the connection to the daemon breaks (the daemon restarted, the SSH connection of
:mod:`workload.mlperf.docker_ssh` dropped) or does not answer in time. None of them is a
:class:`~workload.errors.WorkloadError`, so each one would end a run as an internal error.

Rather than wrapping each SDK call, callers put their docker work under :func:`docker_boundary`
(the interpreter does it once per plan operation; the executor around its status read). The
Docker operation is read from the failed HTTP request itself (method and Engine API path, e.g.
``GET /containers/NAME/logs`` is ``docker logs NAME``), so every call site is covered, including
calls added later, and the message names the container or image the daemon was asked about.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

from workload.errors import EXIT_CONNECT, EXIT_STEP_FAILED, WorkloadError

#: Engine API endpoints (https://docs.docker.com/engine/api/) as the CLI command that calls them.
#: ``{0}`` is the path's object (container, image or exec id); ``{q:KEY}`` a query parameter.
_ENDPOINTS: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (method, re.compile(pattern + r"$"), text)
    for method, pattern, text in (
        ("GET", r"/containers/([^/]+)/json", "docker inspect {0}"),
        ("GET", r"/containers/([^/]+)/logs", "docker logs {0}"),
        ("POST", r"/containers/create", "docker create --name {q:name}"),
        ("POST", r"/containers/([^/]+)/start", "docker start {0}"),
        ("POST", r"/containers/([^/]+)/stop", "docker stop {0}"),
        ("POST", r"/containers/([^/]+)/kill", "docker kill {0}"),
        ("POST", r"/containers/([^/]+)/wait", "docker wait {0}"),
        ("DELETE", r"/containers/([^/]+)", "docker rm {0}"),
        ("POST", r"/containers/([^/]+)/exec", "docker exec {0} (creating the exec)"),
        ("POST", r"/exec/([^/]+)/start", "docker exec (running exec {0})"),
        ("GET", r"/exec/([^/]+)/json", "docker exec (reading the exit code of exec {0})"),
        ("GET", r"/containers/json", "docker ps"),
        ("GET", r"/images/(.+)/json", "docker image inspect {0}"),
        ("POST", r"/images/create", "docker pull {q:fromImage}"),
        ("DELETE", r"/images/(.+)", "docker rmi {0}"),
        ("POST", r"/build", "docker build -t {q:t}"),
        ("GET", r"/_ping", "docker info (ping)"),
        ("HEAD", r"/_ping", "docker info (ping)"),
        ("GET", r"/version", "docker version"),
    )
)
_VERSION_PREFIX = re.compile(r"^/v\d+(\.\d+)?(?=/)")


class DockerError(WorkloadError):
    """The Docker daemon refused or failed an operation (names host, operation, object; with a hint)."""

    exit_code = EXIT_STEP_FAILED

    def __init__(self, host: str, operation: str, problem: str, *, doing: str | None, hint: str | None) -> None:
        where = f" while {doing}" if doing else ""
        super().__init__(f"Docker operation `{operation}` failed{where}: {problem}", host=host, hint=hint)
        self.operation = operation


class DockerConnectionLost(DockerError):
    """The connection to the Docker daemon broke or timed out during an operation."""

    exit_code = EXIT_CONNECT


def docker_failures() -> tuple[type[BaseException], ...]:
    """The exception types the docker SDK and its transports raise (for ``except`` clauses)."""
    import docker
    import paramiko
    import requests
    import urllib3

    return (
        docker.errors.DockerException,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        paramiko.SSHException,
        EOFError,  # paramiko, when the channel closes under a read
        TimeoutError,  # socket.timeout: a read past the client's timeout
        ConnectionError,  # socket-level resets and broken pipes
    )


def operation_of(method: str, url: str) -> str:
    """The CLI command of an Engine API request: ``GET .../v1.43/containers/x/logs?tail=20`` is ``docker logs x``."""
    parts = urlsplit(url)
    path = _VERSION_PREFIX.sub("", unquote(parts.path)) or "/"
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    for verb, pattern, text in _ENDPOINTS:
        match = pattern.match(path)
        if verb == method.upper() and match:
            text = re.sub(r"\{q:(\w+)\}", lambda m: query.get(m.group(1), "?"), text)
            return text.replace("{0}", match.group(1) if match.groups() else "")
    return f"{method.upper()} {path}"


def _request_of(exc: BaseException) -> tuple[str, str] | None:
    for holder in (exc, getattr(exc, "response", None)):
        request = getattr(holder, "request", None)
        method, url = getattr(request, "method", None), getattr(request, "url", None)
        if isinstance(method, str) and isinstance(url, str):
            return method, url
    return None


def translate(exc: BaseException, host: str, *, doing: str | None, fallback: str) -> DockerError:
    """The project's error for a docker SDK exception ``exc`` (see the module docstring)."""
    import docker

    request = _request_of(exc)
    operation = operation_of(*request) if request else fallback
    if isinstance(exc, docker.errors.APIError) and exc.response is not None:
        status = exc.response.status_code
        explanation = str(exc.explanation or exc.response.reason or "").strip()
        problem = f"the daemon answered {status} {exc.response.reason or ''}".rstrip() + f": {explanation}"
        return DockerError(host, operation, problem, doing=doing, hint=_hint_for_status(status, explanation, operation))
    problem = str(exc).strip() or type(exc).__name__
    if isinstance(exc, docker.errors.DockerException) and not isinstance(exc, docker.errors.APIError):
        # Client-side (bad argument, unparseable stream): not a connection problem.
        return DockerError(
            host, operation, problem, doing=doing, hint="a docker SDK error; the message says what it rejected"
        )
    name = type(exc).__name__.lower()
    timed_out = isinstance(exc, TimeoutError) or "timeout" in name or "timed out" in problem.lower()
    hint = (
        "the Docker daemon did not answer in time: check that dockerd on the host is responsive "
        "(`systemctl status docker`, `journalctl -u docker`) and re-run"
        if timed_out
        else "the connection to the Docker daemon broke (dockerd restarted, or the host or its SSH connection "
        "went away): check `systemctl status docker` on the host and re-run"
    )
    return DockerConnectionLost(host, operation, f"{type(exc).__name__}: {problem}", doing=doing, hint=hint)


def _hint_for_status(status: int, explanation: str, operation: str = "") -> str:
    text = explanation.lower()
    if operation.startswith("docker pull") and status != 409:
        return (
            "the registry must be reachable from the Docker daemon (and logged in where it needs it), or the "
            "image present there already (docker pull / docker load / docker tag)"
        )
    if status == 409:
        return (
            "another client is changing the same container or image at this moment (e.g. a removal in "
            "progress, or a second run with the same DockerName): let it finish, then re-run"
        )
    if status == 404:
        what = "image" if "image" in text else "container" if "container" in text else "object"
        return (
            f"the {what} is gone: it was removed meanwhile (docker rm/rmi, a prune, another run, a reboot); "
            "re-run to pull or recreate it"
        )
    if status in (401, 403):
        return "the daemon refused the request: check registry credentials or the daemon's authorization plugin"
    if status >= 500:
        return "the daemon failed: see its log on the host (`journalctl -u docker`) and re-run"
    return "the daemon rejected the request; its answer above says why"


@contextlib.contextmanager
def docker_boundary(host: str, *, doing: str | None = None, fallback: str = "docker") -> Iterator[None]:
    """Turn docker SDK exceptions raised inside into :class:`DockerError` (``WorkloadError`` passes through).

    ``doing`` says what the caller was doing (an op's summary) and ends up in the message;
    ``fallback`` names the operation when the exception carries no HTTP request.
    """
    try:
        yield
    except WorkloadError:
        raise
    except docker_failures() as exc:
        raise translate(exc, host, doing=doing, fallback=fallback) from exc
