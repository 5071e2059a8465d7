"""metrics.jsonl / metrics.csv (VirtualClient's exact columns and quoting) / summary.json, fleet merge."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from workload.metrics.collection import collect
from workload.metrics.model import Metric
from workload.metrics.outputs import CSV_COLUMNS, OutputContext, csv_row, load_run, write_outputs

FIX = Path(__file__).parent / "fixtures" / "results"
SERVER = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28" / "H200-SXM-141GBx8_TRT" / "bert-99" / "Server"
VC_HEADER = (
    '"Timestamp","ExperimentId","ExecutionSystem","ProfileName","ClientId","ToolName","ToolVersion",'
    '"ScenarioName","ScenarioStartTime","ScenarioEndTime","MetricName","MetricValue","MetricUnit",'
    '"MetricCategorization","MetricDescription","MetricRelativity","MetricVerbosity","AppHost","AppName",'
    '"AppVersion","OperatingSystemPlatform","PlatformArchitecture","SeverityLevel","OperationId",'
    '"OperationParentId","Metadata","Metadata_Host","ToolResults","Tags"'
)
CTX = OutputContext(
    experiment_id="exp-1", profile_name="PERF-GPU-MLPERF", client_id="ci", app_host="ci", tags=("a", "b")
)


def test_csv_header_exact(tmp_path: Path) -> None:
    write_outputs(tmp_path, collect(SERVER, host="h1").results, CTX)
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[0] == VC_HEADER
    assert len(CSV_COLUMNS) == 29


def test_csv_quoting_every_field_and_doubled_quotes() -> None:
    metric = Metric(
        name="m", value=1.5, description='say "hi", ok', scenario_name="bert", metadata={"k": 'a"b', "n": None}
    )
    line = csv_row(metric, CTX, "2024-01-01T00:00:00.0000000Z", "pid")
    assert line.endswith("\n")
    fields = next(csv.reader([line]))
    assert len(fields) == 29
    assert fields[CSV_COLUMNS.index("MetricDescription")] == 'say "hi", ok'
    assert '"say ""hi"", ok"' in line
    assert fields[CSV_COLUMNS.index("Metadata")] == 'k=a"b'  # None values are left out, like VC's IConvertible filter
    assert fields[CSV_COLUMNS.index("Tags")] == "a,b"
    # every field is quoted: splitting on the quoted separator gives exactly 29 parts
    assert line.rstrip("\n").startswith('"') and line.rstrip("\n").count('","') == 28


def test_jsonl_csv_summary_content(tmp_path: Path) -> None:
    results = collect(SERVER, host="h1").results
    paths = write_outputs(tmp_path, results, CTX)
    assert [p.name for p in paths] == ["metrics.jsonl", "metrics.csv", "summary.json"]
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == len(results[0].metrics)
    head = records[0]
    assert head["name"] == "samples_per_second" and head["value"] == 57609.27 and head["host"] == "h1"
    assert head["metadata"]["scenario"] == "Server" and head["relativity"] == "HigherIsBetter"
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    first = rows[0]
    assert first["MetricName"] == "samples_per_second" and first["MetricValue"] == "57609.27"
    assert first["ClientId"] == "h1" and first["ExperimentId"] == "exp-1" and first["ToolName"] == "MLPerf"
    assert "scenario=Server" in first["Metadata"] and first["Metadata_Host"] == "host=h1"
    assert first["ScenarioStartTime"] == "2024-07-24T15:03:20.0000000Z"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["verdict"]["ok"] is True and summary["counts"]["results"] == 1
    assert summary["results"][0]["headline"]["value"] == 57609.27


def test_fleet_merge_replaces_per_host(tmp_path: Path) -> None:
    write_outputs(tmp_path, collect(SERVER, host="h1").results, CTX)
    write_outputs(tmp_path, collect(SERVER, host="h2").results, CTX)
    write_outputs(tmp_path, collect(SERVER, host="h1").results, CTX)  # re-collecting h1 must not duplicate it
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    per_host = {h: sum(1 for r in records if r["host"] == h) for h in ("h1", "h2")}
    assert per_host["h1"] == per_host["h2"] > 0 and len(records) == 2 * per_host["h1"]
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0] == VC_HEADER and rows.count(VC_HEADER) == 1 and len(rows) == 1 + len(records)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["counts"]["hosts"] == 2 and summary["counts"]["results"] == 2
    loaded = load_run(tmp_path)
    assert sorted(loaded.hosts) == ["h1", "h2"] and len(loaded.results) == 2
    assert all(r.headline is not None and r.headline.value == 57609.27 for r in loaded.results)


def test_summary_records_issues_and_failed_verdict(tmp_path: Path) -> None:
    bad = tmp_path / "in" / "x"
    bad.mkdir(parents=True)
    (bad / "metadata.json").write_text("{not json")
    invalid = collect(FIX / "loadgen" / "offline_invalid", host="h1")
    broken = collect(tmp_path / "in", host="h1")
    write_outputs(tmp_path / "out", invalid.results, CTX, issues=broken.issues)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["verdict"]["ok"] is False and summary["verdict"]["invalid"] == 1
    assert (
        summary["issues"][0]["path"].endswith("metadata.json") and "not valid JSON" in summary["issues"][0]["problem"]
    )
    assert summary["results"][0]["fixes"]
