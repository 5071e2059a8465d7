"""The ``LoadGenExecutor`` action and the ``PERF-CPU-MLPERF`` profile: plan, apply, verify, for real.

Runs go through the real local transport (``LocalHost``) and real runner subprocesses with short
durations; a second transport class (not a LocalHost) exercises the copy-back path used for
remote hosts. About 20 s on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.loadgen_verdicts import judge_executor_result
from workload.actions.loadgen_executor import LoadGenExecutor, LoadGenParameters
from workload.errors import ProfileError, StepError
from workload.hosts.base import Host, OutputCollector
from workload.hosts.local import LocalHost
from workload.profile import load_profile, resolve_profile
from workload.rundir import remote_run_name
from workload.steps import StepContext

PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "PERF-CPU-MLPERF.json"
QUICK = {"MinDurationMs": 500, "SampleCount": 128, "SequenceLength": 16}

pytestmark = pytest.mark.timeout(180)


def make_step(**params: Any) -> LoadGenExecutor:
    parsed = LoadGenParameters.model_validate(params)
    LoadGenExecutor.check_parameters(parsed)
    return LoadGenExecutor(parsed, location="Actions[0]", kind="action")


def make_ctx(host: Host, tmp_path: Path, lines: list[str] | None = None) -> StepContext:
    from workload.steps import HostState

    host_dir = tmp_path / "run-1" / host.name
    return StepContext(
        host=host,
        host_dir=host_dir,
        log_path=host_dir / "01-LoadGenExecutor.log",
        state=HostState(host, str(tmp_path / "state.json")),
        console=lines.append if lines is not None else None,
    )


class ForeignHost(Host):
    """Not a LocalHost (so the executor takes its remote path), running on this machine."""

    def __init__(self) -> None:
        self.name = "vm1"
        self._local = LocalHost("vm1")

    def _execute(
        self, shell_line: str, *, stdin: bytes | None, timeout: float | None,
        stdout: OutputCollector, stderr: OutputCollector,
    ) -> tuple[int, bool]:  # fmt: skip
        return self._local._execute(shell_line, stdin=stdin, timeout=timeout, stdout=stdout, stderr=stderr)

    def _put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        self._local.put(local_path, remote_path, mode=mode)

    def get(self, remote_path: str, local_path: str) -> None:
        self._local.get(remote_path, local_path)

    def read_bytes(self, path: str) -> bytes:
        return self._local.read_bytes(path)

    def _write_bytes(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        self._local.write_bytes(path, data, mode=mode)

    def exists(self, path: str) -> bool:
        return self._local.exists(path)


# -- parameters and plan (no LoadGen run) --------------------------------------------------------
def test_profile_resolves_to_one_action_with_the_default_runs() -> None:
    resolved = resolve_profile(load_profile(str(PROFILE)))
    assert [s.kind for s in resolved.steps] == ["action"]
    step = resolved.steps[0]
    assert isinstance(step, LoadGenExecutor)
    assert step.runs() == [
        ("Offline", "PerformanceOnly"),
        ("Offline", "AccuracyOnly"),
        ("Server", "PerformanceOnly"),
        ("SingleStream", "PerformanceOnly"),
    ]
    settings = step.settings_for()
    assert settings.find_peak_performance is True
    assert settings.offline_target_qps is None  # "" in the profile means: let find-performance pick it
    assert settings.server_target_latency_ms is None  # picked from the measured batch time (findperf)
    assert settings.accuracy_threshold == 0.999


@pytest.mark.parametrize(
    ("override", "where", "problem"),
    [
        ({"Scenarios": "Offline,Turbo"}, "Parameters.Scenarios", "unknown value 'Turbo'"),
        ({"TestModes": "SubmissionRun"}, "Parameters.TestModes", "unknown value 'SubmissionRun'"),
        ({"MinDurationMs": "0"}, "Parameters.MinDurationMs", "greater than or equal to 1"),
        ({"ServerTargetLatencyMs": "-1"}, "Parameters.ServerTargetLatencyMs", "greater than 0"),
        ({"OfflineTargetQps": "fast"}, "Parameters.OfflineTargetQps", "valid number"),
        ({"AccuracyThreshold": "1.5"}, "Parameters.AccuracyThreshold", "less than or equal to 1"),
        ({"SampleCount": "0"}, "Parameters.SampleCount", "greater than or equal to 1"),
    ],
)
def test_bad_parameters_name_the_parameter(override: dict[str, str], where: str, problem: str) -> None:
    with pytest.raises(ProfileError) as err:
        resolve_profile(load_profile(str(PROFILE)), override)
    assert f"Actions[0].{where}" in str(err.value)
    assert problem in str(err.value)


def test_scenario_names_are_case_insensitive_and_multistream_is_allowed() -> None:
    step = make_step(Scenarios="offline;MULTISTREAM", TestModes="performanceonly")
    assert step.runs() == [("Offline", "PerformanceOnly"), ("MultiStream", "PerformanceOnly")]


def test_plan_has_one_change_per_run_with_the_runner_command(tmp_path: Path) -> None:
    step = make_step(Scenarios="Offline,Server", TestModes="PerformanceOnly,AccuracyOnly", AccuracyScenarios="Server")
    ctx = make_ctx(LocalHost(), tmp_path)
    plan = step.plan(ctx)
    assert [c.summary.split(" -> ")[0] for c in plan.changes] == [
        "LoadGen Offline PerformanceOnly",
        "LoadGen Server PerformanceOnly",
        "LoadGen Server AccuracyOnly",
    ]
    command = plan.changes[2].commands[0]
    out = ctx.host_dir / "results" / "loadgen" / "minilm-int8" / "Server" / "accuracy" / "run_1"
    assert command.argv == (
        sys.executable, "-m", "workload.loadgen.runner", "--scenario", "Server", "--mode", "AccuracyOnly",
        "--out", str(out), "--settings", str(out / "settings.json"),
    )  # fmt: skip
    assert command.timeout is not None and command.timeout >= 300
    assert not out.exists()  # planning changed nothing


def test_plan_names_a_missing_model_file(tmp_path: Path) -> None:
    step = make_step(ModelPath=str(tmp_path / "nope.onnx"))
    with pytest.raises(StepError) as err:
        step.plan(make_ctx(LocalHost(), tmp_path))
    assert f"ModelPath '{tmp_path / 'nope.onnx'}': no such file on the host" in str(err.value)


def test_plan_says_what_to_install_when_loadgen_is_missing(tmp_path: Path) -> None:
    # A Python without the cpu extra for certain: a bare venv sees none of this environment's packages
    # (the python3 first on PATH is this venv's own when it is activated).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    step = make_step(Python=str(tmp_path / "bare" / "bin" / "python"))
    with pytest.raises(StepError) as err:
        step.plan(make_ctx(LocalHost(), tmp_path))
    assert "cannot import mlperf_loadgen" in str(err.value)
    assert "workload-mlperf[cpu]" in str(err.value)


# -- real runs -----------------------------------------------------------------------------------
def test_apply_and_verify_on_the_local_host(tmp_path: Path) -> None:
    lines: list[str] = []
    step = make_step(Scenarios="Offline,SingleStream", AccuracyScenarios="Offline", **QUICK)
    ctx = make_ctx(LocalHost(), tmp_path, lines)
    step.apply(ctx, step.plan(ctx))
    step.verify(ctx)
    base = ctx.host_dir / "results" / "loadgen" / "minilm-int8"
    assert ctx.results == [
        base / "Offline" / "performance" / "run_1",
        base / "Offline" / "accuracy" / "run_1",
        base / "SingleStream" / "performance" / "run_1",
    ]
    validity = {}
    for folder, scenario in ((ctx.results[0], "Offline"), (ctx.results[2], "SingleStream")):
        # VALID, or (the CPU was taken mid-run) INVALID and retried once with the computed fix.
        validity[scenario] = judge_executor_result(ctx.host_dir, folder, scenario).values["result_validity"]
        asked = json.loads((folder / "settings.json").read_text())
        assert asked["min_duration_ms"] == QUICK["MinDurationMs"] and asked["find_peak_performance"] is True
        assert (folder / "effective_settings.json").is_file()
    accuracy = json.loads((ctx.results[1] / "accuracy.json").read_text())
    assert accuracy["pass"] is True and accuracy["samples"] == 128
    # Runner output was streamed to the console sink and the step log.
    assert any(f"Offline PerformanceOnly: {validity['Offline']}" in line for line in lines)
    assert f"SingleStream PerformanceOnly: {validity['SingleStream']}" in ctx.log_path.read_text()

    (ctx.results[1] / "accuracy.json").unlink()
    with pytest.raises(StepError, match=r"Offline AccuracyOnly: accuracy.json missing"):
        step.verify(ctx)


def test_remote_host_results_are_copied_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))  # "installed" on the host
    step = make_step(Scenarios="Offline", TestModes="PerformanceOnly", Python=sys.executable, **QUICK)
    ctx = make_ctx(ForeignHost(), tmp_path)
    step.apply(ctx, step.plan(ctx))
    step.verify(ctx)
    (folder,) = ctx.results
    node = ctx.host.identity.node
    state = tmp_path / "home" / ".local/state/workload/nodes" / node
    remote = state / "loadgen" / remote_run_name(ctx.host_dir.parent) / "loadgen/minilm-int8/Offline/performance/run_1"
    assert (remote / "mlperf_log_detail.txt").is_file()
    assert folder == ctx.host_dir / "results" / "loadgen" / "minilm-int8" / "Offline" / "performance" / "run_1"
    assert (folder / "mlperf_log_detail.txt").read_bytes() == (remote / "mlperf_log_detail.txt").read_bytes()
    assert (folder / "user.conf").is_file() and (folder / "effective_settings.json").is_file()


def test_a_run_that_cannot_start_fails_the_step_with_its_reason(tmp_path: Path) -> None:
    model = tmp_path / "broken.onnx"
    model.write_bytes(b"not an onnx file")
    step = make_step(Scenarios="Offline", TestModes="PerformanceOnly", ModelPath=str(model), **QUICK)
    ctx = make_ctx(LocalHost(), tmp_path)
    with pytest.raises(StepError) as err:
        step.apply(ctx, step.plan(ctx))
    assert "Offline PerformanceOnly (exit 2)" in str(err.value)
    assert "onnxruntime cannot load it" in str(err.value)
    assert ctx.results == []
