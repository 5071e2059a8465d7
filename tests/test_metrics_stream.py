"""Results kept as wire rows (wire.LazyMetrics) and output files written as a stream give what the
eager objects gave: the same metrics, the same files."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workload.metrics import outputs, wire
from workload.metrics.build import build, build_data, result_of
from workload.metrics.collection import collect, find_result_dirs, parse_dir
from workload.metrics.outputs import OutputContext, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"


def encoded_results() -> list[wire.Encoded]:
    found = []
    for directory, names in find_result_dirs(FIX).items():
        if "/" in names[0] or names[0].startswith("verify_"):
            continue  # endpoints and compliance folders are not built from LoadGen files
        result = build(parse_dir(directory, names), host="h")
        if result is not None:
            found.append(wire.encode(result))
    return found


def test_lazy_metrics_read_like_the_eager_list() -> None:
    encoded = encoded_results()
    assert len(encoded) > 15
    for parts in encoded:
        eager, lazy = wire.decode(parts), wire.decode(parts, lazy=True)
        assert isinstance(lazy.metrics, wire.LazyMetrics) and not isinstance(eager.metrics, wire.LazyMetrics)
        assert lazy == eager and eager == lazy
        assert len(lazy.metrics) == len(eager.metrics) and bool(lazy.metrics) == bool(eager.metrics)
        assert list(lazy.metrics) == eager.metrics and lazy.metrics[1:3] == eager.metrics[1:3]
        if eager.metrics:
            assert lazy.metrics[-1] == eager.metrics[-1] and eager.metrics[0] in lazy.metrics
        assert lazy.headline == eager.headline
        # encode of a lazy result finds its headline by value: the round trip keeps it
        assert wire.decode(wire.encode(lazy)) == eager
        assert pickle.loads(pickle.dumps(lazy.metrics)) == eager.metrics
        # pydantic's serializer reads list storage directly: the lazy list must still dump its metrics
        assert lazy.model_dump() == eager.model_dump() and lazy.model_dump_json() == eager.model_dump_json()
        assert len(lazy.model_dump()["metrics"]) == len(eager.metrics)


def test_the_plain_data_gives_the_same_result_as_the_model_on_both_paths() -> None:
    """The pool encodes build_data()'s plain data; the serial path makes the model of the same data."""
    checked = 0
    for directory, names in find_result_dirs(FIX).items():
        if "/" in names[0] or names[0].startswith("verify_"):
            continue
        built = build_data(parse_dir(directory, names), host="h")
        if built is None:
            continue
        model = result_of(built)
        assert model == build(parse_dir(directory, names), host="h")
        for lazy in (False, True):
            decoded = wire.decode(wire.encode_built(built), lazy=lazy)
            assert decoded == model and decoded.headline == model.headline
            # one metadata dict per result on the wire path too
            assert len({id(m.metadata) for m in decoded.metrics}) <= 1
        assert wire.decode(pickle.loads(pickle.dumps(wire.encode_built(built)))) == model
        checked += 1
    assert checked > 15


def test_metadata_updated_in_place_stays_and_changes_materialise() -> None:
    result = wire.decode(encoded_results()[0], lazy=True)
    first = next(iter(result.metrics))
    first.metadata["profile"] = "P"  # a metric's metadata dict is its result's, shared
    assert all(m.metadata["profile"] == "P" for m in result.metrics)
    extra = first.model_copy(update={"name": "extra"})
    result.metrics.append(extra)
    assert result.metrics[-1] is extra and len(result.metrics) == len(list(result.metrics))
    assert result.metrics[0] is result.metrics[0]  # an ordinary list now


#: The pooled path in a fresh interpreter: collect() forks workers only where no other thread runs
#: (forking a threaded process is unsafe), and a test process may have threads left by earlier tests.
_POOLED = """
import json, sys
from pathlib import Path
from workload.metrics import wire
from workload.metrics.collection import collect
c = collect(Path(sys.argv[1]), workers=2)
print(json.dumps({
    "lazy": all(isinstance(r.metrics, wire.LazyMetrics) for r in c.results),
    "results": [r.model_dump(mode="json") for r in c.results],
    "issues": [i.model_dump(mode="json") for i in c.issues],
}))
"""


def test_only_the_process_pool_keeps_rows_and_both_paths_give_the_same_results() -> None:
    serial = collect(FIX / "nvidia", workers=1)
    assert serial.results
    assert not any(isinstance(r.metrics, wire.LazyMetrics) for r in serial.results)  # build() gives the model
    # the large-archive path (wire rows between processes), in a process with no other thread
    done = subprocess.run([sys.executable, "-c", _POOLED, str(FIX / "nvidia")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    pooled = json.loads(done.stdout)
    assert pooled["lazy"] is True
    assert pooled["results"] == [r.model_dump(mode="json") for r in serial.results]
    assert pooled["issues"] == [i.model_dump(mode="json") for i in serial.issues]


def _normalised(folder: Path) -> list[str]:
    """The output files with the run's uuids and timestamps blanked."""
    pattern = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT[\d:.]+Z"
    return [re.sub(pattern, "X", (folder / n).read_text()) for n in ("metrics.jsonl", "metrics.csv", "summary.json")]


def test_streamed_outputs_equal_one_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    collection = collect(FIX, host="h")
    context = OutputContext(experiment_id="e", client_id="c", app_host="a")
    write_outputs(tmp_path / "one", collection.results, context, issues=collection.issues)
    monkeypatch.setattr(outputs, "_BATCH_METRICS", 3)
    write_outputs(tmp_path / "many", collection.results, context, issues=collection.issues)
    one, many = _normalised(tmp_path / "one"), _normalised(tmp_path / "many")
    assert one == many
    assert one[0].count("\n") == sum(len(r.metrics) for r in collection.results)
