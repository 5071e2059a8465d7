"""Issue 30: the newest surfaces attacked (history, report, JUnit, telemetry files, remote state).

One section per numbered defect of the issue; each test plants what an attacker, a damaged disk or
a careless hand could leave, and checks the real code path (the CLI where the user meets it).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click
from click.testing import CliRunner

from workload.cli.compare_cmd import compare_command
from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
OFFLINE = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"


def cli(*args: str, command: click.Command | None = None) -> tuple[int, str]:
    group = click.Group("workload")
    for each in (results_command, compare_command) if command is None else (command,):
        group.add_command(each)
    result = CliRunner().invoke(group, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


# -- 1. --junit follows a planted symlink ---------------------------------------------------------
def test_results_junit_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.symlink(victim, shared / "junit.xml")
    code, _ = cli("results", str(OFFLINE), "--output", str(shared), "--junit", str(shared / "junit.xml"))
    assert code == 0
    assert victim.read_text() == "precious\n"
    assert not (shared / "junit.xml").is_symlink()
    assert (shared / "junit.xml").read_text().startswith("<?xml")


def test_compare_junit_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    runs = []
    for name in ("a", "b"):
        raw = tmp_path / "raw" / name
        shutil.copytree(OFFLINE, raw)
        write_outputs(tmp_path / name, collect(raw, host="n1").results, OutputContext())
        runs.append(str(tmp_path / name))
    os.symlink(victim, tmp_path / "compare.xml")
    code, _ = cli("compare", *runs, "--junit", str(tmp_path / "compare.xml"))
    assert code == 0
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "compare.xml").read_text().startswith("<?xml")
