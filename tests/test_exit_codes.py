"""The exit codes have one source (workload/exit_codes.py): ``--help`` and the README's table come from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workload import errors, exit_codes

ROOT = Path(__file__).resolve().parent.parent


def _readme_table() -> list[str]:
    """The README's exit-code table: from its header line to the first line that is not a row."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("| code | meaning |")
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return lines[start:end]


def test_readme_table_is_the_one_source() -> None:
    assert _readme_table() == exit_codes.readme_rows()


def test_help_lists_every_exit_code_exit_1_included() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "workload", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120, check=True
    ).stdout
    flat = " ".join(out.split())  # click re-wraps the paragraph
    assert exit_codes.help_text() in flat
    assert "1 internal error (a bug" in flat
    for entry in exit_codes.EXIT_CODES:
        assert f"{entry.code} {entry.short}" in flat


def test_codes_are_unique_and_errors_use_them() -> None:
    codes = [entry.code for entry in exit_codes.EXIT_CODES]
    assert len(codes) == len(set(codes)) and codes == sorted(codes)
    raised = {errors.UsageError.exit_code, errors.ConnectError.exit_code, errors.WorkloadError.exit_code}
    assert raised <= set(codes)
    assert errors.EXIT_STEP_FAILED == exit_codes.EXIT_STEP_FAILED == 4
