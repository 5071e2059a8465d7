"""The GPU qualification verdicts on recorded per-GPU figures: stragglers, wrong answers, throttling."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from workload.monitors.nvsmi import GpuSample, parse_query
from workload.qualify.verdicts import (
    AGREEMENT_TOLERANCE,
    GpuFigures,
    GpuIdentity,
    agreement,
    agreement_tolerance,
    math_efficiency,
    parity,
    throttling,
)

REAL_H200 = Path(__file__).parent / "fixtures" / "monitors" / "h200-580.159.04" / "query-under-load.txt"
GPUS = {i: GpuIdentity(i, f"00000000:{0x19 + i:02X}:00.0", f"16549230{i:05d}", "NVIDIA H200") for i in range(8)}


def _figures(rates: list[float], scenario: str = "Offline", latencies: list[float] | None = None) -> list[GpuFigures]:
    lat = latencies or [None] * len(rates)  # type: ignore[list-item]
    return [GpuFigures(GPUS[i], scenario, r, lat[i]) for i, r in enumerate(rates)]


# -- parity --------------------------------------------------------------------------------------
def test_parity_passes_siblings_within_threshold() -> None:
    check = parity(_figures([1000, 990, 1010, 1003, 995, 1001, 998, 1005]), threshold=0.1)
    assert check.passed and not check.problems
    assert check.value == pytest.approx(990 / 1002.0, rel=1e-3)  # 990 against the median of the 7 others
    assert len(check.details) == 8


def test_parity_names_the_straggler_by_index_pci_and_serial() -> None:
    check = parity(_figures([1000, 1010, 780, 995, 1003, 998, 1001, 1007]), threshold=0.1)
    assert not check.passed
    assert len(check.problems) == 1
    problem = check.problems[0]
    assert "GPU 2" in problem and "00000000:1B:00.0" in problem and "1654923000002" in problem
    assert "straggler" in problem and "Offline" in problem
    assert check.value == pytest.approx(780 / 1001.0, rel=1e-3)


def test_parity_with_two_gpus_uses_the_sibling_not_a_median_including_itself() -> None:
    # Against a median including itself (890) GPU 1 would be 10.1 % low and pass a 12 % bound only narrowly;
    # against its sibling it is 20 % low.
    check = parity(_figures([1000, 800]), threshold=0.12)
    assert not check.passed
    assert [p.split(" (")[0] for p in check.problems] == ["GPU 1"]


def test_parity_just_inside_and_just_outside_the_threshold() -> None:
    assert parity(_figures([1000, 1000, 901]), threshold=0.1).passed
    assert not parity(_figures([1000, 1000, 899]), threshold=0.1).passed


def test_parity_judges_each_scenario_and_latency() -> None:
    figures = _figures([1000, 1000, 1000]) + _figures([500, 500, 500], "Server", [10.0, 10.5, 14.0])
    check = parity(figures, threshold=0.1)
    assert not check.passed
    assert len(check.problems) == 1
    assert "GPU 2" in check.problems[0] and "Server" in check.problems[0] and "p99 latency" in check.problems[0]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
def test_parity_fails_a_gpu_without_throughput(bad: float) -> None:
    check = parity(_figures([1000, bad, 1000]))
    assert not check.passed and check.value == 0.0
    assert "GPU 1" in check.problems[0]


def test_parity_single_gpu_has_no_siblings_and_passes() -> None:
    check = parity(_figures([1234.0]))
    assert check.passed and check.value == 1.0
    assert "no sibling" in check.details[0]


def test_parity_rejects_a_nonsense_threshold() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        parity(_figures([1, 1]), threshold=1.5)


# -- throttling ----------------------------------------------------------------------------------
def _sample(index: int, mask: int, clock: float = 1980.0) -> GpuSample:
    return GpuSample("2026/11/28 06:39:25.385", index, "NVIDIA H200", {"clocks_event_reasons": mask, "sm_clock": clock})


def test_throttling_names_the_throttling_gpu_and_its_reasons() -> None:
    samples = [_sample(i, 0x0) for i in range(4) for _ in range(20)]
    samples += [_sample(3, 0x40 | 0x8, clock=1200.0) for _ in range(10)]
    check = throttling(samples, [GPUS[i] for i in range(4)])
    assert not check.passed
    assert len(check.problems) == 1
    assert "GPU 3" in check.problems[0] and "00000000:1C:00.0" in check.problems[0]
    assert "HW thermal slowdown" in check.problems[0] and "HW slowdown" in check.problems[0]
    assert "1200-1980 MHz" in check.problems[0]
    assert check.value == pytest.approx(10 / 30)


def test_throttling_ignores_idle_and_sync_boost_bits() -> None:
    samples = [_sample(0, 0x1 | 0x10) for _ in range(10)]
    check = throttling(samples, [GPUS[0]])
    assert check.passed and check.value == 0.0


def test_throttling_on_real_h200_rows_reports_the_power_cap_without_failing() -> None:
    """The recorded H200 rows (driver 580.159.04, a bf16 matmul loop) carry the SW power cap (0x4) in
    12 of 21 samples at ~690 of 700 W: the GPU working at its power limit, as designed, not a fault."""
    samples = parse_query(REAL_H200.read_text(encoding="utf-8"))
    assert len(samples) == 21
    h200 = GpuIdentity(0, "00000000:00:06.0", None, "NVIDIA H200")
    check = throttling(samples, [h200])
    assert check.passed and check.value == 0.0 and not check.problems
    assert "57% at the power limit (up to 693/700 W, SM clock down to 1425 MHz)" in check.details[0]
    assert "345-1530 MHz" in check.details[0] and "serial unknown" in check.details[0]


def test_the_same_rows_with_a_power_brake_fail_and_name_only_the_fault() -> None:
    """Bit 0x80 (HW power brake slowdown) on the capped rows: the fault fails, the cap is not blamed."""
    samples = parse_query(REAL_H200.read_text(encoding="utf-8"))
    braked = [
        GpuSample(s.timestamp, s.index, s.name, {**s.values, "clocks_event_reasons": 0x84})
        if s.event_reasons == 0x4
        else s
        for s in samples
    ]
    check = throttling(braked, [GpuIdentity(0, "00000000:00:06.0", None, "NVIDIA H200")])
    assert not check.passed and check.value == pytest.approx(12 / 21)
    assert "held down in 12 of 21 samples" in check.problems[0]
    assert "HW power brake slowdown" in check.problems[0] and "SW power cap" not in check.problems[0]


@pytest.mark.parametrize("fault", [0x8, 0x20, 0x40, 0x80])
def test_every_fault_reason_fails_and_the_power_cap_alone_never_does(fault: int) -> None:
    capped = [_sample(0, 0x4, clock=1440.0) for _ in range(20)]
    assert throttling(capped, [GPUS[0]]).passed
    check = throttling([*capped, *(_sample(0, fault | 0x4) for _ in range(5))], [GPUS[0]])
    assert not check.passed and check.value == pytest.approx(5 / 25)


def test_throttling_fails_a_gpu_without_telemetry() -> None:
    check = throttling([_sample(0, 0)], [GPUS[0], GPUS[1]])
    assert not check.passed and "GPU 1" in check.problems[0] and "no telemetry" in check.problems[0]


def test_throttling_without_gpus_passes_and_says_so() -> None:
    check = throttling([], [])
    assert check.passed and "nothing to judge" in check.details[0]


# -- agreement -----------------------------------------------------------------------------------
def _outputs(count: int, gpus: int, seed: int = 7, noise: float = 1e-4) -> tuple[dict[int, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    reference = rng.standard_normal((16, 64)).astype(np.float32)
    outputs = {i: (reference + noise * rng.standard_normal(reference.shape)).astype(np.float32) for i in range(gpus)}
    return outputs, reference


def test_agreement_passes_gpus_within_the_precision_tolerance() -> None:
    outputs, reference = _outputs(16, 4, noise=1e-2)  # bf16-sized rounding noise
    check = agreement(outputs, reference, GPUS, precision="bf16")
    assert check.passed, check.problems
    assert AGREEMENT_TOLERANCE["bf16"] < check.value < 1.0


def test_agreement_names_the_wrong_answer_gpu() -> None:
    outputs, reference = _outputs(16, 4)
    outputs[2] = outputs[2].copy()
    outputs[2][5] = -outputs[2][5]  # one sample computed wrong (a flipped sign: cosine -1)
    check = agreement(outputs, reference, GPUS, precision="fp16")
    assert not check.passed
    culprits = {p.split(" (")[0] for p in check.problems}
    assert culprits == {"GPU 2"}
    assert any("CPU reference" in p and "sample 5" in p for p in check.problems)
    assert any("consensus" in p for p in check.problems)
    assert check.value == pytest.approx(-1.0, abs=1e-3)


def test_agreement_catches_nan_and_zero_outputs() -> None:
    outputs, reference = _outputs(16, 3)
    outputs[0] = np.full_like(reference, np.nan)
    outputs[1] = np.zeros_like(reference)
    check = agreement(outputs, reference, GPUS, precision="fp32")
    assert {p.split(" (")[0] for p in check.problems} == {"GPU 0", "GPU 1"}


def test_agreement_fp32_is_stricter_than_bf16() -> None:
    outputs, reference = _outputs(16, 2, noise=1e-2)
    assert agreement(outputs, reference, GPUS, precision="bf16").passed
    assert not agreement(outputs, reference, GPUS, precision="fp32").passed


def test_agreement_shape_mismatch_and_nothing_to_compare() -> None:
    outputs, reference = _outputs(16, 2)
    outputs[1] = outputs[1][:8]
    check = agreement(outputs, reference, GPUS, precision="fp32")
    assert not check.passed and "GPU 1" in check.problems[0] and "shape" in check.problems[0]
    assert not agreement({}, reference, GPUS, precision="fp32").passed


def test_agreement_tolerance_unknown_precision() -> None:
    with pytest.raises(ValueError, match="int4"):
        agreement_tolerance("int4")


# -- math efficiency ------------------------------------------------------------------------------
def test_math_efficiency_ratio_and_bounds() -> None:
    check = math_efficiency({0: 300.0, 1: 150.0}, {0: 600.0, 1: 610.0}, GPUS, min_ratio=0.3)
    assert not check.passed
    assert check.value == pytest.approx(150 / 610)
    assert "GPU 1" in check.problems[0] and "below 30%" in check.problems[0]
    assert math_efficiency({0: 300.0}, {0: 600.0}, GPUS).passed


def test_math_efficiency_flags_impossible_or_missing_figures() -> None:
    assert "impossible" in math_efficiency({0: 1000.0}, {0: 100.0}, GPUS).problems[0]
    assert "no matmul probe" in math_efficiency({0: 10.0}, {}, GPUS).problems[0]
    assert not math_efficiency({}, {}, GPUS).passed


def test_check_as_accuracy_json_is_what_the_metrics_parser_reads() -> None:
    from workload.metrics.parsers.accuracy_json import parse
    from workload.metrics.raw import RawResult

    check = parity(_figures([1000, 700, 1000]))
    data = check.as_accuracy_json(model="qualify-standin", scenario="Offline")
    import json

    raw = RawResult(directory=".")
    parse("accuracy.json", json.dumps(data), raw)
    assert raw.accuracy_pass is False
    assert any("GPU 1" in p for p in raw.accuracy_problems)
    assert raw.accuracy_fixes == [check.fix] and "PCIe" in check.fix
    assert (
        data["fixes"] and parity(_figures([1000, 1000])).as_accuracy_json(model="m", scenario="Offline")["fixes"] == []
    )


def test_a_failed_check_s_own_fix_replaces_the_generic_advice_in_the_verdict() -> None:
    from workload.metrics.model import AccuracyCheck
    from workload.metrics.verdict import explain_accuracy

    check = AccuracyCheck(name="gpu_output_cosine_min", value=-1.0, threshold=0.99, passed=False)
    reasons, fixes = explain_accuracy([check], None, ["GPU 2 (...): outputs disagree"], ["run dcgmi diag -r 3"])
    assert fixes == ["run dcgmi diag -r 3"]
    assert any("GPU 2" in r for r in reasons)
    _, generic = explain_accuracy([check], None, ["GPU 2 (...): outputs disagree"])
    assert generic and "dcgmi" not in " ".join(generic)
