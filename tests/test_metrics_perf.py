"""The fast paths of the metrics layer give the same answers as the plain ones (issue 7).

Process-pool parsing vs one process, the forked CSV writer vs writing here, the merge fast path vs
parsing every CSV row, the bytes detail-log parser vs the text one, wire form round trips, and the
grouped console output for large collections. Timings are bench/bench_results.py's job, not a test's.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from workload.metrics import collection as collection_mod
from workload.metrics import outputs, table
from workload.metrics.collection import collect, collect_many, parse_dir
from workload.metrics.model import Metric
from workload.metrics.outputs import OutputContext, load_run, write_outputs
from workload.metrics.wire import decode, encode

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
SERVER = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Server"
CTX = OutputContext(experiment_id="exp", client_id="ci", app_host="ci", tags=("t", 'q"x'))
_IDS = re.compile(r'"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}","[0-9a-f-]{36}"')


def _dumps(c: collection_mod.Collection) -> tuple[list[dict[str, object]], list[str]]:
    return [r.model_dump(mode="json") for r in c.results], [str(i) for i in c.issues]


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Three hosts, each a copy of every fixture result, plus one broken file per host."""
    for host in ("h1", "h2", "h3"):
        shutil.copytree(FIX, tmp_path / host / "results")
        bad = tmp_path / host / "broken" / "bert-99" / "Offline"
        bad.mkdir(parents=True)
        (bad / "metadata.json").write_text("{not json")
    return tmp_path


def test_pool_parse_equals_one_process(fleet: Path) -> None:
    targets = [(fleet / h, h) for h in ("h1", "h2", "h3")]
    serial, pooled = collect_many(targets, workers=1), collect_many(targets, workers=2)
    assert len(serial.results) > 60 and any("not valid JSON" in str(i) for i in serial.issues)
    assert _dumps(pooled) == _dumps(serial)
    # results of one host, in directory order, as collecting each host in turn gives
    one_by_one = [r for h in ("h1", "h2", "h3") for r in collect(fleet / h, host=h, workers=1).results]
    assert [(r.host, r.source) for r in pooled.results] == [(r.host, r.source) for r in one_by_one]
    # the metrics of one result share one metadata dict after the trip through the pool (run_cmd relies on it)
    for result in pooled.results:
        assert len({id(m.metadata) for m in result.metrics}) <= 1
        if result.headline is not None:
            # metric lists are made when read (wire.LazyMetrics): the headline is one of them by value and metadata
            assert any(m == result.headline and m.metadata is result.headline.metadata for m in result.metrics)


@pytest.mark.parametrize("workers", [1, 2])
def test_while_parsing_runs_once_while_the_workers_parse(fleet: Path, workers: int) -> None:
    calls: list[tuple[int, int]] = []  # (pid, worker processes alive) at each call

    def hook() -> None:
        calls.append((os.getpid(), len(multiprocessing.active_children())))

    pooled = collect_many([(fleet / h, h) for h in ("h1", "h2")], workers=workers, while_parsing=hook)
    assert len(pooled.results) > 40
    assert len(calls) == 1 and calls[0][0] == os.getpid()
    # The pool is never forked from a process with other threads (a full test session has some),
    # so the forked case is checked in a fresh interpreter below.
    forked = workers == 2 and threading.active_count() == 1
    assert calls[0][1] == (2 if forked else 0)
    # raw files via load_run (-> collect) and a run folder with metrics.jsonl: called once each too
    write_outputs(fleet / "out", pooled.results, CTX)
    for path in (fleet / "h3", fleet / "out"):
        calls.clear()
        assert load_run(path, while_parsing=hook).results and len(calls) == 1


def test_wire_round_trip_keeps_equality_and_shared_metadata() -> None:
    result = collect(SERVER, host="h1").results[0]
    back = decode(encode(result))
    assert back == result and back.headline == result.headline
    assert back.metrics[0].metadata is back.metrics[-1].metadata


