"""CPU of one host-state change (``HostState.set``: the host's Python runs ``UPDATE_SCRIPT``), this checkout vs a base.

A run makes hundreds of these (every step's done-marker and setup key, on every host; about 600 in the
test suite), each a fresh interpreter. Interleaved in one run (``--rounds`` of: this checkout's command,
then the base's, then ``python -c pass`` with this checkout's flags), each measured by ``_measure.run_process`` (CPU
of the process: user + system). The base is ``--base REF``: its ``workload/hoststate.py`` read with
``git show``, run as that version ran it (its ``UPDATE_FLAGS``, none before they existed). Printed with
the interval of each median (``_measure.py``): CPU per change of each, the paired ratio this/base, and
what the script adds to a bare isolated interpreter. Every change writes the same small state file in a
temporary folder.

    .venv/bin/python bench/bench_state_update.py [--base REF] [--python PATH] [--rounds 30] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _measure import (
    ProcessRun,
    Report,
    add_arguments,
    figure,
    interleave,
    paired_differences,
    paired_ratios,
    run_process,
)

ROOT = Path(__file__).resolve().parents[1]


def constants(source: str) -> tuple[tuple[str, ...], str]:
    """``UPDATE_FLAGS`` (``()`` where the version has none) and ``UPDATE_SCRIPT`` of a hoststate.py source."""
    values: dict[str, object] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in ("UPDATE_FLAGS", "UPDATE_SCRIPT"):
            values[target.id] = ast.literal_eval(node.value)
    script = values.get("UPDATE_SCRIPT")
    if not isinstance(script, str):
        raise SystemExit("bench_state_update: that hoststate.py has no UPDATE_SCRIPT string")
    flags = values.get("UPDATE_FLAGS", ())
    return tuple(str(flag) for flag in flags) if isinstance(flags, tuple) else (), script


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base", default="HEAD", help="the git commit to compare with (default: HEAD)")
    parser.add_argument("--python", default=sys.executable, help="the host's Python (default: this one)")
    add_arguments(parser, rounds=30)
    args = parser.parse_args()
    this = constants((ROOT / "workload" / "hoststate.py").read_text(encoding="utf-8"))
    shown = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{args.base}:workload/hoststate.py"], capture_output=True, text=True
    )
    if shown.returncode != 0:
        raise SystemExit(f"bench_state_update: git show {args.base}:workload/hoststate.py: {shown.stderr.strip()}")
    base = constants(shown.stdout)
    report = Report("bench_state_update", settings={"rounds": args.rounds, "base": args.base, "python": args.python})
    change = json.dumps({"op": "set", "key": "bench", "value": {"step": "done"}})

    with tempfile.TemporaryDirectory(prefix="bench-state-") as folder:
        state = str(Path(folder) / "state.json")
        request = Path(folder) / "change.json"
        request.write_text(change, encoding="utf-8")

        def update(version: tuple[tuple[str, ...], str]) -> ProcessRun:
            flags, script = version
            with request.open("rb") as stdin:
                return run_process([args.python, *flags, "-c", script, state], stdin=stdin)

        def bare(r: int) -> ProcessRun:  # the interpreter started as this checkout starts it, doing nothing
            return run_process([args.python, *this[0], "-c", "pass"])

        mine, theirs, bares = interleave(args.rounds, [lambda r: update(this), lambda r: update(base), bare])
    ms = 1000.0
    cpu_this, cpu_base = [r.cpu_s * ms for r in mine], [r.cpu_s * ms for r in theirs]
    cpu_bare = [r.cpu_s * ms for r in bares]
    this_flags, base_flags = (" ".join(version[0]) or "no flags" for version in (this, base))
    report.add(figure(f"this checkout, {this_flags}: CPU per change", cpu_this, "ms", digits=1))
    report.add(figure(f"base {args.base}, {base_flags}: CPU per change", cpu_base, "ms", digits=1))
    report.add(figure("ratio this/base CPU", paired_ratios(cpu_this, cpu_base), digits=2))
    over_bare = paired_differences(cpu_this, cpu_bare)
    report.add(figure(f"this checkout's script over a bare start ({this_flags})", over_bare, unit="ms", digits=1))
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
