"""The v5.0 adapter against the v5.0 stand-in harness in a real container of the test bed.

Real parts as in test_mlperf_v51_container.py: private dockerd, the fresh-VM image kept open as the harness
container, ``docker exec`` of every op's argv, the stand-in's registry and system list reading the files we write,
results parsed by the metrics layer (tests/fixtures/harness/rounds/v5.0/UPSTREAM.md).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.harness.rounds.make_round import make_round_tree
from tests.mlperf_rounds_driver import Applied, apply_v50
from workload.hosts.local import LocalHost
from workload.metrics.collection import collect
from workload.mlperf.container import ContainerSpec, HarnessContainer
from workload.mlperf.harness import HarnessVersion
from workload.mlperf.ops import to_changes
from workload.mlperf.planner import plan_ops
from workload.mlperf.settings import MLPerfFacts, MLPerfParameters, UserFacts
from workload.mlperf.system import HostSystem

pytestmark = pytest.mark.slow

# Azure ND H100 v5-like: NVIDIA's v5.0 H100 systems want an Intel CPU, so the harness does not know it.
H100X8 = HostSystem("NVIDIA H100 80GB HBM3", 81559, 8, "AMD EPYC 9V84 96-Core Processor", 96, 2, 1, 1_900_000_000_000)
ROOT = UserFacts("root", 0, 0, "root", "/root")
SOMEONE = {
    "coffeepot": {
        "__obj_class__": "<class 'nvmitten.system.component.Description'>",
        "data": {
            "_component_module": "nvmitten.system.system",
            "_component_classname": "System",
            "_match_ignore_fields": [],
            "fields": {"extras": {}},
        },
    }
}


@pytest.fixture
def bed(tmp_path: Path, docker_engine: Any, harness_image: str) -> Iterator[dict[str, Any]]:
    nvidia = make_round_tree(tmp_path / "repo", "v5.0")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "standin_detected_system.json").write_text(json.dumps(H100X8.to_json()))
    name = f"wl-r50-{uuid.uuid4().hex[:8]}"
    spec = ContainerSpec(
        name=name,
        image=harness_image,
        nvidia_dir=str(nvidia),
        scratch_path=str(scratch),
        user="0:0",
        use_gpus=False,
        unlimited_memlock=False,
    )
    container = HarnessContainer(
        docker_engine.client, spec, lambda _line: None, outer=LocalHost(), docker_url=docker_engine.base_url
    )
    facts = MLPerfFacts(
        nvidia_dir=str(nvidia),
        nvidia_dir_exists=True,
        version=HarnessVersion(5, 0),
        commit="standin",
        scratch_path=str(scratch),
        user=ROOT,
        machine="x86_64",
    )
    yield {"nvidia": nvidia, "scratch": scratch, "container": container, "facts": facts}
    with contextlib.suppress(Exception):
        docker_engine.client.containers.get(name).remove(force=True)


def params(**extra: Any) -> MLPerfParameters:
    base: dict[str, Any] = {
        "Model": "llama2-70b",
        # The stand-in's scratch is a temp folder: llama2-70b's ~337 GiB are not on a CI machine.
        "SkipFreeSpaceCheck": True,
        "Scenarios": "Offline",
        "TestModes": "PerformanceOnly",
        "Quick": True,
        "RequireCustomSystemSupport": True,
        "ContainerImage": "standin",
    }
    base.update(extra)
    return MLPerfParameters.model_validate(base)


def test_custom_h100_registers_in_custom_list_json_and_runs_nvidias_v50_values(bed: dict[str, Any]) -> None:
    nvidia: Path = bed["nvidia"]
    (nvidia / "code/common/systems/custom_list.json").write_text(json.dumps(SOMEONE))
    applied = apply_v50(params(), bed["facts"], bed["container"], H100X8, run_id="r1", applied=Applied())
    assert applied.system_name == "WL_H100_SXM_80GBx8"
    assert applied.written == ["code/common/systems/custom_list.json", "configs/llama2-70b/Offline/custom.py"]
    entries = json.loads((nvidia / "code/common/systems/custom_list.json").read_text())
    assert set(entries) == {"coffeepot", "WL_H100_SXM_80GBx8"}  # someone's entry kept
    custom = (nvidia / "configs/llama2-70b/Offline/custom.py").read_text()
    # NVIDIA's v5.0 H100_SXM_80GB_PP2x4 values (gpuconfigs/v5.0/H100_SXM_80GB.json).
    assert "offline_expected_qps = 300" in custom and "'pipeline_parallelism': 2" in custom
    assert "gpuconfigs/v5.0/" in custom
    # The harness itself now names the machine by our entry.
    check = [a for a in applied.argvs if a[:3] == ("python3", "-m", "scripts.get_system_id")]
    assert len(check) == 1
    code, out = bed["container"].exec(list(check[0]), on_line=None)
    assert code == 0 and "KnownSystem.WL_H100_SXM_80GBx8" in out
    # Commands run after the check are the ones plan prints.
    planned = plan_ops(params(), bed["facts"], run_id="r1").after_system_check()
    shown = [c.argv_values()[7:] for change in to_changes(planned) for c in change.commands]
    assert shown and all(tuple(argv) in applied.argvs for argv in shown)
    run = next(a for a in applied.argvs if a[:2] == ("make", "run_harness"))
    assert any(p.startswith("RUN_ARGS=") and "--config_ver=default" in p and "--test_run" in p for p in run)
    # Results under <id>_TRT/llama2-70b-99/Offline, parsed.
    (found,) = applied.found
    assert found.directory.endswith("WL_H100_SXM_80GBx8_TRT/llama2-70b-99/Offline")
    collection = collect(nvidia / "build" / "logs")
    (result,) = collection.results
    assert result.scenario == "Offline" and result.headline is not None
    assert result.headline.value == pytest.approx(300 * 0.98, rel=1e-3)


def test_a_known_b200_uses_nvidias_own_class(bed: dict[str, Any]) -> None:
    b200 = {**H100X8.to_json(), "gpu_name": "NVIDIA B200", "cpu_model": "Intel(R) Xeon(R) Platinum 8570"}
    (bed["scratch"] / "standin_detected_system.json").write_text(json.dumps(b200))
    system = HostSystem(**{**H100X8.to_json(), "gpu_name": "NVIDIA B200"})  # type: ignore[arg-type]
    applied = apply_v50(params(), bed["facts"], bed["container"], system, run_id="r2", applied=Applied())
    assert applied.system_name == "B200_SXM_180GBx8"
    assert applied.written == []
    (found,) = applied.found
    # v5.0 replaces '-' by '_' in the detected id: results under B200_SXM_180GBx8_TRT.
    assert "/B200_SXM_180GBx8_TRT/llama2-70b-99/Offline" in found.directory
    summary = (Path(found.directory) / "mlperf_log_summary.txt").read_text()
    assert "368.48" in summary  # NVIDIA's 376 QPS (47 x 8) through the stand-in's 0.98


def test_unknown_system_without_custom_support_is_refused(bed: dict[str, Any]) -> None:
    from workload.errors import BenchmarkFailed

    applied = Applied()
    with pytest.raises(BenchmarkFailed, match="does not know this system"):
        apply_v50(
            params(RequireCustomSystemSupport=False),
            bed["facts"],
            bed["container"],
            H100X8,
            run_id="r3",
            applied=applied,
        )
    assert not any(a[:2] == ("make", "run_harness") for a in applied.argvs)
