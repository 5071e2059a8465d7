"""``HarnessRound``: everything that differs between rounds of NVIDIA's MLPerf Inference harness.

One folder per round (``v4_1/``: NVIDIA's v4.0/v4.1 ``closed/NVIDIA``; later rounds beside it), its adapter in its
``__init__.py``.
The action never asks "which version?" itself: it asks the round chosen by
:func:`workload.mlperf.rounds.choose_round` for values and ops, in this order (all pure: values in,
values/ops out; no host access except through what the interpreter does with the ops):

1. :meth:`HarnessRound.recognises` -- by ``choose_round``, at ``plan`` and ``apply``: is this checkout
   (its ``VERSION`` and which of :attr:`HarnessRound.markers` exist) this round?
2. :meth:`HarnessRound.image_ops` -- the planner: how the harness image is made (build the
   checkout's recipe, or use a given image). Returns ops (``UseImage``/``BuildImage``...).
3. :meth:`HarnessRound.tree_ops` -- the planner: the folders the round's own code needs in closed/NVIDIA before it
   imports at all (``PrepareTree``, v5.1 ``build/``, v6.0 ``3rdparty/``), run before the system check.
   :meth:`HarnessRound.system_check` -- the planner: the ``IdentifySystem`` op (the round's own
   system-detection command and the rule for an unknown system).
4. :meth:`HarnessRound.setup_ops` -- the planner: the model's setup stages (``SetupStage``), then
   the one-off build (``BuildHarness``), those already done carrying ``done``; plus notes for them.
5. :meth:`HarnessRound.engine_ops` and :meth:`HarnessRound.run_ops` -- the planner: the ops that
   run one (model, scenarios, test mode) group (``MakeTarget`` then ``CollectResults``).
6. :meth:`HarnessRound.results_dir` -- where a run's results land (relative to closed/NVIDIA);
   also what the run id is checked against (:meth:`HarnessRound.results_prefix` in
   :meth:`HarnessRound.results_root`).
7. System support (the interpreter, for ``IdentifySystem``), as the round declares it (``system_support`` of its
   ``round.json``): ``registered`` and ``by id`` rounds give :meth:`HarnessRound.custom_config_path`,
   :meth:`HarnessRound.custom_list_block` and :meth:`HarnessRound.custom_config` (the files a custom system needs,
   in the round's format); ``generated files`` rounds give :meth:`HarnessRound.generated_files`
   (:class:`GeneratedFiles`: the check's answer, the config files a system needs, a custom system's files, the
   servers its config files start).

A new round: a folder beside the others (``rounds/v7_0/``) with its data file ``round.json``
(:mod:`~workload.mlperf.round_spec`: versions, markers, benchmarks, scenarios, make target, variables and short-run
flag, results root, gpuconfigs table, tuning rule, system support) and an ``__init__.py`` whose class reads it
(``spec = read_spec(__file__)``), composes the strategies its harness needs (``rounds/common/``) and is named
``ADAPTER``; detection finds the folder (:func:`workload.mlperf.rounds.discover`). Give it a stand-in harness under
``tests/fixtures/``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Protocol

from workload.errors import ProfileError
from workload.mlperf.catalog import MODELS, WorkloadSetting, canonical_benchmark
from workload.mlperf.custom_system import CUSTOM_LIST, GeneratedFile, merge_custom_list
from workload.mlperf.gpuconfigs import ResolvedConfig, SkuTable
from workload.mlperf.harness import HarnessVersion, RunGroup
from workload.mlperf.ops import ContainerRef, Op
from workload.mlperf.round_spec import RoundSpec, SystemSupportKind, builtin_specs
from workload.mlperf.server_urls import ServerUrls
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, Settings, tree_key
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import SystemFiles


def round_benchmarks(spec: RoundSpec) -> tuple[str, ...]:
    """The benchmarks of the round (its ``round.json``, NVIDIA's spelling) the catalog runs."""
    names = (canonical_benchmark(b) for b in spec.data.benchmarks)
    return tuple(dict.fromkeys(b for b in names if b in MODELS))


def done_at(marked: object) -> str | None:
    """A host-state mark as an op's ``done`` (the time it was marked; any true value counts)."""
    return str(marked) if marked else None


@dataclass(frozen=True)
class Checkout:
    """What ``choose_round`` knows of a checkout: its ``closed/NVIDIA/VERSION`` and which marker paths exist."""

    #: None: no checkout yet (plan before GitRepoClone), or VERSION missing/unreadable.
    version: HarnessVersion | None
    #: The paths of every round's :attr:`HarnessRound.markers` that exist (relative to closed/NVIDIA).
    present: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PlanInputs:
    """Everything a round plans from: parameters, normalised settings, facts and derived names."""

    params: MLPerfParameters
    settings: Settings
    facts: MLPerfFacts
    #: The checkout's version, or the round's assumed one (plan before the clone).
    version: HarnessVersion
    container: ContainerRef
    #: ``closed/NVIDIA`` on the host (or a placeholder for ``plan``).
    nvidia_dir: str
    #: MLPERF_SCRATCH_PATH (or a placeholder).
    scratch: str
    #: The user the image and container are made for (or ``<user>``).
    user_name: str
    run_id: str
    #: (scenario, benchmark) pairs the system check found no config for (apply only): left out of runs.
    blocked: frozenset[tuple[str, str]] = frozenset()
    #: (scenario, benchmark, accuracy target ``0.99``/``0.999``) runs whose config files have no values for that target
    #: (the v6.x system check, apply only): that target's harness run of the scenario is left out, the others run.
    blocked_targets: frozenset[tuple[str, str, str]] = frozenset()
    #: The system id the harness is told to use (v5.1+ ``SYSTEM_NAME``), decided by the system check (apply
    #: only; ``plan`` shows a placeholder where a round needs it).
    system_name: str | None = None
    #: The LLM servers of each (scenario, accuracy target ``0.99``/``0.999``) read by the system check from the
    #: config files the harness uses (v6.1, apply only; ``plan`` shows a placeholder).
    server_urls: Mapping[tuple[str, str], ServerUrls] = field(default_factory=dict)

    def runs(self, scenario: str, target: str) -> bool:
        """Whether the harness run of (scenario, accuracy target) is planned (rounds with one ``--accuracy_target``
        a run, v5.1 on): neither its result (scenario, benchmark) nor the target itself was blocked by the system
        check. The one rule the planner and the rounds' engine and run ops follow."""
        benchmark = self.settings.benchmark_at(target)
        return (scenario, benchmark) not in self.blocked and (scenario, benchmark, target) not in self.blocked_targets


def tree_state(inputs: PlanInputs, folder: str) -> tuple[str, str | None]:
    """(host-state key, done) of a folder :meth:`HarnessRound.tree_ops` makes in closed/NVIDIA: done (the time it was
    marked) when marked for this commit and the folder is still there (it is one of the round's ``markers``)."""
    key = tree_key(inputs.nvidia_dir, inputs.facts.commit, folder)
    return key, done_at(inputs.facts.done.get(key)) if folder in inputs.facts.present else None


class GeneratedFiles(Protocol):
    """A round whose custom system is a set of config files generated from its gpuconfigs table (``"system_support":
    "generated files"`` in its ``round.json``), as its system support asks it (:meth:`HarnessRound.generated_files`)."""

    @property
    def name(self) -> str: ...

    def system_answer(self, output: str) -> str | None:
        """The system id the check printed, or None when the harness does not know the machine."""
        ...

    def config_files(self, system_id: str, model: str, scenario: str) -> tuple[str, ...]:
        """The files (relative to closed/NVIDIA) the harness needs for one scenario of ``system_id``."""
        ...

    def system_files(
        self,
        system: HostSystem,
        model: str,
        scenarios: Sequence[str],
        accuracies: Sequence[str],
        *,
        allow_untuned: bool,
        port: int = 30000,
    ) -> SystemFiles:
        """The custom system's config files (``SYSTEM_NAME`` = their system id)."""
        ...

    def served_urls(
        self,
        read: Callable[[str], str | None],
        system_id: str,
        model: str,
        scenario: str,
        accuracy: str,
        *,
        gpu_count: Callable[[], int],
        port: int,
        client: str,
    ) -> ServerUrls | None:
        """The LLM servers of (scenario, accuracy target) read from the config files the harness uses; None for a
        round whose servers are not in its config files (one on LLMServerPort: its ``server_spec``)."""
        ...


class HarnessRound(ABC):
    """One round of NVIDIA's harness. Instances are stateless; every method is pure.

    A concrete round sets :attr:`spec` (its folder's ``round.json``); the class values below are read from it when
    the class is made (:meth:`__init_subclass__`), so the data file is the one place they are written."""

    #: The round's data (``round.json`` of its folder).
    spec: ClassVar[RoundSpec]
    #: ``"v4.1"``: shown in notes and accepted by the ``HarnessRound`` parameter.
    name: ClassVar[str]
    #: The VERSION values this adapter runs (``v4.0`` and ``v4.1`` for ``v4_1``).
    versions: ClassVar[tuple[HarnessVersion, ...]]
    #: Paths (relative to closed/NVIDIA) whose presence tells this round's layout apart; checked read-only.
    markers: ClassVar[tuple[str, ...]] = ()
    #: The benchmarks (catalog names) this round's harness has and this runner runs on one node; () = not
    #: restricted. :meth:`check_benchmark` refuses any other when the round is known (parameter or checkout).
    benchmarks: ClassVar[tuple[str, ...]] = ()
    #: The ``Client`` values this round runs: NVIDIA's harness always; MLCommons' endpoints client only where
    #: the round's harness serves the model over HTTP for it (v6.1). :meth:`check_client` refuses the others.
    clients: ClassVar[tuple[str, ...]] = ("harness",)
    #: The make target built once per harness commit after the setup stages; None: the round's Makefiles have none
    #: and the setup is the stages only.
    build_target: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if isinstance(spec, RoundSpec):
            cls.name = spec.name
            cls.versions = spec.versions
            cls.markers = spec.data.markers
            cls.benchmarks = round_benchmarks(spec) if spec.data.restrict_benchmarks else ()
            cls.clients = spec.data.clients
            cls.build_target = spec.data.build_target
            cls.system_support = spec.data.system_support

    @property
    def assumed_version(self) -> HarnessVersion:
        """The version planned for before the checkout exists (the newest this adapter runs)."""
        return max(self.versions)

    # -- detection ---------------------------------------------------------------------------
    @classmethod
    def recognises(cls, checkout: Checkout) -> bool:
        """Whether ``checkout`` is this round: by default, its VERSION is one of :attr:`versions`."""
        return checkout.version in cls.versions

    def check_benchmark(self, model: str) -> None:
        """ProfileError naming the round's benchmarks when ``model`` is not one of them (no setup, no run)."""
        if self.benchmarks and model not in self.benchmarks:
            raise ProfileError(
                f"HarnessRound {self.name}",
                f"{model} is not a benchmark of NVIDIA's {self.name} harness (it has: {', '.join(self.benchmarks)})",
                hint="choose one of them, or the round that has this benchmark (parameter HarnessRound, "
                "ResultsRepoUri/ResultsRepoCommit)",
            )

    def check_client(self, client: str) -> None:
        """ProfileError naming the rounds that have ``client`` when this one has not (it would be ignored)."""
        if client in self.clients:
            return
        having = [spec.name for spec in builtin_specs() if client in spec.data.clients]
        raise ProfileError(
            "Client",
            f"Client={client} is not run by NVIDIA's {self.name} harness (only {', '.join(having) or 'no round'})",
            hint="use Client=harness, or choose a round that has it (parameter HarnessRound)",
        )

    def fit_scenarios(self, settings: Settings, *, requested: bool) -> tuple[Settings, str | None]:
        """``settings`` with only the scenarios this round has (``scenarios`` of its ``round.json``; v4.1/v5.0 have
        no Interactive): defaults it lacks are left out with a note; ``requested`` ones (the Scenarios parameter) are
        refused, naming the round's scenarios. A round without a list keeps every scenario."""
        have = self.spec.data.scenarios
        lacking = [s for s in settings.scenarios if have and s not in have]
        if not lacking:
            return settings, None
        kept = tuple(s for s in settings.scenarios if s not in lacking)
        if requested or not kept:
            raise ProfileError(
                f"HarnessRound {self.name}",
                f"NVIDIA's {self.name} harness has no {', '.join(lacking)} scenario (it has: {', '.join(have)})",
                hint="leave it out of Scenarios, or choose a round that has it (parameter HarnessRound)",
            )
        note = f"{settings.model}: {', '.join(lacking)} left out ({self.name} has no such scenario)"
        return replace(settings, scenarios=kept), note

    # -- planning ----------------------------------------------------------------------------
    @abstractmethod
    def image_ops(self, inputs: PlanInputs) -> list[Op]:
        """How the harness image is prepared (before ``EnsureContainer``)."""

    def tree_ops(self, inputs: PlanInputs) -> list[Op]:
        """Ops that make the folders NVIDIA's README has the user make before anything runs (default: none)."""
        return []

    @abstractmethod
    def system_check(self, inputs: PlanInputs) -> Op:
        """The ``IdentifySystem`` op: runs before any download (an unknown system must not cost hours)."""

    @abstractmethod
    def setup_ops(self, inputs: PlanInputs) -> tuple[list[Op], list[str]]:
        """(ops, notes): the model's setup stages, then the one-off build (done ones carry ``done``)."""

    @abstractmethod
    def engine_ops(self, inputs: PlanInputs, scenarios: Sequence[str]) -> list[Op]:
        """Ops that prepare ``scenarios`` once for every test mode (engines); may be empty."""

    @abstractmethod
    def run_ops(self, inputs: PlanInputs, group: RunGroup, test_mode: str, index: int) -> list[Op]:
        """Ops that run one group of scenarios in one test mode (``index``: 1-based group number)."""

    @abstractmethod
    def results_dir(self, run_id: str, model: str, test_mode: str, index: int) -> str:
        """Where one run's results land, relative to closed/NVIDIA (the run's LOG_DIR)."""

    @abstractmethod
    def results_prefix(self, run_id: str, model: str) -> str:
        """What every :meth:`results_dir` of one run of one model starts with (a free run id has none)."""

    def results_root(self) -> str:
        """The folder (relative to closed/NVIDIA) every :meth:`results_dir` is directly in (``results_root`` of
        ``round.json``).

        ``apply`` lists it (read-only) to choose a run id none of whose results dirs exist yet.
        """
        return self.spec.data.results_root

    # -- system support ----------------------------------------------------------------------
    @abstractmethod
    def custom_config_path(self, model: str, scenario: str) -> str:
        """The config file (relative to closed/NVIDIA) a custom system's settings go in."""

    @abstractmethod
    def custom_list_block(self, system: HostSystem, sku: SkuTable) -> str:
        """The custom-system registration block (v4.1: ``code/common/systems/custom_list.py``)."""

    @abstractmethod
    def custom_config(
        self,
        model: str,
        scenario: str,
        member: str,
        class_base: str,
        classes: Sequence[tuple[WorkloadSetting, ResolvedConfig]],
        version: HarnessVersion,
    ) -> GeneratedFile:
        """One scenario's config file for ``KnownSystem.<member>`` in the round's format."""

    #: Where a custom system is registered (relative to closed/NVIDIA; v5.0: ``custom_list.json``).
    custom_list_path: ClassVar[str] = CUSTOM_LIST
    #: Whether a config file's folders may be created (v5.1 keeps one folder per system; older rounds' exist).
    creates_config_dirs: ClassVar[bool] = False
    #: How the harness is made to run a machine it does not know (``system_support`` of ``round.json``): the system
    #: support the interpreter runs for :class:`~workload.mlperf.ops.IdentifySystem`.
    system_support: ClassVar[SystemSupportKind] = "registered"

    def generated_files(self) -> GeneratedFiles | None:
        """This round as the system support of generated files needs it (``"generated files"`` rounds), else None."""
        return None

    def merge_custom_list(self, existing: str | None, block: str) -> str:
        """The custom-system registry file with our block put in (everything else kept)."""
        return merge_custom_list(existing, block)

    def refused_output(self, output: str) -> str | None:
        """Why a make target's output shows a run that must not count (v5.1: the minimal-config fallback), or None."""
        return None

    def quick_flag(self, version: HarnessVersion) -> str:
        """The harness's short-run flag for the checkout's ``version`` (``quick_flag`` of ``round.json``, or the one
        ``quick_flag_up_to`` gives the nearest VERSION at or above it)."""
        up_to = sorted((HarnessVersion.parse(v), flag) for v, flag in self.spec.data.quick_flag_up_to.items())
        return next((flag for last, flag in up_to if version <= last), self.spec.data.quick_flag)

    def extra_variables(self) -> Mapping[str, str]:
        """``make`` variables every harness target gets (``make_variables`` of ``round.json``: ``EXTERNAL_USER=1``)."""
        return dict(self.spec.data.make_variables)
