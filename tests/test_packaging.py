"""The wheel ships profiles/ and gpuconfigs/ and works from an install outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        check=True,
        cwd=out,
    )
    (path,) = out.glob("workload_mlperf-*.whl")
    return path


def test_wheel_contains_profiles_gpuconfigs_and_installers(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "workload/profiles/PERF-GPU-MLPERF.json" in names
    assert "workload/profiles/PERF-CPU-MLPERF.json" in names
    assert any(n.startswith("workload/gpuconfigs/") and n.endswith(".json") for n in names), sorted(names)
    assert "workload/installers/__init__.py" in names and "workload/installers/py.typed" in names
    assert "workload/py.typed" in names
    assert "workload/metrics/rules/v3.1.json" in names and "workload/metrics/rules/v6.1.json" in names
    assert not any(n.startswith("tests/") for n in names)


def test_wheel_contains_every_module_of_the_source_tree(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    # installers/ installs as workload/installers/ (pyproject's package-dir); rglob does not follow the
    # workload/installers symlink, so each file is counted once.
    sources = [p.relative_to(ROOT).as_posix() for p in (ROOT / "workload").rglob("*.py")]
    sources += ["workload/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "installers").rglob("*.py")]
    missing = sorted(s for s in sources if "__pycache__" not in s and s not in names)
    assert not missing, f"not in the wheel (add the package to pyproject's packages list): {missing}"


def test_wheel_puts_nothing_generic_at_the_top_of_site_packages(wheel: Path, tmp_path: Path) -> None:
    """Issue 28: the dependency steps install as ``workload.installers``; ``import installers`` fails."""
    tops = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"workload"}, sorted(tops)
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True
    )
    # -I -S: no site-packages, so neither the checkout nor an editable install of it can answer; only the
    # installed wheel (on sys.path) and the standard library. find_spec locates without running the module.
    probe = (
        "import importlib.util, sys\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "spec = importlib.util.find_spec('workload.installers.apt')\n"
        "print(spec.origin if spec else 'missing')\n"
        "import installers\n"
    )
    found = subprocess.run([sys.executable, "-I", "-S", "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert found.stdout.strip() == str(target / "workload" / "installers" / "apt.py"), found.stdout + found.stderr
    assert found.returncode == 1 and "ModuleNotFoundError: No module named 'installers'" in found.stderr, found.stderr


def test_installed_wheel_lists_and_resolves_shipped_profiles(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)], check=True
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    # Run from an empty folder so the checkout cannot be imported by accident.
    listing = subprocess.run(
        [sys.executable, "-m", "workload", "profiles"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert listing.returncode == 0, listing.stderr
    assert "PERF-GPU-MLPERF" in listing.stdout and "PERF-CPU-MLPERF" in listing.stdout
    where = subprocess.run(
        [sys.executable, "-c", "import workload.resources as r; print(r.profile_dir())"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip().startswith(str(target)), where.stdout
    show = subprocess.run(
        [sys.executable, "-m", "workload", "show", "PERF-GPU-MLPERF"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert show.returncode == 0, show.stderr
    assert "NvidiaCudaInstallation" in show.stdout
    # The first promise: plan the flagship profile from the installed package (read-only
    # facts of this machine, no GPU needed, nothing changed).
    plan = subprocess.run(
        [sys.executable, "-m", "workload", "plan", "--profile", "PERF-GPU-MLPERF"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "Dependencies[5] NvidiaContainerToolkitInstallation" in plan.stdout
    assert "Actions[1] MLPerfExecutor" in plan.stdout and "Traceback" not in plan.stdout + plan.stderr
