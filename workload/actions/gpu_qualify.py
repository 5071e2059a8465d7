"""``GpuQualifyExecutor``: real LoadGen on each GPU alone, then on all at once, and the qualification verdicts.

The embedded LoadGen benchmark does the LoadGen work (:class:`LoadGenExecutor`'s runner,
``python -m workload.loadgen.runner``, one process per (scenario, GPU)); this step adds:

1. the GPUs: nvidia-smi's index, PCI bus id and serial (``Devices`` picks some; the stand-in model on a
   host without nvidia-smi runs on "devices" that are CPU processes, named by index only);
2. per GPU, ``python -m workload.qualify.probe`` pinned with ``CUDA_VISIBLE_DEVICES``: the fixed sample
   set's outputs and the matmul peak; once more on the CPU in fp32: the reference outputs;
3. per GPU alone, then all GPUs at once, each scenario: one runner process per GPU, pinned with
   ``CUDA_VISIBLE_DEVICES`` (all at once: the processes run side by side in one shell command);
4. nvidia-smi telemetry during 3 (the monitors' own sampler, :class:`HostMonitor`);
5. the verdicts (:mod:`workload.qualify.verdicts`), each written as an ``accuracy.json`` under
   ``<host dir>/results/qualify/<model>/verdicts/<check>/``: the metrics verdict reads them like every
   other accuracy check, so a failed verdict is exit code 6 with the culprits named.

Result folders (local)::

    <host dir>/results/qualify/<model>/gpu<i>/<Scenario>/performance/run_<iteration>/      alone
    <host dir>/results/qualify/<model>/all-gpu<i>/<Scenario>/performance/run_<iteration>/  all at once
    <host dir>/qualify/<model>/probe-gpu<i>/, probe-cpu/                                    probes

Refusals (a step failure, exit code 4, one message): torch or LoadGen missing on the host for
``Model=torch-encoder``, no GPU visible to torch, a ``Devices`` index nvidia-smi does not list.
"""

from __future__ import annotations

import json
import posixpath
import shlex
import statistics
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from workload.commands import Command, cmd, shell
from workload.errors import WorkloadError
from workload.facts.fact import Fact, command_fact
from workload.facts.system import python_runs
from workload.loadgen.child_path import child_pythonpath
from workload.loadgen.settings import RunSettings, Scenario
from workload.monitors.nvsmi import GpuSample
from workload.safefile import atomic_write_text, read_regular
from workload.steps import Change, FactPhase, StepContext, StepParameters, StepPlan, split_list

from .loadgen_executor import (
    RESULT_FILES,
    RUNNER_MODULE,
    LoadGenExecutor,
    LoadGenParameters,
    _is_local,
    _measured_rate,
    expected_marker,
    expected_seconds,
)

PROBE_MODULE = "workload.qualify.probe"
PROBE_FILES = ("settings.json", "outputs.npy", "probe.json")
GPU_IDENTITY_QUERY = ("nvidia-smi", "--query-gpu=index,pci.bus_id,serial,name", "--format=csv,noheader,nounits")
VERDICTS_DIR = "verdicts"


#: The GPUs' identities by index (:func:`parse_gpu_identities`; none where nvidia-smi fails).
GPU_IDENTITIES: Fact[dict[int, Any]] = command_fact(
    "gpu-identities",
    cmd(*GPU_IDENTITY_QUERY, timeout=60, readonly=True),
    lambda _host, listed: parse_gpu_identities(listed.stdout) if listed.ok else {},
)


class QualifyParameters(LoadGenParameters):
    """LoadGenExecutor's parameters, plus the model and the verdicts' bounds."""

    Scenarios: str = "Offline,Server"
    TestModes: str = "PerformanceOnly"
    Model: Literal["torch-encoder", "standin"] = "torch-encoder"
    Precision: Literal["auto", "fp32", "fp16", "bf16"] = "auto"
    #: GPU indices to qualify; empty = every GPU nvidia-smi lists (the stand-in without one: device 0).
    Devices: str | None = None
    SequenceLength: int = Field(default=128, ge=2, le=512)
    StragglerThreshold: float = Field(default=0.10, gt=0, lt=1)
    MaxThrottledFraction: float = Field(default=0.05, ge=0, le=1)
    AgreementSamples: int = Field(default=32, ge=1, le=4096)
    MinMathEfficiency: float = Field(default=0.0, ge=0, le=1)
    MatmulProbeSeconds: float = Field(default=2.0, gt=0, le=60)
    TelemetryIntervalS: float = Field(default=1.0, gt=0, le=60)


