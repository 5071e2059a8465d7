"""How fast does `workload --help` start? Target: under 0.3 s.

Runs `python -m workload --help` and, side by side in the same run, a bare `python -c pass`, N
times each, interleaved, and prints the medians, their difference (what workload itself costs)
and whether any heavy library was imported.

    .venv/bin/python bench/bench_startup.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

HEAVY = ("docker", "paramiko", "pydantic", "rich", "jsonpath_ng", "tenacity")


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    help_times, bare_times = [], []
    for _ in range(runs):
        help_times.append(timed([sys.executable, "-m", "workload", "--help"]))
        bare_times.append(timed([sys.executable, "-c", "pass"]))
    check = (
        "import sys, runpy; sys.argv=['workload','--help']\n"
        "try:\n    runpy.run_module('workload', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True).stdout
    loaded = [line.removeprefix("HEAVY=") for line in out.splitlines() if line.startswith("HEAVY=")]
    help_med, bare_med = statistics.median(help_times), statistics.median(bare_times)
    print(f"workload --help   median {help_med * 1000:7.1f} ms  (min {min(help_times) * 1000:.1f} ms, {runs} runs)")
    print(f"python -c pass    median {bare_med * 1000:7.1f} ms")
    print(f"workload's own    {(help_med - bare_med) * 1000:7.1f} ms   ratio help/bare = {help_med / bare_med:.2f}")
    print(f"heavy modules imported by --help: {loaded[-1] if loaded and loaded[-1] else 'none'}")
    print("target: under 300 ms ->", "PASS" if help_med < 0.3 else "FAIL")


if __name__ == "__main__":
    main()
