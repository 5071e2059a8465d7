"""Shared measurement and statistics for the ``bench/`` scripts: one place, so every script decides alike.

Contract, for every script that uses it:

* variants are measured **interleaved** (A B A B ..., :func:`interleave`), so drift in the neighbours'
  load hits every variant alike; a ratio is taken per round (``A_i / B_i``, :func:`paired_ratios`)
  so that a slow round slows both sides of its own ratio;
* a figure is the **median** of its rounds with a distribution-free confidence interval of that
  median (:func:`median_interval`: order statistics from the sign test; with few rounds that is the
  min-max range, whose confidence level is printed beside it);
* a figure with a goal gets a **verdict** (:func:`verdict`): ``meets`` or ``misses`` only when the
  whole interval is on one side of the goal, ``cannot tell`` when it straddles it (or when too few
  rounds make the interval meaningless) -- never pass/fail from a single median;
* a script may **stop early** (:func:`run_sequential`): rounds are added until one figure's verdict is
  ``meets`` or ``misses`` at one of a few looks planned before the run (:class:`Sequential`), or the
  rounds or the time budget are spent ("cannot tell", with the rounds tried); each look gets a
  share of the 5 % error, so that peeking does not make a verdict more confident than it is;
* processes are measured by :func:`run_process`: wall time, and CPU time of the process with all its
  threads and the children it reaped (``wait4``), which other processes' load barely changes;
* the machine (load average, core count) is recorded at start and end, and ``--json`` prints one
  line with everything, to compare figures across commits (:class:`Report`).

Standard library only: the scripts import it with ``bench/`` on ``sys.path`` (scripts run from
``bench/`` have it there already).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

T = TypeVar("T")

#: The confidence asked of an interval; with fewer rounds than that needs, min-max is used and its
#: (lower) level is printed.
CONFIDENCE = 0.95
#: Below this level an interval says nothing: the verdict is "cannot tell" whatever it holds
#: (min-max of 3 rounds is 75 %; of 2 rounds 50 %).
MIN_LEVEL = 0.75

Op = Literal["<", "<=", ">", ">="]
Verdict = Literal["meets", "misses", "cannot tell"]


@dataclass(frozen=True)
class Interval:
    """Median of ``n`` values and a confidence interval ``[low, high]`` of that median at ``level``."""

    median: float
    low: float
    high: float
    level: float
    n: int


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _binom_cdf_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / float(2**n)


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Median and its distribution-free confidence interval (sign-test order statistics).

    ``[x_(k), x_(n-k+1)]`` of the sorted values covers the true median with probability
    ``1 - 2 P(Bin(n, 1/2) <= k-1)``, whatever the distribution (no normality: timings on a shared
    machine have long right tails). The largest ``k`` whose level reaches ``confidence`` is used;
    when even ``k = 1`` (min-max) falls short, min-max is returned with its own, lower level.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("interval of no values")
    best_k, best_level = 1, 1 - 2 * _binom_cdf_half(0, n)
    for k in range(2, (n + 1) // 2 + 1):
        level = 1 - 2 * _binom_cdf_half(k - 1, n)
        if level < confidence:
            break
        best_k, best_level = k, level
    return Interval(median(ordered), ordered[best_k - 1], ordered[n - best_k], max(best_level, 0.0), n)


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """``a_i / b_i`` per round: the pairing cancels what one round's load did to both sides."""
    if len(a) != len(b):
        raise ValueError(f"unpaired rounds: {len(a)} vs {len(b)}")
    return [x / y for x, y in zip(a, b, strict=True)]


