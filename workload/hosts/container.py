"""``ContainerHost``: a running container as a host, layered on the host that runs its Docker daemon.

Every command runs as a ``docker exec`` made by the *outer* host's own transport (local, SSH, a
Slurm node), just as :class:`~workload.hosts.slurm.SlurmHost` runs its commands as ``srun`` on the
login host. So a command in the container gives the same :class:`~workload.hosts.base.CommandResult`
and :class:`~workload.errors.CommandFailed` (masked argv, exit code, tail) as any other, with the
outer transport's timeout, output streaming and interrupt; the argv is quoted once, at the edge::

    [guard STOP_LINE] docker [-H URL] exec [-i] -u USER -w DIR NAME sh -c IN_CONTAINER workload-exec PIDFILE sh -c LINE

Killing a ``docker exec`` client does not end the process it started in the container (dockerd
sends no signal when the client goes), so the container host ends what it started itself:

- in the container, :data:`_IN_CONTAINER` writes the group id of the exec'd process (runc makes it
  a process group leader) to ``PIDFILE`` (removed when the command ends);
- :data:`_STOP_IN_CONTAINER`, run as root through a second ``docker exec``, sends the group SIGTERM,
  SIGKILL after a grace period. The container host runs it after a timeout (the outer transport
  SIGKILLs the client: no trap could run), from :meth:`ContainerHost.interrupt` (Ctrl-C, a fleet
  that stops), and when the outer call raised (a lost connection, KeyboardInterrupt);
- on the outer host, the guard (:mod:`workload.hosts.guard`, placed by the outer transport's
  :meth:`~workload.hosts.base.Host._execute_guarded`) runs the same stop line when it gets SIGTERM
  or SIGHUP: an SSH host's watchdog TERMs the command's group when the connection drops, and then
  nothing on the controller can reach the container any more.

Files are moved through commands (:class:`~workload.hosts.shellfiles.FilesThroughCommands`).
Commands run as the container host's user; one that asks for root runs through :meth:`as_root`.
"""

from __future__ import annotations

import contextlib
import threading
import uuid

from workload.commands import Command, cmd
from workload.errors import ConnectError
from workload.hosts.base import Host, OutputCollector
from workload.hosts.shellfiles import FilesThroughCommands
from workload.hosts.stophooks import interrupt_exempt

#: The socket ``docker`` uses when neither DOCKER_HOST nor ``-H`` names one.
DEFAULT_SOCKET = "/var/run/docker.sock"
#: How long the command's process group has between SIGTERM and SIGKILL when the container host
#: stops it after a timeout or a lost connection (an interrupt gives its own grace period).
STOP_GRACE_S = 5.0
#: How long the stop waits for a just-started command to write its group id.
_PIDFILE_WAIT_TENTHS = 20

#: In the container: ``$1`` is the pid file, the rest the command. runc starts every exec'd process
#: as the leader of a session and process group of its own (seen on the test bed's dockerd:
#: pid = pgid = sid), so the shell's ``$$`` is the group id of the command and all it starts; the
#: file goes when the command ends.
_IN_CONTAINER = 'f=$1; shift; echo $$ > "$f" || exit 125; "$@"; s=$?; rm -f "$f"; exit $s'
#: In the container, as root: ``$1`` the pid file, ``$2`` the grace period in tenths of a second, ``$3``
#: how long (tenths) a later stop waits for the first one to end (:meth:`ContainerHost.stop_argv`).
#: SIGTERM to the group (as a terminal's Ctrl-C: make passes it on), SIGKILL to what is left.
#: ``alive`` reads /proc rather than ``kill -0``: a container whose PID 1 reaps nothing (``sleep``)
#: keeps the group's dead processes as zombies, which ``kill -0`` still finds.
#:
#: One stop per command: a Ctrl-C reaches a command twice, through :meth:`ContainerHost.interrupt`
#: and through its guard on the outer host (the outer host's interrupt TERMs the guard, whose trap
#: runs this same stop). The first stop claims ``PIDFILE.stop`` (mkdir is atomic) and marks it
#: ``done`` when it ends; a later one only waits for that mark (bounded), so it neither waits for
#: a pid file the ended command removed nor outlives the run in the container while the first one
#: still works (its ``docker exec`` client may be killed with the guard; the stop in the container
#: goes on, and the controller's own stop returns only when it is done). The mark stays: a few
#: bytes in the container's /tmp for each stopped command.
_STOP_IN_CONTAINER = (
    'alive() { for d in /proc/[0-9]*; do read -r s < "$d/stat" 2>/dev/null || continue; s=${s##*) }; '
    'set -- $s; [ "$1" != Z ] && { [ "$3" = "$p" ] || [ "${d#/proc/}" = "$p" ]; } && return 0; done; return 1; }; '
    "f=$1; n=$2; w=$3; i=0; "
    'if ! mkdir "$f.stop" 2>/dev/null; then '
    'while [ ! -e "$f.stop/done" ] && [ $i -lt "$w" ]; do sleep 0.1; i=$((i+1)); done; exit 0; fi; '
    'end() { : > "$f.stop/done"; exit 0; }; '
    'while [ ! -s "$f" ] && [ $i -lt ' + str(_PIDFILE_WAIT_TENTHS) + " ]; do "
    "sleep 0.1; i=$((i+1)); done; "
    '[ -s "$f" ] || end; read -r p < "$f"; '
    'kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; i=0; '
    'while alive && [ $i -lt "$n" ]; do sleep 0.1; i=$((i+1)); done; '
    'alive && { kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; }; rm -f "$f"; end'
)


