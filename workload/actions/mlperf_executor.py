"""``MLPerfExecutor``: NVIDIA's MLPerf Inference harness, run in its container on the host.

Compatible with VirtualClient's MLPerfExecutor parameters (``Model``, ``Username``, ``DiskFilter``,
``RequireCustomSystemSupport``, ``Scenario``) and fixing what the reference notes list as its gaps:
per-model setup stages remembered in host state, one ``make build`` per harness commit, a container
that is checked before every exec and recreated when gone, the real short-run flag, engines built
once and ``make run_harness`` per test mode, LoadGen overrides as RUN_ARGS fields (never a user.conf
that would replace the harness's own), results looked up in this run's own LOG_DIR per (benchmark,
scenario, mode), custom systems and missing configs registered through the harness's extension
points, Ctrl-C reaching the running harness, and an SSH host's daemon reached over its own connection.

This module is the step: it gathers the facts (read-only: files, ``git rev-parse``, ``docker
inspect``), asks the pure planner (:mod:`workload.mlperf.planner`) for the ops, renders them for
``plan`` (:func:`plan_mlperf`) and hands the same ops to the interpreter for ``apply``
(:mod:`workload.mlperf.interpreter`). Where the rest lives: parameters and settings
(:mod:`workload.mlperf.settings`), the ops (:mod:`workload.mlperf.ops`), what differs per harness
round (:mod:`workload.mlperf.rounds`), the image (:mod:`workload.mlperf.image`), custom systems
and configs (:mod:`workload.mlperf.system_support`).
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from typing import Any, ClassVar

from workload.commands import cmd
from workload.errors import ProfileError, WorkloadError
from workload.hosts.base import Host
from workload.mlperf import endpoint_checks
from workload.mlperf.container import ContainerSpec, HarnessContainer, container_name
from workload.mlperf.docker_errors import docker_boundary, docker_failures
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.interpreter import Interpreter
from workload.mlperf.ops import to_changes
from workload.mlperf.planner import plan_ops
from workload.mlperf.rounds import HarnessRound
from workload.mlperf.rounds import markers as round_markers
from workload.mlperf.settings import (
    STATE_KEY,
    MLPerfFacts,
    MLPerfParameters,
    UserFacts,
    build_key,
    for_host,
    settings_of,
    setup_key,
)
from workload.mlperf.system import parse_system_description
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan, package_export

__all__ = [
    "MLPerfExecutor",
    "MLPerfFacts",
    "MLPerfParameters",
    "UserFacts",
    "build_key",
    "plan_mlperf",
    "settings_of",
    "setup_key",
]


def plan_mlperf(params: MLPerfParameters, facts: MLPerfFacts, *, run_id: str = "<run id>") -> StepPlan:
    """The pure planner's ops (:func:`workload.mlperf.planner.plan_ops`) as the changes ``plan`` prints."""
    planned = plan_ops(params, facts, run_id=run_id)
    changes = tuple(Change(c.summary, c.commands) for c in to_changes(planned.ops))
    return StepPlan(changes=changes, notes=planned.notes)


