"""`compare` judging interleaved iterations pair by pair: the signed-rank interval of the ratios
B_i / A_i (exact coverage, checked by enumerating every sign pattern), the pairing read from the
iterations' recorded times (and refused when they did not alternate), and hostile values.

The run folders are written by the product's own writer (``write_outputs``) from results the real
parsers read from the NVIDIA harness logs of the fixtures; only each iteration's figure and times
are set, as ``workload run --iterations`` or the bench's interleaved runs would record them."""

from __future__ import annotations

import itertools
import json
import math
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.test_compare_ci import H200, cli
from workload.metrics.collection import collect
from workload.metrics.compare import compare
from workload.metrics.intervals import (
    CANNOT_TELL,
    NO_CHANGE,
    REGRESSION,
    interval,
    paired_coverage_best,
    paired_interval,
    pairs_needed,
    signed_rank_counts,
    signed_rank_depth,
    why_not_paired,
)
from workload.metrics.model import BenchmarkResult
from workload.metrics.outputs import OutputContext, load_run, write_outputs
from workload.metrics.pairing import pair_iterations

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
HEADLINE = "samples_per_second"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _offline() -> BenchmarkResult:
    results = collect(H200, host="n1").results
    (result,) = [r for r in results if r.benchmark_full == "bert-99" and r.scenario == "Offline"]
    return result


def timed_folder(root: Path, name: str, values: list[float], starts: list[float], seconds: float = 5.0) -> Path:
    """A run folder whose Offline result has one iteration per value, started ``starts[i]`` seconds
    after T0 and ended ``seconds`` later (the figure's aliases follow it)."""
    base = _offline()
    original = next(m.value for m in base.metrics if m.name == HEADLINE)
    results = []
    for value, start in zip(values, starts, strict=True):
        times = {"start_time": at(start), "end_time": at(start + seconds)}
        metrics = [
            m.model_copy(update={**times, "value": value if m.value == original else m.value}) for m in base.metrics
        ]
        headline = next(m for m in metrics if m.name == HEADLINE)
        results.append(base.model_copy(update={"metrics": metrics, "headline": headline}))
    write_outputs(root / name, results, OutputContext())
    return root / name


def offline(document: dict[str, object]) -> dict[str, object]:
    changes = document["changes"]
    assert isinstance(changes, list)
    (row,) = [c for c in changes if c["metric"] == HEADLINE]
    return dict(row)


# --- the signed-rank interval ----------------------------------------------------------------------


