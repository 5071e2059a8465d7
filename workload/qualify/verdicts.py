"""The qualification verdicts: pure functions of recorded per-GPU figures, each a :class:`Check`.

Nothing here runs anything: the action records figures (LoadGen results per GPU, nvidia-smi samples,
output arrays, probe timings) and these functions judge them, so every verdict is tested on recorded
figures in CI. A failed check names each culprit by GPU index, PCI bus id and serial
(:meth:`GpuIdentity.label`), so a fleet operator knows which board to pull.

* :func:`parity` - each GPU's throughput (and p99 latency) against the MEDIAN OF ITS SIBLINGS (the other
  GPUs of the host, not itself: with two GPUs a straggler would otherwise pull the median half-way);
* :func:`throttling` - the share of telemetry samples taken during the run in which NVML's clock-event
  reasons of a fault (heat, the board's protection: :data:`workload.monitors.nvsmi.FAULT_MASK`) were set,
  the share at the power limit (reported, not failed) and the SM clock range;
* :func:`agreement` - every GPU's outputs on the fixed sample set against the CPU reference and against
  the element-wise median of all GPUs' outputs (the consensus), by cosine similarity per sample, with a
  tolerance that depends on the precision;
* :func:`math_efficiency` - achieved TFLOP/s (samples/s x model FLOPs per sample) over the TFLOP/s the
  same GPU's matmul probe reached in the same run.

Each :class:`Check` becomes an ``accuracy.json`` (see :meth:`Check.as_accuracy_json`), the file the
metrics collector already reads, so a failed check fails the run's verdict (exit code 6) with its
problems as the reasons, like every other profile's failed accuracy check.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from workload.monitors.nvsmi import FAULT_MASK, POWER_CAP_MASK, GpuSample, describe_reasons

FloatArray = npt.NDArray[np.float32]

#: Minimum per-sample cosine similarity to the CPU fp32 reference, by the precision the GPU computed in.
#: fp32 differs from the CPU only by summation order; 16-bit formats round every activation (bf16 keeps
#: 8 mantissa bits, fp16 11), so their bound is looser. A wrong-answer GPU lands far below all of them.
#: Measured: BERT-large's shapes in bf16 on an H200 scored 0.999958 at worst over 32 samples (1 - cosine
#: 4.2e-5; tests/fixtures/qualify/h200-torch-encoder/), as bf16 on a CPU does, so bf16's bound 0.999
#: leaves 24 times that error. The fp16 bound has not been measured on a GPU yet.
AGREEMENT_TOLERANCE: dict[str, float] = {"fp32": 0.99999, "fp16": 0.999, "bf16": 0.999}
#: A GPU this much slower than its siblings' median (0.10 = 10 %) is a straggler.
DEFAULT_STRAGGLER_THRESHOLD = 0.10
#: The share of samples during the run allowed to show a throttle reason.
DEFAULT_MAX_THROTTLED_FRACTION = 0.05


@dataclass(frozen=True)
class GpuIdentity:
    """Which physical GPU: nvidia-smi's index, PCI bus id and serial (``None`` where not known)."""

    index: int
    pci_bus_id: str | None = None
    serial: str | None = None
    name: str | None = None

    def label(self) -> str:
        """``GPU 3 (PCI 00000000:4C:00.0, serial 1654923012345)``: what an operator needs to find the board."""
        pci = self.pci_bus_id or "unknown"
        serial = self.serial or "unknown"
        return f"GPU {self.index} (PCI {pci}, serial {serial})"


@dataclass(frozen=True)
class GpuFigures:
    """One GPU's LoadGen result in one scenario when it ran alone."""

    gpu: GpuIdentity
    scenario: str
    samples_per_second: float
    #: p99 latency in ms (Server); ``None`` where LoadGen did not report one.
    p99_latency_ms: float | None = None


@dataclass(frozen=True)
class Check:
    """One verdict: its metric, the worst value, the bound, pass/fail and why (one line per culprit)."""

    name: str
    value: float
    threshold: float | None
    passed: bool
    problems: tuple[str, ...] = ()
    #: Per-GPU figures behind the value (for the record; not part of the verdict).
    details: tuple[str, ...] = ()
    #: What an operator does about a failure (written only when the check failed).
    fix: str = ""

    def as_accuracy_json(self, *, model: str, scenario: str) -> dict[str, object]:
        """The ``accuracy.json`` object the metrics collector reads (workload/metrics/parsers/accuracy_json.py)."""
        return {
            "metric": self.name,
            "value": self.value,
            "threshold": self.threshold,
            "pass": self.passed,
            "problems": list(self.problems),
            "details": list(self.details),
            "fixes": [self.fix] if self.fix and not self.passed else [],
            "model": model,
            "scenario": scenario,
        }


