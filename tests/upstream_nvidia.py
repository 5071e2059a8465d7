"""Test support: NVIDIA's REAL harness sources (``../shared/upstream``), staged and driven for conformance tests.

Contract:
* :func:`upstream_root` is the folder holding ``nvidia-harness/<round>/closed/NVIDIA`` and ``nvmitten/src``: the
  environment variable ``WORKLOAD_UPSTREAM`` or, by default, ``<repository root>/../shared/upstream`` (CI clones the
  project beside ``shared/``; a user with clones of the public repositories points the variable at them).
* :func:`require_round` returns a round's ``closed/NVIDIA``; when the tree is absent the test is skipped with the
  path it looked at, except under ``CI=true``, where an absent tree FAILS the test (CI always has it: a skip there
  would count as a pass that checked nothing).
* :func:`stage_round` copies a round's ``closed/NVIDIA`` into a test's temporary folder (the upstream tree stays
  read-only and byte-exact; nothing is copied into the repository) and creates what NVIDIA's README has the user
  create before the harness imports (``code/common/paths.py`` refuses to import without it): ``build/`` (v5.1) or
  ``3rdparty/trtllm`` and ``3rdparty/mlc-inference`` (v6.0; the TensorRT-LLM clone stays empty: GPU software), and
  the round's clone of MLCommons' checker as ``tests/upstream_standins/pinned_checker.py`` (the REAL checker file of
  ``mlcommons-inference/`` cut to the round, see its docstring).
* :func:`run_in_round` is the one way a test runs a script in NVIDIA's environment: a subprocess in the staged tree
  with ``PYTHONPATH=<nvmitten>/src:<staged tree>:tests/upstream_standins`` (the stand-ins, loaded by the script's
  ``import upstream_standins_boot`` or by ``sitecustomize``), ``SYSTEM_NAME=<system id>`` when given, the GPUs the
  CUDA stand-in reports (``STANDIN_CUDA_GPUS``, see :func:`cuda_gpus`), and the round's checker file; its bytecode
  goes to :func:`bytecode_cache`, never beside the sources.
* :func:`stage_v41_harness` writes into a staged v4.1 tree the stand-ins of what NVIDIA's v4.1 files we hold lack
  for a whole run (``Makefile``, ``code/main.py``, ``code/common/cuda_python.py``, ``scripts/print_harness_result.py``:
  tests/upstream_standins/v4.1/UPSTREAM.md).
* :func:`resolve_configs` runs ``tests/upstream_nvidia_driver.py`` that way: NVIDIA's own code detects the system,
  finds and loads the config files, validates their keys and resolves the values (see the driver's docstring for
  what is NVIDIA's code and what is a stand-in). Returns the driver's JSON answer. ``tests/nvidia_v60_values.py``
  (what NVIDIA's ConfigurationIndex resolves per file) and ``tests/nvidia_engine_config.py`` (the generate_engines
  config step) are run the same way by their tests.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests import upstream

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The environment variable naming the upstream folder (default: ``<repository root>/../shared/upstream``).
UPSTREAM_ENV = upstream.UPSTREAM_ENV
DRIVER = Path(__file__).resolve().parent / "upstream_nvidia_driver.py"
#: The driver of NVIDIA's v4.1 config registry (``configs/configuration.py``), which v5.x replaced.
DRIVER_V41 = Path(__file__).resolve().parent / "upstream_nvidia_driver_v41.py"
STANDINS = Path(__file__).resolve().parent / "upstream_standins"
#: Folders NVIDIA's README has the user create in ``closed/NVIDIA`` before anything runs, per round
#: (``code/common/paths.py`` ``_verify_path``: v5.1 ``BUILD_DIR``; v6.0 also ``3rdparty``).
ROUND_FOLDERS: dict[str, tuple[str, ...]] = {
    "v4.1": ("build",),
    "v5.1": ("build",),
    "v6.0": ("build", "3rdparty/trtllm"),
}
#: Where each round's code imports MLCommons' checker from (relative to closed/NVIDIA), and the real checker file
#: (relative to ``mlcommons-inference/tools/submission``) it is: v5.1 ``Makefile.build`` ``clone_loadgen`` into
#: ``build/inference``; v6.0 README ``git clone ... 3rdparty/mlc-inference``.
CHECKER: dict[str, tuple[str, str]] = {
    "v5.1": ("build/inference/tools/submission/submission_checker.py", "submission_checker_old.py"),
    "v6.0": (
        "3rdparty/mlc-inference/tools/submission/submission_checker/constants.py",
        "submission_checker/constants.py",
    ),
}
#: A driver run is NVIDIA's imports plus a few config files: bounded so a hang fails instead of blocking the suite.
DRIVER_TIMEOUT_S = 300


def upstream_root() -> Path:
    """Where the real upstream sources are (see the module docstring)."""
    return upstream.root()


def _absent(what: Path) -> None:
    upstream.unavailable(
        f"NVIDIA's upstream sources are not at {what} (set {UPSTREAM_ENV} to the folder holding nvidia-harness/ "
        "and nvmitten/, see ../shared/upstream/README.md)"
    )


def require_round(round_name: str) -> Path:
    """``closed/NVIDIA`` of NVIDIA's ``round_name`` (``v5.1``) tree, and nvmitten beside it (skip/fail when absent)."""
    tree = upstream_root() / "nvidia-harness" / round_name / "closed" / "NVIDIA"
    if not (tree / "VERSION").is_file():
        _absent(tree)
    if round_name != "v4.1" and not (nvmitten_src() / "nvmitten" / "configurator").is_dir():
        _absent(nvmitten_src())
    return tree


