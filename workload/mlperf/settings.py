"""The MLPerf action's parameters, their normalised form (:class:`Settings`) and the host facts it plans from.

Who calls what: profile loading validates :class:`MLPerfParameters` and calls :func:`settings_of`
(through ``MLPerfExecutor.check_parameters``); the action gathers :class:`MLPerfFacts` read-only on
the host and hands both to the planner (:mod:`workload.mlperf.planner`) and the round adapters
(:mod:`workload.mlperf.rounds`). Nothing here touches a host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from workload.mlperf.catalog import (
    LATER_SCENARIOS,
    TEST_MODES,
    accuracy_key,
    accuracy_target,
    benchmark_full,
    canonical_scenario,
    check_config_version,
    model_info,
)
from workload.mlperf.harness import HarnessVersion, LoadGenOverride, parse_override, parse_override_list
from workload.mlperf.system import HostSystem
from workload.steps import StepParameters, split_list

#: The host-state key under which finished setup stages and builds are marked.
STATE_KEY = "mlperf"


class MLPerfParameters(StepParameters):
    """Parameters (VirtualClient's names first, then this runner's additions)."""

    #: VirtualClient's MLPerf v2.0-era profiles (results v2.0: bert, rnnt, ssd-mobilenet, ssd-resnet34) gave
    #: every MLPerfExecutor the whole benchmark list as ``Benchmarks``, to set up all of them before the first
    #: run (microsoft/VirtualClient, PERF-GPU-MLPERF.json at 02776adf; its current form has no such parameter).
    RETIRED: ClassVar[dict[str, str]] = {
        "Benchmarks": "older VirtualClient releases set up every benchmark of this list before the first run; "
        "here each MLPerfExecutor sets up its own Model only, so it changes nothing (delete it to silence this)"
    }

    Model: str
    Username: str | None = None
    #: Accepted for VirtualClient profiles; the scratch disk is chosen by MountDisks (MLPERF_SCRATCH_PATH).
    DiskFilter: str | None = None
    RequireCustomSystemSupport: bool = False
    #: LoadGen scenarios (default: every scenario the harness has configs for, per model).
    Scenarios: str | None = None
    #: ``--config_ver`` values, comma separated (default, high_accuracy, triton, maxq, ...).
    ConfigVersion: str = "default"
    TestModes: str = "PerformanceOnly,AccuracyOnly"
    #: The harness's real short run: ``--test_run`` (v4.1+) or ``--fast`` (v4.0 and older).
    Quick: bool = False
    PackageName: str = "mlperf"
    #: The results repository clone (or its closed/NVIDIA folder); default: what GitRepoClone exported.
    RepoPath: str | None = None
    ScratchPath: str | None = None
    #: Leave out the free-space check before setup (:mod:`workload.mlperf.space_check`): for a resumed stage the
    #: check counts in full, or a scratch disk the user knows has room. The plan then notes the space needed.
    SkipFreeSpaceCheck: bool = False
    #: ``bert.Server.target_qps=100;bert.Offline.min_duration=60000`` (also as parameters named like the key):
    #: passed to the harness as RUN_ARGS config fields (``--server_target_qps``, ``--min_duration``...).
    LoadGenOverrides: str | None = None
    #: Run this image as it is instead of building the repository's recipe.
    ContainerImage: str | None = None
    BuildImage: bool = True
    #: BASE_IMAGE build argument of docker/release/Dockerfile (default: the Dockerfile's own).
    BaseImage: str | None = None
    UseGpus: bool = True
    #: ``--ulimit memlock=-1`` like launch_docker (tests turn it off: their nested dockerd may not raise it).
    UnlimitedMemlock: bool = True
    #: The Docker daemon: ``unix:///path`` (a socket on the host; over its SSH connection for an SSH
    #: host), ``tcp://...``; default: the host's default socket.
    DockerBaseUrl: str | None = None
    #: Test-only: a JSON HostSystem instead of reading nvidia-smi/lscpu (for machines without a GPU).
    SystemDescription: str | None = None
    #: The container's name, as NVIDIA's ``DOCKER_NAME`` (overridable on its make command line);
    #: default ``mlperf-inference-<user>-<arch>`` (VirtualClient's fixed name, no ``$RANDOM`` suffix).
    #: ``{host}`` in it (and in RepoPath, ScratchPath) is the host's name in the run (a Slurm node's
    #: name): for nodes that share one file system or one Docker daemon (:func:`for_host`).
    DockerName: str | None = None
    #: The harness round adapter (``v4.1``...); default: recognised from the checkout (VERSION, layout).
    HarnessRound: str | None = None
    #: Port of the LLM server rounds from v5.1 run LLM benchmarks against (NVIDIA's default 30000), on 127.0.0.1
    #: (the container shares the host's network).
    LLMServerPort: int = Field(default=30000, ge=1, le=65535)
    #: v6.1: who sends the queries: NVIDIA's harness (``harness``: make run_harness, LoadGen) or MLCommons' endpoints
    #: client (``endpoints``: ``inference-endpoint benchmark from-config``; Offline, Server, Interactive) against the
    #: same server.
    Client: Literal["harness", "endpoints"] = "harness"
    #: v6.1 ``Client=endpoints``: the Poisson ``target_qps`` of a Server / Interactive run (queries/s, > 0, as the
    #: client's ``LoadPattern.target_qps``); default NVIDIA's ``server_target_qps`` for this GPU in gpuconfigs/v6.1
    #: (:mod:`workload.mlperf.endpoint_target`). NVIDIA's harness takes LoadGenOverrides ``<model>.Server.target_qps``.
    ServerTargetQps: float | None = Field(default=None, gt=0)
    InteractiveTargetQps: float | None = Field(default=None, gt=0)

    @field_validator("Model")
    @classmethod
    def _model(cls, value: str) -> str:
        return model_info(value).name

    @field_validator("HarnessRound")
    @classmethod
    def _round(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        from workload.mlperf.round_spec import spec_named

        spec_named(value)  # ValueError naming the known rounds (their data files: no adapter imported)
        return value.strip()

    @field_validator("DockerName")
    @classmethod
    def _docker_name(cls, value: str | None) -> str | None:
        value = (value or "").strip() or None
        # Docker's own rule for container names ([a-zA-Z0-9][a-zA-Z0-9_.-]+).
        if value is not None and not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", value.replace(HOST_PLACEHOLDER, "h")):
            raise ValueError(f"{value!r} is not a container name (letters, digits, _ . -; first a letter or digit)")
        return value

    @field_validator("DockerBaseUrl")
    @classmethod
    def _docker_url(cls, value: str | None) -> str | None:
        if value and value.strip().startswith("ssh://"):
            raise ValueError(
                "ssh:// is not used: the docker SDK would open its own SSH connection, ignoring the host's key, "
                "known_hosts and sudo settings; run the step on that host (--host ssh://...) and the daemon is "
                "reached over the host's own connection (give unix:///path for a socket other than the default)"
            )
        return (value.strip() or None) if value is not None else None


@dataclass(frozen=True)
class Settings:
    """Validated, normalised parameters."""

    model: str
    scenarios: tuple[str, ...]
    config_versions: tuple[str, ...]
    test_modes: tuple[str, ...]
    #: Every override given; those for another model are ignored (:meth:`ignored_overrides`).
    overrides: tuple[LoadGenOverride, ...]

    @property
    def config_version(self) -> str:
        """The ``--config_ver`` value."""
        return ",".join(self.config_versions)

    @property
    def accuracies(self) -> tuple[str, ...]:
        """The accuracy targets of the config versions (``k_99``, ``k_99_9`` for ``high_accuracy``), in order."""
        return tuple(dict.fromkeys(accuracy_key(v) for v in self.config_versions))

    @property
    def targets(self) -> tuple[str, ...]:
        """The ``--accuracy_target`` values of the config versions (``0.99``; ``0.999`` for ``high_accuracy``), in
        order: one harness run each from v5.1 on."""
        return tuple(dict.fromkeys(accuracy_target(v) for v in self.config_versions))

    def benchmark_at(self, target: str) -> str:
        """The result benchmark of an accuracy target (``llama2-70b-99.9`` for ``0.999``; the plain name where the
        model has one benchmark whatever the target)."""
        return benchmark_full(self.model, "high_accuracy" if target == "0.999" else "default")

    @property
    def benchmarks(self) -> tuple[str, ...]:
        """The result benchmarks this run must produce: ``bert-99``, ``bert-99.9``..."""
        return tuple(dict.fromkeys(benchmark_full(self.model, cv) for cv in self.config_versions))

    def versions_of(self, benchmark: str) -> tuple[str, ...]:
        """The config versions whose results are ``benchmark``."""
        return tuple(cv for cv in self.config_versions if benchmark_full(self.model, cv) == benchmark)

    def ignored_overrides(self) -> list[LoadGenOverride]:
        """Overrides no scenario of this run reads (another model, or a scenario not run)."""
        return [o for o in self.overrides if not any(o.applies_to(self.model, s) for s in self.scenarios)]


def settings_of(params: MLPerfParameters) -> Settings:
    """Normalise parameters; ValueError ``"Param: problem"`` for anything wrong (used at profile load)."""
    info = model_info(params.Model)
    scenarios: list[str] = []
    for item in split_list(params.Scenarios) or list(info.scenarios):
        try:
            scenario = canonical_scenario(item)
        except ValueError as exc:
            raise ValueError(f"Scenarios: {exc}") from None
        if scenario not in info.scenarios and scenario not in LATER_SCENARIOS.get(info.name, ()):
            raise ValueError(
                f"Scenarios: the harness has no {scenario} config for {info.name} (has: {', '.join(info.scenarios)})"
            )
        if scenario not in scenarios:
            scenarios.append(scenario)
    try:
        versions = tuple(check_config_version(v) for v in split_list(params.ConfigVersion) or ["default"])
    except ValueError as exc:
        raise ValueError(f"ConfigVersion: {exc}") from None
    modes = []
    for mode in split_list(params.TestModes):
        canonical = {m.lower(): m for m in TEST_MODES}.get(mode.lower())
        if canonical is None:
            raise ValueError(f"TestModes: unknown test mode {mode!r} (known: {', '.join(TEST_MODES)})")
        modes.append(canonical)
    if not modes:
        raise ValueError("TestModes: give at least one test mode")
    try:
        overrides = list(parse_override_list(params.LoadGenOverrides or ""))
    except ValueError as exc:
        raise ValueError(f"LoadGenOverrides: {exc}") from None
    for key, value in (params.model_extra or {}).items():
        if key.count(".") == 2:
            overrides.append(parse_override(key, value))
    return Settings(info.name, tuple(scenarios), versions, tuple(modes), tuple(overrides))


@dataclass(frozen=True)
class UserFacts:
    name: str
    uid: int
    gid: int
    group: str
    home: str


@dataclass
class MLPerfFacts:
    """What the planner needs to know about the host (all read-only)."""

    nvidia_dir: str | None
    nvidia_dir_exists: bool
    version: HarnessVersion | None
    commit: str | None
    scratch_path: str | None
    user: UserFacts | None
    machine: str
    done: dict[str, Any] = field(default_factory=dict)
    build_exists: bool = False
    container_status: str | None = None
    docker_problem: str | None = None
    notes: list[str] = field(default_factory=list)
    #: The host's GPUs (SystemDescription or read), when a plan needs them (the endpoints client's target QPS).
    system: HostSystem | None = None
    #: Which round-marker paths exist in the checkout (:func:`workload.mlperf.rounds.markers`).
    present: frozenset[str] = frozenset()
    #: The host's name in the run (what ``{host}`` in DockerName stands for).
    host_name: str = ""


#: Stands for the host's name in DockerName, RepoPath and ScratchPath.
HOST_PLACEHOLDER = "{host}"


def for_host(value: str | None, host_name: str) -> str | None:
    """``value`` with ``{host}`` replaced by ``host_name``: distinct names and paths per node where nodes
    share a file system (a harness checkout on shared storage) or a Docker daemon."""
    return value.replace(HOST_PLACEHOLDER, host_name) if value else value


def setup_key(scratch: str, model: str, stage: str) -> str:
    """Host-state key of a finished setup stage: the data lives in the scratch path, per model."""
    return f"setup:{scratch}:{model}:{stage}"


def tree_key(nvidia_dir: str, commit: str | None, folder: str) -> str:
    """Host-state key of a prepared harness folder (``build``, ``3rdparty/trtllm``): once per harness commit."""
    return f"tree:{nvidia_dir}@{commit or 'unknown'}:{folder}"


def build_key(nvidia_dir: str, commit: str | None) -> str:
    """Host-state key of a finished ``make build``: once per harness commit."""
    return f"build:{nvidia_dir}@{commit or 'unknown'}"
