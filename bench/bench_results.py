"""Benchmark ``collect()`` + ``write_outputs()`` on 10,000 result files (target: under 2 s on 2 cores).

Builds a realistic NVIDIA ``build/logs`` tree in a temporary folder from the real result files in
``tests/fixtures/results`` (the 87 kB H200 Server detail log, summaries, metadata.json, accuracy.txt),
one timestamped log folder per harness run, then times the parse and the writes separately.

    .venv/bin/python bench/bench_results.py [--files 10000] [--hosts 4]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workload.metrics.collection import collect  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--hosts", type=int, default=4)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-results-"))
    try:
        n = build_tree(tmp / "runs", args.files, args.hosts)
        size = sum(p.stat().st_size for p in (tmp / "runs").rglob("*") if p.is_file())
        start = time.perf_counter()
        results = []
        issues = []
        for host_dir in sorted((tmp / "runs").iterdir()):
            part = collect(host_dir, host=host_dir.name)
            results += part.results
            issues += part.issues
        parsed = time.perf_counter()
        paths = write_outputs(tmp / "out", results, OutputContext(experiment_id="bench"), issues=issues)
        done = time.perf_counter()
        metrics = sum(len(r.metrics) for r in results)
        print(f"files: {n} ({size / 1e6:.1f} MB) in {len(results)} results, {metrics} metrics, {len(issues)} issues")
        print(f"collect():       {parsed - start:.3f} s  ({n / (parsed - start):,.0f} files/s)")
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in paths)
        print(f"write_outputs(): {done - parsed:.3f} s  ({sizes})")
        print(f"total:           {done - start:.3f} s  ({n / (done - start):,.0f} files/s)  target < 2 s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
