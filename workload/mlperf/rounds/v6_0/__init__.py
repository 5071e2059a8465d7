"""NVIDIA's v6.0 harness (``closed/NVIDIA`` of mlcommons/inference_results_v6.0).

What changed from v5.1, and the upstream file each behaviour comes from (``tests/fixtures/harness/rounds/v6.0/
UPSTREAM.md`` names repository and commit):
* no one-off ``make build``: v6.0's Makefiles have no ``build`` target (``Makefile.build`` has ``link_dirs``,
  ``build_harness``, ``build_trt_llm``...; the README's prebuilt container needs none of them), and every target the
  runner calls depends on ``link_dirs`` itself (``Makefile`` ``generate_engines: link_dirs``, ``run_harness:
  link_dirs``; ``Makefile.data`` ``download_model: link_dirs``...): the setup is the stages only
  (:attr:`V6_0Round.build_target` None);
* before anything imports NVIDIA's code, the README's clones (its "Setting Up 3rdparty Dependencies": ``git clone
  --depth 1`` of TensorRT-LLM into ``3rdparty/trtllm`` and of mlcommons/inference into ``3rdparty/mlc-inference``):
  ``code/common/paths.py`` refuses to import without both (``_verify_path(SUBMODULES_DIR / "trtllm")``,
  ``MLCOMMONS_INF_REPO``), so the system check could not run. :meth:`V6_0Round.tree_ops` makes them, after a free
  space check of the checkout's disk, each resumable (a clone is renamed into place when complete; one cut off
  part-way is removed and made again); mlcommons/inference pinned to a commit whose checker still has v6.0 as its
  newest round (:data:`MLC_INFERENCE_COMMIT`);
* the image is NVIDIA's prebuilt one when ``ContainerImage`` names it (pulled where the daemon lacks it; a pull
  that cannot reach the registry fails naming the image), else built from the checkout's recipe as
  ``make prebuild BENCHMARK=<benchmark>`` does;
* the benchmarks: llama2-70b, llama3.1-8b, llama3.1-405b, gpt-oss-120b, deepseek-r1 (LLMs, served by
  ``trtllm-serve``), whisper ...; mixtral-8x7b is gone (the MAKE Targets documentation's "Available Benchmarks");
* config files ``configs/<SYSTEM>/<Scenario>/<benchmark with _>.py`` carry ``ACCURACY_OVERRIDES`` and
  ``COMPLIANCE_OVERRIDES`` beside ``EXPORTS``; the accuracy target is ``--accuracy_target``;
* the values of a custom system come from ``gpuconfigs/v6.0`` (:func:`.systems.v60_files`):
  NVIDIA tunes B200, B300, GB200 and GB300; a Hopper GPU is refused naming v5.0 or, with
  ``RequireCustomSystemSupport=true``, runs the nearest GPU's values marked untuned.
Everything else (SYSTEM_NAME, the minimal-config fallback refused, one server per scenario) is v5.1's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.ops import Op, PrepareTree
from workload.mlperf.round_spec import RoundSpec, read_spec
from workload.mlperf.rounds.base import GeneratedFiles, PlanInputs, tree_state
from workload.mlperf.rounds.common.accuracy_target_runs import AccuracyTargetRuns
from workload.mlperf.rounds.common.detection import DETECTION_ARGV, is_unregistered, system_answer
from workload.mlperf.rounds.common.make_harness import HarnessSystemCheck, ImageFromRecipe, MakeSetup
from workload.mlperf.rounds.common.results import LogDirResults
from workload.mlperf.rounds.common.system_configs import PerSystemConfigs
from workload.mlperf.server_urls import ServerUrls
from workload.mlperf.space_check import CheckFreeSpace, StageNeed
from workload.mlperf.space_table import GIB
from workload.mlperf.system import HostSystem
from workload.mlperf.system_files import SystemFiles

from .configgen import v60_config_path
from .systems import v60_files

#: The commit of mlcommons/inference the ``3rdparty/mlc-inference`` clone checks out. The README clones the default
#: branch's newest commit, but v6.0's ``code/common/mlcommons/loadgen.py`` (lines 43-53) reads the checker's
#: ``MODEL_CONFIG`` of its newest round and looks up v6.0's benchmarks in it (line 74: ``llama3.1-405b``): once the
#: checker moved on to v6.1 (which has no ``llama3.1-405b``) the harness stops with a KeyError at import. At this
#: commit ``tools/submission/submission_checker/constants.py`` has v6.0 as its newest round, with every v6.0 LLM
#: benchmark (llama2-70b-99/99.9, llama3.1-8b, llama3.1-405b, deepseek-r1, gpt-oss-120b) in
#: ``performance-sample-count`` (read through the search index of public repositories, mlcommons/inference).
MLC_INFERENCE_COMMIT = "9e3d1054ec143c87c06a0a305f6eca4a37fe662e"
#: The README's clones (closed/NVIDIA folder, repository, commit): ``git clone --depth 1`` of the default branch as it
#: says (commit None), except MLCommons' repository, pinned to :data:`MLC_INFERENCE_COMMIT`.
CLONES: tuple[tuple[str, str, str | None], ...] = (
    ("3rdparty/trtllm", "https://github.com/NVIDIA/TensorRT-LLM.git", None),
    ("3rdparty/mlc-inference", "https://github.com/mlcommons/inference.git", MLC_INFERENCE_COMMIT),
)
#: Room each clone needs on the checkout's disk: conservative estimates (no published size; shallow clones without
#: Git LFS objects), shown with ``~``.
CLONE_BYTES: dict[str, int] = {"3rdparty/trtllm": 4 * GIB, "3rdparty/mlc-inference": 2 * GIB}
#: v6.0's LLM benchmarks (``--core_type=trtllm_endpoint``: a trtllm-serve server beside the harness).
LLM_BENCHMARKS = ("llama2-70b", "llama3.1-8b", "llama3.1-405b", "gpt-oss-120b", "deepseek-r1")


class V6_0Round(HarnessSystemCheck, ImageFromRecipe, MakeSetup, AccuracyTargetRuns, PerSystemConfigs, LogDirResults):
    """v6.0: v5.1's strategies (``rounds/common/``) with a prebuilt image, the README's clones, v6.0's benchmarks
    and its custom system's files generated from gpuconfigs/v6.0."""

    spec: ClassVar[RoundSpec] = read_spec(__file__)

    system_id_argv: ClassVar[tuple[str, ...]] = DETECTION_ARGV
    registry: ClassVar[str | None] = "SYSTEM_NAME=WL_<SKU>x<count> with its own configs/<system>/ folder"
    nvidia_benchmark_names: ClassVar[bool] = True
    # v6.0's per-benchmark download scripts are not in our index: every stage is ``make <stage> BENCHMARKS=<b>``.
    served_benchmarks: ClassVar[tuple[str, ...]] = LLM_BENCHMARKS

    def image_tag(self, inputs: PlanInputs) -> str:
        # one image per benchmark: v6.0's prebuild builds the image of one BENCHMARK
        return f"mlperf-inference:{inputs.user_name}-{inputs.facts.machine}-{inputs.settings.model}"

    def tree_ops(self, inputs: PlanInputs) -> list[Op]:
        """The README's ``3rdparty/`` clones (see the module docstring), after the free-space check of the checkout's
        disk for those still to make (left out, with the clones, when ``SkipFreeSpaceCheck``)."""
        clones: list[PrepareTree] = []
        for folder, url, commit in CLONES:
            key, done = tree_state(inputs, folder)
            what = f"git clone --depth 1 {url}" + (f" at {commit}" if commit else "")
            why = f"{what}: v6.0 code/common/paths.py will not import without it (README)"
            clones.append(PrepareTree(inputs.container, folder, why, clone_argv(folder, url, commit), key, done=done))
        needs = tuple(StageNeed(f"clone {op.folder}", ".", CLONE_BYTES[op.folder], True) for op in clones if op.shown)
        if not needs or inputs.params.SkipFreeSpaceCheck:
            return list(clones)
        what = f"NVIDIA's {self.name} 3rdparty clones"
        disk = "the harness checkout's disk"
        check = CheckFreeSpace(inputs.nvidia_dir, what, self.name, needs, disk=disk, subject=what)
        return [check, *clones]

    # -- system support (workload.mlperf.system_support_files) --------------------------------------------------
    def system_answer(self, output: str) -> str | None:
        """The system id the check printed, or None when the harness does not know the machine."""
        answer = system_answer(output)
        return None if answer is None or is_unregistered(answer) or answer == "None" else answer

    def config_files(self, system_id: str, model: str, scenario: str) -> tuple[str, ...]:
        """The files (relative to closed/NVIDIA) the harness needs for one scenario of ``system_id``."""
        return (v60_config_path(system_id, scenario, model),)

    def generated_files(self) -> GeneratedFiles:
        return self

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
        """None: v6.0's server is not in its config files (one on LLMServerPort, :meth:`server_spec`)."""
        return None

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
        """The custom system's config files (``SYSTEM_NAME`` = their system id), from ``gpuconfigs/v6.0``."""
        return v60_files(
            system, load_table(harness_round="v6.0"), model, scenarios, accuracies, allow_untuned=allow_untuned
        )