# -- the step ------------------------------------------------------------------------------------
class MLPerfExecutor(Step):
    """Runs one model's scenarios in NVIDIA's harness container, in performance and accuracy mode."""

    type_name: ClassVar[str] = "MLPerfExecutor"
    Parameters: ClassVar[type[StepParameters]] = MLPerfParameters

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, MLPerfParameters)
        settings = settings_of(params)
        if params.SystemDescription:
            try:
                parse_system_description(params.SystemDescription)
            except ValueError as exc:
                raise ValueError(f"SystemDescription: {exc}") from None
        for name in ("ServerTargetQps", "InteractiveTargetQps"):
            if getattr(params, name) is not None and params.Client != "endpoints":
                raise ValueError(
                    f"{name}: read only by MLCommons' endpoints client (Client=endpoints); NVIDIA's harness takes "
                    "its Server rate from LoadGenOverrides <model>.Server.target_qps"
                )
        try:
            # What the endpoints client's run cannot give, refused before plan or run does anything.
            endpoint_checks.check(params, settings)
        except ProfileError as exc:
            raise ValueError(f"{exc.location}: {exc.problem}") from None

    @property
    def p(self) -> MLPerfParameters:
        assert isinstance(self.params, MLPerfParameters)
        return self.params

    # -- facts -----------------------------------------------------------------------------------
    def _nvidia_dir(self, ctx: StepContext) -> str | None:
        # The declared export of the package's path (GitRepoClone sets it; the engine keeps it on the host).
        repo = for_host(self.p.RepoPath, ctx.host.name) or ctx.exports.get(package_export(self.p.PackageName))
        if not repo:
            return None
        repo = str(repo).rstrip("/")
        if repo.endswith("closed/NVIDIA") or (
            ctx.host.exists(posixpath.join(repo, "VERSION")) and not ctx.host.exists(posixpath.join(repo, "closed"))
        ):
            return repo
        return posixpath.join(repo, "closed", "NVIDIA")

    def _user(self, host: Host) -> UserFacts:
        name = (self.p.Username or "").strip()
        if not name:
            sudo_user = host.run(cmd("printenv", "SUDO_USER", timeout=30)).stdout.strip()
            name = sudo_user or host.identity.user
        out = host.run(
            cmd(
                "sh",
                "-c",
                'id -u "$1" && id -g "$1" && id -gn "$1" && getent passwd "$1" | cut -d: -f6',
                "sh",
                name,
                timeout=30,
            )
        )
        lines = out.stdout.split()
        if not out.ok or len(lines) < 3:
            raise self.fail(
                f"Username: the user {name!r} does not exist on the host", hint="set Username to a real user"
            )
        return UserFacts(name, int(lines[0]), int(lines[1]), lines[2], lines[3] if len(lines) > 3 else f"/home/{name}")

    def gather(self, ctx: StepContext, *, need_docker: bool = True) -> MLPerfFacts:
        host = ctx.host
        nvidia_dir = self._nvidia_dir(ctx)
        notes: list[str] = []
        exists = bool(nvidia_dir and host.exists(nvidia_dir))
        version: HarnessVersion | None = None
        commit: str | None = None
        present: frozenset[str] = frozenset()
        if nvidia_dir and exists:
            try:
                version = HarnessVersion.parse(host.read_text(posixpath.join(nvidia_dir, "VERSION")))
            except FileNotFoundError:
                notes.append(f"{nvidia_dir}/VERSION is missing")
            except ValueError as exc:
                notes.append(f"{nvidia_dir}/VERSION: {exc}")
            # The layout markers the round adapters recognise a checkout by (rounds.choose_round).
            present = frozenset(m for m in round_markers() if host.exists(posixpath.join(nvidia_dir, m)))
            rev = host.run(cmd("git", "-C", nvidia_dir, "rev-parse", "HEAD", timeout=60))
            commit = rev.stdout.strip() if rev.ok else None
        elif nvidia_dir is None:
            notes.append(
                f"repository path unknown: GitRepoClone (PackageName {self.p.PackageName}) has not run yet "
                "and RepoPath is not set"
            )
        scratch = for_host(self.p.ScratchPath, host.name) or ctx.exports.get("MLPERF_SCRATCH_PATH")
        machine = host.run(cmd("uname", "-m", timeout=30)).stdout.strip() or "x86_64"
        user = self._user(host)
        done = ctx.state.mapping(STATE_KEY)
        facts = MLPerfFacts(
            nvidia_dir=nvidia_dir,
            nvidia_dir_exists=exists,
            version=version,
            commit=commit,
            scratch_path=scratch,
            user=user,
            machine=machine,
            done=done if isinstance(done, dict) else {},
            build_exists=bool(nvidia_dir and host.exists(posixpath.join(nvidia_dir, "build"))),
            notes=notes,
            present=present,
            host_name=host.name,
        )
        # The GPUs (read-only: nvidia-smi, lscpu, /proc/meminfo; or SystemDescription): the planner says whether the
        # round's configs tune them (workload.mlperf.tuning) and the endpoints client's rate defaults to NVIDIA's
        # value for them. Unreadable (no driver, no GPU): the plan says nothing of them, the run decides.
        from workload.mlperf.system_support import system_of

        try:
            facts.system = system_of(self.p, ctx)
        except WorkloadError as exc:
            if self._needs_system():
                notes.append(f"this machine's GPUs could not be read ({exc.message}): no target QPS from gpuconfigs")
        if need_docker:
            try:
                client = self._docker(ctx)
                spec = self._spec(facts, "<image>", host)
                try:
                    with docker_boundary(host.name, doing=f"reading the state of the container {spec.name}"):
                        facts.container_status = HarnessContainer(
                            client, spec, ctx.log, outer=host, docker_url=self.p.DockerBaseUrl
                        ).status()
                finally:
                    with contextlib.suppress(*docker_failures()):
                        client.close()
            except WorkloadError as exc:
                facts.docker_problem = f"docker: {exc.message}"
        return facts

    def needs_nvidia_gpu(self) -> bool:
        # The container is started with a GPU device request (docker's --gpus all), which fails without one.
        return self.p.UseGpus

    def _needs_system(self) -> bool:
        """Whether the plan reads the GPUs: an endpoints client Server/Interactive run without its rate given."""
        if self.p.Client != "endpoints":
            return False
        given = {"Server": self.p.ServerTargetQps, "Interactive": self.p.InteractiveTargetQps}
        return any(s in given and given[s] is None for s in settings_of(self.p).scenarios)

    def plan(self, ctx: StepContext) -> StepPlan:
        return plan_mlperf(self.p, self.gather(ctx))

    # -- docker ----------------------------------------------------------------------------------
    def _docker(self, ctx: StepContext) -> Any:
        """A docker client for the host's daemon.

        An SSH host's daemon is reached over the host's own SSH connection (same keys, same host-key
        check, sudo when the user may not open the socket); ``tcp://`` URLs are used as given.
        """
        from workload.mlperf.container import connect

        url = self.p.DockerBaseUrl
        if ctx.host.can_open_channels and not (url or "").startswith("tcp://"):
            from workload.mlperf.docker_ssh import connect_over_host

            return connect_over_host(ctx.host, url, log=ctx.log)
        return connect(url, host_name=ctx.host.name)

    def _spec(self, facts: MLPerfFacts, image: str, host: Host) -> ContainerSpec:
        assert facts.user is not None
        mounts: list[tuple[str, str, str]] = []
        # launch_docker's mounts, where the host has them (docker refuses a missing bind source).
        if host.exists(facts.user.home):
            mounts.append((facts.user.home, f"/mnt{facts.user.home}", "rw"))
        for path in ("/etc/timezone", "/etc/localtime"):
            if host.exists(path):
                mounts.append((path, path, "ro"))
        return ContainerSpec(
            name=for_host(self.p.DockerName, host.name) or container_name(facts.user.name, facts.machine),
            image=image,
            nvidia_dir=facts.nvidia_dir or "",
            scratch_path=facts.scratch_path or "",
            user=f"{facts.user.uid}:{facts.user.gid}",
            use_gpus=self.p.UseGpus,
            unlimited_memlock=self.p.UnlimitedMemlock,
            mounts=tuple(mounts),
        )

    # -- apply -----------------------------------------------------------------------------------
    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        facts = self.gather(ctx, need_docker=False)
        if facts.nvidia_dir is None or not facts.nvidia_dir_exists:
            raise self.fail(
                f"the harness repository is not there ({facts.nvidia_dir or 'path unknown'})",
                ctx,
                hint="run GitRepoClone first (same PackageName) or set RepoPath",
            )
        if not facts.scratch_path:
            raise self.fail(
                "no scratch path: MountDisks exported no MLPERF_SCRATCH_PATH and ScratchPath is not set",
                ctx,
                hint="add MountDisks before this action or set ScratchPath",
            )
        # The run id is chosen before planning (a read-only listing), so the plan run is the plan shown.
        first = plan_ops(self.p, facts)
        run_id = self._run_id(ctx, facts.nvidia_dir, first.round, first.inputs.settings.model)
        Interpreter(
            step=self,
            ctx=ctx,
            params=self.p,
            facts=facts,
            plan=plan_ops(self.p, facts, run_id=run_id),
            connect=lambda: self._docker(ctx),
            container_spec=lambda image: self._spec(facts, image, ctx.host),
        ).run()

    @staticmethod
    def _run_id(ctx: StepContext, nvidia_dir: str, harness: HarnessRound, model: str) -> str:
        """A run id (``<date>-<time>-<iteration>``, then ``.1``, ``.2``...) none of whose LOG_DIRs exist yet.

        Results are found by their LOG_DIR path; a LOG_DIR used before (two actions of one model
        started within the same second) would hand back the earlier action's results as this one's.
        """
        root = harness.results_root()
        logs = posixpath.join(nvidia_dir, root)
        listing = ctx.host.run(cmd("ls", "-1", logs, timeout=60)).stdout.split() if ctx.host.exists(logs) else []
        base = time.strftime("%Y%m%d-%H%M%S") + f"-{ctx.iteration}"
        run_id, n = base, 0
        while any(posixpath.join(root, name).startswith(harness.results_prefix(run_id, model)) for name in listing):
            n += 1
            run_id = f"{base}.{n}"
        return run_id