def paired_differences(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """``a_i - b_i`` per round (what A adds to B, e.g. start-up beyond a bare interpreter)."""
    if len(a) != len(b):
        raise ValueError(f"unpaired rounds: {len(a)} vs {len(b)}")
    return [x - y for x, y in zip(a, b, strict=True)]


@dataclass(frozen=True)
class Goal:
    """``value op target``, e.g. ``Goal(">=", 0.97)``: a ratio of at least 0.97."""

    op: Op
    target: float

    def holds(self, value: float) -> bool:
        t = self.target
        return {"<": value < t, "<=": value <= t, ">": value > t, ">=": value >= t}[self.op]

    def __str__(self) -> str:
        return f"{self.op} {self.target:g}"


def verdict(interval: Interval, goal: Goal) -> Verdict:
    """``meets``/``misses`` only when both ends of the interval agree; else ``cannot tell``."""
    if interval.level < MIN_LEVEL:
        return "cannot tell"
    low_ok, high_ok = goal.holds(interval.low), goal.holds(interval.high)
    if low_ok and high_ok:
        return "meets"
    if not low_ok and not high_ok:
        return "misses"
    return "cannot tell"


@dataclass
class Figure:
    """One reported figure: its interval, unit, and (optionally) goal and verdict."""

    name: str
    interval: Interval
    unit: str = ""
    goal: Goal | None = None
    digits: int = 3
    #: set when this figure decided a sequential run: its verdict and how the run stopped
    stopped: Stopped | None = None

    @property
    def verdict(self) -> Verdict | None:
        if self.stopped is not None:
            return self.stopped.verdict
        return None if self.goal is None else verdict(self.interval, self.goal)

    def line(self) -> str:
        i, d, unit = self.interval, self.digits, f" {self.unit}" if self.unit else ""
        text = (
            f"{self.name}: {i.median:.{d}f}{unit}  [{i.low:.{d}f} .. {i.high:.{d}f}, {_interval_kind(i)}, {i.n} rounds]"
        )
        if self.goal is not None:
            text += f"  goal {self.goal}{unit}: {self.verdict}"
        if self.stopped is not None:
            text += f"  ({self.stopped.reason})"
        return text

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"median": self.interval.median, "low": self.interval.low, "high": self.interval.high}
        out |= {"level": round(self.interval.level, 4), "n": self.interval.n, "unit": self.unit}
        if self.goal is not None:
            out |= {"goal": str(self.goal), "verdict": self.verdict}
        if self.stopped is not None:
            out |= {"stopped": self.stopped.reason}
        return out


def _interval_kind(i: Interval) -> str:
    level = f"{i.level:.1%}" if 0.99 < i.level < 1 else f"{i.level:.0%}"  # 99.6 %, not a rounded 100 %
    return f"{level} CI of the median" if i.level >= CONFIDENCE else f"min-max, {level} CI"


def interleave(
    rounds: int, variants: Sequence[Callable[[int], T]], progress: Callable[[int, list[list[T]]], None] | None = None
) -> list[list[T]]:
    """Run ``variants[0](r), variants[1](r), ...`` for each round ``r``: A B A B ...

    Returns one list per variant, in round order (``out[v][r]``). ``progress(r, out)`` is called
    after each round (to print it as it comes: a long benchmark shows it is alive).
    """
    out: list[list[T]] = [[] for _ in variants]
    for r in range(rounds):
        for v, run in enumerate(variants):
            out[v].append(run(r))
        if progress is not None:
            progress(r, out)
    return out


@dataclass(frozen=True)
class Sequential:
    """A plan for stopping early: look at the verdict after ``looks[0]``, ``looks[1]``, ... rounds.

    **Why the levels are honest.** Looking at the verdict after every round and stopping as soon as
    the interval clears the goal would let chance decide: each look is another draw at a 5 % error,
    and over many looks one of them errs far more often than 5 %. So the looks are planned before
    the run (the round counts, nothing that depends on the data) and the error ``1 - confidence`` is
    split between them (Bonferroni): the chance that *some* look's interval misses the true median
    is at most the sum of the looks' errors, hence the chance that the verdict the run stops with is
    wrong is at most ``1 - confidence`` in all. The sign test's intervals are discrete, so a look
    usually spends less than its share (9 rounds asked for 98.3 % get min-max at 99.6 %); what it
    leaves is carried on to the later looks (see :meth:`levels`), which also depends on the round
    counts only. A look whose min-max range falls short of its share spends nothing and decides
    nothing (its verdict is "cannot tell"), nor does stopping for the time budget: a run that stops
    without a verdict cannot state a wrong one.

    ``budget_s``: no round is started that would, at the mean round time so far, end after this many
    seconds from the start; the run then stops with "cannot tell" (the interval of the rounds it has
    is shown at the plain confidence, for information).
    """

    looks: tuple[int, ...]
    budget_s: float | None = None
    confidence: float = CONFIDENCE

    def __post_init__(self) -> None:
        if not self.looks or list(self.looks) != sorted(set(self.looks)) or self.looks[0] < 1:
            raise ValueError(f"looks must be increasing round counts >= 1, not {self.looks}")

    @classmethod
    def between(cls, first: int, last: int, count: int = 3, budget_s: float | None = None) -> Sequential:
        """``count`` looks spread evenly from ``first`` to ``last`` rounds (fewer when they coincide)."""
        if last <= first or count < 2:
            return cls((max(first, last),), budget_s)
        step = (last - first) / (count - 1)
        return cls(tuple(sorted({first + round(step * j) for j in range(count)})), budget_s)

    def levels(self) -> list[float]:
        """The confidence asked of each look's interval: the error left, shared among the looks left."""
        left, out = 1 - self.confidence, []
        for j, n in enumerate(self.looks):
            asked = 1 - left / (len(self.looks) - j)
            out.append(asked)
            got = median_interval([float(v) for v in range(n)], asked).level
            if got >= asked:  # a look that can decide spends what its interval actually risks
                left -= 1 - got
        return out


