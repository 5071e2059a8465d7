"""The free-space check before a model's setup: refuse before any download that cannot fit on the scratch disk.

Contract
--------
* :func:`place_space_check` (called by the pure planner) puts one :class:`CheckFreeSpace` before the first
  setup stage of the model that still has to run; stages already done (host state) need no space, and a
  stage that writes nothing to the scratch disk (v6.1's ``ensure_installed``) needs none either. The op
  carries every number it will require (per stage, from :mod:`workload.mlperf.space_table`), so ``plan``
  shows them. ``SkipFreeSpaceCheck=true`` leaves it out and says so in a note.
* :func:`run_check` (the interpreter's handler) runs ``df -P -B1 <folder>...`` on the host (read-only; a
  local, SSH or Slurm host alike), one folder per stage (``data``, ``models``, ``preprocessed_data``: a folder
  may be a link to another disk), adds up what each file system must hold, and returns the problem (benchmark,
  path, need and free in GiB, what to do) when one holds less, before the first download starts.

Limit: a stage cut off part-way is not marked done, so it is counted in full although part of it is already
on the disk; ``SkipFreeSpaceCheck=true`` runs such a resume when the user knows the rest fits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from workload.commands import Command, cmd
from workload.mlperf.ops import Op, SetupStage
from workload.mlperf.space_table import GIB, STAGE_FOLDERS, sizes_for

#: What to do when the space is short (the message's hint).
HINT = (
    "use a larger scratch disk (MountDisks with a DiskFilter that picks it, e.g. SizeGreaterThan:<n>gb) or point "
    "ScratchPath at a file system with room; SkipFreeSpaceCheck=true runs the setup anyway (a resumed stage is "
    "counted in full)"
)
DF_TIMEOUT_S = 60


@dataclass(frozen=True)
class StageNeed:
    """One setup stage's space: the scratch folder it fills and the bytes it needs (``estimate``: no source)."""

    stage: str
    folder: str
    bytes: int
    estimate: bool

    def label(self) -> str:
        return f"{self.stage} {'~' if self.estimate else ''}{self.bytes / GIB:.1f} GiB"


@dataclass(frozen=True)
class CheckFreeSpace(Op):
    """``df`` the scratch folders of the stages still to run; refuse when a file system has less free than they need."""

    scratch: str
    model: str
    harness_round: str
    needs: tuple[StageNeed, ...]
    #: The disk as the summary names it (the v6.0 clones go in the harness checkout, not the scratch disk).
    disk: str = "the scratch disk"
    #: What needs the room, as the summary names it (default: ``<model>'s setup``).
    subject: str = ""

    @property
    def total(self) -> int:
        return sum(n.bytes for n in self.needs)

    def folders(self) -> tuple[str, ...]:
        """The folders ``df`` measures, in the order of :attr:`needs` (each once)."""
        return tuple(dict.fromkeys(f"{self.scratch}/{n.folder}" for n in self.needs))

    def summary(self) -> str:
        marked = " (~: estimated, no published size)" if any(n.estimate for n in self.needs) else ""
        subject = self.subject or f"{self.model}'s setup"
        return (
            f"check {self.disk} has room for {subject} before it starts: "
            f"{self.total / GIB:.1f} GiB free needed ({', '.join(n.label() for n in self.needs)}){marked}"
        )

    def commands(self) -> tuple[Command, ...]:
        return (cmd("df", "-P", "-B1", *self.folders(), timeout=DF_TIMEOUT_S),)