def parse_gpu_identities(text: str) -> dict[int, Any]:
    """``index, pci.bus_id, serial, name`` rows -> :class:`GpuIdentity` by index (``[N/A]`` -> None)."""
    from workload.qualify.verdicts import GpuIdentity

    out: dict[int, GpuIdentity] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4 or not cells[0].isdigit():
            continue
        known = [None if c.startswith("[") or c in ("", "N/A") else c for c in cells[1:4]]
        out[int(cells[0])] = GpuIdentity(int(cells[0]), known[0], known[1], known[2])
    return out


class GpuQualifyExecutor(LoadGenExecutor):
    """Qualifies a host's GPUs (see the module docstring)."""

    type_name: ClassVar[str] = "GpuQualifyExecutor"
    Parameters: ClassVar[type[StepParameters]] = QualifyParameters

    @property
    def q(self) -> QualifyParameters:
        assert isinstance(self.params, QualifyParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        super().check_parameters(params)
        assert isinstance(params, QualifyParameters)
        if "accuracyonly" in params.TestModes.lower():
            raise ValueError(
                "TestModes: the qualification runs PerformanceOnly (output agreement takes the accuracy run's place)"
            )

    # -- what runs ---------------------------------------------------------------------------------
    def settings_for(self) -> RunSettings:
        return super().settings_for().model_copy(update={"model_kind": self.q.Model, "precision": self.q.Precision})

    def model_label(self) -> str:
        return f"qualify-{self.q.Model}"

    def devices(self, ctx: StepContext) -> list[int]:
        """The GPU indices to qualify (found at plan time, kept for apply and verify; looked up if not yet)."""
        if "devices" not in ctx.memo:
            self._check_host(ctx)
        found: list[int] = ctx.memo["devices"]
        return found

    def groups(self, ctx: StepContext) -> list[tuple[str, list[int]]]:
        """``(folder prefix, devices)`` in run order: each GPU alone, then all at once (when more than one)."""
        devices = self.devices(ctx)
        alone = [(f"gpu{d}", [d]) for d in devices]
        return alone + ([("all-gpu", devices)] if len(devices) > 1 else [])

    def group_dir(self, ctx: StepContext, prefix: str, device: int, scenario: Scenario) -> Path:
        folder = f"{prefix}{device}" if prefix == "all-gpu" else prefix
        root = ctx.host_dir / "results" / "qualify" / self.model_label() / folder
        return root / scenario / "performance" / f"run_{ctx.iteration}"

    def _remote(self, ctx: StepContext, local: Path) -> str:
        if _is_local(ctx.host):
            return str(local)
        relative = local.relative_to(ctx.host_dir).as_posix()
        return f"{ctx.host.identity.state_root}/qualify/{ctx.host_dir.parent.name}/{relative}"

    def _env_prefix(self, ctx: StepContext) -> str:
        """Locally, run the same package as this process, installed or not (as LoadGenExecutor does)."""
        return f"PYTHONPATH={shlex.quote(child_pythonpath())} " if _is_local(ctx.host) else ""

    def group_command(self, ctx: StepContext, prefix: str, devices: list[int], scenario: Scenario) -> Command:
        """One shell command: a pinned runner per device, side by side; fails when any of them failed."""
        python = shlex.quote(self.python(ctx))
        lines = ["pids=''"]
        for device in devices:
            out = shlex.quote(self._remote(ctx, self.group_dir(ctx, prefix, device, scenario)))
            lines.append(
                f"CUDA_VISIBLE_DEVICES={device} {self._env_prefix(ctx)}{python} -m {RUNNER_MODULE} "
                f"--scenario {scenario} --mode PerformanceOnly --out {out} --settings {out}/settings.json & "
                'pids="$pids $!"'
            )
        lines.append('rc=0; for p in $pids; do wait "$p" || rc=1; done; exit "$rc"')
        return shell("\n".join(lines), timeout=self.timeout_s(), idempotent=True)

    def probe_dir(self, ctx: StepContext, name: str) -> Path:
        return ctx.host_dir / "qualify" / self.model_label() / name

    def probe_command(self, ctx: StepContext, name: str, device: int | None) -> Command:
        out = self._remote(ctx, self.probe_dir(ctx, name))
        argv = [self.python(ctx), "-m", PROBE_MODULE, "--settings", posixpath.join(out, "settings.json")]
        argv += ["--out", out, "--samples", str(self.q.AgreementSamples)]
        if device is None:
            argv += ["--device", "cpu", "--matmul-seconds", "0"]
        else:
            argv += ["--matmul-seconds", str(self.q.MatmulProbeSeconds)]
        env = {"CUDA_VISIBLE_DEVICES": "" if device is None else str(device)}
        if _is_local(ctx.host):
            env["PYTHONPATH"] = child_pythonpath()
        return cmd(*argv, env=env, timeout=600 + 10 * self.q.AgreementSamples, idempotent=True)

    # -- step life ---------------------------------------------------------------------------------
    def plan(self, ctx: StepContext) -> StepPlan:
        self._check_host(ctx)
        devices = self.devices(ctx)
        changes = [Change("probe the CPU reference outputs", (self.probe_command(ctx, "probe-cpu", None),))]
        changes += [
            Change(f"probe GPU {d}: outputs and matmul peak", (self.probe_command(ctx, f"probe-gpu{d}", d),))
            for d in devices
        ]
        for prefix, group in self.groups(ctx):
            for scenario in self._scenarios():
                who = f"GPU {group[0]}" if len(group) == 1 else f"GPUs {','.join(map(str, group))} at once"
                changes.append(
                    Change(f"LoadGen {scenario} on {who}", (self.group_command(ctx, prefix, group, scenario),))
                )
        settings = self.settings_for()
        notes = (
            f"model {self.q.Model} ({self.q.Precision}), {settings.sample_count} samples x {settings.sequence_length} "
            f"tokens; devices {devices}; min_duration {settings.min_duration_ms} ms",
        )
        return StepPlan(changes=tuple(changes), notes=notes)

    def _scenarios(self) -> list[Scenario]:
        return [s for s, m in self.runs() if m == "PerformanceOnly"]

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Plan reads whether the host's Python runs the qualification (LoadGen; torch with a GPU for the real
        model) and the GPUs' identities; verify reads the local result folders only."""
        return (python_runs(self.python(ctx), self._needs()), GPU_IDENTITIES) if phase == "plan" else ()

    def _needs(self) -> str:
        """The Python the qualification needs: LoadGen, and torch with a visible GPU for the real model."""
        need = "import mlperf_loadgen, numpy"
        if self.q.Model == "torch-encoder":
            need += "; import torch; assert torch.cuda.is_available(), 'no GPU'"
        return need

    def _check_host(self, ctx: StepContext) -> None:
        """Refuse clearly: LoadGen (and torch with a visible GPU for the real model) on the host; the GPUs."""
        read = self.read_facts(ctx, "plan")
        result = read[python_runs(self.python(ctx), self._needs())]
        if not result.ok:
            last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
            if self.q.Model == "torch-encoder" and "no GPU" in last[0]:
                raise self.fail(
                    "PyTorch on the host sees no CUDA GPU",
                    ctx,
                    hint="check nvidia-smi and the driver; Model=standin runs the CPU stand-in instead",
                )
            raise self.fail(
                f"{self.python(ctx)} cannot run the qualification ({last[0]})",
                ctx,
                hint="install the extras on the host: pip install 'workload-mlperf[cpu,gpu]' "
                "(or point the Python parameter at an interpreter that has them)",
            )
        identities = read[GPU_IDENTITIES]
        listed_devices = split_list(self.q.Devices or "")
        wanted = [int(d) for d in listed_devices if d.isdigit()]
        if len(wanted) != len(listed_devices):
            raise self.fail(f"Devices {self.q.Devices!r}: expected GPU indices such as 0,1,2", ctx)
        if not wanted:
            wanted = sorted(identities) or ([0] if self.q.Model == "standin" else [])
        if not wanted:
            raise self.fail("nvidia-smi lists no GPU on the host", ctx, hint="Model=standin runs on the CPU")
        unknown = [d for d in wanted if identities and d not in identities]
        if unknown:
            raise self.fail(f"Devices: nvidia-smi lists no GPU {unknown} (it lists {sorted(identities)})", ctx)
        ctx.memo["devices"] = wanted
        ctx.memo["identities"] = identities

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        from workload.monitors.hostmonitor import HostMonitor, own_connection

        settings = self.settings_for()
        samples: list[GpuSample] = []
        failures: list[str] = []
        rates: dict[str, float] = {}
        commands = [change.commands[0] for change in plan.changes]
        probes = ["probe-cpu", *(f"probe-gpu{d}" for d in self.devices(ctx))]
        for name, command in zip(probes, commands, strict=False):
            ctx.stop_if_cancelled(name)
            self._write_settings(ctx, self.probe_dir(ctx, name), settings)
            ctx.log(f"-> {name}")
            if not self._run_and_fetch(ctx, command, [self.probe_dir(ctx, name)], PROBE_FILES):
                failures.append(name)
        monitor = HostMonitor(
            f"{ctx.host.name}-qualify",
            own_connection(ctx.host),
            interval_s=self.q.TelemetryIntervalS,
            host_part=False,
            raw_path=ctx.host_dir / "qualify" / self.model_label() / "nvidia-smi.csv",
            write=lambda records: samples.extend(_gpu_samples(records)),
            cancel=ctx.cancel,
        ).start()
        try:
            runs = [(p, g, s) for p, g in self.groups(ctx) for s in self._scenarios()]
            for (prefix, group, scenario), command in zip(runs, commands[len(probes) :], strict=True):
                ctx.stop_if_cancelled(f"LoadGen {scenario} on {prefix}")
                folders = [self.group_dir(ctx, prefix, d, scenario) for d in group]
                expected = expected_seconds(scenario, "PerformanceOnly", settings, rates)
                left = ctx.host.time_left_s()  # a scheduler's time limit (Slurm --time); None: none
                if left is not None and left < expected:
                    raise self.fail(
                        f"LoadGen {scenario} on {prefix} needs about {expected:.0f}s, the job has {left:.0f}s left",
                        ctx,
                        hint="ask for a longer --time (or fewer Devices or scenarios, or a shorter MinDurationMs)",
                    )
                for folder in folders:
                    self._write_settings(ctx, folder, settings)
                names = ", ".join(f.parent.parent.parent.name for f in folders)
                ctx.log(f"-> LoadGen {scenario} on {names} {expected_marker(expected)}")
                if self._run_and_fetch(ctx, command, folders, None):
                    ctx.results.extend(folders)
                    rate = _measured_rate(folders[0])
                    if rate is not None and len(group) == 1:
                        rates.setdefault(scenario, rate)
                else:
                    failures.append(f"{scenario} on {prefix}{'' if len(group) == 1 else 's'}")
        finally:
            monitor.request_stop()
            monitor.join(30.0)
            monitor.close()
        if failures:
            raise self.fail("qualification runs failed: " + "; ".join(failures), ctx)
        verdicts = self.write_verdicts(ctx, samples)
        ctx.results.append(verdicts)

    def _write_settings(self, ctx: StepContext, local: Path, settings: RunSettings) -> None:
        remote = self._remote(ctx, local)
        ctx.check(cmd("mkdir", "-p", remote, timeout=60))
        ctx.host.write_text(posixpath.join(remote, "settings.json"), json.dumps(settings.model_dump(), indent=2) + "\n")

    def _run_and_fetch(
        self, ctx: StepContext, command: Command, folders: list[Path], names: tuple[str, ...] | None
    ) -> bool:
        result = ctx.run(command, echo=True)
        if not _is_local(ctx.host):
            for folder in folders:
                self._fetch(ctx.host, self._remote(ctx, folder), folder, names or RESULT_FILES)
        return result.ok

    # -- verdicts ------------------------------------------------------------------------------------
    def write_verdicts(self, ctx: StepContext, samples: list[GpuSample]) -> Path:
        """Judge the recorded figures; write one ``accuracy.json`` per check; return their folder."""
        from workload.loadgen.logs import DETAIL_LOG, detail_values
        from workload.qualify import verdicts as v

        identities: dict[int, v.GpuIdentity] = dict(ctx.memo.get("identities", {}))
        devices = self.devices(ctx)
        gpus = {d: identities.get(d, v.GpuIdentity(d)) for d in devices}
        figures: list[v.GpuFigures] = []
        offline: dict[int, float] = {}
        for prefix, group in self.groups(ctx):
            for scenario in self._scenarios():
                for device in group:
                    values = detail_values(self.group_dir(ctx, prefix, device, scenario) / DETAIL_LOG)
                    rate = _number(
                        values,
                        "result_samples_per_second" if scenario == "Offline" else "result_completed_samples_per_sec",
                    )
                    latency = _number(values, "result_99.00_percentile_latency_ns")
                    label = scenario if len(group) == 1 else f"{scenario} (all GPUs at once)"
                    figures.append(
                        v.GpuFigures(
                            gpus[device],
                            label,
                            rate or 0.0,
                            latency / 1e6 if latency and scenario == "Server" else None,
                        )
                    )
                    if len(group) == 1 and scenario == "Offline" and rate:
                        offline[device] = rate
        reference = _load_outputs(self.probe_dir(ctx, "probe-cpu"))
        outputs = {d: _load_outputs(self.probe_dir(ctx, f"probe-gpu{d}")) for d in devices}
        probes = {d: _probe_record(self.probe_dir(ctx, f"probe-gpu{d}")) for d in devices}
        described = probes[devices[0]].get("model")
        precision = described.get("precision") if isinstance(described, dict) else None
        if precision not in v.AGREEMENT_TOLERANCE:
            precision = "fp32"  # not recorded: the strictest bound
        flops = {d: _positive(p.get("flops_per_sample")) for d, p in probes.items()}
        achieved = {d: rate * (flops.get(d) or 0.0) / 1e12 for d, rate in offline.items()}
        peak = {d: tflops for d, p in probes.items() if (tflops := _positive(p.get("matmul_tflops"))) is not None}
        with_telemetry = [gpus[d] for d in devices if d in identities]
        checks = {
            "parity": v.parity(figures, threshold=self.q.StragglerThreshold),
            "throttling": v.throttling(samples, with_telemetry, max_fraction=self.q.MaxThrottledFraction),
            "agreement": v.agreement(outputs, reference, gpus, precision=precision),
            "math-efficiency": v.math_efficiency(achieved, peak, gpus, min_ratio=self.q.MinMathEfficiency),
        }
        root = ctx.host_dir / "results" / "qualify" / self.model_label() / VERDICTS_DIR
        for name, check in checks.items():
            folder = root / name
            folder.mkdir(parents=True, exist_ok=True)
            data = check.as_accuracy_json(model=self.model_label(), scenario="Offline")
            atomic_write_text(folder / "accuracy.json", json.dumps(data, indent=2) + "\n")
            ctx.log(f"{name}: {'PASS' if check.passed else 'FAIL'} {check.name} {check.value:.4f}")
            for line in (*check.details, *check.problems):
                ctx.log(f"  {line}")
        if offline:
            ctx.log(f"per-GPU Offline samples/s: median {statistics.median(offline.values()):.1f}")
        return root

    def verify(self, ctx: StepContext) -> None:
        problems = [
            f"{folder}: no LoadGen detail log"
            for prefix, group in self.groups(ctx)
            for scenario in self._scenarios()
            for d in group
            if not (folder := self.group_dir(ctx, prefix, d, scenario) / "mlperf_log_detail.txt").is_file()
        ]
        if problems:
            raise self.fail("; ".join(problems), ctx)


