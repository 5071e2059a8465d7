"""Benchmark ``workload results`` on 10,000 result files (goal: under 2 s on 2 cores; peak RSS <= 300 MB on 50,000).

Builds a realistic NVIDIA ``build/logs`` tree in a temporary folder from the real result files in
``tests/fixtures/results`` (the 87 kB H200 Server detail log, summaries, metadata.json, accuracy.txt),
one timestamped log folder per harness run, then, on that same tree, measures interleaved rounds
(``--rounds``) of:

* the library path in this process: walk (find the result directories), parse (parse + build, in a
  process per CPU), write (metrics.jsonl, metrics.csv, summary.json into a fresh folder);
* with ``--baseline``: the same in one process (no parse pool, no forked CSV writer), and the
  paired ratio 1 process / pool;
* the CLI: ``workload results TREE`` (table and verdict) and ``workload results TREE --output DIR``
  (plus 150 MB of metrics files) as subprocesses, interpreter start-up included.

Per variant: wall seconds (goal < 2 s, judged when ``--files`` is at most 10,000), CPU seconds per
1,000 result files (user + system of the process and of the workers it reaped: what the tool costs
whatever the neighbours do), and for the CLI the peak RSS of the ``workload`` process (``VmHWM``;
the parse workers are separate processes; goal <= 300 MB, judged when ``--files`` is at least
50,000), each with the interval of its median (see ``_measure.py``).

    .venv/bin/python bench/bench_results.py [--files 10000 | --large] [--hosts 4] [--rounds 5] [--baseline]
        [--no-cli] [--no-library] [--compare-root DIR] [--json]

``--compare-root DIR`` also runs the CLI variants of another checkout (the same interpreter, its package on
``PYTHONPATH``), interleaved round by round with this one's, and prints the paired ratios this/other.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _measure import Goal, ProcessRun, Report, add_arguments, figure, interleave, paired_ratios, run_process  # noqa: E402

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

    ``workers=1`` is the single-process baseline: no parse pool and no forked CSV writer. ``cpu`` is
    this process's CPU plus that of the workers it reaped during the pass.
    """
    shutil.rmtree(out, ignore_errors=True)
    outputs.FORK_MIN_METRICS = 10**12 if workers == 1 else _FORK_MIN_METRICS
    cpu_before = _cpu_self_and_children()
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
        "cpu": _cpu_self_and_children() - cpu_before,
        "results": len(collection.results),
        "metrics": sum(len(r.metrics) for r in collection.results),
        "issues": len(collection.issues),
    }


_FORK_MIN_METRICS = outputs.FORK_MIN_METRICS


