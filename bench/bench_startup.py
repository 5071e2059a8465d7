"""How fast does `workload --help` start? Goal: under 0.3 s.

Interleaved in one run (``--rounds`` of: ``python -m workload --help``, then a bare
``python -c pass``), each a fresh interpreter measured by ``_measure.run_process``: wall time and
CPU time (user + system of the process). Printed with the interval of each median (see
``_measure.py``): ``--help`` wall and CPU time against the goal, what workload itself adds to a
bare interpreter (paired difference per round) and the ratio help/bare; then whether any heavy
library was imported. Wall time follows the neighbours' load; CPU time barely does.

    .venv/bin/python bench/bench_startup.py [--rounds 15] [--json]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from _measure import (
    Goal,
    ProcessRun,
    Report,
    add_arguments,
    figure,
    interleave,
    paired_differences,
    paired_ratios,
    run_process,
)

HEAVY = ("docker", "paramiko", "pydantic", "rich", "jsonpath_ng", "tenacity")
GOAL = Goal("<", 0.3)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_arguments(parser, rounds=15)
    args = parser.parse_args()
    report = Report("bench_startup", settings={"rounds": args.rounds})

    def help_run(r: int) -> ProcessRun:
        return run_process([sys.executable, "-m", "workload", "--help"], poll_s=0.002)

    def bare_run(r: int) -> ProcessRun:
        return run_process([sys.executable, "-c", "pass"], poll_s=0.002)

    helps, bares = interleave(args.rounds, [help_run, bare_run])
    check = (
        "import sys, runpy; sys.argv=['workload','--help']\n"
        "try:\n    runpy.run_module('workload', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True).stdout
    loaded = [line.removeprefix("HEAVY=") for line in out.splitlines() if line.startswith("HEAVY=")]
    heavy = loaded[-1] if loaded and loaded[-1] else "none"
    report.extra["heavy_modules"] = heavy
    ms = 1000.0
    hw, hc = [r.wall_s * ms for r in helps], [r.cpu_s * ms for r in helps]
    bw, bc = [r.wall_s * ms for r in bares], [r.cpu_s * ms for r in bares]
    goal_ms = Goal(GOAL.op, GOAL.target * ms)
    report.add(figure("workload --help wall", hw, unit="ms", goal=goal_ms, digits=1))
    report.add(figure("workload --help CPU", hc, unit="ms", goal=goal_ms, digits=1))
    report.add(figure("python -c pass wall", bw, unit="ms", digits=1))
    report.add(figure("python -c pass CPU", bc, unit="ms", digits=1))
    report.add(figure("workload's own wall (help - bare)", paired_differences(hw, bw), unit="ms", digits=1))
    report.add(figure("workload's own CPU (help - bare)", paired_differences(hc, bc), unit="ms", digits=1))
    report.add(figure("ratio help/bare wall", paired_ratios(hw, bw), digits=2))
    print(f"heavy modules imported by --help: {heavy}")
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
