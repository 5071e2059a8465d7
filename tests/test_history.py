"""The run history on both backends: SQLite (a file) and a real PostgreSQL server the tests start.

Every test taking ``history_url`` runs twice, once per backend, with the same assertions.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text

from workload.cli import invoke
from workload.errors import HistoryError, UsageError
from workload.history import open_history
from workload.history.db import parse_url
from workload.history.migrations import HEAD
from workload.history.record import build_record, gpus_of_system
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, load_run, write_outputs
from workload.steps import Change, Step, StepContext, StepParameters, StepPlan

FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
SECRET = "s3cr3t-token-value"


def make_run(
    root: Path,
    run_id: str,
    *,
    hosts: dict[str, str | None],
    profile: str = "PERF-GPU-MLPERF",
    qps: str | None = None,
    source: Path = H200,
) -> Path:
    """A run folder as ``workload run`` leaves it: run.json, profile.json, metrics files per host."""
    folder = root / run_id
    results = []
    for host in hosts:
        raw = root / "raw" / run_id / host
        shutil.copytree(source, raw)
        if qps is not None:
            for summary in raw.rglob("mlperf_log_summary.txt"):
                summary.write_text(
                    summary.read_text().replace("Samples per second: 73309.5", f"Samples per second: {qps}")
                )
        results += collect(raw, host=host).results
    write_outputs(folder, results, OutputContext(experiment_id=run_id, profile_name=profile))
    run_hosts = [{"name": h, "labels": {"sku": sku} if sku else {}} for h, sku in hosts.items()]
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "profile": profile, "hosts": run_hosts}))
    parameters = {
        "LinuxDriverVersion": "550",
        "LinuxCudaVersion": "12.4",
        "ResultsRepoUri": "https://github.com/mlcommons/inference_results_v4.1.git",
        "GitHubToken": SECRET,
        "Mirror": f"https://user:{SECRET}@mirror.example/x",
    }
    (folder / "profile.json").write_text(json.dumps({"Name": profile, "Parameters": parameters}))
    return folder


def record_folder(url: str, folder: Path, *, exit_code: int = 0, tag: str | None = None) -> str:
    collection = load_run(folder)
    entry = build_record(folder, collection, command="run", exit_code=exit_code, ok=exit_code == 0, tag=tag)
    with open_history(url) as history:
        return history.record(entry)


def test_record_keeps_hosts_facts_masked_parameters_and_every_metric(history_url: str, tmp_path: Path) -> None:
    folder = make_run(tmp_path, "20261101-120000-PERF-GPU-MLPERF", hosts={"n1": "ND96isr_H200_v5", "n2": None})
    assert record_folder(history_url, folder, tag="nightly") == "20261101-120000-PERF-GPU-MLPERF"
    with open_history(history_url) as history:
        (run,) = history.runs()
        assert run.profile == "PERF-GPU-MLPERF" and run.tag == "nightly" and run.exit_code == 0 and run.ok is True
        assert run.started_at == datetime(2026, 11, 1, 12, 0, tzinfo=UTC)  # from the run folder's name
        assert run.metric_count == len(load_run(folder).metrics) == 2 * 92
        # secrets are masked before they reach the database, in values and inside URLs
        stored = json.dumps(run.parameters)
        assert SECRET not in stored and run.parameters["GitHubToken"] == "***"
        assert run.parameters["Mirror"] == "https://user:***@mirror.example/x"
        n1, n2 = run.hosts
        assert (n1.name, n1.sku, n1.gpu_model, n1.gpu_count) == ("n1", "ND96isr_H200_v5", "H200-SXM-141GB", 8)
        assert (n1.driver, n1.cuda, n1.harness_round) == ("550", "12.4", "v4.1")
        assert n1.facts["loadgen_version"] == "4.1 @ 2ed9555be0" and n2.sku is None
        # the recorded results read back as the run folder has them
        back = history.collection(run.run_id)
        original = load_run(folder)
        assert sorted((m.host, m.name, m.value, m.unit) for m in back.metrics) == sorted(
            (m.host, m.name, m.value, m.unit) for m in original.metrics
        )
        assert [r.headline.name if r.headline else None for r in back.results] == [
            r.headline.name if r.headline else None for r in original.results
        ]


def test_filters_trend_and_baselines(history_url: str, tmp_path: Path) -> None:
    record_folder(history_url, make_run(tmp_path, "20261101-120000-P", hosts={"a": "SKU1"}, qps="70000"), tag="t1")
    record_folder(history_url, make_run(tmp_path, "20261102-120000-P", hosts={"b": "SKU2"}, qps="71000"))
    record_folder(history_url, make_run(tmp_path, "20261103-120000-P", hosts={"a": "SKU1"}, qps="72000"), exit_code=6)
    record_folder(
        history_url,
        make_run(tmp_path, "20261104-120000-C", hosts={"local": None}, profile="PERF-CPU-MLPERF", source=FIX / "cpu"),
    )
    with open_history(history_url) as history:
        ids = [r.run_id for r in history.runs()]
        assert ids == ["20261104-120000-C", "20261103-120000-P", "20261102-120000-P", "20261101-120000-P"]
        assert [r.run_id for r in history.runs(sku="SKU1")] == ["20261103-120000-P", "20261101-120000-P"]
        assert [r.run_id for r in history.runs(profile="perf-cpu-mlperf")] == ["20261104-120000-C"]
        assert [r.run_id for r in history.runs(metric="tokens_per_second")] == ids[1:]  # llama2 is not in the CPU run
        assert [r.run_id for r in history.runs(since=datetime(2026, 11, 3, tzinfo=UTC))] == ids[:2]
        assert [r.run_id for r in history.runs(tag="t1")] == ["20261101-120000-P"]
        assert len(history.runs(limit=2)) == 2
        points = history.trend("samples_per_second", scenario="Offline", benchmark="bert-99")
        assert [(p.sku, p.value) for p in points] == [("SKU1", 70000.0), ("SKU2", 71000.0), ("SKU1", 72000.0)]
        assert [p.value for p in history.trend("samples_per_second", sku="SKU2", scenario="offline")] == [71000.0]
        # last-good skips the run that exited 6 and the run being compared
        assert history.baseline("last-good", profile="PERF-GPU-MLPERF").run_id == "20261102-120000-P"
        assert history.baseline("last-good", exclude="20261104-120000-C").run_id == "20261102-120000-P"
        assert history.baseline("t1").run_id == "20261101-120000-P"
        assert history.baseline("20261103-120000-P").run_id == "20261103-120000-P"
        with pytest.raises(UsageError, match="no run with id or tag 'nope'"):
            history.baseline("nope")


def test_rerecording_a_folder_replaces_it_and_a_foreign_run_id_gets_a_suffix(history_url: str, tmp_path: Path) -> None:
    folder = make_run(tmp_path / "x", "20261101-120000-P", hosts={"a": None})
    other = make_run(tmp_path / "y", "20261101-120000-P", hosts={"b": None})
    assert record_folder(history_url, folder) == "20261101-120000-P"
    assert record_folder(history_url, folder, tag="again") == "20261101-120000-P"
    assert record_folder(history_url, other) == "20261101-120000-P-2"
    with open_history(history_url) as history:
        runs = history.runs()
        assert sorted((r.run_id, r.tag) for r in runs) == [
            ("20261101-120000-P", "again"),
            ("20261101-120000-P-2", None),
        ]
        assert all(r.metric_count == 92 for r in runs)  # the replaced run's metrics went with it


def test_migrations_build_the_declared_schema(history_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    open_history(history_url).close()
    open_history(history_url).close()  # a second open finds it current
    config = Config()
    config.set_main_option("script_location", "workload.history:migrations")
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD
    from workload.history.schema import metadata

    engine = create_engine(parse_url(history_url))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == HEAD
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
            assert diff == []
            assert {"runs", "hosts", "results", "metrics"} <= set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _record_many(url: str, root: str, worker: int, count: int, barrier: mp.synchronize.Barrier) -> None:
    barrier.wait()  # every process opens (and migrates) the fresh history at the same moment
    for i in range(count):
        record_folder(url, Path(root) / f"w{worker}-{i}")


def test_concurrent_processes_record_without_loss(history_url: str, tmp_path: Path) -> None:
    workers, per_worker = 4, 3
    for w in range(workers):
        for i in range(per_worker):
            make_run(tmp_path, f"w{w}-{i}", hosts={f"h{w}": "SKU"})
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(workers)
    procs = [
        ctx.Process(target=_record_many, args=(history_url, str(tmp_path), w, per_worker, barrier))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * workers
    with open_history(history_url) as history:
        runs = history.runs(limit=None)
        assert sorted(r.run_id for r in runs) == sorted(f"w{w}-{i}" for w in range(workers) for i in range(per_worker))
        assert all(r.metric_count == 92 for r in runs)


def test_bad_and_unreachable_histories_name_the_url_with_the_password_masked(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unsupported database 'mysql'"):
        open_history("mysql://u:pw@h/db")
    with pytest.raises(UsageError, match="in-memory"):
        open_history("sqlite://")
    with pytest.raises(HistoryError) as err:
        open_history(f"postgresql://u:hunter22@/db?host={tmp_path}")
    assert "hunter22" not in str(err.value) and "***" in str(err.value)
    (tmp_path / "file").write_text("")
    with pytest.raises(HistoryError, match="cannot create its folder"):
        open_history(f"sqlite:///{tmp_path / 'file' / 'h.sqlite'}")


def test_default_history_is_in_the_xdg_data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from workload.history import default_url

    monkeypatch.delenv("WORKLOAD_HISTORY", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_url() == f"sqlite:///{tmp_path}/workload/history.sqlite"
    monkeypatch.setenv("WORKLOAD_HISTORY", "postgresql://x@/y")
    assert default_url() == "postgresql://x@/y"


def test_gpus_of_system_follow_nvidias_system_names() -> None:
    assert gpus_of_system("H200-SXM-141GBx8_TRT") == ("H200-SXM-141GB", 8)
    assert gpus_of_system("DGX-H100_H100-SXM-80GBx8_TRT") == ("H100-SXM-80GB", 8)
    assert gpus_of_system("L4x1_TRT_MaxQ") == ("L4", 1)
    assert gpus_of_system("cpu") == (None, None)


# -- the command line --------------------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_group(), list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _group() -> object:
    import click

    from workload.cli.compare_cmd import compare_command
    from workload.cli.history_cmd import history_command
    from workload.cli.results_cmd import results_command

    group = click.Group("workload")
    for command in (results_command, compare_command, history_command):
        group.add_command(command)
    return group


def test_results_record_history_trend_and_compare_baseline(
    history_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = make_run(tmp_path, "20261101-120000-P", hosts={"n1": "SKU1"})
    slow = make_run(tmp_path, "20261102-120000-P", hosts={"n1": "SKU1"}, qps="60000")
    code, out, _ = cli("results", str(good), "--record", "--history", history_url, "--tag", "base")
    assert code == 0 and "recorded in history" in out and "as 20261101-120000-P" in out
    code, out, _ = cli("results", str(slow), "--tag", "next", "--history", history_url)  # --tag records too
    assert code == 0 and "as 20261102-120000-P" in out

    code, out, _ = cli("history", "--history", history_url, "--json", "--sku", "SKU1")
    listed = json.loads(out)["runs"]
    assert code == 0 and [r["run_id"] for r in listed] == ["20261102-120000-P", "20261101-120000-P"]
    assert listed[0]["hosts"][0]["gpu_model"] == "H200-SXM-141GB" and listed[0]["metric_count"] == 92
    code, out, _ = cli("history", "--history", history_url)
    assert code == 0 and "2 run(s)" in out and "n1 (SKU1)" in out

    code, out, _ = cli("history", "--history", history_url, "--trend", "samples_per_second", "--scenario", "Offline")
    assert code == 0 and "SKU1 - bert-99 Offline PerformanceOnly" in out
    assert "73,309.5 samples/s" in out and "60,000 samples/s" in out and "-18.16 %" in out
    code, out, _ = cli("history", "--history", history_url, "--trend", "samples_per_second", "--json")
    points = json.loads(out)["points"]
    assert [p["value"] for p in points if p["scenario"] == "Offline"] == [73309.5, 60000.0]

    # the slow run against the tagged baseline, and against the last good run of its profile
    code, out, _ = cli("compare", "--baseline", "base", str(slow), "--history", history_url)
    assert code == 7 and "REGRESSION" in out and "20261101-120000-P (history, base)" in out
    code, out, _ = cli("compare", "--baseline", "last-good", str(slow), "--history", history_url, "--json")
    document = json.loads(out)
    assert code == 7 and document["regressions"] >= 1 and document["baseline"].startswith("20261101-120000-P")
    # no RUN: the newest recorded run against the baseline
    code, out, _ = cli("compare", "--baseline", "base", "--history", history_url, "--threshold", "20")
    assert code == 0 and "20261102-120000-P (history)" in out and "no regression" in out

    assert invoke(["history", "--history", history_url, "--since", "yesterday-ish"]) == 2
    assert "--since 'yesterday-ish': not a date or an age" in capsys.readouterr().err


def test_recording_failure_keeps_the_results_and_the_exit_code(tmp_path: Path) -> None:
    folder = make_run(tmp_path, "20261101-120000-P", hosts={"n1": None})
    unreachable = f"postgresql://u:hunter22@/nodb?host={tmp_path / 'nowhere'}"
    code, out, err = cli("results", str(folder), "--record", "--history", unreachable)
    assert code == 0 and "57,609.27" in out and "verdict: OK" in out
    assert "warning: the run was not recorded in the history" in err and "hunter22" not in err
    assert f"workload results {folder} --record" in err


class CopyResults(Step):
    """An action whose results are a copy of the H200 fixture (real harness result files)."""

    type_name: ClassVar[str] = "CopyResults"
    Parameters: ClassVar[type[StepParameters]] = StepParameters

    def plan(self, ctx: StepContext) -> StepPlan:
        return StepPlan(changes=(Change("copy results", ()),))

    def verify(self, ctx: StepContext) -> None:
        target = ctx.host_dir / "results"
        shutil.copytree(H200, target, dirs_exist_ok=True)
        ctx.results.append(target)


def test_run_records_itself_and_writes_junit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.steptypes import TEST_TYPES
    from workload import registry

    monkeypatch.setattr(
        registry, "STEP_TYPES", {**registry.STEP_TYPES, **TEST_TYPES, "CopyResults": "tests.test_history:CopyResults"}
    )
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("WORKLOAD_HISTORY", raising=False)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps({"Description": "x", "Actions": [{"Type": "CopyResults"}]}))
    junit = tmp_path / "junit.xml"
    args = ["run", "--profile", str(profile), "--output-dir", str(tmp_path / "runs"), "--tag", "first"]
    assert invoke([*args, "--junit", str(junit)]) == 0
    with open_history(None) as history:  # the default: $XDG_DATA_HOME/workload/history.sqlite
        (run,) = history.runs()
        assert run.tag == "first" and run.exit_code == 0 and run.command == "run" and run.metric_count == 92
        assert run.hosts[0].name == "local" and run.hosts[0].gpu_count == 8
        assert run.ended_at is not None and run.started_at is not None and run.ended_at >= run.started_at
        assert run.ended_at - run.started_at < timedelta(minutes=5)
    assert 'tests="3" failures="0"' in junit.read_text()
    assert invoke([*args, "--history", "off"]) == 0
    with open_history(None) as history:
        assert len(history.runs()) == 1
