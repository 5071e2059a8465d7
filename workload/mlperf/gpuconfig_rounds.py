"""Per-round facts of NVIDIA's harness the gpuconfigs table is validated against.

Which benchmarks (``--benchmarks`` names), scenarios and config file layout each harness round has, which
fields a scenario cannot do without, which fields scale with the GPU count. Pure data, each value with the
upstream file it was read from; :mod:`workload.mlperf.gpuconfigs_schema` checks every table file against it.
"""

from __future__ import annotations

from workload.mlperf.catalog import SCENARIOS

#: Fields that scale with the number of GPUs (throughput); everything else is per system as is.
THROUGHPUT_FIELDS = ("offline_expected_qps", "server_target_qps")
#: The field each scenario cannot do without (the harness sizes the LoadGen run from it).
REQUIRED_BY_SCENARIO = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
    "MultiStream": "multi_stream_expected_latency_ns",
}
#: NVIDIA's ``AccuracyTarget`` members: 99 % and 99.9 % of the reference accuracy.
ACCURACY_TARGETS = ("k_99", "k_99_9")

#: Rounds with a table, and the folder of its files below ``gpuconfigs/`` ("" = the folder itself).
ROUNDS: dict[str, str] = {"v4.1": "", "v5.0": "v5.0", "v5.1": "v5.1", "v6.0": "v6.0"}
#: The round a file without ``"round"`` belongs to (the files written before rounds had folders).
DEFAULT_ROUND = "v4.1"
#: ``--benchmarks`` names each round's harness has (v5.0: README "Valid benchmarks"; v5.1: ``code/common/constants.py``
#: ``Benchmark`` values, the names of its config files).
ROUND_MODELS: dict[str, tuple[str, ...]] = {
    # v4.1: its ``configs/<benchmark>/`` folders (reference notes §2; v4.0 lacks mixtral).
    "v4.1": (
        "bert",
        "3d-unet",
        "resnet50",
        "retinanet",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "mixtral-8x7b",
        "stable-diffusion-xl",
    ),
    # v5.0: NVIDIA's ``Benchmark`` values of the round (code/common/constants.py, anandhu-eng/inference_results_v5.0
    # @ 825f72bb): no llama3.1-8b yet, llama2-70b-interactive a benchmark of its own.
    "v5.0": (
        "bert",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "llama2-70b-interactive",
        "llama3_1-405b",
        "mixtral-8x7b",
        "resnet50",
        "retinanet",
        "stable-diffusion-xl",
        "3d-unet",
        "rgat",
    ),
    # v5.1: NVIDIA's ``Benchmark`` values (code/common/constants.py, ykamiset/inference_results_v5.1 @ e9ccad4d).
    "v5.1": (
        "resnet50",
        "retinanet",
        "bert",
        "dlrm-v2",
        "gptj",
        "llama2-70b",
        "llama3_1-8b",
        "llama3_1-405b",
        "mixtral-8x7b",
        "deepseek-r1",
        "stable-diffusion-xl",
        "whisper",
        "rgat",
    ),
    # v6.0: the MAKE Targets documentation's "Available Benchmarks", spelled as its config files
    # (configs/<SYSTEM>/<Scenario>/llama3_1-405b.py).
    "v6.0": (
        "llama2-70b",
        "llama3_1-8b",
        "llama3_1-405b",
        "gpt-oss-120b",
        "deepseek-r1",
        "whisper",
        "dlrm-v3",
        "wan22-a14b",
        "qwen3-vl-235b-a22b",
    ),
}
#: Scenarios of each round (v5.1 ``Scenario`` adds ``Interactive``, a folder of its own in ``configs/<SYSTEM>/``).
ROUND_SCENARIOS: dict[str, tuple[str, ...]] = {
    "v4.1": SCENARIOS,
    "v5.0": SCENARIOS,
    "v5.1": (*SCENARIOS, "Interactive"),
    "v6.0": (*SCENARIOS, "Interactive"),
}
#: Where NVIDIA's config file of a round lies: one file per benchmark and scenario up to v5.0, one per system,
#: scenario and benchmark from v5.1 (``configs/<SYSTEM>/<Scenario>/<benchmark>.py``).
ROUND_FILE_PATTERNS: dict[str, str] = {
    "v4.1": r"^closed/NVIDIA/configs/(?P<model>[^/]+)/(?P<scenario>[A-Za-z]+)/__init__\.py$",
    "v5.0": r"^closed/NVIDIA/configs/(?P<model>[^/]+)/(?P<scenario>[A-Za-z]+)/__init__\.py$",
    "v5.1": r"^closed/NVIDIA/configs/[^/]+/(?P<scenario>[A-Za-z]+)/(?!__init__\.py$)(?P<model>[^/]+)\.py$",
    "v6.0": r"^closed/NVIDIA/configs/[^/]+/(?P<scenario>[A-Za-z]+)/(?!__init__\.py$)(?P<model>[^/]+)\.py$",
}
