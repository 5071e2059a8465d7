"""The qualification models: the numpy stand-in (CI) and the torch encoder (``gpu``-marked, skipped here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from workload.errors import UsageError
from workload.loadgen.encoders import (
    BERT_LARGE,
    STANDIN,
    StandInEncoder,
    encoder_flops,
    make_model,
    matmul_probe,
)
from workload.loadgen.model import synthetic_tokens
from workload.qualify.verdicts import AGREEMENT_TOLERANCE, GpuIdentity, agreement


def test_bert_large_flops_per_sample_match_two_flops_per_weight_per_token() -> None:
    # 24 layers x (4 h^2 + 2 h f) weights = 302 M encoder weights; 2 FLOPs each per token, plus attention.
    weights = 24 * (4 * 1024 * 1024 + 2 * 1024 * 4096)
    attention = 2 * 24 * 2 * 128 * 128 * 1024
    assert encoder_flops(BERT_LARGE, 128) == 2 * weights * 128 + attention == 78_920_024_064


def test_standin_is_deterministic_and_batch_independent() -> None:
    data = synthetic_tokens(6, 16, seed=3)
    first = StandInEncoder().embed(data)
    again = StandInEncoder().embed(data)
    assert first.shape == (6, STANDIN.hidden) and first.dtype == np.float32
    np.testing.assert_array_equal(first, again)
    alone = np.concatenate([StandInEncoder().embed(data.take([i])) for i in range(6)])
    np.testing.assert_allclose(alone, first, rtol=1e-5, atol=1e-6)
    assert np.isfinite(first).all() and len({tuple(np.round(r, 4)) for r in first}) == 6  # samples differ


def test_standin_outputs_agree_with_themselves_and_a_wrong_one_is_caught() -> None:
    data = synthetic_tokens(8, 16, seed=5)
    reference = StandInEncoder().embed(data)
    other_weights = StandInEncoder(seed=34).embed(data)  # a "GPU" that computes something else
    gpus = {0: GpuIdentity(0), 1: GpuIdentity(1)}
    check = agreement({0: reference, 1: other_weights}, reference, gpus, precision="fp32")
    assert not check.passed and {p.split(" (")[0] for p in check.problems} == {"GPU 1"}
    assert check.value < AGREEMENT_TOLERANCE["bf16"]


def test_make_model_and_probe_on_the_cpu() -> None:
    assert isinstance(make_model("standin"), StandInEncoder)
    with pytest.raises(UsageError, match="expected one of"):
        make_model("onnx")
    assert matmul_probe("standin", seconds=0.05) > 0


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed: no refusal to show")
def test_torch_encoder_refuses_without_torch() -> None:
    with pytest.raises(UsageError, match="needs PyTorch") as caught:
        make_model("torch-encoder")
    assert "[gpu]" in (caught.value.hint or "")


@pytest.mark.gpu
def test_torch_encoder_on_the_gpu_agrees_with_the_cpu_reference() -> None:
    """BERT-large shapes on the GPU in its auto precision vs the CPU in fp32, on the same seeded weights."""
    from workload.loadgen.encoders import TorchEncoder

    data = synthetic_tokens(8, 128, seed=0)
    gpu = TorchEncoder(device="cuda", precision="auto")
    cpu = TorchEncoder(device="cpu", precision="fp32")
    out, reference = gpu.embed(data), cpu.embed(data)
    assert out.shape == reference.shape == (8, 1024)
    assert gpu.precision in ("bf16", "fp16")
    check = agreement({0: out}, reference, {0: GpuIdentity(0)}, precision=gpu.precision)
    assert check.passed, check.problems


@pytest.mark.gpu
def test_matmul_probe_on_the_gpu_reaches_tensor_core_rates() -> None:
    tflops = matmul_probe("torch-encoder", device="cuda", precision="auto", seconds=1.0)
    assert tflops > 50, tflops  # any data-centre GPU with tensor cores; an H200's bf16 peak is ~990 dense


def test_probe_writes_the_qsl_s_first_outputs_and_refuses_an_onnx_model(tmp_path: Path) -> None:
    import json

    from workload.loadgen.settings import RunSettings
    from workload.qualify.probe import main, probe

    settings = RunSettings(model_kind="standin", sample_count=20, sequence_length=12, data_seed=4)
    path = tmp_path / "settings.json"
    path.write_text(settings.model_dump_json())
    record = probe(path, tmp_path / "out", device="cpu", samples=5, matmul_seconds=None)
    outputs = np.load(tmp_path / "out" / "outputs.npy")
    expected = StandInEncoder().embed(synthetic_tokens(20, 12, seed=4).take([0, 1, 2, 3, 4]))
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-6)
    written = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert written["samples"] == record["samples"] == 5 and written["matmul_tflops"] is None
    assert written["flops_per_sample"] == encoder_flops(STANDIN, 12)

    path.write_text(RunSettings().model_dump_json())  # model_kind onnx
    assert main(["--settings", str(path), "--out", str(tmp_path / "onnx"), "--device", "cpu"]) == 2