def nvmitten_src() -> Path:
    """NVIDIA's nvmitten library (its ``src`` folder, put on ``PYTHONPATH``)."""
    return upstream_root() / "nvmitten" / "src"


def stage_round(round_name: str, into: Path, *, prepared: bool = True) -> Path:
    """A private copy of the round's ``closed/NVIDIA`` under ``into`` with the folders its README creates
    (``prepared=False``: the bare tree, as NVIDIA publishes it)."""
    tree = require_round(round_name)
    staged = into / round_name / "closed" / "NVIDIA"
    shutil.copytree(tree, staged)
    if not prepared:
        return staged
    for folder in ROUND_FOLDERS.get(round_name, ()):
        (staged / folder).mkdir(parents=True, exist_ok=True)
    place_checker(staged)
    return staged


def place_checker(staged: Path) -> None:
    """The round's clone of MLCommons' checker, stood in, in a staged tree (v5.1 ``make clone_loadgen``'s
    ``build/inference``; v6.0 the README's ``3rdparty/mlc-inference``): ``pinned_checker.py`` where NVIDIA's code
    imports it from (see :data:`CHECKER`)."""
    round_name = staged.parent.parent.name
    if round_name in CHECKER:
        target = staged / CHECKER[round_name][0]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(STANDINS / "pinned_checker.py", target)


def checker_file(round_name: str) -> Path:
    """MLCommons' real checker file the round's code imports (see :data:`CHECKER`)."""
    return upstream_root() / "mlcommons-inference" / "tools" / "submission" / CHECKER[round_name][1]


def write_files(staged: Path, files: Sequence[tuple[str, str]]) -> None:
    """Write generated files (path relative to closed/NVIDIA, text) into a staged tree."""
    for rel, text in files:
        target = staged / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def cuda_gpus(name: str, total_mem: int, sm: tuple[int, int], count: int) -> list[dict[str, Any]]:
    """``count`` identical GPUs as the CUDA stand-in reports them (``STANDIN_CUDA_GPUS``: nvidia-smi name, bytes of
    memory as ``cuDeviceTotalMem`` gives them, compute capability)."""
    return [{"name": name, "total_mem": total_mem, "sm": list(sm), "integrated": False}] * count


@functools.cache
def bytecode_cache() -> Path:
    """The folder of the bytecode of every process :func:`run_in_round` starts in this test process
    (``PYTHONPYCACHEPREFIX``): nvmitten, the stand-ins and the libraries NVIDIA's code imports are compiled once per
    test worker, not once per process, and nothing is written into the upstream tree or a staged copy. Removed when
    the test process exits."""
    folder = Path(tempfile.mkdtemp(prefix="workload-test-pycache-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def run_in_round(
    staged: Path,
    argv: Sequence[str],
    *,
    system_id: str | None = None,
    gpus: Sequence[dict[str, Any]] = (),
    stdin: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the staged tree in NVIDIA's environment (see the module docstring; ``python3`` is this
    test's interpreter, which has nvmitten's pure-Python dependencies; ``extra_env`` last, e.g. a ``PATH`` with a
    command stood in), bounded by :data:`DRIVER_TIMEOUT_S`: the finished process, for the caller to judge."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(staged),
        "PYTHONPATH": os.pathsep.join([str(nvmitten_src()), str(staged), str(STANDINS)]),
        "PYTHONPYCACHEPREFIX": str(bytecode_cache()),
        "GIT_PYTHON_REFRESH": "quiet",
        "STANDIN_CUDA_GPUS": json.dumps(list(gpus)),
    }
    if system_id is not None:
        env["SYSTEM_NAME"] = system_id
    round_name = staged.parent.parent.name
    if round_name in CHECKER:
        env |= {"WORKLOAD_CHECKER_FILE": str(checker_file(round_name)), "WORKLOAD_CHECKER_ROUND": round_name}
    env |= extra_env or {}
    return subprocess.run(
        [sys.executable, *argv[1:]] if argv[0] == "python3" else list(argv),
        input=stdin,
        capture_output=True,
        text=True,
        cwd=staged,
        env=env,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )


