"""Does ``workload compare`` tell a change from noise? Identical runs, and a SUT made slower, beside a busy core.

    .venv/bin/python bench/bench_compare_noise.py [--pairs 10] [--iterations 7] [--slowdown 0.25]
        [--parameters ...] [--confidence 0.95] [--threshold 5] [--no-neighbour] [--keep DIR] [--json]
    .venv/bin/python bench/bench_compare_noise.py --judge DIR [--iterations 7] [--confidence 0.95] [--json]

Per pair, three sides of N runs each of the CPU profile (``workload run --profile PERF-CPU-MLPERF``
with ``--parameters``), while a separate process spins on one core: A and B unchanged, C with the
SUT made ``--slowdown`` slower. The runs are interleaved (round r runs A, B and C once each, in an
order rotated per round), so that the neighbours' load, which drifts within minutes on a shared
machine, hits the three sides alike. Then ``workload compare A B --iterations N --json`` (identical
runs: each side's folder holds its N run folders, read as N iterations) and ``compare A C`` (the
slower SUT), each summarised as the worst verdict of its headline performance metrics: regression,
cannot tell, improvement or no change. Since the rounds alternate in time (each round's runs began
after the round before had ended, as the runs' recorded times show), compare judges each metric
pair by pair: the signed-rank interval of the round ratios C_r / A_r, which cancels the load a round's
runs shared (``workload/metrics/pairing.py``, ``paired_interval`` in ``workload/metrics/intervals.py``).
Every judged line says ``paired N`` or ``unpaired`` and why.

The runs' parameters (``--parameters``, default :data:`DEFAULT_PARAMETERS`) keep each iteration's
own noise low, since no statistic separates 25 % from noise that is as large: one onnxruntime
thread (``Threads=1``: with two intra-op threads on 2 cores beside a spinning core, the threads wait
on each other and the figure follows the scheduler), fixed targets instead of the peak search
(``FindPeakPerformance=false``, ``OfflineTargetQps=150``: every run issues the same Offline queries
and the sides' settings agree) and ``MinDurationMs=3000``. N pairs reach at most ``1 - 2 / 2**N``
confidence, so ``--confidence 0.95`` needs 6 rounds; the default 7 (coverage 0.953, the interval's
upper end the 3rd largest of the 28 Walsh averages of the round ratios) lets one round whose two runs
met different load not decide the verdict alone, as it does with 6 (the interval's upper end is then
the largest round ratio).
``--judge DIR`` judges the pairs kept by an earlier ``--keep DIR`` again (no runs): after a change
to ``compare``, or to see another confidence.

Goals (issue 29): identical pairs get no "regression" in at least 9 of 10 pairs; the slower SUT
gets "regression" in at least 9 of 10 (scaled to ``--pairs``). The figure is the counts of each
verdict, printed as they are: 10 pairs give a coarse answer, and the counts say how coarse.

The slowdown is a knob of this bench, not of the product. Every side runs a copy of this checkout's
package (``workload/``, ``profiles/``, ``gpuconfigs/``) taken at the start, from ``PYTHONPATH``; C's
copy has a ``sitecustomize`` module at its root. The LoadGen runner a run starts gets that root as its
``PYTHONPATH`` (the LoadGenExecutor runs the package its own process runs), so the module is loaded
there; it wraps onnxruntime's ``InferenceSession.run`` so that every model call spins for
``slowdown / (1 - slowdown)`` of its own duration afterwards (a busy wait, not a sleep: the extra time
costs CPU like a slower model would, so ``--slowdown 0.25`` makes a CPU-bound SUT 25 % slower in
throughput). Runs of A and B use an identical copy without it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Report, machine

WORKLOAD = Path(sys.executable).with_name("workload")
ROOT = Path(__file__).resolve().parents[1]
#: what a copy of the checkout needs to run `workload run` (resources.py finds data beside the package)
TREE = ("workload", "profiles", "gpuconfigs")
SPIN = "import time\nwhile True:\n    pass\n"
VERDICTS = ("regression", "cannot tell", "improvement", "no change")
#: ``--facts``: LoadGen figures judged one by one (beside the headline ones) to see which the load moves least
FACTS = (
    ("Offline", "samples_per_second"),
    ("SingleStream", "latency_p90_ns"),
    ("SingleStream", "latency_p50_ns"),
    ("SingleStream", "latency_mean_ns"),
    ("SingleStream", "latency_min_ns"),
    ("SingleStream", "early_stopping_latency_ns"),
)
DEFAULT_PARAMETERS = (
    "Scenarios=Offline,SingleStream,,,TestModes=PerformanceOnly,,,MinDurationMs=3000,,,Threads=1,,,"
    "FindPeakPerformance=false,,,OfflineTargetQps=150,,,SingleStreamTargetLatencyMs=20"
)

#: the bench's knob: slows onnxruntime's InferenceSession.run in every Python process that imports it
SLOWER_SUT = """
import importlib.abc, importlib.machinery, sys, time

