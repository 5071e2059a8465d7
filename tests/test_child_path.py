"""A local child Python (LoadGen runner, qualification probe) imports this package and keeps the
user's own ``PYTHONPATH``: dependencies installed with ``pip install --target`` (the way an
air-gapped GPU host gets them) must reach the children too."""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from workload.loadgen.child_path import child_pythonpath, package_root

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_comes_first_and_the_inherited_path_follows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/opt/wheels", "", package_root(), "/srv/more"]))
    assert child_pythonpath().split(os.pathsep) == [package_root(), "/opt/wheels", "/srv/more"]
    monkeypatch.delenv("PYTHONPATH")
    assert child_pythonpath() == package_root()


def test_the_executors_children_get_the_inherited_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_loadgen_executor import make_ctx, make_step
    from workload.actions.gpu_qualify import GpuQualifyExecutor, QualifyParameters
    from workload.hosts.local import LocalHost

    monkeypatch.setenv("PYTHONPATH", "/opt/wheels")
    ctx = make_ctx(LocalHost(), tmp_path)
    runner = make_step().runner_command(ctx, "Offline", "PerformanceOnly")
    assert runner.env["PYTHONPATH"] == os.pathsep.join([package_root(), "/opt/wheels"])
    qualify = GpuQualifyExecutor(QualifyParameters(Model="standin"), location="Actions[0]", kind="action")
    assert qualify.probe_command(ctx, "probe-cpu", None).env["PYTHONPATH"].endswith(":/opt/wheels")
    group = qualify.group_command(ctx, "gpu0", [0], "Offline")
    assert f"PYTHONPATH={package_root()}:/opt/wheels " in group.argv[-1]


@pytest.mark.timeout(120)
def test_a_qualification_whose_dependencies_live_only_on_pythonpath_runs(tmp_path: Path) -> None:
    """The base interpreter, outside this virtual environment, finds pydantic, LoadGen and numpy only
    through ``PYTHONPATH``. With the package's folder in place of that path the children failed
    ("qualification runs failed: probe-cpu; probe-gpu0; Offline on gpu0")."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = os.pathsep.join([*site.getsitepackages(), str(ROOT)])
    assert subprocess.run([str(base), "-c", "import sys; print(sys.prefix)"], env={**env, "PYTHONPATH": ""},
                          capture_output=True, text=True, check=True).stdout.strip() != sys.prefix  # fmt: skip
    small = (
        "Model=standin,,,Devices=0,,,Scenarios=Offline,,,MinDurationMs=300,,,SampleCount=48,,,FindPeakPerformance=false"
    )
    done = subprocess.run(
        [str(base), "-m", "workload", "run", "--profile", "PERF-GPU-QUALIFY", "-p", small,
         "--output-dir", str(tmp_path / "runs"), "--history", "off"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert "qualification runs failed" not in text
    assert "samples/s" in text and "VALID" in text
