"""The qualification's own record of a real run on an NVIDIA H200, re-judged by today's code.

``tests/fixtures/qualify/h200-torch-encoder/`` holds what ``PERF-GPU-QUALIFY`` (as shipped: 10 s runs,
1,024 samples, BERT-large shapes in bf16) wrote on a lent H200 on 2026-11-29 (its README says how):
the LoadGen logs of GPU 0's Offline and Server runs, the probes' outputs and matmul figures, the
nvidia-smi telemetry taken during the runs and the four verdict files the run wrote. Here the same
executor code judges those files again, so a change to a verdict rule shows against a real GPU's
figures, not only against figures we made up; and MLCommons' own log parser (``../shared/upstream``) reads
the same LoadGen values from those logs as our ``detail_values`` does.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.test_loadgen_executor import make_ctx
from tests.upstream import CHECKER_TOOLS, upstream_root
from workload.actions.gpu_qualify import GpuQualifyExecutor, QualifyParameters, parse_gpu_identities
from workload.hosts.local import LocalHost
from workload.loadgen.logs import detail_values
from workload.monitors.nvsmi import FAULT_MASK, POWER_CAP_MASK, parse_query
from workload.qualify.verdicts import AGREEMENT_TOLERANCE

RECORD = Path(__file__).parent / "fixtures" / "qualify" / "h200-torch-encoder"
RESULTS = Path("results") / "qualify" / "qualify-torch-encoder"
TELEMETRY = Path("qualify") / "qualify-torch-encoder" / "nvidia-smi.csv"
#: The row ``GPU_IDENTITIES`` read on that machine (index, pci.bus_id, serial, name), from device.txt's nvidia-smi -q.
IDENTITY_ROW = "0, 00000000:00:06.0, 1654024074248, NVIDIA H200\n"


def _rejudge(tmp_path: Path) -> tuple[Path, dict[str, dict[str, object]]]:
    ctx = make_ctx(LocalHost(), tmp_path)
    shutil.copytree(RECORD / "local", ctx.host_dir)
    shutil.rmtree(ctx.host_dir / RESULTS / "verdicts")
    ctx.memo["devices"] = [0]
    ctx.memo["identities"] = parse_gpu_identities(IDENTITY_ROW)
    step = GpuQualifyExecutor(QualifyParameters(), location="Actions[0]", kind="action")  # the profile's defaults
    samples = parse_query((ctx.host_dir / TELEMETRY).read_text(encoding="utf-8"))
    root = step.write_verdicts(ctx, samples)
    return root, {p.parent.name: json.loads(p.read_text()) for p in root.glob("*/accuracy.json")}


def test_the_record_is_judged_again_as_the_h200_run_judged_it(tmp_path: Path) -> None:
    _, verdicts = _rejudge(tmp_path)
    recorded = {
        p.parent.name: json.loads(p.read_text())
        for p in (RECORD / "local" / RESULTS / "verdicts").glob("*/accuracy.json")
    }
    assert sorted(verdicts) == sorted(recorded) == ["agreement", "math-efficiency", "parity", "throttling"]
    for name, verdict in verdicts.items():
        # the bounds are today's (bf16's agreement bound was tightened from 0.99 to 0.999 on this record)
        assert {**verdict, "threshold": None} == {**recorded[name], "threshold": None}, name
    assert verdicts["agreement"]["threshold"] == AGREEMENT_TOLERANCE["bf16"]
    assert all(v["pass"] is True for v in verdicts.values())


def test_the_h200_figures(tmp_path: Path) -> None:
    """The figures the closing note quotes, read from the record's own files."""
    _, verdicts = _rejudge(tmp_path)
    offline = detail_values(
        RECORD / "local" / RESULTS / "gpu0" / "Offline" / "performance" / "run_1" / "mlperf_log_detail.txt"
    )
    server = detail_values(
        RECORD / "local" / RESULTS / "gpu0" / "Server" / "performance" / "run_1" / "mlperf_log_detail.txt"
    )
    assert offline["result_validity"] == server["result_validity"] == "VALID"
    assert offline["result_samples_per_second"] == pytest.approx(4843.82, abs=0.01)
    assert server["result_completed_samples_per_sec"] == pytest.approx(487.09, abs=0.01)
    assert float(str(server["result_99.00_percentile_latency_ns"])) < 100e6  # the profile's 100 ms bound
    probe = json.loads(
        (RECORD / "local" / "qualify" / "qualify-torch-encoder" / "probe-gpu0" / "probe.json").read_text()
    )
    assert probe["model"]["precision"] == "bf16" and probe["model"]["device_name"] == "NVIDIA H200"
    assert probe["matmul_tflops"] == pytest.approx(681.62, abs=0.01)
    # achieved = 4,843.82 samples/s x 78.92 GFLOP per sample = 382.27 TFLOP/s, 56.1 % of the probe
    assert verdicts["math-efficiency"]["value"] == pytest.approx(4843.82 * 78.920024064e9 / 1e12 / 681.62, rel=1e-4)
    assert verdicts["agreement"]["value"] > 0.9999  # bf16 against the CPU's fp32, worst of 32 samples


def test_a_healthy_h200_at_its_power_limit_passes_the_throttling_check(tmp_path: Path) -> None:
    """16 of 38 samples carry the SW power cap at up to 693 of 700 W, the SM clock at 1,920 MHz or more of its
    1,980 MHz maximum; none carries a fault reason. Judged by every reason that lowers clocks (the rule before
    this record), the share was 8 times the 5 % allowed and a healthy GPU failed."""
    samples = parse_query((RECORD / "local" / TELEMETRY).read_text(encoding="utf-8"))
    capped = [s for s in samples if (s.event_reasons or 0) & POWER_CAP_MASK]
    assert len(samples) == 38 and len(capped) == 16
    assert not any((s.event_reasons or 0) & FAULT_MASK for s in samples)
    assert min(s.values["sm_clock"] or 0 for s in capped) == 1920  # of a 1,980 MHz maximum
    _, verdicts = _rejudge(tmp_path)
    throttling = verdicts["throttling"]
    assert throttling["pass"] is True and throttling["value"] == 0.0
    assert "42% at the power limit (up to 693/700 W, SM clock down to 1920 MHz)" in str(throttling["details"])


def _mlcommons_log_class() -> Any:
    """MLCommons' ``MLPerfLog`` (tools/submission/log_parser.py, the parser its submission checker reads detail
    logs with), evaluated from ``../shared/upstream`` without writing bytecode there."""
    path = upstream_root() / CHECKER_TOOLS / "log_parser.py"
    namespace: dict[str, Any] = {"__name__": "mlcommons_log_parser"}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace["MLPerfLog"]


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_mlcommons_own_parser_reads_the_h200_logs_as_we_do(scenario: str) -> None:
    """The verdicts read the record's LoadGen detail logs with ``detail_values``; MLCommons' parser, strict (a
    malformed line raises), reads the same value for every key the log holds once, the result keys included."""
    log = RECORD / "local" / RESULTS / "gpu0" / scenario / "performance" / "run_1" / "mlperf_log_detail.txt"
    theirs = _mlcommons_log_class()(str(log), strict=True)
    ours = detail_values(log)
    once = {key for key in theirs.get_keys() if len(theirs.get(key)) == 1}
    assert set(ours) == set(theirs.get_keys()) and len(once) > 50
    assert {key: ours[key] for key in once} == {key: theirs[key] for key in once}
    rate = "result_samples_per_second" if scenario == "Offline" else "result_completed_samples_per_sec"
    assert {rate, "result_validity", "result_99.00_percentile_latency_ns"} <= once
