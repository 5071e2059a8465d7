"""``MLPerfExecutor``: NVIDIA's MLPerf Inference harness, run in its container on the host.

Compatible with VirtualClient's MLPerfExecutor parameters (``Model``, ``Username``, ``DiskFilter``,
``RequireCustomSystemSupport``, ``Scenario``) and fixing what the reference notes list as its gaps:
per-model setup stages remembered in host state, one ``make build`` per harness commit, a container
that is checked before every exec and recreated when gone, the real short-run flag, engines built
once and ``make run_harness`` per test mode, LoadGen overrides as RUN_ARGS fields (never a user.conf
that would replace the harness's own), results looked up in this run's own LOG_DIR per (benchmark,
scenario, mode), custom systems and missing configs registered through the harness's extension
points, Ctrl-C reaching the running harness, and an SSH host's daemon reached over its own connection.

This module is the step: it gathers the facts it declares (read-only: files, ``git rev-parse``, the
user, the GPUs, the results listing; :mod:`workload.mlperf.step_facts`) and the container's state
(``docker inspect``), asks the pure planner (:mod:`workload.mlperf.planner`) for the plan, renders it
for ``plan`` (:func:`plan_mlperf`, the typed plan carried as the StepPlan's payload) and hands that
same plan to the interpreter at ``apply`` (:mod:`workload.mlperf.interpreter`). Where the rest
lives: parameters and settings (:mod:`workload.mlperf.settings`), the ops
(:mod:`workload.mlperf.ops`), what differs per harness round (:mod:`workload.mlperf.rounds`), the
image (:mod:`workload.mlperf.image`), custom systems and configs
(:mod:`workload.mlperf.system_support`).
"""

from __future__ import annotations

import contextlib
import posixpath
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from workload.errors import ProfileError, WorkloadError
from workload.facts.fact import Fact
from workload.hosts.base import Host
from workload.mlperf import endpoint_checks, step_facts
from workload.mlperf.container import ContainerSpec, HarnessContainer, container_name
from workload.mlperf.docker_errors import docker_boundary, docker_failures
from workload.mlperf.interpreter import Interpreter
from workload.mlperf.ops import to_changes
from workload.mlperf.planner import MLPerfPlan, plan_ops, round_of
from workload.mlperf.rounds import ROUNDS, HarnessRound
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
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan, package_export

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
    """The pure planner's plan (:func:`workload.mlperf.planner.plan_ops`), carried as the StepPlan's payload, with
    the changes ``plan`` prints rendered from it (the deferred tail's labelled as such)."""
    return render_mlperf(plan_ops(params, facts, run_id=run_id))


def render_mlperf(planned: MLPerfPlan) -> StepPlan:
    """The StepPlan of a planned MLPerf action: its ops as changes, the tail after the system check labelled."""
    head = [Change(c.summary, c.commands) for c in to_changes((*planned.head, planned.tail.after))]
    tail = [Change(c.summary, c.commands, decided_after=planned.tail.label) for c in to_changes(planned.tail.preview)]
    return StepPlan(changes=(*head, *tail), notes=planned.notes, payload=planned)


