"""`compare` telling change from noise: intervals over iterations (regression / improvement / no
change / cannot tell at a chosen confidence), differing settings named, the machine's load named.
The result files are the recorded NVIDIA harness logs of the fixtures, judged by the real parsers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_compare_ci import H200, cli, run_folder
from workload.metrics.intervals import CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION, interval, t_quantile

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
    assert "-104.7 .." in out and "+101.9 %" in out  # the interval, in the table
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
