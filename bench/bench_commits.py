"""This checkout against another commit's, side by side: is a reshape (issue 14) no slower?

Each round runs, in fresh interpreters and interleaved (this, other, this, other...), the CLI
commands that cross every layer a reshape moves: ``workload --help`` (imports), ``workload plan``
of both shipped profiles on this machine (profile loading, the engine, steps, facts, the MLPerf
planner; read-only) and ``workload results`` of the published result trees in the test fixtures
(parsers, rules, the metrics model). Both checkouts run with this interpreter and its installed
dependencies; only ``PYTHONPATH`` differs, so the figure is the code's, not the environment's.

Printed per command: the median CPU time and peak RSS of each side with their intervals, and the
paired ratio this/other (one pair per round, so the machine's load, which both sides share within
a round, largely cancels). Ratios whose interval lies under 1.10 are "no worse" (CPU time barely
follows the neighbours' load; wall time does, and is shown for information).

    git worktree add /tmp/base <commit>   # or any checkout of the other commit
    .venv/bin/python bench/bench_commits.py --other /tmp/base [--rounds 9] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from _measure import Goal, ProcessRun, Report, add_arguments, figure, interleave, paired_ratios, run_process

ROOT = Path(__file__).resolve().parents[1]
#: Paired CPU ratio this/other below which a command counts as no worse.
NO_WORSE = Goal("<", 1.10)


def commands(root: Path) -> dict[str, list[str]]:
    """The measured command lines, with paths inside ``root`` (each side reads its own shipped files)."""
    trees = root / "tests" / "fixtures" / "results" / "trees"
    found = {
        "--help": ["--help"],
        "plan PERF-CPU-MLPERF": ["plan", "--profile", str(root / "profiles" / "PERF-CPU-MLPERF.json")],
        "plan PERF-GPU-MLPERF": ["plan", "--profile", str(root / "profiles" / "PERF-GPU-MLPERF.json")],
    }
    if trees.is_dir():
        found["results (fixture trees)"] = ["results", str(trees)]
    return found


def runner(root: Path, argv: list[str], scratch: Path) -> Callable[[int], ProcessRun]:
    """One measured run of ``workload ARGV`` from checkout ``root`` (its own history off, temporary home)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "WORKLOAD_HISTORY": "off",
        "XDG_DATA_HOME": str(scratch / "data"),
        "NO_COLOR": "1",
    }

    def run(r: int) -> ProcessRun:
        return run_process([sys.executable, "-m", "workload", *argv], cwd=root, env=env, check=False)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_arguments(parser, rounds=9)
    parser.add_argument("--other", type=Path, required=True, help="the other commit's checkout")
    args = parser.parse_args()
    other = args.other.resolve()
    if not (other / "workload" / "__main__.py").is_file():
        raise SystemExit(f"--other {other}: not a checkout of this project (no workload/__main__.py)")
    report = Report("bench_commits", settings={"rounds": args.rounds, "other": str(other)})
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-commits-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    mine, theirs = commands(ROOT), commands(other)
    for name, argv in mine.items():
        if name not in theirs:
            print(f"{name}: not in the other checkout, skipped")
            continue
        this_runs, other_runs = interleave(
            args.rounds, [runner(ROOT, argv, scratch), runner(other, theirs[name], scratch)]
        )
        this_codes, other_codes = {r.returncode for r in this_runs}, {r.returncode for r in other_runs}
        if len(this_codes) > 1 or this_codes != other_codes:
            print(
                f"{name}: exit codes differ (this {sorted(this_codes)}, other {sorted(other_codes)}): compare with care"
            )
        report.add(figure(f"{name}: CPU this", [r.cpu_s * 1000 for r in this_runs], unit="ms", digits=0))
        report.add(figure(f"{name}: CPU other", [r.cpu_s * 1000 for r in other_runs], unit="ms", digits=0))
        report.add(
            figure(
                f"{name}: CPU ratio this/other",
                paired_ratios([r.cpu_s for r in this_runs], [r.cpu_s for r in other_runs]),
                goal=NO_WORSE,
                digits=3,
            )
        )
        report.add(
            figure(
                f"{name}: wall ratio this/other",
                paired_ratios([r.wall_s for r in this_runs], [r.wall_s for r in other_runs]),
                digits=3,
            )
        )
        report.add(
            figure(
                f"{name}: peak RSS ratio this/other",
                paired_ratios([r.peak_rss_mib for r in this_runs], [r.peak_rss_mib for r in other_runs]),
                goal=NO_WORSE,
                digits=3,
            )
        )
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
