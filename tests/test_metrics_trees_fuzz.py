"""Mangled real files of published submission trees (compliance verify files, system descriptions, v6.1
endpoints files) never crash the collector: each tree still gives results, or a clear issue naming the file."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mangling import INTERNAL_ERRORS, mangle
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

TREES = Path(__file__).parent / "fixtures" / "results" / "trees"
SOURCES = sorted(p.relative_to(TREES) for p in TREES.rglob("*") if p.is_file() and p.name != "SOURCES")
TEXTS = {p: (TREES / p).read_bytes() for p in SOURCES}


@st.composite
def mangled(draw: st.DrawFn) -> tuple[Path, bytes]:
    source = draw(st.sampled_from(SOURCES))
    return source, mangle(draw, TEXTS[source])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=mangled())
def test_mangled_tree_files_give_results_or_issues(case: tuple[Path, bytes]) -> None:
    source, data = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "trees"
        shutil.copytree(TREES, root)
        (root / source).write_bytes(data)
        collection = collect(root)  # must not raise
        assert collection.results, collection.issues  # the other results of the trees are still there
        for issue in collection.issues:
            assert issue.path.startswith(str(root)) and issue.problem
            assert not any(words in issue.problem for words in INTERNAL_ERRORS), issue
        for result in collection.results:
            assert result.validity in (None, "VALID", "INVALID")
            assert all(isinstance(m.value, float) and math.isfinite(m.value) for m in result.metrics)
        write_outputs(Path(tmp) / "out", collection.results, OutputContext(), issues=collection.issues)
