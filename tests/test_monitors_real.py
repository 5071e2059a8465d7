"""The nvidia-smi telemetry query against real output recorded on an NVIDIA H200 (driver 580.159.04).

The rest of the monitor tests drive the test bed's stand-in nvidia-smi; these hold our parser and the
stand-in to what the real tool printed (tests/fixtures/monitors/h200-580.159.04/README.md says how
it was recorded): the rows parse with the values the GPU reported, the power-cap throttling under
load is recognised, and the stand-in prints rows of the same shape and the same invalid-field error.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.test_monitors import gpu, install_standin
from workload.monitors.nvsmi import (
    LEGACY_EVENT_FIELD,
    THROTTLE_MASK,
    describe_reasons,
    invalid_field,
    parse_query,
    query_argv,
)

REAL = Path(__file__).parent / "fixtures" / "monitors" / "h200-580.159.04"


def real_rows(name: str) -> list[str]:
    return [line for line in (REAL / name).read_text().splitlines() if line.strip()]


def test_every_real_row_parses_with_the_values_the_gpu_reported() -> None:
    rows = real_rows("query-under-load.txt")
    samples = parse_query("\n".join(rows))
    assert len(samples) == len(rows) >= 20
    assert {(s.index, s.name) for s in samples} == {(0, "NVIDIA H200")}
    assert all(s.values["memory_total"] == 143771 and s.values["power_limit"] == 700 for s in samples)
    assert all(s.values["ecc_uncorrected_volatile"] == 0 for s in samples)
    assert all(None not in s.values.values() for s in samples)  # an H200 answers every field we ask


def test_idle_then_held_by_the_power_cap_under_load() -> None:
    samples = parse_query((REAL / "query-under-load.txt").read_text())
    idle = [s for s in samples if s.values["gpu_utilization"] == 0]
    busy = [s for s in samples if (s.values["gpu_utilization"] or 0) >= 99]
    assert idle and busy
    assert {s.event_reasons for s in idle} == {0x1} and describe_reasons(0x1) == ["GPU idle"]
    assert all((s.event_reasons or 0) & THROTTLE_MASK == 0 for s in idle)  # idle is not throttling
    assert {s.event_reasons for s in busy} == {0x4}
    assert describe_reasons(0x4 & THROTTLE_MASK) == ["SW power cap"]
    assert max(s.values["power_draw"] or 0 for s in busy) > 600
    assert max(s.values["sm_clock"] or 0 for s in busy) > max(s.values["sm_clock"] or 0 for s in idle)


def test_driver_580_still_answers_the_pre_r535_field_name() -> None:
    (sample,) = parse_query((REAL / "query-legacy-field.txt").read_text())
    assert sample.name == "NVIDIA H200" and sample.event_reasons == 0x1
    assert LEGACY_EVENT_FIELD == "clocks_throttle_reasons.active"


def _shape(cell: str) -> str:
    """A cell's form: what a parser depends on, not its value."""
    for name, pattern in (
        ("timestamp", r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}"),
        ("hex64", r"0x[0-9a-f]{16}"),
        ("float2", r"\d+\.\d\d"),
        ("int", r"\d+"),
    ):
        if re.fullmatch(pattern, cell):
            return name
    return "text"


def test_the_stand_in_prints_rows_of_the_real_shape(tmp_path: Path) -> None:
    exe = install_standin(
        tmp_path,
        [gpu(0, name="NVIDIA H200", memory_mib=143771, util=100, power_w=685.9, sm_mhz=1440, clocks_event_reasons=0x4)],
    )
    ours = subprocess.run(query_argv(str(exe)), capture_output=True, text=True, check=True).stdout.strip()
    real = real_rows("query-under-load.txt")[-1]
    assert [_shape(c) for c in ours.split(", ")] == [_shape(c) for c in real.split(", ")]


def test_an_invalid_field_fails_as_the_real_tool_does(tmp_path: Path) -> None:
    real = (REAL / "invalid-field.exit2.txt").read_bytes()
    exe = install_standin(tmp_path, [gpu(0)])
    ours = subprocess.run(
        [str(exe), "--query-gpu=index,no.such.field", "--format=csv,noheader,nounits"], capture_output=True
    )
    assert ours.returncode == 2  # the real exit status, from the fixture's name
    assert ours.stdout + ours.stderr == real
    assert invalid_field(real.decode()) == "no.such.field"