@dataclass(frozen=True)
class Stopped:
    """How a :func:`run_sequential` run ended: after ``rounds`` rounds, with ``reason``."""

    rounds: int
    interval: Interval
    verdict: Verdict
    reason: str


def run_sequential(
    plan: Sequential,
    variants: Sequence[Callable[[int], T]],
    values_of: Callable[[list[list[T]]], list[float]],
    goal: Goal,
    progress: Callable[[int, list[list[T]]], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[list[T]], Stopped]:
    """Interleave rounds (as :func:`interleave`) until the plan's verdict or its end; see :class:`Sequential`.

    ``values_of(out)`` turns the rounds so far into the figure that decides (e.g. paired ratios);
    only that figure's verdict steers the stop. Returns the rounds and how the run stopped: decided
    at a look (its interval at that look's level), or "cannot tell" after the last look or when the
    time budget was spent (then the interval of all rounds at the plain confidence).
    """
    out: list[list[T]] = [[] for _ in variants]
    levels = dict(zip(plan.looks, plan.levels(), strict=True))
    started, done = clock(), 0
    while True:
        for v, run in enumerate(variants):
            out[v].append(run(done))
        done += 1
        if progress is not None:
            progress(done - 1, out)
        if done in levels:
            interval = median_interval(values_of(out), levels[done])
            said = verdict(interval, goal) if interval.level >= levels[done] else "cannot tell"
            look = f"look {plan.looks.index(done) + 1} of {len(plan.looks)} ({', '.join(map(str, plan.looks))} rounds)"
            if said != "cannot tell":
                return out, Stopped(done, interval, said, f"decided at {look}")
            if done == plan.looks[-1]:
                return out, Stopped(done, interval, said, f"every round spent: {look}")
        elapsed = clock() - started
        if plan.budget_s is not None and elapsed + elapsed / done > plan.budget_s:
            interval = median_interval(values_of(out), plan.confidence)
            looks = ", ".join(map(str, plan.looks))
            reason = f"time budget {plan.budget_s:g} s spent after {done} rounds (looks at {looks})"
            return out, Stopped(done, interval, "cannot tell", reason)


@dataclass
class ProcessRun:
    """What :func:`run_process` saw of one child process."""

    wall_s: float
    #: user + system CPU of the process, all its threads and every child it waited for (wait4)
    cpu_s: float
    #: the process's own peak resident set (``VmHWM``, polled: growth in its last poll interval is missed)
    peak_rss_mib: float
    returncode: int
    #: mark name -> process CPU seconds (utime + stime, all threads) when that mark's test first held
    cpu_at: dict[str, float] = field(default_factory=dict)


class _ThreadClock:
    """CPU time of a live process to the nanosecond: the sum over its threads of ``/proc/PID/task/TID/schedstat``.

    ``/proc/PID/stat`` counts whole clock ticks (10 ms): over a test of 50 samples that is several
    percent. Each thread's last reading is kept, so a thread that ends between two readings still
    counts (up to one poll interval short). Falls back to ``/proc/PID/stat`` where the kernel has
    no schedstat.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.last: dict[str, int] = {}

    def read(self) -> float | None:
        """CPU seconds of the process so far, None once it is gone."""
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return None
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                    self.last[tid] = int(fh.read().split()[0])
            except (OSError, IndexError, ValueError):
                continue  # the thread ended since the listing: its last reading stands
        if not self.last:
            return _stat_cpu_s(self.pid)
        return sum(self.last.values()) / 1e9


def _stat_cpu_s(pid: int) -> float | None:
    """utime + stime of every thread of ``pid`` so far (``/proc/PID/stat``, clock ticks), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _high_water_kib(pid: int) -> int:
    """``VmHWM`` of ``pid`` (0 once it is gone).

    Not ``wait4``'s ``ru_maxrss``: on Linux exec keeps the forking parent's peak in it, so it would
    report this benchmark process instead of the child.
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: IO[Any] | int | None = subprocess.DEVNULL,
    stdin: IO[Any] | int | None = None,
    marks: Mapping[str, Callable[[], bool]] | None = None,
    poll_s: float = 0.01,
    check: bool = True,
) -> ProcessRun:
    """Run ``argv`` to its end and measure it (see :class:`ProcessRun`).

    ``marks``: name -> a test of what the child has done so far (e.g. "LoadGen's log exists"); the
    process's CPU time is noted when each first holds, so that the part worth measuring (LoadGen's
    test) can be told from start-up (interpreter, imports, model load) and teardown. A mark is seen
    up to ``poll_s`` late; a mark the child passes in its last poll interval is missed (absent from
    ``cpu_at``). Polling costs this process well under 1 % of a core. ``check``: a non-zero exit
    raises ``RuntimeError``. ``stdin``: what the child reads (None: this process's own).
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=subprocess.STDOUT)
    peak_kib, cpu_at, pending = 0, {}, dict(marks or {})
    clock = _ThreadClock(proc.pid)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak_kib = max(peak_kib, _high_water_kib(proc.pid))
        if pending:
            now = clock.read()  # every poll while a mark is pending: threads that end are still counted
            for name, test in list(pending.items()):
                if now is not None and test():
                    cpu_at[name] = now
                    del pending[name]
        time.sleep(poll_s)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ... exited {proc.returncode}")
    cpu = usage.ru_utime + usage.ru_stime
    return ProcessRun(wall, cpu, peak_kib / 1024, proc.returncode, cpu_at)


