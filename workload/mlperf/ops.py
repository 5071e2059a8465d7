"""The MLPerf action's plan as typed operations: what ``plan`` prints is what ``apply`` runs.

Contract
--------
* A round adapter (:mod:`workload.mlperf.rounds`) *returns* operations; the planner
  (:func:`workload.mlperf.planner.plan_ops`) puts them in order, pure: (parameters, facts) -> ops.
* ``plan`` renders them with :func:`to_changes` (every op its one-line :meth:`Op.summary` and the
  exact :meth:`Op.commands`; consecutive :class:`SetupStage` of one model share one line, as
  ``workload plan`` has always shown a model's setup).
* ``apply`` executes the *same* plan (carried as the step plan's payload) in order through
  :mod:`workload.mlperf.interpreter` (one handler per op type). No handler decides anything the op
  does not carry.
* Ops are frozen dataclasses of plain values (argv tuples, paths, keys): they can be compared,
  printed and tested without a host.

Decisions that can only be taken at apply time are carried as rules, never hidden:
* :class:`IdentifySystem` carries what to do with each answer of NVIDIA's system check
  (``custom_support``: register a custom system / add missing configs, or refuse). The ops after it
  are the plan's deferred tail (:class:`workload.mlperf.planner.Deferred`): ``plan`` shows them as
  planned before the check, under ``decided after the system check``; ``apply`` plans them again
  from the check's answer when it blocks some (scenario, benchmark) (their scenarios leave
  RUN_ARGS) or names the system id or LLM servers.
* The run id inside every ``LOG_DIR`` is chosen by ``plan`` (a read-only listing of the results
  root, a declared fact) once the checkout is there; before it, ``plan`` shows ``<run id>``.
* :class:`SetupStage` and :class:`BuildHarness` already marked done in host state carry ``done``:
  ``apply`` logs and skips them, ``plan`` does not print them (the planner adds a note).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from workload.commands import Command, cmd
from workload.mlperf.harness import CONTAINER_WORKDIR
from workload.mlperf.results import Expected

#: The scratch folders NVIDIA's harness reads (MLPERF_SCRATCH_PATH/{data,models,preprocessed_data}).
SCRATCH_FOLDERS: tuple[str, ...] = ("data", "models", "preprocessed_data")


@dataclass(frozen=True)
class ContainerRef:
    """Where in-container commands run: ``docker exec -u USER -w WORKDIR NAME argv``."""

    name: str
    #: ``uid:gid`` (or the user's name before it is known, for ``plan``).
    user: str
    workdir: str = CONTAINER_WORKDIR

    def command(self, argv: Sequence[str]) -> Command:
        """The exact command ``plan`` shows for ``argv`` run in this container (the SDK runs the same exec)."""
        return cmd("docker", "exec", "-u", self.user, "-w", self.workdir, self.name, *argv)


class Op(ABC):
    """One operation of the plan. Subclasses are frozen dataclasses."""

    @abstractmethod
    def summary(self) -> str:
        """One line: what this op changes."""

    def commands(self) -> tuple[Command, ...]:
        """The exact commands ``plan`` prints (empty when the op runs through an API, e.g. docker builds)."""
        return ()

    @property
    def shown(self) -> bool:
        """Whether ``plan`` prints this op as a change (read-only ops such as collecting results are not)."""
        return True


@dataclass(frozen=True)
class EnsureScratch(Op):
    """``mkdir -p`` the scratch folders on the host."""

    scratch: str
    folders: tuple[str, ...] = SCRATCH_FOLDERS

    def summary(self) -> str:
        return f"make sure the scratch folders exist under {self.scratch}"

    def commands(self) -> tuple[Command, ...]:
        return (cmd("mkdir", "-p", *(f"{self.scratch}/{d}" for d in self.folders), timeout=60),)


@dataclass(frozen=True)
class UseImage(Op):
    """Run a given image; pulled first when the daemon does not have it."""

    image: str

    def summary(self) -> str:
        return f"use the image {self.image}"


@dataclass(frozen=True)
class BuildImage(Op):
    """Build the harness image from the checkout's recipe (once per recipe hash; label ``workload.recipe``).

    ``release_dir`` holds the base Dockerfile (its named build contexts are ``docker/<name>`` beside
    it); ``user_dockerfile`` (may be absent on the host) adds the user on top. ``build`` false:
    the image must already exist.
    """

    tag: str
    nvidia_dir: str
    release_dir: str = "docker/release"
    user_dockerfile: str = "docker/Dockerfile.user"
    base_image: str | None = None
    build: bool = True

    def summary(self) -> str:
        return (
            f"build the harness image {self.tag} from the repository's {self.release_dir}/Dockerfile and "
            f"{self.user_dockerfile} (skipped when already built for this commit)"
        )


@dataclass(frozen=True)
class EnsureContainer(Op):
    """Start the harness container (or keep it); the container is checked before every exec too."""

    container: ContainerRef
    #: What ``plan`` saw (``running``, ``exited``..., None: absent).
    status: str | None = None

    def summary(self) -> str:
        status = self.status or "absent"
        action = "keep it running" if status == "running" else f"start it ({status})"
        return f"container {self.container.name}: {action}; checked before every exec and recreated when gone"


@dataclass(frozen=True)
class IdentifySystem(Op):
    """Ask the harness which system this is, then act on the answer (before any download).

    Rule, applied by the interpreter:
    * ``None`` (no KnownSystem matches) and not ``custom_support``: the step fails, naming the GPU/CPU
      and the parameter RequireCustomSystemSupport.
    * with ``custom_support``: an unknown system is registered as a custom system in the round's
      format, and a known one gets the configs it lacks (``config_targets``); NVIDIA's files are
      never changed.
    * Every (scenario, benchmark) still without a config is *blocked*; the ops after this one are
      planned again without it (each blocked result is named in the step's failure). From v6.0 so is
      every (scenario, benchmark, accuracy target) whose config files have no values for the target:
      that run alone leaves the plan.
    """

    container: ContainerRef
    argv: tuple[str, ...]
    custom_support: bool
    #: The config files a custom system gets (``configs/<model>/<scenario>/custom.py``...), for ``plan``.
    config_targets: tuple[str, ...] = ()
    #: The script ``argv`` runs (relative to closed/NVIDIA); a checkout without it has no system check
    #: (nothing is registered, the results check explains what is missing). None: always run ``argv``.
    script: str | None = "scripts/get_system_id.py"

    #: How the round registers a custom system (shown by ``plan``).
    registry: str = "code/common/systems/custom_list.py, marked block"
    #: Where the config values come from for this machine's GPU, when the planner knew it
    #: (:func:`workload.mlperf.tuning.plan_values`); "" shows the generic text.
    values: str = ""

    def summary(self) -> str:
        if self.custom_support:
            return (
                "ask the harness which system this is; if it does not know it, register a custom system "
                f"({self.registry}), and add the configs it lacks for it "
                f"({', '.join(self.config_targets)}), "
                + (f"values: {self.values}" if self.values else "values from gpuconfigs/")
            )
        return "ask the harness which system this is and which configs it has for it" + (
            f"; values: {self.values}" if self.values else ""
        )

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)


@dataclass(frozen=True)
class SetupStage(Op):
    """One setup target for one model (``make download_data BENCHMARKS=bert``), marked done in host state."""

    container: ContainerRef
    model: str
    stage: str
    argv: tuple[str, ...]
    #: Host-state key marked when it succeeded (data lives in the scratch path, per model).
    state_key: str
    #: When host state says it is already done: the time it was marked (apply logs it and skips it;
    #: plan does not print it, the planner adds a note instead).
    done: str | None = None

    def summary(self) -> str:
        return f"set up {self.model}: {self.stage} (BENCHMARKS={self.model} only)"

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)

    @property
    def shown(self) -> bool:
        return self.done is None


@dataclass(frozen=True)
class PrepareTree(Op):
    """A folder NVIDIA's README has the user make in closed/NVIDIA before the harness code imports at all (its
    ``code/common/paths.py`` refuses to load without it): v5.1 ``build/`` (``make link_dirs``), v6.0's ``3rdparty/``
    clones. Runs before the system check (which imports that code), once per harness commit while the folder is
    there; ``argv`` itself resumes a part-done folder (finishes or redoes it), so a cut-off run is safe to repeat."""

    container: ContainerRef
    #: The folder made, relative to closed/NVIDIA (``build``, ``3rdparty/trtllm``).
    folder: str
    #: Why the round needs it (upstream file and line), shown by ``plan``.
    why: str
    argv: tuple[str, ...]
    state_key: str
    #: Marked done for this commit and the folder still there: apply skips it.
    done: str | None = None

    def summary(self) -> str:
        return f"prepare the harness checkout: {self.folder} ({self.why})"

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)

    @property
    def shown(self) -> bool:
        return self.done is None


@dataclass(frozen=True)
class BuildHarness(Op):
    """The round's one-off build target (``make build``) once per harness commit, marked done in host state."""

    container: ContainerRef
    commit: str | None
    argv: tuple[str, ...]
    state_key: str
    #: Already built for this commit (host state marked and the build folder there): apply skips it.
    done: str | None = None

    def summary(self) -> str:
        target = self.argv[1] if len(self.argv) > 1 else "build"
        return f"make {target} (harness commit {(self.commit or 'unknown')[:12]})"

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)

    @property
    def shown(self) -> bool:
        return self.done is None


