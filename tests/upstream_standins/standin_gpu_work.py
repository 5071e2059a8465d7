"""Stand-ins for the GPU work of NVIDIA's v5.1/v6.0 ``code/main.py`` pipeline: the engine build, the checkpoint
quantization and the benchmark run. Everything else of a ``make generate_engines`` / ``run_llm_server`` /
``run_harness`` is NVIDIA's published code (config loading, ``HarnessConfig``/``TrtllmEndpointConfig``, nvmitten's
``Pipeline``, and ``code/llmlib/launch_server.py`` ``RunTrtllmServeOp``, which launches ``trtllm-serve``: the
stand-in of that binary is ``bin/trtllm-serve`` beside this file).

Served only when ``STANDIN_GPU_WORK=1`` (tests/upstream_nvidia.py ``stage_gpu_work`` writes the modules that import this
one): NVIDIA's ``code.ops`` (``code/main.py`` ``import code.ops as Ops``, v5.1 line 54, v6.0 line 59; v5.1 lines
299-300, 340-343, 360 and 413, v6.0 lines 677-678, 724-727, 744 and 796 name ``MPS``, ``LoadgenConfFilesOp``,
``ResultSummaryOp``, ``CalibrateEngineOp``, ``EngineBuilderOp``, ``BenchmarkHarnessOp``) and the benchmark modules
``code/__init__.py`` ``G_BENCHMARK_MODULES`` loads (``code.<benchmark>.tensorrt``; ``ModuleLocation.load`` takes the op
classes the module has, ``code/main.py`` ``get_llm_*_ops`` the ones it names for ``--core_type``). Neither is in
NVIDIA's published trees we hold (``code/`` there is ``common``, ``fields``, ``llmlib``).

Every stand-in op appends one JSON line to ``$MLPERF_SCRATCH_PATH/standin_gpu_work.jsonl`` (what it was asked to
do, with the values NVIDIA's code resolved for it), for the test to judge.
"""

from __future__ import annotations

import code.common.constants as C
import code.fields.loadgen as loadgen_fields
import code.llmlib.fields as llm_fields
import os
import sys
import urllib.request
from code.common.workload import Workload
from code.llmlib.builder import HFQuantizerOp as _NvidiaHFQuantizerOp
from code.llmlib.builder import TRTLLMBuilderOp as _NvidiaTRTLLMBuilderOp
from pathlib import Path
from typing import Any

from nvmitten.configurator import autoconfigure, bind
from nvmitten.pipeline import Operation
from standin_gpu_ops import MPS, CalibrateEngineOp, LoadgenConfFilesOp, record

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fixtures" / "harness" / "rounds"))
import standin_loadgen  # LoadGen's file formats (tests/fixtures/harness/rounds/standin_loadgen.py)

__all__ = [
    "MPS",
    "BenchmarkHarnessOp",
    "CalibrateEngineOp",
    "EngineBuilderOp",
    "HFQuantizerOp",
    "LoadgenConfFilesOp",
    "ResultSummaryOp",
    "TrtllmExecutorBenchmarkHarnessOp",
    "TrtllmServeBenchmarkHarnessOp",
]


@autoconfigure
@bind(Workload.FIELD, "workload")
class HFQuantizerOp(_NvidiaHFQuantizerOp):
    """The checkpoint NVIDIA's ``HFQuantizerOp`` makes (``code/llmlib/builder.py``: quantized with ModelOpt on the
    GPU, or found at its output path): a folder under the scratch's models, which ``RunTrtllmServeOp`` checks
    (``assert Path(target_path).exists()``) and gives ``trtllm-serve`` as the model."""

    def __init__(self, *args: Any, workload: Workload | None = None, **kwargs: Any) -> None:
        assert workload is not None, "Workload is required"  # as NVIDIA's __init__
        self.wl = workload

    def run(self, scratch_space: Any, dependency_outputs: Any) -> dict[str, Any]:
        scratch = Path(os.environ["MLPERF_SCRATCH_PATH"])
        out = scratch / "models" / self.wl.benchmark.valstr / "standin-quantized-checkpoint"
        out.mkdir(parents=True, exist_ok=True)
        record("HFQuantizerOp", benchmark=self.wl.benchmark.valstr, scenario=self.wl.scenario.valstr, path=out)
        return {"quantized_checkpoint_path": out}


