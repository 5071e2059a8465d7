"""The benchmarks' shared statistics (bench/_measure.py): intervals, verdicts, interleaving, process measurement."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "bench" / "_measure.py"
_spec = importlib.util.spec_from_file_location("_measure", _PATH)
assert _spec is not None and _spec.loader is not None
m = importlib.util.module_from_spec(_spec)
sys.modules["_measure"] = m  # dataclasses look their module up by name
_spec.loader.exec_module(m)


def test_small_samples_use_min_max_with_its_true_level() -> None:
    i = m.median_interval([3.0, 1.0, 2.0, 5.0])
    assert (i.median, i.low, i.high, i.n) == (2.5, 1.0, 5.0, 4)
    assert i.level == pytest.approx(1 - 2 / 16)  # both ends miss the median with prob. 2 * (1/2)^4


def test_larger_samples_trim_to_the_order_statistics_of_the_sign_test() -> None:
    values = [float(v) for v in range(1, 21)]  # n = 20: [x_(6), x_(15)] is the 95 % interval (95.9 %)
    i = m.median_interval(values)
    assert (i.low, i.high, i.median) == (6.0, 15.0, 10.5)
    assert i.level == pytest.approx(0.9586, abs=1e-4)
    assert i.level >= 0.95


def test_interval_ignores_one_wild_round() -> None:
    values = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 9.0]
    i = m.median_interval(values)
    assert i.high < 2 and i.median == 1.0


def test_paired_ratios_cancel_a_slow_round_and_refuse_unpaired_lists() -> None:
    assert m.paired_ratios([2.0, 20.0], [1.0, 10.0]) == [2.0, 2.0]
    with pytest.raises(ValueError, match="unpaired"):
        m.paired_ratios([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    ("low", "high", "goal", "expected"),
    [
        (0.98, 1.10, m.Goal(">=", 0.97), "meets"),
        (0.80, 0.95, m.Goal(">=", 0.97), "misses"),
        (0.90, 1.05, m.Goal(">=", 0.97), "cannot tell"),  # straddles the goal
        (0.10, 0.20, m.Goal("<", 0.3), "meets"),
        (0.25, 0.35, m.Goal("<", 0.3), "cannot tell"),
        (0.31, 0.35, m.Goal("<", 0.3), "misses"),
        (0.20, 0.25, m.Goal("<=", 0.25), "meets"),  # the goal itself counts for <=
        (0.20, 0.25, m.Goal("<", 0.25), "cannot tell"),
    ],
)
def test_verdict_needs_the_whole_interval_on_one_side(low: float, high: float, goal: object, expected: str) -> None:
    interval = m.Interval(median=(low + high) / 2, low=low, high=high, level=0.95, n=9)
    assert m.verdict(interval, goal) == expected


def test_too_few_rounds_cannot_tell_even_far_from_the_goal() -> None:
    two = m.median_interval([5.0, 6.0])  # min-max of 2 rounds: 50 %
    assert m.verdict(two, m.Goal(">=", 0.97)) == "cannot tell"
    three = m.median_interval([5.0, 6.0, 7.0])
    assert m.verdict(three, m.Goal(">=", 0.97)) == "meets"


def test_figure_line_and_json_carry_interval_goal_and_verdict() -> None:
    f = m.figure("ratio", [0.9, 1.0, 1.05, 0.95, 1.1], goal=m.Goal(">=", 0.97))
    assert f.verdict == "cannot tell"
    assert "1.000  [0.900 .. 1.100, min-max, 94% CI, 5 rounds]  goal >= 0.97: cannot tell" in f.line()
    d = f.as_dict()
    assert (d["median"], d["low"], d["high"], d["n"], d["verdict"]) == (1.0, 0.9, 1.1, 5, "cannot tell")


def test_interleave_runs_a_b_a_b() -> None:
    order: list[str] = []

    def a(r: int) -> int:
        order.append(f"A{r}")
        return r

    def b(r: int) -> int:
        order.append(f"B{r}")
        return 10 * r

    seen: list[tuple[int, int]] = []
    assert m.interleave(3, [a, b], lambda r, out: seen.append((r, len(out[1])))) == [[0, 1, 2], [0, 10, 20]]
    assert order == ["A0", "B0", "A1", "B1", "A2", "B2"]
    assert seen == [(0, 1), (1, 2), (2, 3)]  # called after each round, with that round's results in


def test_run_process_measures_cpu_of_threads_not_sleep(tmp_path: Path) -> None:
    code = (
        "import threading, time, pathlib, sys\n"
        "time.sleep(0.3)\n"
        "pathlib.Path(sys.argv[1]).write_text('x')\n"
        "def spin():\n"
        "    end = time.process_time() + 0.2\n"
        "    while time.process_time() < end: pass\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
        "b = bytearray(64 << 20)\n"
    )
    watch = tmp_path / "started"
    run = m.run_process([sys.executable, "-c", code, str(watch)], marks={"started": watch.exists})
    assert run.returncode == 0 and run.wall_s >= 0.3
    assert 0.2 <= run.cpu_s < run.wall_s  # the thread's spin counts, the sleep does not
    assert run.cpu_at["started"] < run.cpu_s - 0.15
    assert run.peak_rss_mib >= 64


def test_run_process_reports_a_failure(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="exited 3"):
        m.run_process([sys.executable, "-c", "raise SystemExit(3)"])
    assert m.run_process([sys.executable, "-c", "raise SystemExit(3)"], check=False).returncode == 3


def test_report_json_line_has_machine_at_start_and_end(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    report = m.Report("bench_x", settings={"rounds": 3})
    report.add(m.figure("wall", [1.0, 2.0, 3.0], unit="s", goal=m.Goal("<", 5)))
    assert report.finish(as_json=True) == 0
    lines = capsys.readouterr().out.splitlines()
    record = json.loads(lines[-1])
    assert record["bench"] == "bench_x" and record["figures"]["wall"]["verdict"] == "meets"
    for key in ("machine_start", "machine_end"):
        assert len(record[key]["loadavg"]) == 3 and record[key]["cores"] >= 1
    assert lines[0].startswith("bench_x: machine at start: load average")


def test_marks_count_a_thread_that_ended_between_them(tmp_path: Path) -> None:
    # The child spins only once this process has seen mark "a" (it waits for the "a-seen" file the mark's test
    # writes), so the spin falls between the marks however late a loaded machine lets the poller look: the test
    # judges run_process's accounting, not how fast the poller was (it failed under CI load when the spin could
    # start before "a" was seen).
    code = (
        "import threading, time, pathlib, sys\n"
        "d = pathlib.Path(sys.argv[1])\n"
        "(d / 'a').write_text('x')\n"
        "deadline = time.monotonic() + 60\n"
        "while not (d / 'a-seen').exists() and time.monotonic() < deadline: time.sleep(0.01)\n"
        "def spin():\n"
        "    end = time.thread_time() + 0.2\n"
        "    while time.thread_time() < end: pass\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
        "time.sleep(0.1)\n"
        "(d / 'b').write_text('x')\n"
        "time.sleep(0.2)\n"
    )

    def seen_a() -> bool:
        if not (tmp_path / "a").exists():
            return False
        (tmp_path / "a-seen").write_text("x")
        return True

    marks = {"a": seen_a, "b": (tmp_path / "b").exists}
    run = m.run_process([sys.executable, "-c", code, str(tmp_path)], marks=marks)
    assert (tmp_path / "a-seen").exists()
    spent = run.cpu_at["b"] - run.cpu_at["a"]
    # the spinning thread was gone when "b" appeared, yet its 0.2 s count; /proc's utime + stime come in clock ticks
    # (10 ms) and are sampled by the scheduler, so a 0.2 s spin reads as 0.19 s and more (measured); 2 ticks of slack
    assert 0.18 <= spent < 0.3


def test_sequential_levels_split_the_error_and_carry_what_a_look_leaves() -> None:
    plan = m.Sequential((9, 15, 21))
    first, second, third = plan.levels()
    assert first == pytest.approx(1 - 0.05 / 3)  # an equal share asked of the first look
    # 9 rounds: min-max is the widest interval there is; it risks 2/512, the rest is carried on
    spent_9 = 1 - m.median_interval([float(v) for v in range(9)], first).level
    assert spent_9 == pytest.approx(2 / 512)
    assert second == pytest.approx(1 - (0.05 - spent_9) / 2)
    spent_15 = 1 - m.median_interval([float(v) for v in range(15)], second).level
    assert third == pytest.approx(1 - (0.05 - spent_9 - spent_15))
    assert spent_9 + spent_15 + (1 - m.median_interval([float(v) for v in range(21)], third).level) <= 0.05
    # a look too small to reach its share (min-max of 3 rounds is 75 %) spends nothing
    assert m.Sequential((3, 9)).levels()[1] == pytest.approx(0.95)


def test_sequential_plan_between_and_refuses_a_bad_plan() -> None:
    assert m.Sequential.between(9, 21).looks == (9, 15, 21)
    assert m.Sequential.between(9, 9).looks == (9,)
    with pytest.raises(ValueError, match="increasing"):
        m.Sequential((9, 9))


def _rounds_of(ratios: list[float]) -> tuple[Callable[[int], float], Callable[[int], float], list[int]]:
    """Two variants whose paired ratio in round r is ratios[r]; counts the rounds run."""
    ran: list[int] = []

    def a(r: int) -> float:
        ran.append(r)
        return ratios[r]

    return a, lambda r: 1.0, ran


def test_sequential_stops_at_the_first_look_that_decides() -> None:
    ratios = [0.99, 1.0, 0.98, 1.01, 0.99, 1.0, 0.995, 1.005, 0.99] + [1.5] * 20  # clearly <= 1.03 by round 9
    a, b, ran = _rounds_of(ratios)
    out, stop = m.run_sequential(m.Sequential((9, 15, 21)), [a, b], lambda o: m.paired_ratios(*o), m.Goal("<=", 1.03))
    assert (stop.rounds, stop.verdict, len(ran), len(out[0])) == (9, "meets", 9, 9)
    assert stop.reason.startswith("decided at look 1 of 3")
    assert (stop.interval.low, stop.interval.high) == (0.98, 1.01)  # min-max of 9 at 99.6 %
    line = m.stopped_figure("CPU ratio", stop, m.Goal("<=", 1.03)).line()
    assert "[0.980 .. 1.010, 99.6% CI of the median, 9 rounds]  goal <= 1.03: meets  (decided at look 1" in line


def test_sequential_goes_on_while_the_interval_straddles_the_goal_then_says_cannot_tell() -> None:
    ratios = [1.0, 1.06, 0.98, 1.05, 1.02, 1.04, 1.0, 1.03, 1.01] * 3  # around the goal 1.03 throughout
    a, b, ran = _rounds_of(ratios)
    seen: list[int] = []
    _, stop = m.run_sequential(
        m.Sequential((9, 15, 21)), [a, b], lambda o: m.paired_ratios(*o), m.Goal("<=", 1.03),
        progress=lambda r, out: seen.append(r),
    )  # fmt: skip
    assert (stop.rounds, stop.verdict, len(ran)) == (21, "cannot tell", 21)
    assert seen == list(range(21)) and "every round spent" in stop.reason
    figure = m.stopped_figure("CPU ratio", stop, m.Goal("<=", 1.03))
    assert figure.verdict == "cannot tell" and "21 rounds" in figure.line() and "every round spent" in figure.line()
    assert figure.as_dict()["stopped"] == stop.reason


def test_sequential_decides_misses_at_a_later_look() -> None:
    ratios = [1.0, 1.2, 1.1, 1.15, 1.08, 1.12, 1.1, 1.09, 1.11] + [1.1, 1.12, 1.09, 1.11, 1.1, 1.13] + [1.1] * 10
    a, b, _ = _rounds_of(ratios)  # round 1 (1.0) keeps min-max of 9 across 1.03; 15 rounds trim it
    _, stop = m.run_sequential(m.Sequential((9, 15, 21)), [a, b], lambda o: m.paired_ratios(*o), m.Goal("<=", 1.03))
    assert (stop.rounds, stop.verdict) == (15, "misses") and "look 2 of 3" in stop.reason


def test_sequential_stops_without_a_verdict_when_the_time_budget_is_spent() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def a(r: int) -> float:
        now[0] += 10.0  # each round takes 10 s
        return 1.0 if r % 2 else 1.06

    _, stop = m.run_sequential(
        m.Sequential((9, 15), budget_s=45.0), [a, lambda r: 1.0], lambda o: m.paired_ratios(*o), m.Goal("<=", 1.03),
        clock=clock,
    )  # fmt: skip
    # after 4 rounds (40 s) a fifth would end at 50 s > 45 s: stop, far before the first look
    assert (stop.rounds, stop.verdict) == (4, "cannot tell")
    assert "time budget 45 s spent after 4 rounds" in stop.reason