def place_space_check(ops: Sequence[Op], *, scratch: str, harness_round: str, skip: bool) -> tuple[list[Op], list[str]]:
    """``ops`` (a round's setup ops) with a :class:`CheckFreeSpace` before the first setup stage still to run."""
    out = list(ops)
    pending = [op for op in out if isinstance(op, SetupStage) and op.done is None]
    if not pending:
        return out, []
    model = pending[0].model
    sizes = sizes_for(harness_round, model)
    if sizes is None:
        return out, [f"free space not checked: no size known for {model}'s setup (workload/mlperf/space_table.py)"]
    needs = []
    for op in pending:
        size = sizes.for_stage(op.stage)
        if size is not None and size.bytes > 0:
            needs.append(StageNeed(op.stage, STAGE_FOLDERS[op.stage], size.bytes, size.estimate))
    if not needs:
        return out, []
    if skip:
        total = sum(n.bytes for n in needs) / GIB
        return out, [f"free space not checked (SkipFreeSpaceCheck): {model}'s setup needs about {total:.1f} GiB"]
    first = next(i for i, op in enumerate(out) if isinstance(op, SetupStage) and op.done is None)
    out.insert(first, CheckFreeSpace(scratch, model, harness_round, tuple(needs)))
    return out, []


# -- df ------------------------------------------------------------------------------------------------------
#: One data line of ``df -P`` (POSIX format: one line per operand, never wrapped): file system (may hold spaces),
#: total, used, available (in ``-B1`` bytes), capacity, mount point (may hold spaces).
_DF_LINE = re.compile(
    r"^(?P<fs>.+?)\s+(?P<total>\d+)\s+(?P<used>\d+)\s+(?P<avail>\d+)\s+(?P<cap>\d+%|-)\s+(?P<mount>/.*)$"
)


@dataclass(frozen=True)
class DfLine:
    filesystem: str
    available: int
    mount: str


def parse_df(output: str, count: int) -> list[DfLine]:
    """The ``count`` data lines of ``df -P -B1 <path>...`` output, in operand order; ValueError naming what is wrong."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines or not lines[0].split()[:1] == ["Filesystem"]:
        raise ValueError(f"not df -P output (no 'Filesystem' header): {output.strip()[:120]!r}")
    rows = []
    for line in lines[1:]:
        match = _DF_LINE.match(line.rstrip())
        if match is None:
            raise ValueError(f"unreadable df line: {line.strip()[:120]!r}")
        rows.append(DfLine(match["fs"], int(match["avail"]), match["mount"]))
    if len(rows) != count:
        raise ValueError(f"df printed {len(rows)} line(s) for {count} path(s)")
    return rows


@dataclass(frozen=True)
class Shortfall:
    """One file system without room: what must go on it, and how much it has."""

    mount: str
    folders: tuple[str, ...]
    need: int
    free: int


def shortfalls(op: CheckFreeSpace, rows: Sequence[DfLine]) -> list[Shortfall]:
    """The file systems that hold less free space than the stages writing to them need (grouped by mount point)."""
    by_folder = dict(zip(op.folders(), rows, strict=True))
    need: dict[tuple[str, str], int] = {}
    folders: dict[tuple[str, str], list[str]] = {}
    free: dict[tuple[str, str], int] = {}
    for item in op.needs:
        path = f"{op.scratch}/{item.folder}"
        row = by_folder[path]
        key = (row.filesystem, row.mount)
        need[key] = need.get(key, 0) + item.bytes
        free[key] = row.available
        if path not in folders.setdefault(key, []):
            folders[key].append(path)
    return [Shortfall(key[1], tuple(folders[key]), need[key], free[key]) for key in need if free[key] < need[key]]


def refusal(op: CheckFreeSpace, short: Sequence[Shortfall]) -> str:
    """The one message naming the benchmark, the path, need and free space in GiB."""
    parts = [
        f"{', '.join(s.folders)} (file system {s.mount}): {s.need / GIB:.1f} GiB needed, {s.free / GIB:.1f} GiB free"
        for s in short
    ]
    return (
        f"not enough free space for {op.subject or f'the setup of {op.model}'} ({op.harness_round}, "
        f"{', '.join(n.label() for n in op.needs)}): {'; '.join(parts)}; nothing was downloaded"
    )