def _by_scenario(figures: Sequence[GpuFigures]) -> dict[str, list[GpuFigures]]:
    out: dict[str, list[GpuFigures]] = {}
    for figure in figures:
        out.setdefault(figure.scenario, []).append(figure)
    return out


def parity(figures: Sequence[GpuFigures], *, threshold: float = DEFAULT_STRAGGLER_THRESHOLD) -> Check:
    """Each GPU against the median of its siblings, per scenario (see the module docstring).

    Throughput ratio = own samples/s / siblings' median; a GPU fails when the ratio is below
    ``1 - threshold``, or when its p99 latency exceeds the siblings' median by more than ``threshold``.
    ``value`` is the lowest throughput ratio; a host with one GPU has no siblings and passes with 1.0.
    A GPU whose figure is missing, zero or not finite fails (it did not do the work).
    """
    if not 0 < threshold < 1:
        raise ValueError(f"straggler threshold {threshold} is not between 0 and 1")
    problems: list[str] = []
    details: list[str] = []
    worst = 1.0
    for scenario, group in sorted(_by_scenario(figures).items()):
        for figure in group:
            rate = figure.samples_per_second
            if not math.isfinite(rate) or rate <= 0:
                problems.append(f"{figure.gpu.label()} {scenario}: no throughput ({rate} samples/s)")
                worst = 0.0
                continue
            siblings = [f for f in group if f.gpu.index != figure.gpu.index and math.isfinite(f.samples_per_second)]
            if not siblings:
                details.append(f"{figure.gpu.label()} {scenario}: {rate:.1f} samples/s (no sibling to compare)")
                continue
            median = statistics.median(f.samples_per_second for f in siblings)
            ratio = rate / median if median > 0 else math.inf
            worst = min(worst, ratio)
            details.append(f"{figure.gpu.label()} {scenario}: {rate:.1f} samples/s, {ratio:.3f} x siblings' median")
            if ratio < 1 - threshold:
                problems.append(
                    f"{figure.gpu.label()} {scenario}: straggler, {rate:.1f} samples/s is {1 - ratio:.1%} below "
                    f"its siblings' median {median:.1f} (limit {threshold:.0%})"
                )
            latencies = [f.p99_latency_ms for f in siblings if f.p99_latency_ms is not None]
            if figure.p99_latency_ms is not None and latencies:
                median_latency = statistics.median(latencies)
                if median_latency > 0 and figure.p99_latency_ms > median_latency * (1 + threshold):
                    problems.append(
                        f"{figure.gpu.label()} {scenario}: p99 latency {figure.p99_latency_ms:.2f} ms is "
                        f"{figure.p99_latency_ms / median_latency - 1:.1%} above its siblings' median "
                        f"{median_latency:.2f} ms (limit {threshold:.0%})"
                    )
    fix = (
        "compare the named GPU's clocks, power limit and PCIe link with its siblings' "
        "(nvidia-smi -q -d CLOCK,POWER,PERFORMANCE; lspci -vv for the link width and speed), then rerun"
    )
    return Check("gpu_parity_ratio_min", worst, 1 - threshold, not problems, tuple(problems), tuple(details), fix)


