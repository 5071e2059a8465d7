"""Does the README's first command flake? N consecutive runs while a neighbour keeps one core busy.

    .venv/bin/python bench/bench_first_command.py [--runs 10] [--no-neighbour] [--keep DIR]
        [--workload EXE] [--baseline EXE]

Runs ``workload run --profile PERF-CPU-MLPERF`` (the README's first command, from this checkout's
venv) N times one after another, while a separate process spins on one core for the whole bench
(a busy neighbour on a small shared machine). Prints, per run: exit code, wall time, the retries
the LoadGenExecutor made (``attempts.json`` files: an INVALID test re-run once with the computed
target) and the validity of each attempt; then the count that exited 0, the retries used and the
wall-time median / max. Goal: N of N exit 0, the run staying near its usual length.
``--workload`` runs another checkout's command instead; ``--baseline EXE`` runs a second command
(e.g. the main branch's venv) alternately with the first, and prints both counts and the ratio of
their median wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = Path(sys.executable).with_name("workload")

SPIN = "import time\nwhile True:\n    pass\n"


def one_run(workload: Path, output_dir: Path) -> tuple[int, float, list[str], Path | None]:
    """Exit code, seconds, retry descriptions, run folder."""
    before = set(output_dir.glob("*"))
    started = time.perf_counter()
    proc = subprocess.run(
        [str(workload), "run", "--profile", "PERF-CPU-MLPERF", "--output-dir", str(output_dir)],
        cwd=output_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    new = sorted(set(output_dir.glob("*")) - before)
    folder = new[-1] if new else None
    retries: list[str] = []
    if folder is not None:
        for path in sorted(folder.rglob("attempts.json")):
            record = json.loads(path.read_text())
            validity = " -> ".join(str(a.get("validity")) for a in record.get("attempts", []))
            changed = record["attempts"][-1].get("changed", {})
            retries.append(f"{record.get('scenario')} {validity} ({', '.join(f'{k}={v}' for k, v in changed.items())})")
    if proc.returncode != 0:
        tail = "\n".join(proc.stdout.strip().splitlines()[-8:])
        print(f"    output tail:\n{tail}")
    return proc.returncode, seconds, retries, folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-neighbour", action="store_true", help="no busy process (a quiet baseline)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    parser.add_argument("--workload", type=Path, default=WORKLOAD, help="the workload command to run")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="another workload command, run alternately with --workload"
    )
    args = parser.parse_args()
    commands: list[Path] = [args.workload] + ([args.baseline] if args.baseline else [])
    for command in commands:
        if not command.exists():
            print(f"{command} not found: run this with the venv's python (.venv/bin/python)", file=sys.stderr)
            return 2
    neighbour = None if args.no_neighbour else subprocess.Popen([sys.executable, "-c", SPIN])
    print(
        f"{args.runs} runs of `{' run --profile PERF-CPU-MLPERF` and `'.join(map(str, commands))} run --profile "
        f"PERF-CPU-MLPERF`{' (alternating)' if len(commands) > 1 else ''} on {os.cpu_count()} CPU(s); "
        f"neighbour spinning on one core: {'no' if neighbour is None else f'yes (pid {neighbour.pid})'}; "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    codes: dict[Path, list[int]] = {c: [] for c in commands}
    times: dict[Path, list[float]] = {c: [] for c in commands}
    retries_used = dict.fromkeys(commands, 0)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-first-") as tmp:
            out = args.keep or Path(tmp)
            out.mkdir(parents=True, exist_ok=True)
            for n in range(1, args.runs + 1):
                for command in commands:  # alternate, so that the machine's load hits both alike
                    code, seconds, retries, _folder = one_run(command, out)
                    codes[command].append(code)
                    times[command].append(seconds)
                    retries_used[command] += len(retries)
                    who = "" if len(commands) == 1 else (" ours    " if command == args.workload else " baseline")
                    print(
                        f"run {n:2d}{who}: exit {code}  {seconds:6.1f}s  load {os.getloadavg()[0]:5.2f}  "
                        f"retries {len(retries)}" + (f": {'; '.join(retries)}" if retries else ""),
                        flush=True,
                    )
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    print()
    for command in commands:
        ok = sum(1 for c in codes[command] if c == 0)
        spent = times[command]
        print(
            f"{command}: {ok} of {len(spent)} runs exited 0; retries used: {retries_used[command]}; "
            f"wall time median {statistics.median(spent):.1f}s, min {min(spent):.1f}s, max {max(spent):.1f}s"
        )
    if args.baseline:
        ratio = statistics.median(times[args.workload]) / statistics.median(times[args.baseline])
        print(f"median wall time ours / baseline: {ratio:.2f}")
    return 0 if all(c == 0 for c in codes[args.workload]) else 1


if __name__ == "__main__":
    sys.exit(main())