@pytest.mark.parametrize("n", range(1, 11))
def test_signed_rank_counts_are_the_subset_sums_of_the_ranks(n: int) -> None:
    brute = [0] * (n * (n + 1) // 2 + 1)
    for signs in itertools.product((0, 1), repeat=n):
        brute[sum(rank for rank, positive in zip(range(1, n + 1), signs, strict=True) if positive)] += 1
    assert list(signed_rank_counts(n)) == brute


# Wilcoxon signed-rank critical values, two-sided 0.05 (published tables): the interval's depth is one more
WILCOXON_05 = [(6, 0), (7, 2), (8, 3), (9, 5), (10, 8), (12, 13), (15, 25), (20, 52)]


@pytest.mark.parametrize(("n", "critical"), WILCOXON_05)
def test_signed_rank_depth_matches_the_wilcoxon_tables(n: int, critical: int) -> None:
    found = signed_rank_depth(n, 0.95)
    assert found is not None and found[0] == critical + 1 and 0.95 <= found[1] < 1


@pytest.mark.parametrize(("n", "confidence"), [(5, 0.9), (6, 0.95), (7, 0.95), (8, 0.95), (8, 0.99), (9, 0.8)])
def test_the_coverage_is_exact_over_every_sign_pattern(n: int, confidence: float) -> None:
    """Under no change the log ratios are symmetric about 0: with fixed distinct magnitudes, each of
    the 2**n sign patterns is equally likely. The interval must hold 0 in exactly ``achieved`` of them."""
    magnitudes = [0.013 * (k + 1) + 0.0007 * k * k for k in range(n)]  # distinct, no two sums cancel
    held, achieved = 0, None
    for signs in itertools.product((-1.0, 1.0), repeat=n):
        after = [math.exp(s * m) * 100.0 for s, m in zip(signs, magnitudes, strict=True)]
        found = paired_interval([100.0] * n, after, better_sign=1, threshold_pct=5, confidence=confidence)
        assert found is not None and found.method == "signed-rank" and found.pairs == n
        achieved = found.achieved
        held += found.low_pct <= 0 <= found.high_pct
    assert achieved is not None and achieved >= confidence
    assert held == round(achieved * 2**n)


def test_pairs_the_confidence_needs_and_what_fewer_get() -> None:
    assert (pairs_needed(0.9), pairs_needed(0.95), pairs_needed(0.99)) == (5, 6, 8)
    assert paired_coverage_best(5) == 0.9375 and signed_rank_depth(5, 0.95) is None
    five = [100.0, 101.0, 99.0, 100.5, 99.5]
    assert paired_interval(five, [75.0] * 5, better_sign=1, threshold_pct=5, confidence=0.95) is None
    why = why_not_paired(five, [75.0] * 5, 0.95)
    assert why == "5 pairs reach at most 0.9375 confidence; 0.95 needs 6"
    found = paired_interval(five, [75.0] * 5, better_sign=1, threshold_pct=5, confidence=0.9)
    assert found is not None and found.verdict == REGRESSION and found.achieved == 0.9375
    assert why_not_paired(five, [75.0] * 5, 0.9) == ""


def _drifting_pairs(rng: random.Random, n: int, slowdown: float) -> tuple[list[float], list[float]]:
    """``n`` rounds on a machine whose load swings between rounds (each round's runs lose the same
    0-67 % to the neighbours, as the bench's sides scattered 30-127 %) and stays put within a round
    (2 % own noise a run)."""
    before, after = [], []
    for _ in range(n):
        load = rng.uniform(0.33, 1.0)
        before.append(100.0 * load * math.exp(rng.gauss(0, 0.02)))
        after.append(100.0 * (1 - slowdown) * load * math.exp(rng.gauss(0, 0.02)))
    return before, after


def test_shared_drift_hides_a_25_percent_slowdown_from_the_unpaired_interval_but_not_from_the_paired() -> None:
    rng = random.Random(2029)
    paired_verdicts, unpaired_verdicts = [], []
    for _ in range(300):
        before, after = _drifting_pairs(rng, 7, 0.25)
        paired = paired_interval(before, after, better_sign=1, threshold_pct=5, confidence=0.95)
        unpaired = interval(before, after, better_sign=1, threshold_pct=5, confidence=0.95)
        assert paired is not None and unpaired is not None and unpaired.method == "rank"
        paired_verdicts.append(paired.verdict)
        unpaired_verdicts.append(unpaired.verdict)
    # seen: paired 300 of 300 regressions; unpaired 57 regressions, 243 "cannot tell"
    assert paired_verdicts.count(REGRESSION) == 300
    assert unpaired_verdicts.count(REGRESSION) < 100 and unpaired_verdicts.count(CANNOT_TELL) > 200


def test_identical_sides_under_the_same_drift_are_rarely_a_regression() -> None:
    """The bound of a symmetric null: at most (1 - achieved) / 2 of identical pairs wholly below 0."""
    rng = random.Random(2030)
    verdicts = []
    for _ in range(3000):
        before, after = _drifting_pairs(rng, 7, 0.0)
        found = paired_interval(before, after, better_sign=1, threshold_pct=5, confidence=0.95)
        assert found is not None
        verdicts.append(found.verdict)
    bound = (1 - 0.953125) / 2
    allowed = bound + 3 * math.sqrt(bound * (1 - bound) / len(verdicts))
    assert verdicts.count(REGRESSION) / len(verdicts) <= allowed
    assert verdicts.count(NO_CHANGE) > len(verdicts) / 2  # 2 % own noise: most pairs say so


# --- pairing from the recorded times ---------------------------------------------------------------


def spans(*starts: float, seconds: float = 5.0) -> list[tuple[datetime | None, datetime | None]]:
    return [(at(s), at(s + seconds)) for s in starts]


def test_iterations_that_alternated_are_paired_in_time_order() -> None:
    # A1 B1 | B2 A2 | A3 B3 (order rotated per round), A's values stored out of time order
    pairing = pair_iterations(spans(20, 0, 45), spans(10, 30, 55))
    assert pairing.paired and pairing.order_a == (1, 0, 2) and pairing.order_b == (0, 1, 2)
    # two runs of a pair at once (overlapping) is still a pair: they met the same load
    assert pair_iterations(spans(0, 10), spans(1, 11, seconds=4)).paired
    # a third side's runs between them change nothing (the bench's round A B C)
    assert pair_iterations(spans(0, 30, 60), spans(20, 40, 80)).paired


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        (spans(0, 10, 20), spans(30, 40, 50), "not interleaved in time: the 2nd iterations began before both 1st"),
        (spans(0, 10), spans(20, 30, 40), "the sides have 2 and 3 iterations"),
        (spans(0), spans(10), "one iteration a side"),
        ([(None, None), (at(20), None)], spans(10, 30), "an iteration has no recorded start time"),
        # two hosts' iterations pooled, run at the same time: pair 1 overlaps pair 2
        (spans(0, 0, 20, 20), spans(10, 10, 30, 30), "not interleaved in time: the 2nd"),
        # B2 began while A1 still ran (A1 took 25 s)
        ([(at(0), at(25)), (at(30), at(35))], spans(10, 20), "not interleaved in time: the 2nd"),
    ],
)
def test_iterations_that_did_not_alternate_are_not_paired(
    a: list[tuple[datetime | None, datetime | None]], b: list[tuple[datetime | None, datetime | None]], reason: str
) -> None:
    pairing = pair_iterations(a, b)
    assert not pairing.paired and pairing.reason.startswith(reason)