def throttling(
    samples: Sequence[GpuSample],
    gpus: Sequence[GpuIdentity],
    *,
    max_fraction: float = DEFAULT_MAX_THROTTLED_FRACTION,
) -> Check:
    """Clock-event reasons and SM clocks from the telemetry taken during the run, per GPU.

    A GPU fails when more than ``max_fraction`` of its samples carry a fault reason (:data:`FAULT_MASK`:
    HW slowdown, SW or HW thermal slowdown, HW power brake), naming the reasons seen; a qualified GPU
    with no sample at all fails too (nothing shows it was not held down). The SW power cap
    (:data:`POWER_CAP_MASK`) does not fail a GPU: a healthy one under full load runs at its power
    limit by design (a real H200 did so in a sixth of its samples, clocks 1% below maximum). Its share,
    the power drawn against the limit and the lowest SM clock while capped are in ``details``; a GPU
    whose limit was lowered shows as a straggler in :func:`parity`. ``value`` is the highest faulted
    fraction. With no GPU identities (the CPU stand-in) the check passes with nothing to judge and
    says so in ``details``.
    """
    problems: list[str] = []
    details: list[str] = []
    worst = 0.0
    for gpu in gpus:
        own = [s for s in samples if s.index == gpu.index]
        if not own:
            problems.append(f"{gpu.label()}: no telemetry sample during the run")
            worst = 1.0
            continue
        faulted = [m for s in own if (m := s.event_reasons) is not None and m & FAULT_MASK]
        capped = [s for s in own if (s.event_reasons or 0) & POWER_CAP_MASK]
        fraction = len(faulted) / len(own)
        worst = max(worst, fraction)
        clocks = [c for s in own if (c := s.values.get("sm_clock")) is not None]
        clock_text = f"SM clock {min(clocks):.0f}-{max(clocks):.0f} MHz" if clocks else "SM clock unknown"
        details.append(
            f"{gpu.label()}: {len(own)} samples, {fraction:.0%} held down by a fault, "
            f"{len(capped) / len(own):.0%} at the power limit{_power_cap_text(capped)}, {clock_text}"
        )
        if fraction > max_fraction:
            seen = 0
            for mask in faulted:
                seen |= mask & FAULT_MASK
            problems.append(
                f"{gpu.label()}: held down in {len(faulted)} of {len(own)} samples ({fraction:.0%}, limit "
                f"{max_fraction:.0%}): {', '.join(describe_reasons(seen))}; {clock_text}"
            )
    if not gpus:
        details.append("no GPU identities: nothing to judge (CPU stand-in)")
    fix = (
        "check the named GPU's cooling and power delivery (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); "
        "a GPU without telemetry: check that nvidia-smi answers on the host"
    )
    return Check("gpu_throttled_fraction_max", worst, max_fraction, not problems, tuple(problems), tuple(details), fix)


def _power_cap_text(capped: Sequence[GpuSample]) -> str:
    """`` (up to 689/700 W, SM clock down to 1965 MHz)`` for the power-capped samples, or ``""``."""
    if not capped:
        return ""
    parts = []
    draws = [(d, s.values.get("power_limit")) for s in capped if (d := s.values.get("power_draw")) is not None]
    if draws:
        draw, limit = max(draws, key=lambda pair: pair[0])
        parts.append(f"up to {draw:.0f}/{limit:.0f} W" if limit is not None else f"up to {draw:.0f} W")
    clocks = [c for s in capped if (c := s.values.get("sm_clock")) is not None]
    if clocks:
        parts.append(f"SM clock down to {min(clocks):.0f} MHz")
    return f" ({', '.join(parts)})" if parts else ""