@dataclass(frozen=True)
class MakeTarget(Op):
    """One harness make target in the container (``generate_engines``, ``run_harness``...).

    ``log_dir`` (relative to closed/NVIDIA) and ``expected`` are set for a run that produces
    results; a :class:`CollectResults` of the same ``log_dir`` follows it. A failed target with no
    ``log_dir`` (engines) stops the step; a failed run is reported after every run is done.
    """

    container: ContainerRef
    title: str
    target: str
    #: ``make`` variables in order (``RUN_ARGS``, ``LOG_DIR``, ``EXTERNAL_USER``...).
    variables: tuple[tuple[str, str], ...]
    log_dir: str | None = None
    expected: tuple[Expected, ...] = ()
    #: The scenarios this target covers (the failure text names them).
    scenarios: tuple[str, ...] = ()
    test_mode: str | None = None

    @property
    def argv(self) -> tuple[str, ...]:
        return ("make", self.target, *(f"{k}={v}" for k, v in self.variables))

    def summary(self) -> str:
        return self.title

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)


@dataclass(frozen=True)
class CollectResults(Op):
    """Find this run's result folders in ``log_dir`` (host path) and keep them; each missing expected one is named.

    Read-only on the host (results of a remote host are copied into the run folder), so ``plan``
    does not print it as a change.
    """

    log_dir: str
    test_mode: str
    expected: tuple[Expected, ...]

    def summary(self) -> str:
        return f"collect the {self.test_mode} results in {self.log_dir}"

    @property
    def shown(self) -> bool:
        return False


@dataclass(frozen=True)
class Change:
    """A rendered op (or group of ops): what ``plan`` prints. Mirrors :class:`workload.steps.Change`."""

    summary: str
    commands: tuple[Command, ...] = ()


def to_changes(ops: Sequence[Op]) -> list[Change]:
    """The ops as ``plan`` prints them; consecutive setup stages of one model become one line."""
    changes: list[Change] = []
    index = 0
    while index < len(ops):
        op = ops[index]
        if isinstance(op, SetupStage) and op.shown:
            group = [op]
            while (
                index + 1 < len(ops)
                and isinstance(nxt := ops[index + 1], SetupStage)
                and nxt.model == op.model
                and nxt.container == op.container
            ):
                if nxt.shown:
                    group.append(nxt)
                index += 1
            changes.append(
                Change(
                    f"set up {op.model}: {', '.join(s.stage for s in group)} (BENCHMARKS={op.model} only)",
                    tuple(c for s in group for c in s.commands()),
                )
            )
        elif op.shown:
            changes.append(Change(op.summary(), op.commands()))
        index += 1
    return changes