def docker_cli(docker_url: str | None) -> list[str]:
    """``docker`` with ``-H URL`` when the daemon is not the default one."""
    return ["docker", "-H", docker_url] if docker_url else ["docker"]


def docker_needs_sudo(host: Host, docker_url: str | None) -> bool:
    """Whether ``docker`` must run through sudo on ``host`` to reach the daemon at ``docker_url``.

    Root, or a user who may open the socket (the ``docker`` group), runs it directly; anyone else
    through sudo. A ``tcp://`` or ``ssh://`` daemon is no socket of this host: never sudo.
    """
    if docker_url and not docker_url.startswith("unix://"):
        return False
    if host.is_root:
        return False
    path = "/" + docker_url.removeprefix("unix://").lstrip("/") if docker_url else DEFAULT_SOCKET
    return not host.run(cmd("test", "-w", path, timeout=60)).ok


class ContainerHost(FilesThroughCommands):
    """The running container ``container``, its commands run by ``outer`` as ``docker exec``.

    ``user``: ``uid:gid`` (or a name) the commands run as (None: the image's user); ``workdir``:
    their working directory (None: the image's); ``docker_url``: the daemon's ``-H`` for the
    ``docker`` CLI on ``outer``; ``sudo``: whether that CLI runs through sudo (None: decided on first
    use by :func:`docker_needs_sudo`). The container must be running: this host neither creates nor
    starts it (the harness container's lifecycle is :class:`workload.mlperf.container.HarnessContainer`'s).
    """

    # The container's files are not the controller's, rebooting it is not rebooting the controller,
    # and no raw channels: the Docker API is the outer host's business.
    is_local = False
    files_are_local = False
    can_open_channels = False

    def __init__(
        self,
        outer: Host,
        container: str,
        *,
        user: str | None = None,
        workdir: str | None = None,
        docker_url: str | None = None,
        sudo: bool | None = None,
    ) -> None:
        self.outer = outer
        self.container = container
        self.user = user
        self.workdir = workdir
        self.docker_url = docker_url
        self._sudo = sudo
        self.name = f"{outer.name}/{container}"
        self.default_sink = outer.default_sink
        # Only for masking: sudo runs on the outer host (its wrap), never in the container.
        self.sudo_password = outer.sudo_password
        #: The pid files of the commands running now, by token (for :meth:`interrupt`).
        self._running: dict[str, str] = {}
        #: Tokens whose commands :meth:`interrupt` is stopping already.
        self._stopping: set[str] = set()
        self._lock = threading.Lock()

    # -- capabilities ------------------------------------------------------------------------------
    @property
    def allows_changes(self) -> bool:  # type: ignore[override]  # a class-wide flag elsewhere; the outer host's here
        return self.outer.allows_changes

    @property
    def is_connected(self) -> bool:
        return self.outer.is_connected

    @property
    def has_connected(self) -> bool:
        return self.outer.has_connected

    def connect(self, *, attempts: int | None = None) -> None:
        self.outer.connect(attempts=attempts)

    def as_root(self) -> ContainerHost:
        """The same container with commands run as root (``docker exec -u 0:0``)."""
        return ContainerHost(
            self.outer, self.container, user="0:0", workdir=self.workdir, docker_url=self.docker_url, sudo=self._sudo
        )

    def wrap(self, command: Command) -> tuple[str, bytes | None]:
        """The shell line and stdin for ``command``: no sudo in a container (its user is chosen per exec).

        Raises ValueError for a command that asks for root or another user while this host's
        user is not root: run it through :meth:`as_root` (images have no sudo, and need none).
        """
        if (command.sudo or command.user is not None) and self.user not in ("0", "0:0", "root"):
            raise ValueError(f"{command.display()}: asks for root or another user in {self.name}; use as_root()")
        return command.shell_line(), command.input.encode() if command.input is not None else None

    def docker_sudo(self) -> bool:
        """Whether the ``docker`` CLI runs through sudo on the outer host (decided once)."""
        if self._sudo is None:
            self._sudo = docker_needs_sudo(self.outer, self.docker_url)
        return self._sudo

    # -- commands ----------------------------------------------------------------------------------
    def exec_argv(self, shell_line: str, pidfile: str, *, stdin: bool) -> list[str]:
        """The ``docker exec`` argv running ``shell_line`` in the container (group id to ``pidfile``)."""
        argv = [*docker_cli(self.docker_url), "exec"]
        if stdin:
            argv.append("-i")
        if self.user is not None:
            argv += ["-u", self.user]
        if self.workdir is not None:
            argv += ["-w", self.workdir]
        return [*argv, self.container, "sh", "-c", _IN_CONTAINER, "workload-exec", pidfile, "sh", "-c", shell_line]

    def stop_argv(self, pidfile: str, grace_s: float) -> list[str]:
        """The ``docker exec`` argv that ends the command whose group id is in ``pidfile`` (as root)."""
        tenths = max(0, round(grace_s * 10))
        # A later stop of the command waits for the first one, whose grace may be the longer STOP_GRACE_S.
        first_takes = _PIDFILE_WAIT_TENTHS + max(tenths, round(STOP_GRACE_S * 10)) + 10
        return [
            *docker_cli(self.docker_url),
            "exec",
            "-u",
            "0:0",
            self.container,
            "sh",
            "-c",
            _STOP_IN_CONTAINER,
            "workload-stop",
            pidfile,
            str(tenths),
            str(first_takes),
        ]

    def _execute(
        self,
        shell_line: str,
        *,
        stdin: bytes | None,
        timeout: float | None,
        stdout: OutputCollector,
        stderr: OutputCollector,
    ) -> tuple[int, bool]:
        token = uuid.uuid4().hex
        pidfile = f"/tmp/workload-exec-{token}.pid"
        with self._lock:
            self._running[token] = pidfile
        ended = False
        try:
            code, timed_out = self.outer._execute_guarded(
                self.exec_argv(shell_line, pidfile, stdin=stdin is not None),
                self.stop_argv(pidfile, STOP_GRACE_S),
                sudo=self.docker_sudo(),
                stdin=stdin,
                timeout=timeout,
                stdout=stdout,
                stderr=stderr,
            )
            ended = not timed_out
            return code, timed_out
        except ConnectError:
            # The outer host is out of reach (a stop through it would wait for a reconnect); its own
            # watchdog TERMs the command there, and the guard's trap runs the stop.
            ended = True
            raise
        finally:
            with self._lock:
                self._running.pop(token, None)
                stopping = token in self._stopping
                self._stopping.discard(token)
            if not ended and not stopping:
                # The outer transport killed the client (timeout) or could not finish the call: what
                # runs in the container is still there.
                self._stop_quietly(pidfile, STOP_GRACE_S)

    def _stop_quietly(self, pidfile: str, grace_s: float) -> None:
        """End the command of ``pidfile`` (SIGTERM, SIGKILL after ``grace_s``); errors are only logged."""
        out = OutputCollector("stdout", None, [], 64 * 1024)
        err = OutputCollector("stderr", None, [], 64 * 1024)
        stop = cmd(*self.stop_argv(pidfile, grace_s), sudo=self.docker_sudo(), timeout=grace_s + 30.0)
        line, prefix = self.outer.wrap(stop)
        # Exempt: a Ctrl-C stops the outer host's commands beside this stop (it runs as a stop hook), and
        # a stop killed before its docker exec reached the container would leave the command running.
        with contextlib.suppress(Exception), interrupt_exempt():  # the caller's own outcome is what counts
            self.outer._execute(line, stdin=prefix, timeout=stop.timeout, stdout=out, stderr=err)

    @property
    def busy(self) -> bool:
        """Whether a command of this host object runs in the container now."""
        with self._lock:
            return bool(self._running)

    def interrupt(self, *, grace_s: float = 2.0) -> None:
        """Stop every command this host object runs in the container now: SIGTERM, SIGKILL after ``grace_s``.

        Each one's group is signalled through a ``docker exec`` of its own, all at once; their
        ``docker exec`` clients then return (killed by a signal). Returns when all are done, or
        after ``grace_s`` plus a bounded wait for the stops themselves.
        """
        with self._lock:
            todo = dict(self._running)
            self._stopping.update(todo)
        threads = [
            threading.Thread(target=self._stop_quietly, args=(pidfile, grace_s), name=f"stop-{self.name}", daemon=True)
            for pidfile in todo.values()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(grace_s + 10.0)
