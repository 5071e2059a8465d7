"""`compare` telling change from noise: intervals over iterations (regression / improvement / no
change / cannot tell at a chosen confidence), differing settings named, the machine's load named.
The result files are the recorded NVIDIA harness logs of the fixtures, judged by the real parsers."""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from tests.test_compare_ci import H200, cli, run_folder
from workload.metrics.intervals import (
    CANNOT_TELL,
    IMPROVEMENT,
    NO_CHANGE,
    REGRESSION,
    interval,
    rank_depth,
    t_quantile,
    u_counts,
)

# Student's t quantiles from the published tables (two-sided 95 %, 90 %, 99 %)
TABLE = [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 4, 2.776), (0.975, 10, 2.228), (0.95, 5, 2.015),
         (0.995, 3, 5.841), (0.975, 30, 2.042), (0.95, 1, 6.314)]  # fmt: skip


@pytest.mark.parametrize(("p", "df", "expected"), TABLE)
def test_t_quantiles_match_the_tables(p: float, df: int, expected: float) -> None:
    assert round(t_quantile(p, df), 3) == expected


def test_interval_verdicts() -> None:
    def verdict(before: list[float], after: list[float], sign: float = 1.0, confidence: float = 0.95) -> str:
        found = interval(before, after, better_sign=sign, threshold_pct=5.0, confidence=confidence)
        assert found is not None
        return found.verdict

    base = [100.0, 101.0, 99.0]
    assert verdict(base, [75.0, 76.0, 74.5]) == REGRESSION  # 25 % slower, tight
    assert verdict(base, [130.0, 131.0, 129.0]) == IMPROVEMENT
    assert verdict(base, [100.5, 99.5, 100.2]) == NO_CHANGE
    assert verdict(base, [60.0, 100.0, 140.0]) == CANNOT_TELL  # noisy: could be 25 % worse or better
    # latency: lower is better, so up is a regression
    assert verdict(base, [125.0, 126.0, 124.0], sign=-1.0) == REGRESSION
    # one side with a spread: a single baseline value against iterations
    assert verdict([100.0], [70.0, 71.0, 69.0]) == REGRESSION
    # asking for more confidence can only widen the interval: a borderline regression becomes "cannot tell"
    borderline = ([100.0, 104.0, 96.0], [90.0, 97.0, 86.0])
    assert verdict(*borderline, confidence=0.8) == REGRESSION
    assert verdict(*borderline, confidence=0.99) == CANNOT_TELL
    assert interval([1.0], [2.0], better_sign=1, threshold_pct=5, confidence=0.95) is None


# Mann-Whitney U critical values, two-sided 0.05 (published tables): the interval's depth is one more
MANN_WHITNEY_05 = [(4, 4, 0), (5, 5, 2), (6, 6, 5), (7, 7, 8), (8, 8, 13), (10, 10, 23), (5, 8, 6), (4, 9, 4)]


@pytest.mark.parametrize(("na", "nb", "critical"), MANN_WHITNEY_05)
def test_rank_depth_matches_the_mann_whitney_tables(na: int, nb: int, critical: int) -> None:
    found = rank_depth(na, nb, 0.95)
    assert found is not None
    depth, achieved = found
    assert depth == critical + 1 and 0.95 <= achieved < 1
    assert sum(u_counts(na, nb)) == math.comb(na + nb, na)


def test_small_sides_cannot_reach_the_confidence_and_take_the_t_interval() -> None:
    assert rank_depth(3, 3, 0.95) is None and rank_depth(3, 3, 0.9) == (1, 0.9)
    found = interval([100.0, 101.0, 99.0], [75.0, 76.0, 74.5], better_sign=1, threshold_pct=5, confidence=0.95)
    assert found is not None and found.method == "t-log"
    found = interval([1.0, 2.0, 0.0], [1.0, 2.0, 3.0], better_sign=1, threshold_pct=5, confidence=0.95)
    assert found is not None and found.method == "t"  # a value of 0: no logs
    found = interval([100.0] * 4 + [101.0], [75.0] * 5, better_sign=1, threshold_pct=5, confidence=0.95)
    assert found is not None and found.method == "rank" and round(found.achieved, 3) == 0.968
    assert found.as_dict()["method"] == "rank" and found.verdict == REGRESSION


def _run(rng: random.Random, scale: float, spread: float, spikes: float) -> float:
    """One iteration's figure on a loaded machine: log-normal noise (``spread``: its sigma, about the
    coefficient of variation), and a share ``spikes`` of iterations hit by a load burst costing 10-25 %."""
    value = scale * math.exp(rng.gauss(0.0, spread))
    if rng.random() < spikes:
        value *= rng.uniform(0.75, 0.9)
    return value


#: (sigma, spike share, least share of 25 % slower sides called a regression): 5 against 5 values
#: resolve 25 % at about 10 % noise per iteration; at 15 % they find about 2 in 3 (the rest: cannot tell)
POWER = [(0.05, 0.1, 0.9), (0.1, 0.0, 0.9), (0.15, 0.0, 0.55)]