EXTRA = {extra!r}


def _slow(module):
    session = module.InferenceSession
    original = session.run

    def run(self, *args, **kwargs):
        started = time.perf_counter()
        out = original(self, *args, **kwargs)
        until = time.perf_counter() + (time.perf_counter() - started) * EXTRA
        while time.perf_counter() < until:  # spin: the extra time costs CPU, as a slower model's would
            pass
        return out

    session.run = run


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "onnxruntime":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _slow(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
"""


def copy_tree(target: Path, slowdown: float | None) -> Path:
    """A copy of this checkout's package at ``target`` (with the slower-SUT module when ``slowdown``)."""
    for name in TREE:
        shutil.copytree(ROOT / name, target / name, ignore=shutil.ignore_patterns("__pycache__"))
    if slowdown is not None:
        (target / "sitecustomize.py").write_text(SLOWER_SUT.format(extra=slowdown / (1 - slowdown)))
    return target


def one_run(workload: Path, out: Path, parameters: str, env: dict[str, str]) -> tuple[int, float, Path]:
    """Exit code, seconds and run folder of one ``workload run`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.iterdir())
    started = time.perf_counter()
    argv = [str(workload), "run", "--profile", "PERF-CPU-MLPERF", "--parameters", parameters]
    argv += ["--output-dir", str(out), "--history", "off"]
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    seconds = time.perf_counter() - started
    (folder,) = sorted(set(out.iterdir()) - before)
    if proc.returncode not in (0, 6):
        print("    output tail:\n" + "\n".join(proc.stdout.strip().splitlines()[-8:]))
    return proc.returncode, seconds, folder


def compared(
    workload: Path, a: Path, b: Path, iterations: int, confidence: float, threshold: float, *, every: bool = False
) -> dict[str, object] | str:
    """``compare A B --json`` (``every``: with ``--all``) as a document, or the error's text."""
    argv = [str(workload), "compare", str(a), str(b), "--iterations", str(iterations), "--json"]
    argv += ["--confidence", str(confidence), "--threshold", str(threshold)] + (["--all"] if every else [])
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        document = json.loads(proc.stdout)
    except ValueError:
        return proc.stderr.strip()[-300:]
    return document if isinstance(document, dict) else proc.stdout[-300:]


def fact_verdicts(
    workload: Path, a: Path, b: Path, iterations: int, confidence: float, threshold: float
) -> dict[str, str]:
    """The verdict of each of :data:`FACTS` in ``compare A B --all`` ("scenario metric" -> verdict)."""
    document = compared(workload, a, b, iterations, confidence, threshold, every=True)
    if isinstance(document, str):
        return {}
    changes = document.get("changes")
    wanted = {f"{scenario} {name}" for scenario, name in FACTS}
    found = {}
    for change in changes if isinstance(changes, list) else []:
        fact = f"{change.get('scenario')} {change.get('metric')}"
        if fact in wanted:
            found[fact] = str(change.get("verdict"))
    return found


def verdict_of(
    workload: Path, a: Path, b: Path, iterations: int, confidence: float, threshold: float
) -> tuple[str, list[str]]:
    """The worst verdict of the headline performance metrics of ``compare A B``, and each one's line."""
    document = compared(workload, a, b, iterations, confidence, threshold)
    if isinstance(document, str):
        return "error", [document]
    lines, found = [], set()
    changes = document.get("changes")
    for change in changes if isinstance(changes, list) else []:
        if change.get("relativity") == "Undefined" or change.get("metric") == "valid":
            continue
        verdict = change.get("verdict", "no change")
        found.add(verdict)
        spread = change.get("interval") or {}
        how = f"paired {spread['pairs']}" if spread.get("paired") else f"unpaired: {spread.get('unpaired_because')}"
        values = [", ".join(f"{v:.4g}" for v in change[side].get("values", [])) for side in ("before", "after")]
        lines.append(
            f"{change['scenario']} {change['metric']}: {verdict} (medians {(change.get('change_pct') or 0):+.1f} %; "
            f"interval of the change, + better: {spread.get('low_pct', 0):+.1f} .. {spread.get('high_pct', 0):+.1f} %, "
            f"{spread.get('method', '-')}, {how}; A [{values[0]}] vs [{values[1]}])"
        )
    worst = next((v for v in VERDICTS if v in found), "no change")
    return worst, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument(
        "--iterations", type=int, default=7, help="runs (rounds) per side and pair (compare --iterations; 0.95 needs 6)"
    )
    parser.add_argument("--slowdown", type=float, default=0.25, help="how much slower run C's SUT is (0.25: 25 %%)")
    parser.add_argument("--parameters", default=DEFAULT_PARAMETERS, help="--parameters of every run")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("--no-neighbour", action="store_true", help="no busy process (a quiet baseline)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--workload", type=Path, default=WORKLOAD, help="the workload command to run")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every figure")
    parser.add_argument("--judge", type=Path, default=None, help="judge the pairs kept in DIR again, no runs")
    parser.add_argument(
        "--facts",
        action="store_true",
        help="also judge each of several LoadGen figures on its own (information: which the load moves least)",
    )
    args = parser.parse_args()
    if not args.workload.exists():
        print(f"{args.workload} not found: run this with the venv's python (.venv/bin/python)", file=sys.stderr)
        return 2
    if not 0 <= args.slowdown < 1:
        print("--slowdown must be in [0, 1)", file=sys.stderr)
        return 2
    report = Report("bench_compare_noise", settings={k: str(v) for k, v in vars(args).items()})
    if args.judge is not None:
        identical, slowed = judge_kept(args)
        return summarise(args, report, identical, slowed)
    neighbour = None if args.no_neighbour else subprocess.Popen([sys.executable, "-c", SPIN])
    print(f"neighbour spinning on one core: {'no' if neighbour is None else f'yes (pid {neighbour.pid})'}")
    identical: list[str] = []
    slowed: list[str] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-noise-") as tmp:
            out = args.keep or Path(tmp) / "runs"
            out.mkdir(parents=True, exist_ok=True)
            same = copy_tree(Path(tmp) / "same-sut", None)
            slower = copy_tree(Path(tmp) / "slower-sut", args.slowdown)
            base = {**os.environ, "WORKLOAD_STATE_PATH": str(Path(tmp) / "state.json")}
            env = {**base, "PYTHONPATH": str(same)}
            env_slow = {**base, "PYTHONPATH": str(slower)}
            sides = (("A", env), ("B", env), ("C", env_slow))
            for pair in range(1, args.pairs + 1):
                runs = {name: out / f"pair{pair}" / name for name, _ in sides}
                for round_ in range(args.iterations):
                    shift = round_ % len(sides)
                    for name, run_env in sides[shift:] + sides[:shift]:
                        code, seconds, _ = one_run(args.workload, runs[name], args.parameters, run_env)
                        print(
                            f"pair {pair:2d} round {round_ + 1} run {name}: exit {code} {seconds:6.1f}s "
                            f"load {os.getloadavg()[0]:5.2f}",
                            flush=True,
                        )
                judge_pair(args, pair, runs, identical, slowed)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    return summarise(args, report, identical, slowed)


def judge_pair(
    args: argparse.Namespace, pair: int, runs: dict[str, Path], identical: list[str], slowed: list[str]
) -> None:
    """Compare A with B (identical) and A with C (slower SUT); print and count the worst verdicts."""
    for label, other, verdicts in (("identical", "B", identical), ("slower SUT", "C", slowed)):
        worst, lines = verdict_of(
            args.workload, runs["A"], runs[other], args.iterations, args.confidence, args.threshold
        )
        verdicts.append(worst)
        print(f"pair {pair:2d} {label:10s}: {worst}" + "".join(f"\n      {line}" for line in lines), flush=True)
        if args.facts:
            found = fact_verdicts(
                args.workload, runs["A"], runs[other], args.iterations, args.confidence, args.threshold
            )
            for fact, verdict in found.items():
                FACT_COUNTS.setdefault(label, {}).setdefault(fact, []).append(verdict)


#: ``--facts``: label (identical, slower SUT) -> fact -> its verdict per pair
FACT_COUNTS: dict[str, dict[str, list[str]]] = {}


def judge_kept(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The verdicts of every complete pair kept under ``--judge DIR`` (``pairN/{A,B,C}``)."""
    identical: list[str] = []
    slowed: list[str] = []
    pairs = sorted(
        (int(folder.name[4:]), folder)
        for folder in args.judge.glob("pair*")
        if folder.name[4:].isdigit() and all((folder / side).is_dir() for side in "ABC")
    )
    for pair, folder in pairs:
        runs = {side: folder / side for side in "ABC"}
        if any(sum(1 for _ in runs[side].glob("*/metrics.jsonl")) < args.iterations for side in "ABC"):
            print(f"pair {pair:2d}: fewer than {args.iterations} finished runs on a side, left out")
            continue
        judge_pair(args, pair, runs, identical, slowed)
    return identical, slowed


def summarise(args: argparse.Namespace, report: Report, identical: list[str], slowed: list[str]) -> int:
    """Print the counts against the goals; the report's exit code."""
    pairs = len(identical)
    no_regression = sum(1 for v in identical if v != "regression")
    regression = sum(1 for v in slowed if v == "regression")
    counts = {
        "identical": {v: identical.count(v) for v in (*VERDICTS, "error")},
        "slower": {v: slowed.count(v) for v in (*VERDICTS, "error")},
    }
    facts = {
        label: {f: {v: got.count(v) for v in VERDICTS} for f, got in by.items()} for label, by in FACT_COUNTS.items()
    }
    report.extra = {"counts": counts, "pairs": pairs, "machine": machine(), "facts": facts}
    goal = max(1, -(-9 * pairs // 10))  # 9 of 10, scaled to the pairs run
    print()
    print(f"identical pairs: no regression in {no_regression} of {pairs} (goal >= {goal}): {counts['identical']}")
    slower = f"slower SUT ({args.slowdown:.0%})"
    print(f"{slower}: regression in {regression} of {pairs} (goal >= {goal}): {counts['slower']}")
    for label, by_fact in facts.items():
        for fact, tally in by_fact.items():
            print(f"  --facts {label:10s} {fact:40s} {tally}")
    print(f"verdict: identical {'meets' if no_regression >= goal else 'misses'}, "
          f"slower {'meets' if regression >= goal else 'misses'}")  # fmt: skip
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
