"""How much scratch space each benchmark's setup stages take: data, model, preprocessed data.

Pure data, read by :mod:`workload.mlperf.space_check` (the free-space check before a model's setup).
Every value names where it comes from. Two kinds:

* **stated** (``estimate=False``): a source says it (an NVIDIA README in ``closed/NVIDIA/code/``, an
  MLCommons issue answered by NVIDIA's engineers); the source is named as repository + path or issue.
* **estimate** (``estimate=True``): no source we found states the size. The value is a *conservative*
  estimate (rounded up, margin included) from what the stage stores, and ``basis`` shows the arithmetic
  (parameter count x bytes per parameter from the model's own card, sample count x tensor size from the
  benchmark's definition). ``plan`` marks these with ``~``.

NVIDIA's harness keeps the three folders under ``MLPERF_SCRATCH_PATH`` (``data``, ``models``,
``preprocessed_data``: ``Makefile.data``'s ``download_data``, ``download_model``, ``preprocess_data``).
Checkpoints NVIDIA's LLM flow derives from the downloaded one (FP8/FP4 quantized copies) are written under
``models`` too, so they are counted with ``download_model``.

A round whose files differ from the default gets an entry in :data:`ROUND_SIZES` (most specific wins);
no source we read shows a size that changes between rounds v4.1 to v6.1, so it is empty today.
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.mlperf.catalog import canonical_benchmark

GB = 1_000_000_000
GIB = 1024**3

#: The setup stage -> the scratch folder it fills (``Makefile.data``; v6.1's ``ensure_installed`` fills none).
STAGE_FOLDERS: dict[str, str] = {
    "download_data": "data",
    "download_model": "models",
    "preprocess_data": "preprocessed_data",
}

#: Sources, named once (repository, path / thread).
_FORK = "(read in the fork ykamiset/inference_results_v5.1)"
NV_RGAT = f"mlcommons/inference_results_v5.1 closed/NVIDIA/code/rgat/pytorch/README.md {_FORK}"
NV_DSR1 = f"mlcommons/inference_results_v5.1 closed/NVIDIA/code/deepseek-r1/tensorrt/README.md {_FORK}"
NV_405B = f"mlcommons/inference_results_v5.1 closed/NVIDIA/code/llama3_1-405b/tensorrt/README.md {_FORK}"
MLC_1408 = "mlcommons/inference#1408 (NVIDIA's nv-etcheng on DLRMv2's disk space, 2023-06-26)"


@dataclass(frozen=True)
class Size:
    """What one stage stores, in bytes, with where the number comes from."""

    bytes: int
    #: Why this number (the source's words or the arithmetic of an estimate).
    basis: str
    #: The source read (repository and path, or issue); for an estimate, the facts it starts from.
    source: str
    estimate: bool = True

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def _gb(value: float, basis: str, source: str, *, estimate: bool = True) -> Size:
    return Size(int(value * GB), basis, source, estimate)


@dataclass(frozen=True)
class BenchmarkSizes:
    """The three stages of one benchmark (by :data:`STAGE_FOLDERS`' stage names)."""

    data: Size
    models: Size
    preprocessed_data: Size

    def for_stage(self, stage: str) -> Size | None:
        """The size ``stage`` needs, or None for a stage that writes nothing to the scratch disk."""
        folder = STAGE_FOLDERS.get(stage)
        return getattr(self, folder) if folder else None


_SMALL_TEXT = "a tokenized text dataset of some thousand samples (pickle/npy, well under 1 GB); 1 GB is the floor"

#: Catalog benchmark name -> its sizes (every round unless :data:`ROUND_SIZES` says otherwise).
SIZES: dict[str, BenchmarkSizes] = {
    "resnet50": BenchmarkSizes(
        data=_gb(
            8,
            "ImageNet 2012 validation: 50,000 JPEGs (~6.4 GB) plus the calibration list; rounded up",
            "MLPerf resnet50 dataset definition (ILSVRC2012 val, 50,000 images)",
        ),
        models=_gb(
            1,
            "ResNet-50 v1.5: 25.6 M parameters x 4 bytes = 0.1 GB (ONNX); 1 GB is the floor",
            "MLPerf resnet50 model (25.6 M parameters)",
        ),
        preprocessed_data=_gb(
            10, "50,000 x 224x224x3 INT8 = 7.5 GB, rounded up with margin", "MLPerf resnet50 input shape 224x224x3"
        ),
    ),
    "retinanet": BenchmarkSizes(
        data=_gb(
            20,
            "OpenImages MLPerf validation subset: 24,781 JPEGs plus calibration images (~12 GB assumed), with margin",
            "MLPerf retinanet dataset definition (24,781 images)",
        ),
        models=_gb(
            1,
            "RetinaNet ResNeXt50: 37.7 M parameters x 4 bytes = 0.15 GB (ONNX + PyTorch); 1 GB is the floor",
            "MLPerf retinanet model",
        ),
        preprocessed_data=_gb(
            60, "24,781 x 800x800x3 INT8 = 47.6 GB, rounded up with margin", "MLPerf retinanet input shape 800x800x3"
        ),
    ),
    "bert": BenchmarkSizes(
        data=_gb(
            1,
            "SQuAD v1.1 dev set (5 MB) and vocabulary; 1 GB is the floor",
            "MLPerf bert dataset definition (SQuAD v1.1, 10,833 samples)",
        ),
        models=_gb(
            5,
            "three ONNX files of BERT-Large (340 M parameters x 4 bytes = 1.4 GB each) = 4.1 GB, rounded up",
            "BERT-Large (340 M parameters)",
        ),
        preprocessed_data=_gb(
            1, "10,833 x 384 tokens x 3 int32 arrays = 50 MB; 1 GB is the floor", "MLPerf bert sequence length 384"
        ),
    ),
    "3d-unet": BenchmarkSizes(
        data=_gb(
            35,
            "KiTS19 imaging (CT volumes of 300 cases as the kits19 repository downloads them, ~29 GB "
            "assumed), with margin",
            "KiTS19 dataset (kits19 repository)",
        ),
        models=_gb(
            1,
            "3D U-Net: 19 M parameters (ONNX, PyTorch, TensorFlow copies) < 0.5 GB; 1 GB is the floor",
            "MLPerf 3d-unet model",
        ),
        preprocessed_data=_gb(
            35,
            "the 42 inference cases resampled and padded, as INT8/FP16/FP32 copies; assumed as large as the raw data",
            "MLPerf 3d-unet inference cases (42)",
        ),
    ),
    "dlrm-v2": BenchmarkSizes(
        data=_gb(
            169,
            '"The day23 files are around ~169 GB" (raw day 23, its numpy arrays and the synthetic multi-hot set); '
            "making them from the full Criteo 1TB logs took ~6.1 TB, which this check does not require",
            MLC_1408,
            estimate=False,
        ),
        models=_gb(
            110,
            "the DLRM-DCNv2 checkpoint's embedding tables in FP32 (~100 GB as MLCommons distributes "
            "it, assumed), with margin",
            "MLPerf dlrm-v2 model (DCNv2, 26 embedding tables)",
        ),
        preprocessed_data=_gb(
            169,
            "NVIDIA's preprocess writes its own copy of day 23's dense and sparse arrays: assumed as "
            "large as the day23 files",
            MLC_1408,
        ),
    ),
    "gptj": BenchmarkSizes(
        data=_gb(1, _SMALL_TEXT + " (CNN/DailyMail validation, 13,368 samples)", "MLPerf gptj dataset definition"),
        models=_gb(
            50,
            "GPT-J 6B in FP32 = 24 GB, downloaded as a zip and extracted beside it, plus NVIDIA's "
            "quantized copy; rounded up",
            "GPT-J (6 B parameters)",
        ),
        preprocessed_data=_gb(1, _SMALL_TEXT, "MLPerf gptj dataset definition"),
    ),
    "llama2-70b": BenchmarkSizes(
        data=_gb(1, _SMALL_TEXT + " (OpenOrca, 24,576 samples)", "MLPerf llama2-70b dataset definition"),
        models=_gb(
            360,
            "Llama-2-70b-chat-hf: 70 B parameters x 2 bytes = 140 GB, held in both safetensors and "
            "PyTorch formats (280 GB), "
            "plus NVIDIA's FP8 checkpoint (70 GB); rounded up",
            "Llama-2-70b-chat-hf model card (70 B parameters)",
        ),
        preprocessed_data=_gb(1, _SMALL_TEXT, "MLPerf llama2-70b dataset definition"),
    ),
    "mixtral-8x7b": BenchmarkSizes(
        data=_gb(1, _SMALL_TEXT + " (15,000 samples)", "MLPerf mixtral-8x7b dataset definition"),
        models=_gb(
            150,
            "Mixtral-8x7B: 46.7 B parameters x 2 bytes = 93 GB plus NVIDIA's FP8 checkpoint (47 GB); rounded up",
            "Mixtral-8x7B model card (46.7 B parameters)",
        ),
        preprocessed_data=_gb(1, _SMALL_TEXT, "MLPerf mixtral-8x7b dataset definition"),
    ),
    "stable-diffusion-xl": BenchmarkSizes(
        data=_gb(
            10,
            "COCO 2014 captions (5,000) and the images/statistics the FID/CLIP scores use; assumed",
            "MLPerf stable-diffusion-xl dataset definition",
        ),
        models=_gb(
            30,
            "SDXL base 1.0: 3.5 B parameters as FP32 (14 GB) and FP16 (7 GB) checkpoints = 21 GB, with margin",
            "SDXL base 1.0 model card (3.5 B parameters)",
        ),
        preprocessed_data=_gb(
            5,
            "tokenized captions and latents for 5,000 prompts; assumed",
            "MLPerf stable-diffusion-xl dataset definition",
        ),
    ),
    "llama3.1-8b": BenchmarkSizes(
        data=_gb(1, _SMALL_TEXT + " (CNN/DailyMail, 13,368 samples)", "MLPerf llama3.1-8b dataset definition"),
        models=_gb(
            40,
            "Llama-3.1-8B-Instruct: 8 B parameters x 2 bytes = 16 GB plus NVIDIA's quantized copy (8 GB); rounded up",
            "Llama-3.1-8B-Instruct model card (8 B parameters)",
        ),
        preprocessed_data=_gb(1, _SMALL_TEXT, "MLPerf llama3.1-8b dataset definition"),
    ),
    "llama3.1-405b": BenchmarkSizes(
        data=_gb(5, "the two pickles NVIDIA's README moves into build/data (8,313 + 512 samples); assumed", NV_405B),
        models=_gb(
            1300,
            "Llama-3.1-405B-Instruct (the README's git clone): 405 B parameters x 2 bytes = 810 GB, plus NVIDIA's "
            "quantized checkpoint (<= 405 GB); rounded up",
            NV_405B + "; Llama-3.1-405B-Instruct model card (405 B parameters)",
        ),
        preprocessed_data=_gb(5, "input_ids_padded.npy, input_lens.npy and the calibration parquet; assumed", NV_405B),
    ),
    "deepseek-r1": BenchmarkSizes(
        data=_gb(
            1, "the two pickles NVIDIA's README moves into build/data (4,388 + 500 samples); " + _SMALL_TEXT, NV_DSR1
        ),
        models=_gb(
            1200,
            "the README downloads deepseek-r1 (671 B parameters in FP8 = ~690 GB) and NVIDIA's FP4 checkpoint "
            "(671 B x 0.5 bytes plus scales = ~400 GB); rounded up",
            NV_DSR1 + "; DeepSeek-R1 model card (671 B parameters)",
        ),
        preprocessed_data=_gb(1, _SMALL_TEXT, NV_DSR1),
    ),
    "gpt-oss-120b": BenchmarkSizes(
        data=_gb(5, "the benchmark's prompt set; assumed", "MLPerf gpt-oss-120b dataset definition"),
        models=_gb(
            150,
            "gpt-oss-120b: 117 B parameters in MXFP4 = ~65 GB, held twice in its repository (root "
            "and original/); rounded up",
            "gpt-oss-120b model card (117 B parameters, MXFP4)",
        ),
        preprocessed_data=_gb(5, "tokenized prompts; assumed", "MLPerf gpt-oss-120b dataset definition"),
    ),
    # Benchmarks of the rounds that the catalog does not run yet (see the round audit in the report);
    # kept here so adding them to the catalog finds their sizes.
    "rgat": BenchmarkSizes(
        data=_gb(
            10_000,
            '"You will need to obtain a separate scratch space with ~10 TB to have enough storage to also contain '
            'intermediate files" (IGBH full, downloaded and preprocessed)',
            NV_RGAT,
            estimate=False,
        ),
        models=_gb(1, '"The model is quite tiny"; 1 GB is the floor', NV_RGAT, estimate=False),
        preprocessed_data=_gb(0, "within the README's ~10 TB, counted with download_data", NV_RGAT, estimate=False),
    ),
    "whisper": BenchmarkSizes(
        data=_gb(
            5,
            "LibriSpeech dev-clean and dev-other (~0.7 GB compressed) extracted; assumed",
            "MLPerf whisper dataset definition",
        ),
        models=_gb(
            10,
            "Whisper large-v3: 1.55 B parameters x 4 bytes = 6.2 GB plus NVIDIA's engine checkpoint; rounded up",
            "Whisper large-v3 model card (1.55 B parameters)",
        ),
        preprocessed_data=_gb(5, "the resampled audio; assumed", "MLPerf whisper dataset definition"),
    ),
}

#: (round, benchmark) -> sizes where a round's files differ from :data:`SIZES` (none found so far).
ROUND_SIZES: dict[tuple[str, str], BenchmarkSizes] = {}


def sizes_for(harness_round: str, model: str) -> BenchmarkSizes | None:
    """The sizes of ``model``'s setup in ``harness_round`` (round-specific first), or None when none are known."""
    name = canonical_benchmark(model)
    return ROUND_SIZES.get((harness_round, name)) or SIZES.get(name)
