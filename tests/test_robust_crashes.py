"""What used to end in exit 1 "internal error" (and lose the verdict) is now a named problem.

Unwritable --output-dir, a disk that fills up during the run (a real, tiny tmpfs), two runs in
the same second, a bug on one host of two, a non-UTF-8 byte in metrics.jsonl, a non-UTF-8
folder name with --json.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import pytest

from tests.test_robust_console import CPU_RESULTS, H200_OFFLINE
from workload.cli import invoke
from workload.rundir import RunFolder
from workload.steps import Change, Step, StepContext, StepPlan


class FillDiskStep(Step):
    """Copies the CPU results as this host's result, then fills the file system (test only)."""

    type_name: ClassVar[str] = "FillDiskStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change("copy results, then fill the disk", ()),))

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        target = ctx.host_dir / "results"
        shutil.copytree(CPU_RESULTS, target)
        ctx.results.append(target)
        with contextlib.suppress(OSError), open(ctx.host_dir / "filler", "wb") as fh:
            while True:
                fh.write(b"\0" * 65536)


class BuggyStep(Step):
    """Raises a plain exception (a bug) on the host named 'a'; copies results elsewhere."""

    type_name: ClassVar[str] = "BuggyStep"

    def plan(self, ctx: StepContext) -> StepPlan:
        if ctx.host.name == "a":
            raise RuntimeError("boom in a step")
        return StepPlan(changes=(Change("copy results", ()),))

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        target = ctx.host_dir / "results"
        shutil.copytree(CPU_RESULTS, target)
        ctx.results.append(target)


@pytest.fixture
def test_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workload import registry

    types = {"FillDiskStep": f"{__name__}:FillDiskStep", "BuggyStep": f"{__name__}:BuggyStep"}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **types})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))


def profile_of(tmp_path: Path, step: str) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"Description": "x", "Actions": [{"Type": step}]}))
    return str(path)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs (needs root): it fills up for real."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)]).returncode:
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_unwritable_output_dir_is_bad_input_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code = invoke(["run", "--profile", "PERF-CPU-MLPERF", "--output-dir", str(blocker / "runs")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--output-dir {blocker / 'runs'}: cannot create the run folder" in err and "internal error" not in err


def test_disk_full_during_the_run_names_the_path_keeps_the_verdict_exit_8(
    tmp_path: Path, small_disk: Path, test_steps: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = invoke(["run", "--profile", profile_of(tmp_path, "FillDiskStep"), "--output-dir", str(small_disk)])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 8, out
    assert "internal error" not in out
    assert "cannot write" in out and str(small_disk) in out and "No space left on device" in out
    assert "verdict: OK" in out  # the benchmark's result is still judged and shown


def test_two_runs_in_the_same_second_get_their_own_folders(tmp_path: Path) -> None:
    now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
    made: list[Path] = []
    barrier = threading.Barrier(8)

    def create() -> None:
        barrier.wait()
        made.append(RunFolder.create(tmp_path, "P", now=now).root)

    threads = [threading.Thread(target=create) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(made)) == 8 and all(p.is_dir() for p in made)


def test_runs_of_two_output_folders_in_the_same_second_never_share_a_remote_folder(tmp_path: Path) -> None:
    from workload.rundir import remote_run_name

    now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
    a = RunFolder.create(tmp_path / "ci-a", "P", now=now).root
    b = RunFolder.create(tmp_path / "ci-b", "P", now=now).root
    assert a.name == b.name == "20261123-120000-P"  # the run id alone would be one folder on the host
    assert remote_run_name(a) != remote_run_name(b)
    assert remote_run_name(a) == remote_run_name(a) and remote_run_name(a).startswith(f"{a.name}~")


def test_a_bug_on_one_host_keeps_run_json_and_the_other_hosts_metrics(
    tmp_path: Path, test_steps: None, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = tmp_path / "fleet.txt"
    fleet.write_text("local name=a\nlocal name=b\n")
    runs = tmp_path / "runs"
    code = invoke(
        ["run", "--profile", profile_of(tmp_path, "BuggyStep"), "--inventory", str(fleet), "--output-dir", str(runs)]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    (folder,) = runs.iterdir()
    outcomes = {o["host"]: o for o in json.loads((folder / "run.json").read_text())["outcomes"]}
    assert outcomes["a"]["status"] == "failed" and "RuntimeError: boom in a step" in outcomes["a"]["error"]
    assert outcomes["b"]["status"] == "ok"
    assert "boom in a step" in (folder / "a" / "traceback.txt").read_text()
    hosts = {json.loads(line)["host"] for line in (folder / "metrics.jsonl").read_text().splitlines()}
    assert hosts == {"b"}


def test_a_non_utf8_byte_in_metrics_jsonl_is_named_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out"
    assert invoke(["results", str(H200_OFFLINE), "--output", str(out_dir)]) == 0
    with (out_dir / "metrics.jsonl").open("ab") as fh:
        fh.write(b'{"name": "x\xff"}\n')
    capsys.readouterr()
    assert invoke(["results", str(out_dir)]) == 6
    out = capsys.readouterr().out
    assert "metrics.jsonl" in out and "not UTF-8 text" in out and "VALID" in out


def test_a_non_utf8_folder_name_with_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname"))
    shutil.copytree(H200_OFFLINE, folder)
    assert invoke(["results", str(folder), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert records and all(r["value"] is not None for r in records)


def test_a_folder_claimed_between_check_and_create_is_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other run creates the folder right after this one looked (the race, made certain)."""
    now = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)
    first = RunFolder.create(tmp_path, "P", now=now).root
    monkeypatch.setattr(Path, "exists", lambda self: False)  # every look says "free"
    second = RunFolder.create(tmp_path, "P", now=now).root
    assert second != first and second.name == f"{first.name}-2"
