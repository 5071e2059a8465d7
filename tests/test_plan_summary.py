"""``workload plan`` as a user first sees it: a summary per host (GPU situation; would change / no change /
would fail), every step in full only with --details, --strict to exit 4, and a sentence for an absent
Docker daemon.

The GPU lines are judged against the facts of the machine the test runs on (read with the same
fact, ``workload.facts.nvidia.GPUS``), so the tests hold on a GPU machine and on one without.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from workload.cli import invoke
from workload.cli.plan_summary import NO_GPU_PROBLEM, GpuSituation, summarize
from workload.facts.nvidia import GPUS, GpuInventory, parse_gpu_csv
from workload.hosts.local import LocalHost
from workload.outcomes import HostOutcome, StepOutcome
from workload.steps import Change, StepPlan

ROOT = Path(__file__).resolve().parent.parent
REAL_H200 = ROOT / "tests" / "fixtures" / "facts" / "gpu_csv" / "h200-x1-real.csv"
TOTAL = re.compile(
    r"(\d+) step\(s\) on (\d+) host\(s\): (\d+) would change, (\d+) no change, (\d+) would fail if run now\."
)


def _this_machine() -> GpuSituation:
    host = LocalHost()
    try:
        return GpuSituation(GPUS.read(host))
    finally:
        host.close()


def _mlperf_only(tmp_path: Path, **parameters: object) -> str:
    """A profile with one MLPerfExecutor whose plan can be made on any machine (nothing cloned yet)."""
    profile = tmp_path / "mlperf-only.json"
    action = {"Type": "MLPerfExecutor", "Parameters": {"Scenario": "bert", "Model": "bert", **parameters}}
    profile.write_text(json.dumps({"Description": "one MLPerf action", "Actions": [action]}))
    return str(profile)


def test_default_plan_is_a_short_summary_with_the_gpu_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["plan", "--profile", "PERF-GPU-MLPERF"]) in (0,)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 40, out  # the full plan is 150+ lines
    assert f"  {_this_machine().describe()}" in lines
    assert not any(line.lstrip().startswith("$ ") for line in lines), out  # no commands by default
    assert "LinuxDriverVersion = " not in out  # nor parameters
    assert "every step in full (parameters, exact commands, notes): add --details" in out
    total = TOTAL.search(out)
    assert total is not None, out
    steps, hosts, change, unchanged, fail = (int(n) for n in total.groups())
    assert (steps, hosts) == (8, 1) and change + unchanged + fail == steps
    for title, count in (("would change", change), ("no change", unchanged), ("would fail if run now", fail)):
        assert (f"  {title} ({count}):" in lines) == (count > 0), out
    assert "FileNotFoundError(" not in out and "Traceback" not in out


def test_details_print_every_step_in_full_then_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert invoke(["plan", "--profile", "PERF-GPU-MLPERF", "--details"]) == 0
    out = capsys.readouterr().out
    assert "      LinuxDriverVersion = '550'" in out and "$ git clone --no-checkout" in out
    assert out.index("[local] -> Actions[1] MLPerfExecutor") < out.index("-- summary of local") < out.index("GPU: ")
    assert TOTAL.search(out) is not None


def test_a_step_that_needs_a_gpu_would_fail_on_a_host_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: with the driver step left out, plan said "0 would fail" on a machine without a GPU."""
    gpu = _this_machine()
    profile = _mlperf_only(tmp_path)
    code = invoke(["plan", "--profile", profile])
    out = capsys.readouterr().out
    assert code == 0  # plan reports; it does not fail...
    strict = invoke(["plan", "--profile", profile, "--strict"])
    capsys.readouterr()
    if gpu.none_present:
        assert f"Actions[0] MLPerfExecutor (bert): {NO_GPU_PROBLEM}" in out
        assert ", 1 would fail if run now." in out
        assert "exit 0: plan only reports; --strict exits 4 when a step would fail" in out
        assert strict == 4  # ...unless asked to
    else:
        assert NO_GPU_PROBLEM not in out and ", 0 would fail if run now." in out and strict == 0
    # Without the GPU device request the action needs no GPU: nothing would fail on any machine.
    no_gpu = _mlperf_only(tmp_path, UseGpus=False)
    assert invoke(["plan", "--profile", no_gpu, "--strict"]) == 0
    out = capsys.readouterr().out
    assert NO_GPU_PROBLEM not in out and ", 0 would fail if run now." in out
    assert "exit 0: plan only reports" not in out


