"""Benchmark ``workload results`` on 10,000 result files (target: under 2 s on 2 cores).

Builds a realistic NVIDIA ``build/logs`` tree in a temporary folder from the real result files in
``tests/fixtures/results`` (the 87 kB H200 Server detail log, summaries, metadata.json, accuracy.txt),
one timestamped log folder per harness run, then, on that same tree, each repeat times:

* the library path: walk (find the result directories), parse (parse + build, in a process per CPU),
  write (metrics.jsonl, metrics.csv, summary.json into a fresh folder);
* with ``--baseline``: the same in one process (no parse pool, no forked CSV writer), and the ratio;
* the CLI: ``workload results TREE`` (table and verdict) and ``workload results TREE --output DIR``
  (plus 150 MB of metrics files) as subprocesses, interpreter start-up included.

    .venv/bin/python bench/bench_results.py [--files 10000] [--hosts 4] [--repeat 3] [--baseline] [--no-cli]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workload.metrics import outputs  # noqa: E402
from workload.metrics.collection import find_jobs, parse_jobs  # noqa: E402
from workload.metrics.outputs import OutputContext, write_outputs  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "results"
NV = FIX / "nvidia" / "logs"
H200 = NV / "2024.07.24-15.41.28" / "H200-SXM-141GBx8_TRT"
A100 = NV / "2024.11.15-03.56.48" / "DGX-A100_A100-SXM4-40GBx8_TRT"
ACC = NV / "2024.11.15-04.30.00" / "DGX-A100_A100-SXM4-40GBx8_TRT" / "bert-99" / "Offline"

# (benchmark, scenario) -> files of one result directory, as produced by the harness
TEMPLATES: list[tuple[str, str, dict[str, Path]]] = [
    ("bert-99", "Server", {
        "metadata.json": A100 / "bert-99" / "Server" / "metadata.json",
        "mlperf_log_detail.txt": H200 / "bert-99" / "Server" / "mlperf_log_detail.txt",
        "mlperf_log_summary.txt": H200 / "bert-99" / "Server" / "mlperf_log_summary.txt",
    }),
    ("bert-99", "Offline", {
        "mlperf_log_detail.txt": FIX / "loadgen" / "offline_valid" / "mlperf_log_detail.txt",
        "mlperf_log_summary.txt": H200 / "bert-99" / "Offline" / "mlperf_log_summary.txt",
    }),
    ("bert-99", "SingleStream", {
        "metadata.json": A100 / "bert-99" / "SingleStream" / "metadata.json",
        "mlperf_log_detail.txt": FIX / "loadgen" / "singlestream_valid" / "mlperf_log_detail.txt",
        "mlperf_log_summary.txt": FIX / "loadgen" / "singlestream_valid" / "mlperf_log_summary.txt",
    }),
    ("llama2-70b-99", "Server", {
        "mlperf_log_detail.txt": FIX / "loadgen" / "llm_server_valid" / "mlperf_log_detail.txt",
        "mlperf_log_summary.txt": H200 / "llama2-70b-99" / "Server" / "mlperf_log_summary.txt",
    }),
    ("bert-99", "Offline-accuracy", {
        "metadata.json": ACC / "metadata.json",
        "accuracy.txt": ACC / "accuracy.txt",
        "mlperf_log_detail.txt": FIX / "loadgen" / "offline_accuracy" / "mlperf_log_detail.txt",
        "mlperf_log_summary.txt": FIX / "loadgen" / "offline_accuracy" / "mlperf_log_summary.txt",
    }),
]  # fmt: skip


def build_tree(root: Path, n_files: int, hosts: int) -> int:
    """Write about ``n_files`` result files under ``root/<host>/build/logs/<ts>/<system>/<bench>/<Scenario>``."""
    contents = {p: p.read_bytes() for _, _, files in TEMPLATES for p in files.values()}
    written = run = 0
    while written < n_files:
        host = f"gpu-{run % hosts:02d}"
        stamp = f"2024.07.{1 + run // 1000 % 28:02d}-{run // 60 % 24:02d}.{run % 60:02d}.00"
        for bench, scenario, files in TEMPLATES:
            scen = scenario.split("-")[0]
            target = root / host / "build" / "logs" / f"{stamp}-{run}" / "H200-SXM-141GBx8_TRT" / bench / scen
            if scenario.endswith("accuracy"):
                target = target.parent.parent.parent.with_name(target.parent.parent.parent.name + "-acc") / bench / scen
            target.mkdir(parents=True, exist_ok=True)
            for name, src in files.items():
                (target / name).write_bytes(contents[src])
                written += 1
        run += 1
    return written


def time_library(runs: Path, out: Path, workers: int | None) -> dict[str, float]:
    """One pass of the library path over ``runs`` (each host folder its own host): seconds per stage.

    ``workers=1`` is the single-process baseline: no parse pool and no forked CSV writer.
    """
    shutil.rmtree(out, ignore_errors=True)
    outputs.FORK_MIN_METRICS = 10**12 if workers == 1 else _FORK_MIN_METRICS
    start = time.perf_counter()
    jobs, _ = find_jobs([(host_dir, host_dir.name) for host_dir in sorted(runs.iterdir())])
    walked = time.perf_counter()
    collection = parse_jobs(jobs, workers=workers)
    parsed = time.perf_counter()
    write_outputs(out, collection.results, OutputContext(experiment_id="bench"), issues=collection.issues)
    done = time.perf_counter()
    return {
        "walk": walked - start,
        "parse": parsed - walked,
        "write": done - parsed,
        "total": done - start,
        "results": len(collection.results),
        "metrics": sum(len(r.metrics) for r in collection.results),
        "issues": len(collection.issues),
    }


_FORK_MIN_METRICS = outputs.FORK_MIN_METRICS


def time_cli(runs: Path, out: Path | None) -> float:
    """Wall time of ``workload results RUNS`` (``--output OUT`` when given) in a fresh interpreter."""
    command = [sys.executable, "-m", "workload", "results", str(runs)]
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)
        command += ["--output", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"workload results failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


def _line(label: str, t: dict[str, float], n: int) -> str:
    return (
        f"{label:<9} total {t['total']:6.3f} s  {n / t['total']:8,.0f} files/s  "
        f"(walk {t['walk']:.3f}, parse {t['parse']:.3f}, write {t['write']:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per CPU)")
    parser.add_argument("--baseline", action="store_true", help="also time the single-process path")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="skip the `workload results` runs")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-results-"))
    try:
        runs = tmp / "runs"
        n = build_tree(runs, args.files, args.hosts)
        size = sum(p.stat().st_size for p in runs.rglob("*") if p.is_file())
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        print(f"tree: {n} files ({size / 1e6:.1f} MB), {cpus} CPUs, load average {os.getloadavg()[0]:.2f}")
        fast: list[dict[str, float]] = []
        base: list[dict[str, float]] = []
        cli: list[float] = []
        table: list[float] = []
        for i in range(1, args.repeat + 1):
            fast.append(time_library(runs, tmp / "out", args.workers))
            print(_line(f"run {i}", fast[-1], n))
            if args.baseline:
                base.append(time_library(runs, tmp / "out", 1))
                print(_line("  1 proc", base[-1], n) + f"  ratio {base[-1]['total'] / fast[-1]['total']:.2f}x")
            if args.cli:
                table.append(time_cli(runs, None))
                print(f"  cli     `workload results`          {table[-1]:6.3f} s  {n / table[-1]:8,.0f} files/s")
                cli.append(time_cli(runs, tmp / "out-cli"))
                print(f"  cli     `workload results --output` {cli[-1]:6.3f} s  {n / cli[-1]:8,.0f} files/s")
        last = fast[-1]
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in sorted((tmp / "out").iterdir())
                          if not p.name.startswith("."))  # fmt: skip
        print(f"results {last['results']:.0f}, metrics {last['metrics']:.0f}, issues {last['issues']:.0f}; {sizes}")
        best = min(fast, key=lambda t: t["total"])
        median = statistics.median(t["total"] for t in fast)
        summary = f"best of {len(fast)}: library {best['total']:.3f} s (median {median:.3f})"
        if base:
            best_base = min(t["total"] for t in base)
            summary += f", 1 process {best_base:.3f} s (ratio {best_base / best['total']:.2f}x)"
        if cli:
            summary += f", CLI {min(table):.3f} s (table and verdict), {min(cli):.3f} s with --output"
        print(summary + "; target < 2 s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