def _number(values: dict[str, Any], key: str) -> float | None:
    """A detail-log figure as a finite float, else None."""
    from workload.metrics.raw import finite_float

    return finite_float(values.get(key))


def _gpu_samples(records: list[dict[str, Any]]) -> list[GpuSample]:
    """The sampler's GPU records (``device: gpuN``) back as :class:`GpuSample` values."""
    out = []
    for record in records:
        device = str(record.get("device", ""))
        if device.startswith("gpu") and device[3:].isdigit():
            out.append(
                GpuSample(
                    str(record.get("gpu_time", "")),
                    int(device[3:]),
                    str(record.get("name", "")),
                    dict(record["values"]),
                )
            )
    return out


def _load_outputs(folder: Path) -> Any:
    try:
        return np.load(BytesIO(read_regular(folder / "outputs.npy")), allow_pickle=False)
    except (OSError, ValueError, WorkloadError):
        return np.zeros((0, 0), dtype=np.float32)


def _probe_record(folder: Path) -> dict[str, Any]:
    """``probe.json`` (written on the host, so outside input): bounded numbers; ``{}`` when unreadable."""
    from workload.numbers import load_json

    try:
        data = load_json(read_regular(folder / "probe.json"))
    except (OSError, ValueError, WorkloadError):
        return {}
    return data if isinstance(data, dict) else {}


def _positive(value: object) -> float | None:
    """A probe figure as a finite positive float, else None (missing, malformed, unbounded)."""
    from workload.metrics.raw import finite_float

    number = finite_float(value)
    return number if number is not None and number > 0 else None