def resolve_configs(staged: Path, system_id: str, runs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """NVIDIA's code run with each of ``runs`` (the flags of one ``code/main.py`` call, make's RUN_ARGS) for
    ``system_id`` in ``staged``: the driver's JSON answer (``system``; ``results``: one entry per benchmark and
    scenario of each run, in order)."""
    request = json.dumps({"runs": [list(flags) for flags in runs]})
    proc = run_in_round(staged, ["python3", str(DRIVER)], system_id=system_id, stdin=request)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise AssertionError(
            f"NVIDIA's code failed for {system_id} (exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
        )
    answer: dict[str, Any] = json.loads(lines[-1])
    answer["log"] = proc.stderr
    return answer


def leaves(tree: Any) -> list[Any]:
    """Every leaf value of a resolved config (nested flag dicts included), e.g. to assert no ``fp4`` anywhere."""
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in leaves(value)]
    return [tree]


#: ``git`` with only what reaches the network stood in (the network is out of reach in tests): ``clone --depth 1
#: URL DEST`` makes DEST a repository holding the URL in ``.git/standin-origin``; ``-C DEST fetch --depth 1 URL
#: COMMIT`` (a pinned clone, after a real ``git init``) writes ``URL COMMIT`` there, and its ``checkout`` of
#: FETCH_HEAD does nothing; anything else is the real git (GitPython runs ``git version`` when NVIDIA's code imports
#: it). tests/test_mlperf_rounds_v6.py runs the pinned clone with the real git against a local repository.
GIT_STANDIN = """#!/bin/sh
if [ "$1" = "clone" ]; then mkdir -p "$5/.git" && echo "$4" > "$5/.git/standin-origin"; exit $?; fi
if [ "$3" = "fetch" ]; then echo "$6 $7" > "$2/.git/standin-origin"; exit $?; fi
if [ "$3" = "checkout" ]; then exit 0; fi
exec /usr/bin/git "$@"
"""


def offline_path(tmp: Path) -> dict[str, str]:
    """The environment a planned command gets in place of the network: :data:`GIT_STANDIN` first on ``PATH``
    (written under ``tmp``), ``HOME`` and NVIDIA's scratch path under ``tmp``."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "git").write_text(GIT_STANDIN)
    (bin_dir / "git").chmod(0o755)
    (tmp / "scratch").mkdir(exist_ok=True)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp), "MLPERF_SCRATCH_PATH": str(tmp / "scratch")}


#: NVIDIA's benchmark modules (``code/__init__.py`` ``G_BENCHMARK_MODULES``:
#: ``ModuleLocation("code.<folder>.tensorrt")``)
_BENCHMARK_MODULE = re.compile(r'ModuleLocation\("code\.([A-Za-z0-9_.-]+?)\.tensorrt"\)')
#: ``code/<folder>/tensorrt/`` of each benchmark, stood in (GPU work and downloads; not in the published trees we hold):
#: the module main.py loads its ops from, and the setup scripts of ``Makefile.data`` (``download_model``,
#: ``download_data``: ``bash code/<folder>/tensorrt/download_*.sh``; ``preprocess_data``: ``python3 -m
#: code.<folder>.tensorrt.preprocess_data --data_dir=... --preprocessed_data_dir=...``).
_BENCHMARK_FILES = {
    "__init__.py": '"""Stand-in of NVIDIA\'s benchmark module (tests/upstream_standins/standin_gpu_work.py)."""\n'
    "import code.ops  # noqa: F401  first, as in main.py: it imports standin_gpu_work, which imports code.llmlib\n"
    "from standin_gpu_work import *  # noqa: F403\n"
    "from standin_gpu_work import HF_MODEL_REPO, __getattr__  # noqa: F401\n",
    "download_model.sh": 'mkdir -p "$MLPERF_SCRATCH_PATH/models/{folder}" && '
    'echo "download_model {folder}" >> "$MLPERF_SCRATCH_PATH/standin_setup.log"\n',
    "download_data.sh": 'mkdir -p "$MLPERF_SCRATCH_PATH/data/{folder}" && '
    'echo "download_data {folder}" >> "$MLPERF_SCRATCH_PATH/standin_setup.log"\n',
    "preprocess_data.py": "import os, sys\n"
    'with open(os.path.join(os.environ["MLPERF_SCRATCH_PATH"], "standin_setup.log"), "a") as log:\n'
    '    log.write("preprocess_data {folder} " + " ".join(sys.argv[1:]) + "\\n")\n',
}
#: ``code.ops`` (what NVIDIA's code/main.py takes from it)
_OPS = (
    '"""Stand-in of NVIDIA\'s code.ops (tests/upstream_standins/standin_gpu_work.py)."""\n'
    "from standin_gpu_work import (  # noqa: F401\n"
    "    MPS, BenchmarkHarnessOp, CalibrateEngineOp, EngineBuilderOp, LoadgenConfFilesOp, ResultSummaryOp,\n)\n"
)
#: NVIDIA's ``scripts/print_harness_result.py`` (``make display_results`` after ``run_harness``; not in the published
#: trees we hold): prints the summaries under ``--log_dir``.
_PRINT_RESULT = """import argparse, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--log_dir")
for summary in sorted(pathlib.Path(parser.parse_known_args()[0].log_dir).rglob("mlperf_log_summary.txt")):
    print(summary.parent, *(l for l in summary.read_text().splitlines() if l.startswith("Result is")))
"""
#: ``make`` reads ``GNUmakefile`` before ``Makefile``: NVIDIA's Makefile with the one recipe that needs the GPU
#: toolchain replaced (v5.1 ``Makefile.build`` ``build``: TensorRT plugins, LoadGen and TensorRT-LLM compiled
#: against CUDA); its prerequisites (``clone_loadgen``, ``link_dirs``) stay NVIDIA's.
_GNUMAKEFILE = """include Makefile
build:
\t@echo "build (stand-in: NVIDIA's plugins and LoadGen compile against CUDA and TensorRT)" \\
\t\t>> $(MLPERF_SCRATCH_PATH)/standin_setup.log
"""


