"""The benchmarks' shared statistics (bench/_measure.py): intervals, verdicts, interleaving, process measurement."""

from __future__ import annotations

import importlib.util
import sys
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
    code = (
        "import threading, time, pathlib, sys\n"
        "d = pathlib.Path(sys.argv[1])\n"
        "(d / 'a').write_text('x')\n"
        "time.sleep(0.1)\n"
        "def spin():\n"
        "    end = time.thread_time() + 0.2\n"
        "    while time.thread_time() < end: pass\n"
        "t = threading.Thread(target=spin); t.start(); t.join()\n"
        "time.sleep(0.1)\n"
        "(d / 'b').write_text('x')\n"
        "time.sleep(0.2)\n"
    )
    marks = {"a": (tmp_path / "a").exists, "b": (tmp_path / "b").exists}
    run = m.run_process([sys.executable, "-c", code, str(tmp_path)], marks=marks)
    spent = run.cpu_at["b"] - run.cpu_at["a"]
    assert 0.18 <= spent < 0.3  # the spinning thread was gone when "b" appeared, yet its 0.2 s count