@autoconfigure
@bind(Workload.FIELD, "workload")
class EngineBuilderOp(_NvidiaTRTLLMBuilderOp):
    """The engine NVIDIA's ``TRTLLMBuilderOp`` builds with TensorRT-LLM (GPU work): an empty engine folder."""

    def __init__(self, *args: Any, workload: Workload | None = None, **kwargs: Any) -> None:
        self.wl = workload

    @classmethod
    def immediate_dependencies(cls) -> None:
        return None

    def run(self, scratch_space: Any, dependency_outputs: Any) -> dict[str, Any]:
        assert self.wl is not None
        out = Path(os.environ["MLPERF_SCRATCH_PATH"]) / "engines" / self.wl.benchmark.valstr / "standin-engine"
        out.mkdir(parents=True, exist_ok=True)
        record("EngineBuilderOp", benchmark=self.wl.benchmark.valstr, scenario=self.wl.scenario.valstr, path=out)
        return {"engine_dir": out}


HF_MODEL_REPO = {"standin/model": "main"}  # RunTrtllmServeOp's tokenizer name with an engine (cpp backend)

#: LoadGen's ``target_qps``/latency setting per scenario, as NVIDIA's files name it (``code/fields/loadgen.py``).
_TARGET = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "Interactive": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
}


#: What the reference evaluation script prints for the reference model, per benchmark (the values MLCommons' checker
#: derives its targets from: submission_checker/constants.py ``ACCURACY_TARGET``, e.g. ``"llama2-70b-99": ("ROUGE1",
#: 44.4312 * 0.99, ...)``; read back with its ``ACC_PATTERN``, e.g. ``.*'rouge1':\\s+'?([\\d.]+)'?.*``).
REFERENCE_ACCURACY: dict[str, dict[str, float]] = {
    "llama2-70b": {"rouge1": 44.4312, "rouge2": 22.0352, "rougeL": 28.6162, "tokens_per_sample": 294.45},
    "mixtral-8x7b": {
        "rouge1": 45.5989,
        "rouge2": 23.3526,
        "rougeL": 30.4608,
        "gsm8k": 73.66,
        "mbxp": 60.16,
        "tokens_per_sample": 144.84,
    },
    "llama3.1-8b": {"rouge1": 38.7792, "rouge2": 15.9075, "rougeL": 24.4957, "rougeLsum": 35.793, "gen_len": 8167644},
    "llama3.1-405b": {"rougeL": 21.6666, "exact_match": 90.1335, "tokens_per_sample": 684.68},
}


#: The p99 token latencies (TTFT, TPOT) a valid run reports: half of each limit of MLCommons' checker
#: (submission_checker/constants.py ``LLM_LATENCY_LIMITS``, e.g. llama3.1-8b Server ttft 2000 ms, tpot 100 ms).
LATENCY_LIMITS_MS: dict[tuple[str, str], tuple[int, int]] = {
    ("llama2-70b", "Server"): (2000, 200),
    ("llama2-70b", "Interactive"): (450, 40),
    ("mixtral-8x7b", "Server"): (2000, 200),
    ("llama3.1-405b", "Server"): (6000, 175),
    ("llama3.1-405b", "Interactive"): (4500, 80),
    ("llama3.1-8b", "Server"): (2000, 100),
    ("llama3.1-8b", "Interactive"): (500, 30),
}


