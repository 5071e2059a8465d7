"""The GPU qualification's models (in ``workload.loadgen`` because its runner loads them on any host, standalone):
one interface (:class:`workload.loadgen.model.Embedder`), two implementations.

* :class:`TorchEncoder` (``Model=torch-encoder``): a transformer encoder of BERT-large's shapes built
  from PyTorch's own modules (``torch.nn.TransformerEncoder``: 24 layers, hidden 1024, 16 heads, FFN 4096,
  GELU, post-norm like BERT), token and position embeddings, mean pooling. Weights come from a fixed seed
  (built on the CPU in fp32, then moved, so every GPU and the CPU reference hold the same numbers);
  nothing is downloaded. torch is the optional ``gpu`` extra and is imported only here, inside functions.
* :class:`StandInEncoder` (``Model=standin``): the same architecture at a tiny size in numpy, for the
  CPU path and CI; it has no precision but fp32 and no device but the CPU.

:func:`encoder_flops` counts both models' multiply-adds (x2) per sample, for the achieved TFLOP/s;
:func:`matmul_probe` measures the peak the same device reaches on a plain matrix multiply.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from workload.errors import UsageError
from workload.loadgen.model import VOCAB_SIZE, FloatArray, TokenBatch

ModelKind = Literal["standin", "torch-encoder"]
MODEL_KINDS: tuple[ModelKind, ...] = ("standin", "torch-encoder")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
GPU_EXTRA_HINT = (
    "install the GPU qualification extra on the host: pip install 'workload-mlperf[gpu]' (PyTorch with CUDA)"
)


@dataclass(frozen=True)
class EncoderShape:
    """A BERT-style encoder's sizes."""

    layers: int
    hidden: int
    heads: int
    ffn: int
    max_positions: int = 512


#: BERT-large (Devlin et al. 2018, Table/Section 3: L=24, H=1024, A=16; FFN 4H).
BERT_LARGE = EncoderShape(layers=24, hidden=1024, heads=16, ffn=4096)
#: The stand-in: the same structure, small enough for a 2-core CI machine.
STANDIN = EncoderShape(layers=2, hidden=64, heads=4, ffn=256)
WEIGHT_SEED = 33


def encoder_flops(shape: EncoderShape, sequence_length: int) -> float:
    """Floating-point operations of one sample's forward pass (a multiply-add counts 2).

    Per layer: Q, K, V and output projections ``4 * s * h^2`` multiply-adds, the FFN ``2 * s * h * f``,
    attention scores and their weighted sum ``2 * s^2 * h``. Embeddings, softmax and norms are ignored
    (under 1 % at BERT-large's sizes).
    """
    s, h, f = sequence_length, shape.hidden, shape.ffn
    return 2.0 * shape.layers * (4 * s * h * h + 2 * s * h * f + 2 * s * s * h)


def _layer_norm(x: FloatArray) -> FloatArray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    normed: FloatArray = ((x - mean) / np.sqrt(var + 1e-12)).astype(np.float32)
    return normed


def _gelu(x: FloatArray) -> FloatArray:
    """GELU's tanh form (numpy has no erf); the stand-in need not match torch's numbers, only its shape."""
    return (0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))).astype(np.float32)