def machine() -> dict[str, Any]:
    """Load average (1, 5, 15 min) and cores: what the neighbours were doing while we measured."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"loadavg": [round(v, 2) for v in os.getloadavg()], "cores": os.cpu_count(), "usable_cores": usable}


def _commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def add_arguments(parser: argparse.ArgumentParser, rounds: int) -> None:
    """The options every script shares: ``--rounds`` (its default keeps a run to a few minutes) and ``--json``."""
    parser.add_argument("--rounds", type=int, default=rounds, help=f"interleaved rounds (default {rounds})")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every figure")


@dataclass
class Report:
    """A script's figures, the machine at start and end, and its one ``--json`` line."""

    bench: str
    settings: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    start: dict[str, Any] = field(default_factory=machine)
    end: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        print(f"{self.bench}: machine at start: {_machine_text(self.start)}", flush=True)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure

    def finish(self, as_json: bool) -> int:
        """Print the figures, the machine at end and, with ``as_json``, the JSON line. Exit status 0."""
        self.end = machine()
        for figure in self.figures:
            print(figure.line())
        print(f"machine at end: {_machine_text(self.end)}")
        if as_json:
            record = {"bench": self.bench, "commit": _commit(), "settings": self.settings}
            record |= {"figures": {f.name: f.as_dict() for f in self.figures}, "extra": self.extra}
            record |= {"machine_start": self.start, "machine_end": self.end}
            print(json.dumps(record, sort_keys=True))
        sys.stdout.flush()
        return 0


def _machine_text(m: dict[str, Any]) -> str:
    load = ", ".join(f"{v:.2f}" for v in m["loadavg"])
    return f"load average {load}; {m['cores']} cores ({m['usable_cores']} usable)"


def figure(name: str, values: Sequence[float], unit: str = "", goal: Goal | None = None, digits: int = 3) -> Figure:
    """Shorthand: the :class:`Figure` of ``values`` (one per round)."""
    return Figure(name, median_interval(values), unit, goal, digits)


def stopped_figure(name: str, stopped: Stopped, goal: Goal, unit: str = "", digits: int = 3) -> Figure:
    """The :class:`Figure` that decided a :func:`run_sequential` run: its interval and verdict at the stop."""
    return Figure(name, stopped.interval, unit, goal, digits, stopped)


__all__ = [
    "Figure", "Goal", "Interval", "ProcessRun", "Report", "Sequential", "Stopped", "add_arguments", "figure",
    "interleave", "machine", "median", "median_interval", "paired_differences", "paired_ratios", "run_process",
    "run_sequential", "stopped_figure", "verdict",
]  # fmt: skip
