"""The free-space check before a model's setup (issue 18): the size table, where the planner puts the check,
what ``plan`` shows, and the check itself against real file systems (tmpfs mounts, a real ``df``)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.steptypes import step_context
from workload.actions.mlperf_executor import MLPerfExecutor, plan_mlperf
from workload.errors import StepError
from workload.hosts.local import LocalHost
from workload.mlperf.catalog import MODELS
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.interpreter import Interpreter
from workload.mlperf.ops import EnsureScratch, Op, SetupStage
from workload.mlperf.planner import MLPerfPlan, SystemAnswer, plan_ops
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts, setup_key
from workload.mlperf.space_check import CheckFreeSpace, parse_df, refusal, shortfalls
from workload.mlperf.space_table import GIB, ROUND_SIZES, SIZES, STAGE_FOLDERS, sizes_for

STAGES = ("download_data", "download_model", "preprocess_data")
ALICE = UserFacts("alice", 1000, 1000, "alice", "/home/alice")


def params(**extra: Any) -> MLPerfParameters:
    return MLPerfParameters.model_validate({"Model": "bert", "Scenarios": "Offline", **extra})


def facts(scratch: str = "/mnt/scratch", **extra: Any) -> MLPerfFacts:
    base: dict[str, Any] = dict(
        nvidia_dir="/r/closed/NVIDIA",
        nvidia_dir_exists=True,
        version=HarnessVersion(4, 1),
        commit="abcdef1234567890",
        scratch_path=scratch,
        user=ALICE,
        machine="x86_64",
    )
    base.update(extra)
    return MLPerfFacts(**base)


def checks(plan: MLPerfPlan) -> list[CheckFreeSpace]:
    return [op for op in plan.ops if isinstance(op, CheckFreeSpace)]


def gib(model: str, *stages: str, harness_round: str = "v4.1") -> str:
    """What the table says ``stages`` of ``model`` need, as the plan prints it."""
    sizes = sizes_for(harness_round, model)
    assert sizes is not None
    total = 0
    for stage in stages:
        size = sizes.for_stage(stage)
        assert size is not None
        total += size.bytes
    return f"{total / GIB:.1f} GiB"


# -- the table ----------------------------------------------------------------------------------------------
def test_every_benchmark_the_catalog_runs_has_sizes_and_every_value_says_where_it_comes_from() -> None:
    for model in MODELS:
        sizes = sizes_for("v4.1", model)
        assert sizes is not None, model
        for stage, folder in STAGE_FOLDERS.items():
            size = sizes.for_stage(stage)
            assert size is not None and size is getattr(sizes, folder)
            assert size.source.strip() and size.basis.strip(), (model, stage)
    # A stated value quotes or names its source file/thread; nothing stated is a bare number.
    stated = [s for sizes in SIZES.values() for s in (sizes.data, sizes.models, sizes.preprocessed_data)]
    stated = [s for s in stated if not s.estimate]
    assert stated and all("README.md" in s.source or "#" in s.source for s in stated)
    # NVIDIA's spelling finds the same entry; a benchmark nobody measured has none.
    assert sizes_for("v5.1", "llama3_1-405b") is SIZES["llama3.1-405b"]
    assert sizes_for("v6.1", "no-such-benchmark") is None
    assert ROUND_SIZES == {} or all(key[1] in SIZES for key in ROUND_SIZES)


def test_a_stage_that_writes_no_scratch_data_needs_nothing() -> None:
    assert SIZES["bert"].for_stage("ensure_installed") is None  # v6.1's pip install of the harness


# -- placement and plan ------------------------------------------------------------------------------------
def test_the_check_comes_after_the_system_check_and_right_before_the_first_download() -> None:
    planned = plan_ops(params(), facts())
    kinds = [type(op).__name__ for op in planned.ops]
    first_stage = kinds.index("SetupStage")
    assert kinds[first_stage - 1] == "CheckFreeSpace" and kinds[first_stage - 2] == "IdentifySystem"
    (check,) = checks(planned)
    assert [n.stage for n in check.needs] == list(STAGES)
    assert check.commands()[0].argv_values() == [
        "df",
        "-P",
        "-B1",
        "/mnt/scratch/data",
        "/mnt/scratch/models",
        "/mnt/scratch/preprocessed_data",
    ]


def test_plan_shows_the_numbers_the_check_will_require() -> None:
    changes = plan_mlperf(params(), facts()).changes
    (change,) = [c for c in changes if "room for bert's setup" in c.summary]
    assert f"{gib('bert', *STAGES)} free needed" in change.summary
    for stage in STAGES:
        assert f"{stage} ~{gib('bert', stage)}" in change.summary
    assert "~: estimated" in change.summary
    assert (
        change.commands[0].display() == "df -P -B1 /mnt/scratch/data /mnt/scratch/models /mnt/scratch/preprocessed_data"
    )
    order = [c.summary for c in changes]
    assert order.index(change.summary) + 1 == next(i for i, s in enumerate(order) if s.startswith("set up bert"))


def test_stages_already_done_need_no_space_and_a_finished_setup_no_check() -> None:
    done = {setup_key("/mnt/scratch", "bert", "download_data"): "2026-11-23T10:00:00"}
    (check,) = checks(plan_ops(params(), facts(done=done)))
    assert [n.stage for n in check.needs] == ["download_model", "preprocess_data"]
    assert check.total == sum(SIZES["bert"].for_stage(s).bytes for s in STAGES[1:])  # type: ignore[union-attr]
    assert check.folders() == ("/mnt/scratch/models", "/mnt/scratch/preprocessed_data")
    all_done = {setup_key("/mnt/scratch", "bert", s): "t" for s in STAGES}
    assert checks(plan_ops(params(), facts(done=all_done))) == []


def test_skip_free_space_check_leaves_it_out_and_says_what_it_would_need() -> None:
    planned = plan_ops(params(SkipFreeSpaceCheck=True), facts())
    assert checks(planned) == []
    assert f"free space not checked (SkipFreeSpaceCheck): bert's setup needs about {gib('bert', *STAGES)}" in (
        planned.notes
    )


def test_v61_counts_only_the_stages_that_fill_the_scratch_disk() -> None:
    planned = plan_ops(params(Model="llama2-70b", HarnessRound="v6.1"), facts(version=HarnessVersion(6, 1)))
    (check,) = checks(planned)
    stages = [op for op in planned.ops if isinstance(op, SetupStage)]
    assert stages[0].stage == "ensure_installed"
    assert planned.ops.index(check) == planned.ops.index(stages[0]) - 1
    assert [n.stage for n in check.needs] == list(STAGES)  # ensure_installed (pip install) needs none
    assert check.harness_round == "v6.1"


# -- df -------------------------------------------------------------------------------------------------------
def test_parse_df_reads_real_df_output_in_operand_order(tmp_path: Path) -> None:
    out = subprocess.run(["df", "-P", "-B1", str(tmp_path), "/"], capture_output=True, text=True, check=True).stdout
    rows = parse_df(out, 2)
    assert rows[1].mount == "/" and rows[0].mount.startswith("/")
    assert all(r.available > 0 for r in rows)


def test_parse_df_keeps_spaces_in_names_and_refuses_what_is_not_df() -> None:
    text = (
        "Filesystem              1-blocks       Used  Available Capacity Mounted on\n"
        "//nas/share one   1000000000000 1000 999999999000       1% /mnt/my scratch\n"
    )
    (row,) = parse_df(text, 1)
    assert (row.filesystem, row.available, row.mount) == ("//nas/share one", 999999999000, "/mnt/my scratch")
    with pytest.raises(ValueError, match="no 'Filesystem' header"):
        parse_df("df: /nowhere: No such file or directory\n", 1)
    with pytest.raises(ValueError, match="printed 1 line"):
        parse_df(text, 2)
    with pytest.raises(ValueError, match="unreadable df line"):
        parse_df("Filesystem 1-blocks Used Available Capacity Mounted on\nnonsense\n", 1)


# -- against real file systems -------------------------------------------------------------------------------
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting tmpfs needs root")


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """Mount a tmpfs of a given size (e.g. ``2g``: a limit, it takes no memory until written) under tmp_path."""
    mounted: list[Path] = []

    def make(name: str, size: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(path)
        return path

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", str(path)], capture_output=True)


def apply_until_setup(tmp_path: Path, p: MLPerfParameters, f: MLPerfFacts, *, keep_stages: bool) -> Path:
    """Run the plan's scratch and free-space ops (and, with ``keep_stages``, its setup stages) on this machine.

    The setup stages need the harness container, which this test has none of: reaching one fails the test
    with an AssertionError, so a refusal is the only way through them.
    """
    planned = plan_ops(p, f)
    wanted = (EnsureScratch, CheckFreeSpace, SetupStage) if keep_stages else (EnsureScratch, CheckFreeSpace)
    tail = dataclasses.replace(planned.tail, preview=tuple(op for op in planned.tail.preview if isinstance(op, wanted)))
    plan = dataclasses.replace(planned, head=tuple(op for op in planned.head if isinstance(op, wanted)), tail=tail)
    ctx = step_context(LocalHost(), tmp_path)
    step = MLPerfExecutor(p, location="Actions[0]", kind="action")

    def no_docker() -> Any:
        raise AssertionError("no docker in this test")

    class WithoutSystemCheck(Interpreter):
        """NVIDIA's system check runs in the harness container, which this test has none of: its answer is the
        one that changes nothing (the tail runs as previewed)."""

        def _identify(self, op: Op) -> None:
            self.answer = SystemAnswer()

    WithoutSystemCheck(step, ctx, plan, connect=no_docker, container_spec=no_docker).run()  # type: ignore[arg-type]
    return tmp_path / "step.log"


@needs_root
def test_a_scratch_disk_too_small_is_refused_before_any_download(
    tmpfs: Callable[[str, str], Path], tmp_path: Path
) -> None:
    scratch = tmpfs("scratch", "2g")
    with pytest.raises(StepError) as info:
        apply_until_setup(tmp_path, params(), facts(str(scratch)), keep_stages=True)
    text = str(info.value)
    assert "not enough free space for the setup of bert (v4.1" in text
    assert f"{scratch}/data, {scratch}/models, {scratch}/preprocessed_data (file system {scratch})" in text
    assert f"{gib('bert', *STAGES)} needed, 2.0 GiB free" in text and "nothing was downloaded" in text
    assert info.value.hint is not None and "larger scratch disk" in info.value.hint and "ScratchPath" in info.value.hint
    assert "SkipFreeSpaceCheck=true" in info.value.hint
    assert sorted(p.name for p in scratch.iterdir()) == ["data", "models", "preprocessed_data"]  # nothing else
    assert "df -P -B1" in (tmp_path / "step.log").read_text()


@needs_root
def test_enough_room_passes_and_logs_the_free_space(tmpfs: Callable[[str, str], Path], tmp_path: Path) -> None:
    scratch = tmpfs("scratch", "8g")
    log = apply_until_setup(tmp_path, params(), facts(str(scratch)), keep_stages=False)
    assert f"free space for bert's setup: {gib('bert', *STAGES)} needed; free: {scratch} 8.0 GiB" in log.read_text()


@needs_root
def test_done_stages_are_not_counted_against_a_small_disk(tmpfs: Callable[[str, str], Path], tmp_path: Path) -> None:
    """4.7 GiB of bert's model would not fit in 2 GiB: with it marked done, the rest (1.9 GiB) does."""
    scratch = tmpfs("scratch", "2g")
    done = {setup_key(str(scratch), "bert", "download_model"): "2026-11-23T10:00:00"}
    log = apply_until_setup(tmp_path, params(), facts(str(scratch), done=done), keep_stages=False)
    assert f"{gib('bert', 'download_data', 'preprocess_data')} needed" in log.read_text()


@needs_root
def test_each_file_system_holds_what_its_folders_need(tmpfs: Callable[[str, str], Path], tmp_path: Path) -> None:
    """``models`` is a link to a disk of its own: data and preprocessed data must fit the scratch's, the model its."""
    scratch = tmpfs("scratch", "1g")
    big = tmpfs("models-disk", "8g")
    (scratch / "models").symlink_to(big)
    for folder in ("data", "preprocessed_data"):
        (scratch / folder).mkdir()
    op = next(iter(checks(plan_ops(params(), facts(str(scratch))))))
    out = subprocess.run(["df", "-P", "-B1", *op.folders()], capture_output=True, text=True, check=True).stdout
    (short,) = shortfalls(op, parse_df(out, 3))
    assert short.mount == str(scratch) and short.folders == (f"{scratch}/data", f"{scratch}/preprocessed_data")
    assert short.need == SIZES["bert"].data.bytes + SIZES["bert"].preprocessed_data.bytes
    assert f"{scratch}/models" not in refusal(op, [short])