def test_times_without_a_zone_are_utc_and_a_missing_end_is_the_start() -> None:
    naive = [(at(0).replace(tzinfo=None), None), (at(20).replace(tzinfo=None), None)]
    assert pair_iterations(naive, spans(10, 30, seconds=0)).paired
    assert not pair_iterations(naive, [(at(-5), at(25)), (at(30), None)]).paired


# --- compare, end to end ---------------------------------------------------------------------------

SLOW = [53200.0, 71500.0, 41000.0, 60000.0, 47800.0, 66000.0]  # the drifting machine, A's side
ROUNDS = [0.0, 30.0, 60.0, 90.0, 120.0, 150.0]


def test_compare_judges_interleaved_runs_pair_by_pair(tmp_path: Path) -> None:
    a = timed_folder(tmp_path, "a", SLOW, ROUNDS)
    b = timed_folder(tmp_path, "b", [v * 0.75 for v in SLOW], [s + 10 for s in ROUNDS])
    code, out = cli("compare", str(a), str(b), "--iterations", "6", "--json")
    row = offline(json.loads(out))
    spread = row["interval"]
    assert code == 7 and row["verdict"] == REGRESSION
    assert isinstance(spread, dict)
    assert (spread["paired"], spread["pairs"], spread["method"], spread["unpaired_because"]) == (
        True,
        6,
        "signed-rank",
        None,
    )
    assert spread["achieved_confidence"] == 0.96875 and round(spread["change_pct"], 6) == -25.0
    # the same values run one side after the other: unpaired, and the drift hides the change
    c = timed_folder(tmp_path, "c", [v * 0.75 for v in SLOW], [s + 200 for s in ROUNDS])
    code, out = cli("compare", str(a), str(c), "--iterations", "6", "--json")
    row = offline(json.loads(out))
    spread = row["interval"]
    assert code == 0 and row["verdict"] == CANNOT_TELL and isinstance(spread, dict)
    assert spread["paired"] is False and spread["method"] == "rank"
    assert str(spread["unpaired_because"]).startswith("not interleaved in time")
    # the table says how each interval was made, and why one is unpaired
    code, out = cli("compare", str(a), str(b), "--iterations", "6")
    assert code == 7 and "paired, 6 pairs, 0.969" in out and "REGRESSION" in out
    code, out = cli("compare", str(a), str(c), "--iterations", "6")
    assert code == 0 and "unpaired (not interleaved in time: the 2nd iterations began before" in out


