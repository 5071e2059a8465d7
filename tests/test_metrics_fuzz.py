"""Mangled real result files never make collect() raise: each gives a result or a clear issue."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mangling import INTERNAL_ERRORS, mangle
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"
SOURCES = [
    FIX / "nvidia/logs/2024.07.24-15.41.28/H200-SXM-141GBx8_TRT/bert-99/Server/mlperf_log_detail.txt",
    FIX / "nvidia/logs/2024.07.24-15.41.28/H200-SXM-141GBx8_TRT/llama2-70b-99/Server/mlperf_log_summary.txt",
    FIX / "nvidia/logs/2024.11.15-03.56.48/DGX-A100_A100-SXM4-40GBx8_TRT/bert-99/SingleStream/metadata.json",
    FIX / "nvidia/logs/2024.11.15-04.30.00/DGX-A100_A100-SXM4-40GBx8_TRT/bert-99/Offline/accuracy.txt",
    FIX / "cpu/minilm/Offline/accuracy.json",
    FIX / "loadgen/multistream_invalid/mlperf_log_detail.txt",
]
TEXTS = {p: p.read_bytes() for p in SOURCES}


@st.composite
def mangled(draw: st.DrawFn) -> tuple[Path, bytes]:
    source = draw(st.sampled_from(SOURCES))
    return source, mangle(draw, TEXTS[source])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mangled())
def test_mangled_files_give_result_or_issue(case: tuple[Path, bytes]) -> None:
    source, data = case
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "sys" / "bert-99" / "Server"
        target.mkdir(parents=True)
        (target / source.name).write_bytes(data)
        collection = collect(Path(tmp))  # must not raise
        assert collection.results or collection.issues
        for issue in collection.issues:
            assert issue.path.startswith(tmp) and issue.problem
            assert not any(words in issue.problem for words in INTERNAL_ERRORS), issue
        for result in collection.results:
            assert all(isinstance(m.value, float) for m in result.metrics)
        write_outputs(Path(tmp) / "out", collection.results, OutputContext(), issues=collection.issues)


def test_other_results_survive_a_corrupt_neighbour(tmp_path: Path) -> None:
    shutil.copytree(FIX / "loadgen" / "server_valid", tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metadata.json").write_text('{"benchmark_full": "bert-99", "scenario_key": ')
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "mlperf_log_summary.txt").write_text("")
    collection = collect(tmp_path)
    assert [r.scenario for r in collection.results] == ["Server"]
    problems = {Path(i.path).parent.name: i.problem for i in collection.issues}
    assert "not valid JSON" in problems["bad"] and problems["empty"] == "file is empty"
