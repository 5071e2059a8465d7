"""``nvidia-smi --query-gpu=... --format=csv,noheader,nounits``: the query and its parser.

The fields are nvidia-smi's own names (``nvidia-smi --help-query-gpu``). With ``nounits`` every
value is a bare number or word; a value the GPU cannot give is ``[N/A]`` or ``[Not Supported]``
(and ``N/A`` in some fields), parsed as ``None``. ``clocks_event_reasons.active`` is a hex bitmask
(``0x0000000000000004``) of NVML's ``nvmlClocksEventReasons`` (nvml.h): which reasons hold the
clocks down; drivers before R535 call the field ``clocks_throttle_reasons.active``, so the
sampler falls back to that name when nvidia-smi says the field is not valid.

Sources: field names from ``nvidia-smi --help-query-gpu``; the CSV header names (``clocks.sm`` is
printed as ``clocks.current.sm [MHz]``) and the ``YYYY/MM/DD HH:MM:SS.mmm`` timestamp from CSV
files that real nvidia-smi runs wrote (published telemetry of public benchmark repositories), and
this query's real output on an NVIDIA H200 with driver 580.159.04 (tests/fixtures/monitors/, held
against parser and stand-in by tests/test_monitors_real.py): the row format, the idle (0x1) and
software power cap (0x4) reasons, the invalid-field error (exit 2), and that driver 580 still
answers the pre-R535 field name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: (query field, our metric name, unit) in query order; ``timestamp`` and ``index`` come first.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("utilization.gpu", "gpu_utilization", "%"),
    ("utilization.memory", "memory_utilization", "%"),
    ("memory.used", "memory_used", "MiB"),
    ("memory.total", "memory_total", "MiB"),
    ("power.draw", "power_draw", "W"),
    ("power.limit", "power_limit", "W"),
    ("temperature.gpu", "temperature", "C"),
    ("clocks.sm", "sm_clock", "MHz"),
    ("clocks.mem", "memory_clock", "MHz"),
    ("clocks_event_reasons.active", "clocks_event_reasons", "bitmask"),
    ("ecc.errors.corrected.volatile.total", "ecc_corrected_volatile", "count"),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", "count"),
)
EVENT_FIELD = "clocks_event_reasons.active"
#: The field's name before driver R535.
LEGACY_EVENT_FIELD = "clocks_throttle_reasons.active"

#: nvmlClocksEventReasons bits -> what nvidia-smi -q calls them. Values from NVML's nvml.h, as pynvml
#: exports them (nvmlClocksEventReasonGpuIdle = 1 ... nvmlClocksEventReasonDisplayClockSetting = 256).
EVENT_REASONS: dict[int, str] = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "SW power cap",
    0x8: "HW slowdown",
    0x10: "sync boost",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown",
    0x100: "display clock setting",
}
#: The GPU at its configured power limit: the SW power cap lowers clocks just enough to stay under it. A
#: healthy GPU under full load does this by design: an H200 running dense bf16 work drew 689 of its
#: 700 W with the SM clock at 1965 of 1980 MHz (tests/fixtures/qualify/h200-torch-encoder/).
POWER_CAP_MASK = 0x4
#: The reasons that mean heat or the board's protection holds the GPU down (nvidia-smi -q's help: HW
#: slowdown cuts clocks by half or more for temperature, an external power brake or a power spike):
#: a fault to find, never normal operation.
FAULT_MASK = 0x8 | 0x20 | 0x40 | 0x80
#: The reasons that mean "slower than it could be" (idle, application settings and sync boost do not).
THROTTLE_MASK = POWER_CAP_MASK | FAULT_MASK
_MISSING = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|GPU requires reset|Insufficient Permissions)\]?$", re.I)
_INVALID_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def query_fields(event_field: str = EVENT_FIELD) -> list[str]:
    """The ``--query-gpu`` list, with the clock-event field under the name this driver knows."""
    return ["timestamp", "index", "name", *(event_field if f == EVENT_FIELD else f for f, _, _ in METRICS)]


def query_argv(executable: str, event_field: str = EVENT_FIELD) -> list[str]:
    return [executable, f"--query-gpu={','.join(query_fields(event_field))}", "--format=csv,noheader,nounits"]


def invalid_field(output: str) -> str | None:
    """The field nvidia-smi rejected (``Field "x" is not a valid field to query.``), if that is the error."""
    match = _INVALID_FIELD.search(output)
    return match.group(1) if match else None


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment: nvidia-smi's timestamp text, index, name, metric values (None = not available)."""

    timestamp: str
    index: int
    name: str
    values: dict[str, float | None]

    @property
    def event_reasons(self) -> int | None:
        value = self.values.get("clocks_event_reasons")
        return None if value is None else int(value)


def _value(text: str, unit: str) -> float | None:
    text = text.strip()
    if not text or _MISSING.match(text):
        return None
    if unit == "bitmask":
        return float(int(text, 16)) if text.lower().startswith("0x") else None
    try:
        number = float(text.split()[0])  # tolerate a unit left in (a csv without nounits)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def parse_query(output: str) -> list[GpuSample]:
    """Rows of ``--format=csv,noheader,nounits`` output for :func:`query_fields`; malformed rows are skipped.

    A GPU name may hold no comma in nvidia-smi's output (it does not quote), so a row splits on ``,``.
    """
    samples: list[GpuSample] = []
    width = 3 + len(METRICS)
    for line in output.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != width or not cells[1].isdigit():
            continue
        values = {name: _value(cells[3 + i], unit) for i, (_, name, unit) in enumerate(METRICS)}
        samples.append(GpuSample(cells[0], int(cells[1]), cells[2], values))
    return samples


def describe_reasons(mask: int) -> list[str]:
    """The names of the bits set in a clocks-event mask, lowest bit first."""
    return [name for bit, name in EVENT_REASONS.items() if mask & bit]