def test_bytes_detail_parser_equals_text_parser(tmp_path: Path) -> None:
    """CRLF, a blank line, a non-ASCII byte and an error record each take the text path; same results."""
    data = (SERVER / "mlperf_log_detail.txt").read_bytes()
    variants = {
        "lf": data,
        "crlf": data.replace(b"\n", b"\r\n"),
        "blank": data.replace(b"\n", b"\n\n", 1),
        "latin1": data.replace(b"BERT SERVER", b"BERT S\xe9RVER", 1),
        "error": data.replace(b'"is_error": false', b'"is_error": true', 1),
        "torn": data[: len(data) // 2],
    }
    parsed = {}
    for name, content in variants.items():
        d = tmp_path / name / "bert-99" / "Server"
        d.mkdir(parents=True)
        (d / "mlperf_log_detail.txt").write_bytes(content)
        parsed[name] = parse_dir(str(d), ["mlperf_log_detail.txt"])
    base = parsed["lf"]
    assert base.values["result_validity"] == "VALID" and not base.issues
    for name in ("crlf", "blank"):
        assert parsed[name].values == base.values, name
    assert parsed["latin1"].values["sut_name"] == "BERT S\ufffdRVER"
    assert parsed["error"].errors
    assert "malformed line" in str(parsed["torn"].issues[0])


def test_oversized_file_is_an_issue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(SERVER, tmp_path / "bert-99" / "Server")
    monkeypatch.setattr(collection_mod, "MAX_FILE_BYTES", 1000)
    found = collect(tmp_path, workers=1)
    assert any("larger than any result file" in str(i) and "detail" in i.path for i in found.issues)


def test_jsonl_lines_round_trip_and_lead_with_host(tmp_path: Path) -> None:
    results = collect(H200, host="h1").results
    write_outputs(tmp_path, results, CTX)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    metrics = [m for r in results for m in r.metrics]
    assert [Metric.model_validate_json(line) for line in lines] == metrics
    assert all(line.startswith('{"host":"h1","name":') for line in lines)
    record = json.loads(lines[0])
    assert "end_time" not in record and record["tool_name"] == "MLPerf" and record["metadata"]["host"] == "h1"


def _masked_csv(path: Path) -> str:
    text = _IDS.sub('"ID","PARENT"', path.read_text())
    return re.sub(r'^"[0-9T:.\-]+Z"', '"TS"', text, flags=re.M)


def test_forked_csv_writer_equals_writing_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = collect(H200, host="h1").results
    monkeypatch.setattr(outputs, "FORK_MIN_METRICS", 10**9)
    write_outputs(tmp_path / "here", results, CTX)
    monkeypatch.setattr(outputs, "FORK_MIN_METRICS", 1)
    write_outputs(tmp_path / "forked", results, CTX)
    assert _masked_csv(tmp_path / "forked" / "metrics.csv") == _masked_csv(tmp_path / "here" / "metrics.csv")
    rows = list(csv.DictReader((tmp_path / "forked" / "metrics.csv").open(newline="")))
    assert len(rows) == sum(len(r.metrics) for r in results) and rows[0]["Tags"] == 't,q"x'
    assert not list((tmp_path / "forked").glob(".*.tmp"))  # the child's temporary file was moved into place


@pytest.mark.parametrize("edit_csv", [False, True], ids=["fast-merge", "row-by-row-merge"])
def test_merge_keeps_other_hosts(tmp_path: Path, edit_csv: bool) -> None:
    """Re-writing h1 keeps h2's records, by the JSONL-aligned fast path or (files out of step) row by row."""
    h1, h2 = collect(SERVER, host="h1").results, collect(SERVER, host="h2").results
    write_outputs(tmp_path, h1, CTX)
    write_outputs(tmp_path, h2, CTX)
    if edit_csv:  # a row the JSONL does not have: the two files are no longer in step
        with (tmp_path / "metrics.csv").open("a") as fh:
            fh.write(",".join(['"x"'] * 25 + ['"host=h3"', '"host=h3"', '""', '""']) + "\n")
    write_outputs(tmp_path, h1, CTX)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    n = len(h1[0].metrics)
    assert [r["host"] for r in records] == ["h2"] * n + ["h1"] * n
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open(newline="")))
    hosts = [r["Metadata_Host"] for r in rows]
    assert hosts == ["host=h2"] * n + (["host=h3"] if edit_csv else []) + ["host=h1"] * n
    assert sorted(load_run(tmp_path).hosts) == ["h1", "h2"]


def test_torn_jsonl_line_is_dropped_on_merge(tmp_path: Path) -> None:
    write_outputs(tmp_path, collect(SERVER, host="h2").results, CTX)
    with (tmp_path / "metrics.jsonl").open("a") as fh:
        fh.write('{"host":"h9","name":"x","val\n')
    write_outputs(tmp_path, collect(SERVER, host="h1").results, CTX)
    hosts = {json.loads(line)["host"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()}
    assert hosts == {"h1", "h2"}


def test_large_collections_print_grouped(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workload.cli.results_cmd import results_command

    monkeypatch.setattr(table, "MAX_ROWS", 3)
    group = click.Group("workload")
    group.add_command(results_command)
    result = CliRunner().invoke(group, ["results", str(fleet), "--allow-invalid"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert re.search(r"MLPerf results \(\d+ results in \d+ groups\)", result.output)
    assert "Explanations" in result.output and "e.g." in result.output
    # each distinct explanation once (the three copies of a result share it), not once per result
    whys = [line for line in result.output.splitlines() if "why: min duration not met" in line]
    assert whys and len(whys) == len(set(whys)) and all("(3 " in line for line in whys)


def test_while_parsing_runs_after_the_pool_is_forked_in_a_fresh_process(fleet: Path) -> None:
    script = (
        "import multiprocessing, sys\n"
        "from pathlib import Path\n"
        "from workload.metrics.collection import collect_many\n"
        "seen = []\n"
        "root = Path(sys.argv[1])\n"
        "targets = [(root / h, h) for h in ('h1', 'h2')]\n"
        "hook = lambda: seen.append(len(multiprocessing.active_children()))\n"
        "c = collect_many(targets, workers=2, while_parsing=hook)\n"
        "print(len(c.results), seen)\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(fleet)], capture_output=True, text=True, check=True)
    count, seen = out.stdout.split(" ", 1)
    assert int(count) > 40
    assert seen.strip() == "[2]"  # called once, with both workers already forked
