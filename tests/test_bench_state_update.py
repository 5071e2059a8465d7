"""bench_state_update: it runs the host-state change as HostState runs it, and reads a base's as that base ran it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from workload import hoststate

_BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_this_checkouts_flags_and_script_are_what_hoststate_runs() -> None:
    spec = importlib.util.spec_from_file_location("bench_state_update", _BENCH / "bench_state_update.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(_BENCH))  # it imports _measure from beside itself
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.path.remove(str(_BENCH))
    source = (Path(hoststate.__file__)).read_text(encoding="utf-8")
    assert bench.constants(source) == (hoststate.UPDATE_FLAGS, hoststate.UPDATE_SCRIPT)
    # A version from before UPDATE_FLAGS ran the script with no flags.
    assert bench.constants('UPDATE_SCRIPT = r"""\nprint(1)\n"""\n') == ((), "\nprint(1)\n")
    with pytest.raises(SystemExit, match="no UPDATE_SCRIPT"):
        bench.constants("UPDATE_FLAGS = ()\n")


def test_one_short_run_prints_the_ratio_against_the_committed_version() -> None:
    proc = subprocess.run(
        [sys.executable, str(_BENCH / "bench_state_update.py"), "--rounds", "2", "--base", "HEAD"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ratio this/base CPU:" in proc.stdout and "CPU per change:" in proc.stdout