def _cpu_self_and_children() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_cli(runs: Path, out: Path | None, root: Path = ROOT) -> ProcessRun:
    """``workload results RUNS`` (``--output OUT`` when given) in a fresh interpreter, measured.

    ``root``: the checkout whose ``workload`` package runs (``--compare-root``: another commit's, same venv).
    """
    command = [sys.executable, "-m", "workload", "results", str(runs)]
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)
        command += ["--output", str(out)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = run_process(command, cwd=root, env=env, check=False)
    if run.returncode != 0:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        raise SystemExit(f"workload results failed ({run.returncode}): {proc.stderr[-2000:]}")
    return run


def _line(label: str, t: dict[str, float], n: int) -> str:
    return (
        f"{label:<9} total {t['total']:6.3f} s  {n / t['total']:8,.0f} files/s  {t['cpu'] / n * 1000:5.3f} CPU-s/1k  "
        f"(walk {t['walk']:.3f}, parse {t['parse']:.3f}, write {t['write']:.3f})"
    )


def _cli_line(label: str, run: ProcessRun, n: int) -> str:
    return (
        f"  cli     {label:<27} {run.wall_s:6.3f} s  {n / run.wall_s:8,.0f} files/s  "
        f"{run.cpu_s / n * 1000:5.3f} CPU-s/1k  peak RSS {run.peak_rss_mib * 2**20 / 1e6:6.1f} MB"
    )


LARGE = 50_000


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_arguments(parser, rounds=5)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--files", type=int, default=10_000)
    size.add_argument("--large", dest="files", action="store_const", const=LARGE, help=f"{LARGE:,} result files")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: one per CPU)")
    parser.add_argument("--baseline", action="store_true", help="also time the single-process path")
    parser.add_argument("--no-cli", dest="cli", action="store_false", help="skip the `workload results` runs")
    parser.add_argument("--no-library", dest="library", action="store_false", help="skip the in-process runs")
    parser.add_argument(
        "--compare-root",
        type=Path,
        action="append",
        default=[],
        help="another checkout (e.g. `git archive BASE | tar -x -C DIR`): its CLI runs interleaved with this one's"
        " (repeatable)",
    )
    args = parser.parse_args()
    report = Report(
        "bench_results",
        settings={k: ([str(p) for p in v] if k == "compare_root" else v) for k, v in vars(args).items() if k != "json"},
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-results-"))
    try:
        runs = tmp / "runs"
        n = build_tree(runs, args.files, args.hosts)
        size_mb = sum(p.stat().st_size for p in runs.rglob("*") if p.is_file()) / 1e6
        print(f"tree: {n} files ({size_mb:.1f} MB)", flush=True)
        report.extra["files"] = n

        variants: list[tuple[str, Callable[[int], Any]]] = []
        if args.library:
            variants.append(("library", lambda r: time_library(runs, tmp / "out", args.workers)))
        if args.baseline:
            variants.append(("1 proc", lambda r: time_library(runs, tmp / "out", 1)))
        if args.cli:
            variants.append(("table", lambda r: run_cli(runs, None)))
            variants.append(("--output", lambda r: run_cli(runs, tmp / "out-cli")))
            for i, other in enumerate(p.resolve() for p in args.compare_root):
                variants.append((f"table (compare {i + 1})", lambda r, o=other: run_cli(runs, None, o)))
                variants.append((f"--output (compare {i + 1})", lambda r, o=other: run_cli(runs, tmp / "out-cli", o)))
        names = [name for name, _ in variants]

        def progress(r: int, measured: list[list[Any]]) -> None:
            for name, got in zip(names, measured, strict=True):
                if isinstance(got[r], ProcessRun):
                    what = f"`workload results{' --output' if name.startswith('--output') else ''}`"
                    print(_cli_line(what + (name[name.index("(") :] if "(" in name else ""), got[r], n))
                else:
                    print(_line(f"run {r + 1}" if name == "library" else "  1 proc", got[r], n))
            sys.stdout.flush()

        measured = interleave(args.rounds, [run for _, run in variants], progress)

        if args.library:
            last = measured[0][-1]
            sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.1f} MB" for p in sorted((tmp / "out").iterdir())
                              if not p.name.startswith("."))  # fmt: skip
            print(f"results {last['results']:.0f}, metrics {last['metrics']:.0f}, issues {last['issues']:.0f}; {sizes}")
        time_goal = Goal("<", 2.0) if args.files <= 10_000 else None
        rss_goal = Goal("<=", 300.0) if args.files >= LARGE else None
        for name, got in zip(names, measured, strict=True):
            label = {"table": "cli `workload results`", "--output": "cli `workload results --output`"}.get(name, name)
            if "(compare " in name:
                which = int(name.rsplit(" ", 1)[1].rstrip(")"))
                label = f"{name} = {args.compare_root[which - 1]}"
            if isinstance(got[0], ProcessRun):
                wall, cpu = [g.wall_s for g in got], [g.cpu_s for g in got]
                report.add(
                    figure(f"{label} peak RSS", [g.peak_rss_mib for g in got], unit="MiB", goal=rss_goal, digits=1)
                )
            else:
                wall, cpu = [g["total"] for g in got], [g["cpu"] for g in got]
            report.add(figure(f"{label} wall", wall, unit="s", goal=time_goal))
            report.add(figure(f"{label} CPU per 1,000 files", [c / n * 1000 for c in cpu], unit="CPU-s"))
        by_name = dict(zip(names, measured, strict=True))
        for i in range(len(args.compare_root) if args.cli else 0):
            for this in ("table", "--output"):
                a, b = by_name[this], by_name[f"{this} (compare {i + 1})"]
                for what, get in (("peak RSS", lambda g: g.peak_rss_mib), ("CPU", lambda g: g.cpu_s)):
                    ratio = paired_ratios([get(g) for g in a], [get(g) for g in b])
                    report.add(figure(f"{this} {what} ratio this/compare {i + 1}", ratio, digits=3))
        if args.baseline and args.library:
            ratio = paired_ratios([g["total"] for g in measured[1]], [g["total"] for g in measured[0]])
            report.add(figure("wall ratio 1 proc/pool", ratio, digits=2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
