"""Mangled real files of published submission trees (compliance verify files, system descriptions, v6.1
endpoints files) never crash the collector: each tree still gives results, or a clear issue naming the file."""

from __future__ import annotations

import math
import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

TREES = Path(__file__).parent / "fixtures" / "results" / "trees"
SOURCES = sorted(p.relative_to(TREES) for p in TREES.rglob("*") if p.is_file() and p.name != "SOURCES")
TEXTS = {p: (TREES / p).read_bytes() for p in SOURCES}
#: words of the collector's last-resort handlers: a parser or builder bug, never a clear message
INTERNAL_ERRORS = ("could not be parsed (", "could not build")


@st.composite
def mangled(draw: st.DrawFn) -> tuple[Path, bytes]:
    source = draw(st.sampled_from(SOURCES))
    data = bytearray(TEXTS[source])
    how = draw(st.sampled_from(["truncate", "flip", "drop_lines", "bad_json", "bad_number", "bad_type", "garbage"]))
    if how == "truncate":
        data = data[: draw(st.integers(0, len(data)))]
    elif how == "flip":
        for _ in range(draw(st.integers(1, 20))):
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif how == "drop_lines":
        lines = bytes(data).split(b"\n")
        keep = draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
        data = bytearray(b"\n".join(line for line, k in zip(lines, keep, strict=True) if k))
    elif how == "bad_json":
        data = bytearray(bytes(data).replace(b"{", b"[", 1).replace(b"true", b"tru", 1))
    elif how == "bad_number":
        bad = draw(st.sampled_from([b"NaN", b"Infinity", b"-1", b"1e999", b"9" * 400, b"0"]))
        data = bytearray(re.sub(rb"(: ?)-?\d+(?:\.\d+)?(?=[,\s}])", lambda m: m.group(1) + bad, bytes(data),
                                count=draw(st.integers(1, 40))))  # fmt: skip
    elif how == "bad_type":
        swap = draw(st.sampled_from([b'"x"', b"null", b"[]", b"{}", b'"1"']))
        data = bytearray(re.sub(rb"(: ?)[^\s,{\[]+(?=,?\n)", lambda m: m.group(1) + swap, bytes(data),
                                count=draw(st.integers(1, 40))))  # fmt: skip
    else:
        data = bytearray(draw(st.binary(max_size=300)))
    return source, bytes(data)


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