#: The stand-ins of the v4.1 files a whole run needs that are not among the v4.1 files we hold (nor, except
#: ``code/main.py``, in the public index): (stand-in, where it goes in closed/NVIDIA). The Makefile and the result
#: printer are the stand-in harness's (tests/fixtures/harness/UPSTREAM.md), the others tests/upstream_standins/v4.1's
#: (its UPSTREAM.md).
_V41_STANDINS = (
    (REPO_ROOT / "tests" / "fixtures" / "harness" / "tree" / "closed" / "NVIDIA" / "Makefile", "Makefile"),
    (
        REPO_ROOT
        / "tests"
        / "fixtures"
        / "harness"
        / "tree"
        / "closed"
        / "NVIDIA"
        / "scripts"
        / "print_harness_result.py",
        "scripts/print_harness_result.py",
    ),
    (STANDINS / "v4.1" / "main.py", "code/main.py"),
    (STANDINS / "v4.1" / "cuda_python.py", "code/common/cuda_python.py"),
)


def stage_v41_harness(staged: Path) -> list[str]:
    """Write the stand-ins of :data:`_V41_STANDINS` into a staged v4.1 tree (a file NVIDIA's tree has is replaced:
    the real ``code/main.py`` runs TensorRT); returns the paths written (relative to closed/NVIDIA)."""
    for source, rel in _V41_STANDINS:
        target = staged / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return [rel for _, rel in _V41_STANDINS]


def stage_gpu_work(staged: Path) -> list[str]:
    """Write the stand-ins of a whole run's GPU and network work into a staged tree (see :data:`_BENCHMARK_FILES`,
    ``code/ops`` from ``standin_gpu_work.py``, :data:`_PRINT_RESULT`, :data:`_GNUMAKEFILE` where the round's
    Makefiles have a ``build`` target); returns the benchmark folders stood in. Needs ``STANDIN_GPU_WORK=1`` where
    NVIDIA's code runs (the boot module then leaves ``code.ops`` to the tree)."""
    folders = sorted(set(_BENCHMARK_MODULE.findall((staged / "code" / "__init__.py").read_text())))
    for folder in folders:
        for name, text in _BENCHMARK_FILES.items():
            target = staged / "code" / folder / "tensorrt" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text.replace("{folder}", folder))
    (staged / "code" / "ops").mkdir(exist_ok=True)
    (staged / "code" / "ops" / "__init__.py").write_text(_OPS)
    # the submodules NVIDIA's code/llmlib/__init__.py imports (v5.1 lines 29-30, v6.0 lines 48-49)
    (staged / "code" / "ops" / "harness.py").write_text("from standin_gpu_ops import PyHarnessOp  # noqa: F401\n")
    (staged / "code" / "ops" / "loadgen.py").write_text(
        "from standin_gpu_ops import LoadgenConfFilesOp  # noqa: F401\n"
    )
    (staged / "scripts" / "print_harness_result.py").write_text(_PRINT_RESULT)
    if (staged / "Makefile.build").is_file() and re.search(r"^build:", (staged / "Makefile.build").read_text(), re.M):
        (staged / "GNUmakefile").write_text(_GNUMAKEFILE)
    return folders