@autoconfigure
@bind(Workload.FIELD, "workload")
@bind(loadgen_fields.test_mode)
@bind(loadgen_fields.offline_expected_qps)
@bind(loadgen_fields.server_target_qps)
@bind(loadgen_fields.single_stream_expected_latency_ns)
@bind(llm_fields.trtllm_server_urls)
class BenchmarkHarnessOp(Operation):
    """The benchmark run (NVIDIA's harness drives LoadGen against the GPUs or the LLM server): LoadGen's files
    (``standin_loadgen.write``) in ``Workload.log_dir`` (``code/common/workload.py``:
    ``<LOG_DIR>/<system id>_TRT/<submission benchmark>/<Scenario>``), numbers derived from the resolved target.
    With LLM servers it first asks each URL of ``trtllm_server_urls`` for ``/health`` (the harness's clients
    connect to them)."""

    def __init__(
        self,
        workload: Workload | None = None,
        test_mode: str = "PerformanceOnly",
        offline_expected_qps: float | None = None,
        server_target_qps: float | None = None,
        single_stream_expected_latency_ns: int | None = None,
        trtllm_server_urls: Any = None,
    ) -> None:
        self.wl = workload
        self.test_mode = str(test_mode)
        self.targets = {
            "offline_expected_qps": offline_expected_qps,
            "server_target_qps": server_target_qps,
            "single_stream_expected_latency_ns": single_stream_expected_latency_ns,
        }
        self.urls = list(trtllm_server_urls or [])

    @classmethod
    def immediate_dependencies(cls) -> set[type[Operation]]:
        return {LoadgenConfFilesOp}

    def run(self, scratch_space: Any, dependency_outputs: Any) -> dict[str, Any]:
        assert self.wl is not None, "Workload is required"
        scenario = self.wl.scenario.valstr
        target = self.targets[_TARGET[scenario]]
        if target is None:
            raise RuntimeError(f"{_TARGET[scenario]} is not set for {self.wl}")
        answers = {url: _health(url) for url in self.urls}
        if any(code != 200 for code in answers.values()):
            raise RuntimeError(f"LLM server(s) not answering: {answers}")
        accuracy = float(self.wl.setting.accuracy_target.value)
        base = self.wl.submission_benchmark.removesuffix("-99.9").removesuffix("-99")
        limits = LATENCY_LIMITS_MS.get((base, scenario), (2000, 200))
        standin_loadgen.write(
            str(self.wl.log_dir),
            benchmark=self.wl.submission_benchmark,
            scenario=scenario,
            mode=self.test_mode,
            min_duration_ms=600000,
            target_qps=float(target),
            min_query_count=1,
            llm=self.wl.benchmark.is_llm,
            latencies_ns=(limits[0] * 500_000, limits[1] * 500_000),
            loadgen_version=_round_loadgen(),
        )
        if self.test_mode == "AccuracyOnly":  # the evaluation script's output (a Python dict), as accuracy.txt
            (Path(self.wl.log_dir) / "accuracy.txt").write_text(repr(REFERENCE_ACCURACY[base]) + "\n")
        record(
            type(self).__name__,
            benchmark=self.wl.benchmark.valstr,
            scenario=scenario,
            test_mode=self.test_mode,
            accuracy_target=accuracy,
            target={_TARGET[scenario]: target},
            servers=answers,
            log_dir=self.wl.log_dir,
        )
        return {"log_dir": self.wl.log_dir}

    @classmethod
    def output_keys(cls) -> list[str]:
        return ["log_dir"]


class TrtllmServeBenchmarkHarnessOp(BenchmarkHarnessOp):
    """``--core_type=trtllm_endpoint``: the harness against ``trtllm-serve``."""


class TrtllmExecutorBenchmarkHarnessOp(BenchmarkHarnessOp):
    """``--core_type=trtllm_executor``: the harness with the engine in process."""


class ResultSummaryOp(Operation):
    """NVIDIA's summary of the run (``code.ops``): the LoadGen summary's result line, printed."""

    @classmethod
    def immediate_dependencies(cls) -> set[type[Operation]]:
        return {BenchmarkHarnessOp}

    def run(self, scratch_space: Any, dependency_outputs: Any) -> dict[str, Any]:
        (outputs,) = dependency_outputs.values()
        summary = Path(outputs["log_dir"]) / "mlperf_log_summary.txt"
        lines = summary.read_text().splitlines()
        print("\n".join(line for line in lines if line.startswith(("Scenario", "Mode", "Result is"))))
        record("ResultSummaryOp", summary=summary)
        return {}


def __getattr__(name: str) -> Any:
    """``RunTrtllmServeOp`` is NVIDIA's own (``code/llmlib/launch_server.py``: it launches ``trtllm-serve``, whose
    stand-in is ``bin/trtllm-serve``), imported when ``ModuleLocation.load`` asks for it: inside the run's
    configuration, as NVIDIA's benchmark modules are (the module's decorators build a ``TrtllmEndpointConfig``)."""
    if name == "RunTrtllmServeOp":
        from code.llmlib.launch_server import RunTrtllmServeOp

        return RunTrtllmServeOp
    raise AttributeError(name)


def _health(url: str) -> int:
    host = str(url).replace("0.0.0.0", "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://{host}/health", timeout=5) as answer:
            return int(answer.status)
    except OSError as exc:
        return getattr(exc, "code", 0) or 0


_ = C  # NVIDIA's constants are imported first, as NVIDIA's own modules do


def _round_loadgen() -> str:
    """The LoadGen ``major.minor`` of the tree's round (``VERSION``: ``v5.1`` -> ``5.1``), as the round's harness would
    log it: its Makefile builds LoadGen from the mlcommons/inference clone of that round (v5.1 ``Makefile.build``
    ``clone_loadgen``; v6.0 the README's 3rdparty clone). Read from the tree the harness runs in (its working
    folder)."""
    version = Path("VERSION")
    return version.read_text().strip().removeprefix("v") if version.is_file() else "6.0"