def clone_argv(folder: str, url: str, commit: str | None = None) -> tuple[str, ...]:
    """A resumable shallow clone of ``url`` into ``<folder>``, run from closed/NVIDIA: ``git clone --depth 1`` of the
    default branch, or, given ``commit``, that commit alone (``git fetch --depth 1 <url> <commit>`` into a new
    repository, then checked out). The clone is made beside the folder (``<folder>.partial``) and renamed into place
    when complete, so an existing ``<folder>`` is a finished clone (or the user's own, kept); what a cut-off clone
    left in ``<folder>.partial`` is removed and the clone made again."""
    script = (
        'set -e; if [ -e "$1" ]; then exit 0; fi; mkdir -p "$(dirname "$1")"; rm -rf "$1.partial"; '
        'if [ -z "$3" ]; then git clone --depth 1 "$2" "$1.partial"; else git init -q "$1.partial"; '
        'git -C "$1.partial" fetch --depth 1 "$2" "$3"; git -C "$1.partial" checkout -q --detach FETCH_HEAD; fi; '
        'mv "$1.partial" "$1"'
    )
    return ("bash", "-c", script, "clone", folder, url, commit or "")


#: The adapter :func:`workload.mlperf.rounds.discover` finds in this folder.
ADAPTER = V6_0Round