class StandInEncoder:
    """A tiny post-norm transformer encoder in numpy (see the module docstring); thread-safe (no state)."""

    precision = "fp32"
    device = "cpu"

    def __init__(self, shape: EncoderShape = STANDIN, seed: int = WEIGHT_SEED) -> None:
        self.shape = shape
        rng = np.random.default_rng(seed)
        h, f = shape.hidden, shape.ffn

        def weight(rows: int, cols: int) -> FloatArray:
            return (rng.standard_normal((rows, cols)) / math.sqrt(rows)).astype(np.float32)

        self.tokens = (0.02 * rng.standard_normal((VOCAB_SIZE, h))).astype(np.float32)
        self.positions = (0.02 * rng.standard_normal((shape.max_positions, h))).astype(np.float32)
        self.layers = [
            {"qkv": weight(h, 3 * h), "out": weight(h, h), "up": weight(h, f), "down": weight(f, h)}
            for _ in range(shape.layers)
        ]

    def embed(self, batch: TokenBatch) -> FloatArray:
        ids = batch.input_ids
        x = self.tokens[ids] + self.positions[: ids.shape[1]][None]
        heads, size = self.shape.heads, self.shape.hidden // self.shape.heads
        for layer in self.layers:
            q, k, v = np.split(x @ layer["qkv"], 3, axis=-1)
            split = [t.reshape(*t.shape[:2], heads, size).transpose(0, 2, 1, 3) for t in (q, k, v)]
            scores = split[0] @ split[1].transpose(0, 1, 3, 2) / math.sqrt(size)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            attention = (scores / scores.sum(axis=-1, keepdims=True)) @ split[2]
            merged = attention.transpose(0, 2, 1, 3).reshape(x.shape)
            x = _layer_norm(x + merged @ layer["out"])
            x = _layer_norm(x + _gelu(x @ layer["up"]) @ layer["down"])
        mask = batch.attention_mask[..., None].astype(np.float32)
        pooled = (x * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return np.ascontiguousarray(pooled, dtype=np.float32)

    def flops_per_sample(self, sequence_length: int) -> float:
        return encoder_flops(self.shape, sequence_length)

    def describe(self) -> dict[str, object]:
        return {"model": "standin", "shape": vars(self.shape), "precision": self.precision, "device": self.device}


def import_torch() -> Any:
    """``torch``, or a UsageError saying how to install it (the CPU path never calls this)."""
    try:
        import torch
    except ImportError:
        raise UsageError("Model=torch-encoder needs PyTorch, which is not installed", hint=GPU_EXTRA_HINT) from None
    return torch


def resolve_precision(precision: str, device: str) -> str:
    """``auto``: bf16 on a GPU that supports it, else fp16 on a GPU, fp32 on the CPU."""
    if precision != "auto":
        return precision
    if device == "cpu":
        return "fp32"
    torch = import_torch()
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


class TorchEncoder:
    """BERT-large's shapes from ``torch.nn.TransformerEncoder`` (see the module docstring)."""

    def __init__(
        self,
        *,
        device: str = "cuda",
        precision: str = "auto",
        shape: EncoderShape = BERT_LARGE,
        seed: int = WEIGHT_SEED,
    ) -> None:
        torch = import_torch()
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise UsageError(
                "Model=torch-encoder: PyTorch sees no CUDA GPU",
                hint="check nvidia-smi, the driver and CUDA_VISIBLE_DEVICES (or use Model=standin on the CPU)",
            )
        self._torch = torch
        self.shape = shape
        self.device = device
        self.precision = resolve_precision(precision, device)
        dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[self.precision]
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)  # weights are built on the CPU in fp32: identical on every device
        layer = torch.nn.TransformerEncoderLayer(
            shape.hidden, shape.heads, shape.ffn, dropout=0.0, activation="gelu", batch_first=True, norm_first=False
        )
        encoder = torch.nn.TransformerEncoder(layer, shape.layers, enable_nested_tensor=False)
        tokens = torch.nn.Embedding(VOCAB_SIZE, shape.hidden)
        positions = torch.nn.Embedding(shape.max_positions, shape.hidden)
        torch.random.set_rng_state(generator_state)
        self._net = torch.nn.ModuleDict({"encoder": encoder, "tokens": tokens, "positions": positions})
        self._net.eval().to(device=device, dtype=dtype)

    def embed(self, batch: TokenBatch) -> FloatArray:
        torch = self._torch
        with torch.inference_mode():
            ids = torch.from_numpy(batch.input_ids).to(self.device)
            mask = torch.from_numpy(batch.attention_mask).to(self.device)
            where = torch.arange(ids.shape[1], device=self.device)
            x = self._net["tokens"](ids) + self._net["positions"](where)[None]
            x = self._net["encoder"](x, src_key_padding_mask=mask == 0)
            # pooled in fp32: a 16-bit sum over the sequence would add its own rounding to the comparison
            weights = mask[..., None].float()
            pooled = (x.float() * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
            return np.ascontiguousarray(pooled.cpu().numpy(), dtype=np.float32)

    def flops_per_sample(self, sequence_length: int) -> float:
        return encoder_flops(self.shape, sequence_length)

    def describe(self) -> dict[str, object]:
        torch = self._torch
        name = torch.cuda.get_device_name(0) if self.device.startswith("cuda") else "cpu"
        return {
            "model": "torch-encoder",
            "shape": vars(self.shape),
            "precision": self.precision,
            "device": self.device,
            "device_name": name,
            "torch": str(torch.__version__),
        }


def make_model(kind: str, *, device: str = "cuda", precision: str = "auto") -> StandInEncoder | TorchEncoder:
    """The model ``kind`` names (:data:`MODEL_KINDS`); a UsageError for anything else."""
    if kind == "standin":
        return StandInEncoder()
    if kind == "torch-encoder":
        return TorchEncoder(device=device, precision=precision)
    raise UsageError(f"model {kind!r}: expected one of {', '.join(MODEL_KINDS)}")


def matmul_probe(kind: str, *, device: str = "cuda", precision: str = "auto", seconds: float = 1.0) -> float:
    """TFLOP/s of square matrix multiplies on ``device`` for about ``seconds`` (after a warm-up).

    The torch model's probe multiplies 8192 x 8192 matrices in its precision (large enough to reach the
    tensor cores' peak); the stand-in's multiplies 256 x 256 float32 matrices with numpy.
    """
    if kind == "standin":
        n = 256
        rng = np.random.default_rng(WEIGHT_SEED)
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        a @ b
        count, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds or count == 0:
            a @ b
            count += 1
        return 2.0 * n**3 * count / elapsed / 1e12
    torch = import_torch()
    chosen = resolve_precision(precision, device)
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[chosen]
    n = 8192
    generator = torch.Generator(device=device).manual_seed(WEIGHT_SEED)
    a = torch.randn((n, n), device=device, dtype=dtype, generator=generator)
    b = torch.randn((n, n), device=device, dtype=dtype, generator=generator)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or count == 0:
        for _ in range(10):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        count += 10
        elapsed = time.perf_counter() - started
    return 2.0 * n**3 * count / elapsed / 1e12