def results_roots() -> list[str]:
    """Every round's results root (relative to closed/NVIDIA): plan lists the one of its round to choose a run id,
    and declares them all, since the round is known only from the checkout's facts."""
    return sorted({adapter().results_root() for adapter in ROUNDS})


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

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Plan reads the checkout (VERSION, round markers, ``build/``, commit), the user, the machine, the GPUs
        (unless SystemDescription gives them) and the results folder the run id is chosen from. The container's
        state is read through the Docker API (``docker inspect``), not by a host command; verify reads nothing."""
        if phase != "plan":
            return ()
        declared: list[Fact[Any]] = [
            step_facts.harness_user((self.p.Username or "").strip() or None),
            step_facts.MACHINE,
        ]
        if not self.p.SystemDescription:
            declared.append(step_facts.host_system())
        nvidia_dir = self._nvidia_dir(ctx)
        if nvidia_dir:
            declared.append(step_facts.checkout(nvidia_dir, round_markers()))
            declared += [step_facts.listing(posixpath.join(nvidia_dir, root)) for root in results_roots()]
        return declared

    def gather(self, ctx: StepContext, *, need_docker: bool = True) -> MLPerfFacts:
        """The planner's facts: the declared ones (:meth:`facts`), read through the step's view; then the
        container's state from the Docker API (``need_docker``)."""
        host = ctx.host
        view = self.read_facts(ctx, "plan")
        nvidia_dir = self._nvidia_dir(ctx)
        notes: list[str] = []
        tree = view[step_facts.checkout(nvidia_dir, round_markers())] if nvidia_dir else None
        if tree is not None and tree.version_problem:
            notes.append(tree.version_problem)
        if nvidia_dir is None:
            notes.append(
                f"repository path unknown: GitRepoClone (PackageName {self.p.PackageName}) has not run yet "
                "and RepoPath is not set"
            )
        user = view[step_facts.harness_user((self.p.Username or "").strip() or None)]
        if isinstance(user, str):
            raise self.fail(
                f"Username: the user {user!r} does not exist on the host", hint="set Username to a real user"
            )
        scratch = for_host(self.p.ScratchPath, host.name) or ctx.exports.get("MLPERF_SCRATCH_PATH")
        done = ctx.state.mapping(STATE_KEY)
        facts = MLPerfFacts(
            nvidia_dir=nvidia_dir,
            nvidia_dir_exists=bool(tree and tree.exists),
            version=tree.version if tree else None,
            commit=tree.commit if tree else None,
            scratch_path=scratch,
            user=user,
            machine=view[step_facts.MACHINE],
            done=done if isinstance(done, dict) else {},
            build_exists=bool(tree and tree.build_exists),
            notes=notes,
            present=tree.present if tree else frozenset(),
            host_name=host.name,
        )
        # The GPUs (SystemDescription, or read: nvidia-smi, lscpu, /proc/meminfo): the planner says whether the
        # round's configs tune them (workload.mlperf.tuning) and the endpoints client's rate defaults to NVIDIA's
        # value for them. Unreadable (no driver, no GPU): the plan says nothing of them, the run decides.
        try:
            facts.system = (
                parse_system_description(self.p.SystemDescription)
                if self.p.SystemDescription
                else view[step_facts.host_system()]
            )
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
        """The plan ``apply`` executes as given: the run id is chosen here (a read-only listing of the results root)
        when the checkout is there; before the clone, ``plan`` shows the placeholder ``<run id>``."""
        facts = self.gather(ctx)
        run_id = "<run id>"
        if facts.nvidia_dir is not None and facts.nvidia_dir_exists:
            harness = round_of(self.p, facts).round
            listing = self.read_facts(ctx, "plan")[
                step_facts.listing(posixpath.join(facts.nvidia_dir, harness.results_root()))
            ]
            run_id = self._run_id(ctx, listing, harness, settings_of(self.p).model)
        return plan_mlperf(self.p, facts, run_id=run_id)

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
        """Execute the plan ``plan`` made (its payload), nothing gathered or planned again."""
        planned = plan.payload
        if not isinstance(planned, MLPerfPlan):
            raise self.fail("internal: apply was handed a plan this action did not make", ctx)
        facts = planned.inputs.facts
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
        Interpreter(
            step=self,
            ctx=ctx,
            plan=planned,
            connect=lambda: self._docker(ctx),
            container_spec=lambda image: self._spec(facts, image, ctx.host),
        ).run()

    @staticmethod
    def _run_id(ctx: StepContext, listing: Sequence[str], harness: HarnessRound, model: str) -> str:
        """A run id (``<date>-<time>-<iteration>``, then ``.1``, ``.2``...) none of whose LOG_DIRs is in ``listing``
        (the names in the round's results root).

        Results are found by their LOG_DIR path; a LOG_DIR used before (two actions of one model
        started within the same second) would hand back the earlier action's results as this one's.
        """
        root = harness.results_root()
        base = time.strftime("%Y%m%d-%H%M%S") + f"-{ctx.iteration}"
        run_id, n = base, 0
        while any(posixpath.join(root, name).startswith(harness.results_prefix(run_id, model)) for name in listing):
            n += 1
            run_id = f"{base}.{n}"
        return run_id