def test_too_few_pairs_for_the_confidence_are_judged_unpaired_and_say_why(tmp_path: Path) -> None:
    a = timed_folder(tmp_path, "a", SLOW, ROUNDS)
    b = timed_folder(tmp_path, "b", [v * 0.75 for v in SLOW], [s + 10 for s in ROUNDS])
    code, out = cli("compare", str(a), str(b), "--iterations", "6", "--confidence", "0.99", "--json")
    row = offline(json.loads(out))
    spread = row["interval"]
    assert isinstance(spread, dict) and spread["paired"] is False
    assert code == 0 and row["verdict"] == CANNOT_TELL  # unpaired, the drift hides the 25 %
    assert spread["unpaired_because"] == "6 pairs reach at most 0.9688 confidence; 0.99 needs 8"
    _, out = cli("compare", str(a), str(b), "--iterations", "6", "--confidence", "0.99")
    assert "unpaired (6 pairs reach at most 0.9688 confidence; 0.99 needs 8): " in out


def test_compare_help_teaches_pairing() -> None:
    code, out = cli("compare", "--help")
    assert code == 0 and "signed-rank" in out and "0.95 needs 6 pairs" in out and "unpaired" in out


# --- hostile values --------------------------------------------------------------------------------


def test_values_that_are_not_finite_are_unusable_never_judged(tmp_path: Path) -> None:
    a = timed_folder(tmp_path, "a", SLOW, ROUNDS)
    b = timed_folder(tmp_path, "b", [v * 0.75 for v in SLOW], [s + 10 for s in ROUNDS])
    jsonl = b / "metrics.jsonl"
    lines = jsonl.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if f'"name":"{HEADLINE}"' in line)
    for literal in ("NaN", "1e999"):
        record = json.loads(lines[first])
        text = json.dumps(record).replace(json.dumps(record["value"]), literal, 1)
        jsonl.write_text("\n".join([*lines[:first], text, *lines[first + 1 :]]) + "\n")
        code, out = cli("compare", str(a), str(b), "--iterations", "6", "--json")

        def refuse(constant: str) -> None:
            raise AssertionError(f"the JSON holds {constant}")

        document = json.loads(out, parse_constant=refuse)  # strict JSON: no NaN or Infinity written
        assert code == 7 and [u["metric"] for u in document["unusable"]] == [HEADLINE]
        assert all(c["metric"] != HEADLINE for c in document["changes"])
        code, out = cli("compare", str(a), str(b), "--iterations", "6")
        assert code == 7 and f"{HEADLINE}: a value is not a finite number" in out
        assert cli("compare", str(a), str(b), "--iterations", "6", "--allow-missing")[0] == 0


def test_zero_huge_and_single_values() -> None:
    ones = [1.0] * 6
    # huge ratios: no overflow, a finite change
    found = paired_interval([1e-300] * 6, [1e308] * 6, better_sign=1, threshold_pct=5, confidence=0.95)
    assert found is not None and math.isfinite(found.change_pct) and found.change_pct > 1e300
    found = interval([1e-300] * 3, [1e308] * 3, better_sign=-1, threshold_pct=5, confidence=0.95)
    assert found is not None and math.isfinite(found.low_pct) and found.verdict == REGRESSION
    # zero and NaN: no paired interval, and the reason
    assert paired_interval([0.0, *ones[1:]], ones, better_sign=1, threshold_pct=5, confidence=0.95) is None
    assert why_not_paired([0.0, *ones[1:]], ones, 0.95) == "a value is 0 or below (no ratio)"
    assert paired_interval([math.nan, *ones[1:]], ones, better_sign=1, threshold_pct=5, confidence=0.95) is None
    assert interval([math.nan, 1.0], [1.0, 1.0], better_sign=1, threshold_pct=5, confidence=0.95) is None
    assert interval([math.inf, 1.0], [1.0, 1.0], better_sign=1, threshold_pct=5, confidence=0.95) is None
    # different lengths are never pairs
    assert paired_interval(ones, ones[:5], better_sign=1, threshold_pct=5, confidence=0.9) is None
    assert why_not_paired(ones, ones[:5], 0.9) == "the sides have 6 and 5 values"
    assert why_not_paired([], [], 0.9) == "the sides have 0 and 0 values"


def test_a_single_run_a_side_is_judged_by_the_threshold(tmp_path: Path) -> None:
    a = timed_folder(tmp_path, "a", [70000.0], [0.0])
    b = timed_folder(tmp_path, "b", [52500.0], [10.0])
    result = compare(load_run(a), load_run(b), 5.0, headline_only=True)
    (change,) = [c for c in result.changes if c.key[4] == HEADLINE]
    assert change.interval is None and change.regression and change.verdict == REGRESSION
