"""Accuracy: the SUT's answers in LoadGen's accuracy log against reference outputs.

The reference is computed OUTSIDE LoadGen, by running the same model directly on every sample,
one sample per call (the plain path, independent of the SUT's batching, threads and response
plumbing), and cached as ``reference_embeddings.npy`` in the result folder. LoadGen's
``mlperf_log_accuracy.json`` holds one entry per answered sample with the response bytes as hex;
each is decoded to float32 and compared with the reference row of its ``qsl_idx`` by cosine
similarity. The check passes when every QSL sample was answered and the minimum similarity
reaches the threshold.

``python -m workload.loadgen.accuracy DIR`` recomputes ``DIR/accuracy.json`` from the files in
``DIR`` (exit 0 when computed, whatever the verdict; 2 on bad input).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workload.errors import ResultsError, WorkloadError
from workload.loadgen.logs import ACCURACY_LOG
from workload.loadgen.model import Embedder, FloatArray, TokenBatch
from workload.safefile import atomic_write_text

REFERENCE_FILE = "reference_embeddings.npy"
ACCURACY_FILE = "accuracy.json"
METRIC = "cosine_similarity_min"


@dataclass(frozen=True)
class AccuracyResult:
    """The verdict; :meth:`as_dict` is the ``accuracy.json`` shape."""

    value: float
    mean: float
    threshold: float
    passed: bool
    samples: int
    #: Why it failed besides a low similarity (missing samples, bad entries); empty when fine.
    problems: tuple[str, ...] = ()

    def as_dict(self, **names: str) -> dict[str, object]:
        """The accuracy.json object; ``names`` adds identity keys (``model``, ``scenario``)."""
        return {
            "metric": METRIC,
            "value": self.value,
            "mean": self.mean,
            "threshold": self.threshold,
            "pass": self.passed,
            "samples": self.samples,
            # why it failed besides the figure: the metrics verdict shows these as the reasons
            "problems": list(self.problems),
            **names,
        }


def compute_reference(model: Embedder, data: TokenBatch) -> FloatArray:
    """Reference embeddings for every sample, one model call per sample."""
    rows = [model.embed(data.take([i]))[0] for i in range(len(data))]
    return np.stack(rows).astype(np.float32)


def save_reference(directory: Path, reference: FloatArray) -> Path:
    path = directory / REFERENCE_FILE
    np.save(path, reference)
    return path


def load_reference(path: Path) -> FloatArray:
    try:
        ref = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ResultsError(f"{path}: reference outputs not found") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: not a readable .npy array ({exc})") from None
    if ref.ndim != 2:
        raise ResultsError(f"{path}: expected a [samples, hidden] array, got shape {ref.shape}")
    return np.asarray(ref, dtype=np.float32)


def read_accuracy_log(path: Path, hidden: int) -> list[tuple[int, FloatArray | None]]:
    """``(qsl_idx, output)`` for each entry; ``None`` output when the bytes are not ``hidden`` floats."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: LoadGen accuracy log not found") from None
    except ValueError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(entries, list):
        raise ResultsError(f"{path}: expected a JSON list of entries")
    out: list[tuple[int, FloatArray | None]] = []
    for n, entry in enumerate(entries):
        try:
            index = int(entry["qsl_idx"])
            raw = bytes.fromhex(entry["data"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ResultsError(f"{path}: entry {n} is not a LoadGen accuracy record ({exc})") from None
        ok = len(raw) == hidden * 4
        out.append((index, np.frombuffer(raw, dtype=np.float32).copy() if ok else None))
    return out


def cosine(a: FloatArray, b: FloatArray) -> float:
    """Cosine similarity in float64; 0 when either vector is zero."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    norm = float(np.linalg.norm(a64) * np.linalg.norm(b64))
    return float(a64 @ b64) / norm if norm > 0 else 0.0


def check_accuracy(log_path: Path, reference: FloatArray, threshold: float) -> AccuracyResult:
    """Compare every accuracy-log entry with its reference row (see module docstring)."""
    entries = read_accuracy_log(log_path, int(reference.shape[1]))
    problems: list[str] = []
    sims: list[float] = []
    seen: set[int] = set()
    for index, output in entries:
        if not 0 <= index < reference.shape[0]:
            problems.append(f"qsl_idx {index} is outside the {reference.shape[0]} reference samples")
            sims.append(0.0)
            continue
        seen.add(index)
        if output is None:
            problems.append(f"qsl_idx {index}: response is not {reference.shape[1]} float32 values")
            sims.append(0.0)
            continue
        sims.append(cosine(output, reference[index]))
    missing = reference.shape[0] - len(seen)
    if missing:
        problems.append(f"{missing} of {reference.shape[0]} samples have no answer in the accuracy log")
    value = min(sims) if sims else 0.0
    mean = float(np.mean(sims)) if sims else 0.0
    return AccuracyResult(
        value=round(value, 7),
        mean=round(mean, 7),
        threshold=threshold,
        passed=bool(sims) and not problems and value >= threshold,
        samples=len(sims),
        problems=tuple(problems),
    )


def write_accuracy(directory: Path, result: AccuracyResult, **names: str) -> Path:
    """Write ``accuracy.json`` (``names``: optional ``model`` / ``scenario`` identity keys)."""
    path = directory / ACCURACY_FILE
    return atomic_write_text(path, json.dumps(result.as_dict(**names), indent=2) + "\n")


def _identity(previous: Path) -> dict[str, str]:
    """The ``model`` / ``scenario`` keys of an earlier accuracy.json, kept when recomputing."""
    try:
        data = json.loads(previous.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k in ("model", "scenario") if isinstance(v := data.get(k), str)}


def main(argv: list[str] | None = None) -> int:
    """Recompute ``accuracy.json`` for a result folder (see module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m workload.loadgen.accuracy", description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="an AccuracyOnly result folder")
    parser.add_argument("--reference", type=Path, help=f"reference .npy (default DIR/{REFERENCE_FILE})")
    parser.add_argument("--threshold", type=float, default=0.999)
    args = parser.parse_args(argv)
    try:
        reference = load_reference(args.reference or args.directory / REFERENCE_FILE)
        result = check_accuracy(args.directory / ACCURACY_LOG, reference, args.threshold)
        write_accuracy(args.directory, result, **_identity(args.directory / ACCURACY_FILE))
    except WorkloadError as exc:
        print(f"accuracy: error: {exc}", file=sys.stderr)
        return 2
    for problem in result.problems:
        print(f"accuracy: {problem}", file=sys.stderr)
    print(json.dumps(result.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