def test_plan_json_carries_each_hosts_gpu_and_what_would_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpu = _this_machine()
    code = invoke(["plan", "--profile", _mlperf_only(tmp_path), "--json"])
    document = json.loads(capsys.readouterr().out)
    host = document["hosts"][0]
    assert host["gpu"] == gpu.describe()
    assert host["would_fail"] == (["Actions[0] MLPerfExecutor (bert)"] if gpu.none_present else [])
    assert code == document["exit_code"] == 0


def test_gpu_lines_from_recorded_and_built_facts() -> None:
    real = GpuInventory("ok", parse_gpu_csv(REAL_H200.read_text()), pci_gpus=1)
    assert GpuSituation(real).describe() == "GPU: 1x NVIDIA H200 (143771 MiB), driver 580.159.04"
    fresh = GpuInventory("not-installed", message="nvidia-smi is not installed", pci_gpus=8, nvswitch_count=4)
    assert GpuSituation(fresh).describe() == (
        "GPU: 8 NVIDIA GPU(s) on the PCI bus, no working driver yet (nvidia-smi is not installed); 4 NVSwitch(es)"
    )
    none = GpuInventory("not-installed", message="nvidia-smi is not installed")
    assert GpuSituation(none).describe() == "GPU: none (no NVIDIA GPU on the PCI bus; nvidia-smi is not installed)"
    assert GpuSituation(None, "connection lost").describe() == "GPU: could not be read (connection lost)"
    assert not GpuSituation(None, "x").none_present and not GpuSituation(fresh).none_present


def test_summary_groups_steps_and_strips_the_host_and_step_prefix() -> None:
    change = StepPlan(changes=(Change("install Docker"), Change("start it")), reboot_required=True)
    outcome = HostOutcome(
        "vm1",
        steps=[
            StepOutcome("Dependencies[0] A (a)", "planned", plan=change),
            StepOutcome("Dependencies[1] B (b)", "planned", plan=StepPlan.noop("already there")),
            StepOutcome(
                "Dependencies[2] C (c)",
                "failed",
                message="[vm1] Dependencies[2] C (c): Debian is not supported\nfound by the preflight\n"
                "  hint: use Ubuntu",
            ),
            StepOutcome("Actions[0] M (m)", "planned", plan=change),
        ],
    )
    none = GpuSituation(GpuInventory("not-installed"))
    summary = summarize(outcome, none, ["Actions[0] M (m)"])
    assert [(line.label, line.text) for line in summary.change] == [
        ("Dependencies[0] A (a)", "install Docker (+1 more); then reboot")
    ]
    assert [line.text for line in summary.unchanged] == ["already there"]
    assert [(line.text, line.hint) for line in summary.fail] == [
        ("Debian is not supported", "use Ubuntu"),
        (NO_GPU_PROBLEM, "run this profile on a GPU machine"),
    ]
    assert summary.gpu_missing_for == ["Actions[0] M (m)"]
    # GPUs unknown (not read) or present: the GPU steps are judged by their own plans only
    assert summarize(outcome, None, ["Actions[0] M (m)"]).gpu_missing_for == []


def test_an_absent_docker_daemon_is_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from workload.errors import ConnectError
    from workload.mlperf.container import connect

    missing = tmp_path / "no-daemon.sock"
    with pytest.raises(ConnectError) as raised:
        connect(f"unix://{missing}", host_name="h", timeout=5)
    assert f"cannot reach the Docker daemon at unix://{missing}: there is no such socket" in str(raised.value)
    assert "FileNotFoundError" not in str(raised.value)
    # A socket file nobody listens on: the daemon is stopped.
    stopped = tmp_path / "stopped.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(stopped))
        with pytest.raises(ConnectError) as raised:
            connect(f"unix://{stopped}", host_name="h", timeout=5)
    assert "the socket refuses connections (the Docker service is stopped)" in str(raised.value)
    # Through plan: the MLPerf action's note says it in words (docker-py follows DOCKER_HOST).
    monkeypatch.setenv("DOCKER_HOST", f"unix://{missing}")
    assert invoke(["plan", "--profile", _mlperf_only(tmp_path), "--details"]) == 0
    out = capsys.readouterr().out
    assert f"cannot reach the Docker daemon at unix://{missing}: there is no such socket" in out
    assert "FileNotFoundError" not in out
