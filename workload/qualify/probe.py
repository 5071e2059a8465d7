"""One pinned process: the model's outputs on the fixed sample set, and the device's matmul peak.

Usage (the action runs it once per GPU with ``CUDA_VISIBLE_DEVICES`` set, and once on the CPU in fp32
for the reference)::

    python -m workload.qualify.probe --settings settings.json --out DIR [--device cpu]

What lands in ``DIR``: ``outputs.npy`` (``[samples, hidden]`` float32: the first ``--samples`` samples
of the run's synthetic data, the same token ids LoadGen's QSL holds) and ``probe.json`` (the matmul
TFLOP/s, the model's FLOPs per sample, the precision and device that ran). On the CPU only the outputs
are wanted and no probe runs (``--no-matmul``).

Exit status: 0 when written; 2 for bad input or a missing torch/GPU (one message on stderr); 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from workload.errors import EXIT_USAGE, UsageError, WorkloadError
from workload.loadgen.model import synthetic_tokens
from workload.loadgen.settings import load_settings
from workload.safefile import atomic_write_bytes, atomic_write_text

OUTPUTS_FILE = "outputs.npy"
PROBE_FILE = "probe.json"
PROG = "workload.qualify.probe"


def probe(
    settings_path: Path, out: Path, *, device: str, samples: int, matmul_seconds: float | None
) -> dict[str, object]:
    """Write ``outputs.npy`` and ``probe.json`` into ``out``; return the probe record."""
    from io import BytesIO

    from workload.loadgen.encoders import make_model, matmul_probe

    settings = load_settings(settings_path)
    if settings.model_kind == "onnx":
        raise UsageError(f"{settings_path}: model_kind 'onnx' is not a qualification model")
    precision = "fp32" if device == "cpu" else settings.precision
    model = make_model(settings.model_kind, device=device, precision=precision)
    everything = synthetic_tokens(settings.sample_count, settings.sequence_length, settings.data_seed)
    data = everything.take(list(range(min(samples, len(everything)))))  # the QSL's first samples, exactly
    outputs = np.concatenate(
        [model.embed(data.take(list(range(i, min(i + 8, len(data)))))) for i in range(0, len(data), 8)]
    )
    out.mkdir(parents=True, exist_ok=True)
    buffer = BytesIO()
    np.save(buffer, outputs.astype(np.float32))
    atomic_write_bytes(out / OUTPUTS_FILE, buffer.getvalue())
    tflops = (
        matmul_probe(settings.model_kind, device=device, precision=precision, seconds=matmul_seconds)
        if matmul_seconds
        else None
    )
    record: dict[str, object] = {
        "matmul_tflops": tflops,
        "flops_per_sample": model.flops_per_sample(settings.sequence_length),
        "samples": int(outputs.shape[0]),
        "model": model.describe(),
    }
    atomic_write_text(out / PROBE_FILE, json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("--settings", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--matmul-seconds", type=float, default=1.0, help="0: no matmul probe")
    args = parser.parse_args(argv)
    try:
        record = probe(
            args.settings, args.out, device=args.device, samples=args.samples, matmul_seconds=args.matmul_seconds
        )
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WorkloadError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    print(f"probe: {record['samples']} outputs, matmul {record['matmul_tflops']} TFLOP/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