def _cosine_rows(a: FloatArray, b: FloatArray) -> npt.NDArray[np.float64]:
    """Per-row cosine similarity; a row of zeros or non-finite values scores 0 (never agrees)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    dots = (a64 * b64).sum(axis=1)
    norms = np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
    return np.where(np.isfinite(cos), cos, 0.0)


def agreement_tolerance(precision: str) -> float:
    """The cosine bound for ``precision`` (fp32, fp16, bf16); a ValueError names the known ones."""
    try:
        return AGREEMENT_TOLERANCE[precision]
    except KeyError:
        raise ValueError(f"precision {precision!r}: expected one of {', '.join(AGREEMENT_TOLERANCE)}") from None


def agreement(
    outputs: Mapping[int, FloatArray],
    reference: FloatArray,
    gpus: Mapping[int, GpuIdentity],
    *,
    precision: str,
    tolerance: float | None = None,
) -> Check:
    """Every GPU's outputs against the CPU reference and against the GPUs' consensus.

    ``outputs`` maps GPU index -> ``[samples, hidden]``; ``reference`` is the CPU fp32 result of the same
    samples. The consensus is the element-wise median over three or more GPUs (one wrong GPU cannot move
    it), used only while it agrees with the reference itself (when most GPUs are wrong, the reference alone
    names them; with two GPUs, the reference decides which one is wrong). A GPU fails when any sample's
    cosine similarity to the reference or to the consensus is below the tolerance for ``precision``, or
    when its outputs have another shape. ``value`` is the lowest similarity seen.
    """
    bound = tolerance if tolerance is not None else agreement_tolerance(precision)
    problems: list[str] = []
    details: list[str] = []
    worst = 1.0
    shaped = {i: np.asarray(o, dtype=np.float32) for i, o in outputs.items()}
    good_shape = {i: o for i, o in shaped.items() if o.shape == reference.shape}
    for index, array in sorted(shaped.items()):
        if index not in good_shape:
            label = gpus.get(index, GpuIdentity(index)).label()
            problems.append(f"{label}: outputs of shape {array.shape}, the reference's is {reference.shape}")
            worst = 0.0
    consensus = np.median(np.stack(list(good_shape.values())), axis=0) if len(good_shape) > 2 else None
    if consensus is not None and float(_cosine_rows(consensus, reference).min()) < bound:
        # Most GPUs are wrong: the consensus is no yardstick, the reference alone names them.
        consensus = None
    for index, array in sorted(good_shape.items()):
        label = gpus.get(index, GpuIdentity(index)).label()
        to_reference = _cosine_rows(array, reference)
        lows = [("the CPU reference", to_reference)]
        if consensus is not None:
            lows.append(("the other GPUs' consensus", _cosine_rows(array, consensus)))
        own_worst = min(float(c.min()) for _, c in lows) if len(reference) else 1.0
        worst = min(worst, own_worst)
        details.append(f"{label}: cosine min {own_worst:.6f} over {len(reference)} samples")
        for against, cos in lows:
            bad = np.flatnonzero(cos < bound)
            if bad.size:
                problems.append(
                    f"{label}: outputs disagree with {against} on {bad.size} of {len(cos)} samples (cosine min "
                    f"{float(cos.min()):.6f} at sample {int(bad[np.argmin(cos[bad])])}, {precision} tolerance {bound})"
                )
    if not outputs:
        problems.append("no GPU outputs to compare")
        worst = 0.0
    fix = (
        "take the named GPU out of service and run the vendor's diagnostics (dcgmi diag -r 3): the same inputs "
        "and weights gave other answers there"
    )
    return Check("gpu_output_cosine_min", worst, bound, not problems, tuple(problems), tuple(details), fix)


def math_efficiency(
    achieved_tflops: Mapping[int, float],
    probe_tflops: Mapping[int, float],
    gpus: Mapping[int, GpuIdentity],
    *,
    min_ratio: float = 0.0,
) -> Check:
    """Achieved TFLOP/s over the same GPU's matmul-probe TFLOP/s.

    ``value`` is the lowest ratio. A GPU fails when its ratio is below ``min_ratio`` (0 = report only),
    when the probe is missing or not positive, or when the ratio exceeds 1.5: the workload cannot beat the
    machine's measured peak by that much, so a figure (the FLOP count or the probe) is wrong.
    """
    problems: list[str] = []
    details: list[str] = []
    worst = math.inf
    for index, achieved in sorted(achieved_tflops.items()):
        label = gpus.get(index, GpuIdentity(index)).label()
        peak = probe_tflops.get(index)
        if peak is None or not math.isfinite(peak) or peak <= 0:
            problems.append(f"{label}: no matmul probe figure ({peak})")
            worst = 0.0
            continue
        ratio = achieved / peak
        worst = min(worst, ratio)
        details.append(f"{label}: {achieved:.2f} of {peak:.2f} TFLOP/s ({ratio:.1%} of the probe)")
        if ratio < min_ratio:
            problems.append(f"{label}: reaches {ratio:.1%} of its matmul probe, below {min_ratio:.0%}")
        elif ratio > 1.5:
            problems.append(f"{label}: {ratio:.1%} of its matmul probe is impossible; a figure is wrong")
    if not achieved_tflops:
        problems.append("no achieved throughput to compare")
        worst = 0.0
    fix = (
        "below the bound: raise OfflineBatchSize or use a 16-bit Precision; a missing or impossible figure: "
        "read the probe's probe.json and the probe step's log"
    )
    return Check(
        "gpu_math_efficiency_min",
        0.0 if worst == math.inf else worst,
        min_ratio,
        not problems,
        tuple(problems),
        tuple(details),
        fix,
    )