@pytest.mark.parametrize(("spread", "spikes", "power"), POWER)
def test_a_25_percent_slower_side_is_a_regression_and_identical_sides_almost_never(
    spread: float, spikes: float, power: float
) -> None:
    rng = random.Random(29)

    def verdicts(slowdown: float, trials: int) -> list[str]:
        found = []
        for _ in range(trials):
            a = [_run(rng, 100.0, spread, spikes) for _ in range(5)]
            b = [_run(rng, 100.0 * (1 - slowdown), spread, spikes) for _ in range(5)]
            result = interval(a, b, better_sign=1, threshold_pct=5, confidence=0.95)
            assert result is not None and result.method == "rank"
            found.append(result.verdict)
        return found

    slower = verdicts(0.25, 400)
    assert slower.count(REGRESSION) >= power * len(slower)
    assert IMPROVEMENT not in slower
    identical = verdicts(0.0, 4000)
    # the bound: at most (1 - 0.968) / 2 = 1.6 % of identical pairs wholly below 0, whatever the
    # noise; 3 binomial standard errors of room for the sample
    bound = (1 - 0.9682539682539683) / 2
    allowed = bound + 3 * math.sqrt(bound * (1 - bound) / len(identical))
    assert identical.count(REGRESSION) / len(identical) <= allowed
    assert identical.count(IMPROVEMENT) / len(identical) <= allowed


def test_a_heavy_tail_makes_identical_sides_no_likelier_a_regression() -> None:
    """Distribution-free: bursts costing up to half of an iteration in one of three iterations."""
    rng = random.Random(30)
    found = []
    for _ in range(4000):
        a = [
            100.0 * (rng.uniform(0.5, 1.0) if rng.random() < 1 / 3 else 1.0) * rng.uniform(0.98, 1.02) for _ in range(5)
        ]
        b = [
            100.0 * (rng.uniform(0.5, 1.0) if rng.random() < 1 / 3 else 1.0) * rng.uniform(0.98, 1.02) for _ in range(5)
        ]
        result = interval(a, b, better_sign=1, threshold_pct=5, confidence=0.95)
        assert result is not None
        found.append(result.verdict)
    assert found.count(REGRESSION) / len(found) <= 0.016 + 3 * math.sqrt(0.016 * 0.984 / len(found))


def test_latency_25_percent_slower_is_a_regression() -> None:
    before = [20.1, 19.8, 20.4, 21.0, 19.9]  # ms
    after = [v / 0.75 for v in (20.3, 19.7, 20.9, 20.0, 22.5)]
    found = interval(before, after, better_sign=-1, threshold_pct=5, confidence=0.95)
    assert found is not None and found.verdict == REGRESSION and found.high_pct < 0
    assert -36 < found.change_pct < -30  # latency up by a third: 25 % fewer samples per second


def offline_row(document: dict[str, object]) -> dict[str, object]:
    changes = document["changes"]
    assert isinstance(changes, list)
    (row,) = [c for c in changes if c["scenario"] == "Offline" and c["metric"] == "samples_per_second"]
    return dict(row)


def test_iterations_give_interval_verdicts_in_table_and_json(tmp_path: Path) -> None:
    base = run_folder(tmp_path, "base", ["70000", "71000", "72000"])
    slow = run_folder(tmp_path, "slow", ["52000", "53000", "54000"])
    noisy = run_folder(tmp_path, "noisy", ["40000", "71000", "99000"])
    code, out = cli("compare", str(base), str(slow), "--iterations", "3", "--json")
    row = offline_row(json.loads(out))
    assert code == 7 and row["verdict"] == REGRESSION and row["regression"] is True
    spread = row["interval"]
    assert isinstance(spread, dict) and spread["high_pct"] < 0 and spread["confidence"] == 0.95
    code, out = cli("compare", str(base), str(noisy), "--iterations", "3")
    assert code == 0 and "cannot tell" in out and "1 metric(s): cannot tell at 0.95 confidence" in out
    assert "-70.5 .." in out and "+188.3 %" in out  # the interval (3 and 3 values: t on the logs), in the table
    code, out = cli("compare", str(base), str(noisy), "--iterations", "3", "--json", "--confidence", "0.8")
    document = json.loads(out)
    assert document["confidence"] == 0.8 and offline_row(document)["verdict"] in (CANNOT_TELL, NO_CHANGE)
    assert cli("compare", str(base), str(slow), "--confidence", "1.5")[0] == 2


def test_differing_settings_and_machine_load_are_named(tmp_path: Path) -> None:
    source = tmp_path / "bound-changed"
    shutil.copytree(H200, source)
    detail = source / "H200-SXM-141GBx8_TRT" / "bert-99" / "Server" / "mlperf_log_detail.txt"
    detail.write_text(
        detail.read_text().replace(
            '"key": "effective_target_latency_ns", "value": 130000000',
            '"key": "effective_target_latency_ns", "value": 100000000',
        )
    )
    a = run_folder(tmp_path, "a", ["73309.5"])
    b = run_folder(tmp_path, "b", ["73309.5"], source=source)
    for folder, load in ((a, 0.4), (b, 7.9)):
        run = {"run_id": folder.name, "controller": {"load_average": [load, 1.0, 1.0], "cpu_count": 2}}
        (folder / "run.json").write_text(json.dumps(run))
    code, out = cli("compare", str(a), str(b))
    assert code == 0
    assert "settings differ: [n1] bert-99 Server PerformanceOnly: latency bound 130 ms -> 100 ms" in out
    assert "machine load (1-min): A 0.4 at start, 2 CPU(s); B 7.9 at start, 2 CPU(s)" in out
    document = json.loads(cli("compare", str(a), str(b), "--json")[1])
    (setting,) = document["settings_differ"]
    assert (setting["setting"], setting["before"], setting["after"]) == ("latency bound", 130000000.0, 100000000.0)
    assert document["load"]["baseline"]["load_1m_at_start"] == 0.4 and document["load"]["new"]["cpus"] == 2
