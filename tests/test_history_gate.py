"""The history as a CI gate: baselines by identity and by kind, re-records that keep the run's own
record, and the empty-history policy, on both backends (SQLite and the PostgreSQL server the tests
start). Every result set is real harness output (the H200 fixture) judged by the real parsers, and
every step goes through the command line as a pipeline would run it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_history import H200, cli, make_run
from workload.cli import invoke
from workload.history import open_history


def raw_results(root: Path, name: str, qps: str | None = None) -> Path:
    """A results folder without run.json (what `results FOLDER --record` of harness logs sees)."""
    folder = root / name
    shutil.copytree(H200, folder)
    if qps is not None:
        for summary in folder.rglob("mlperf_log_summary.txt"):
            summary.write_text(summary.read_text().replace("Samples per second: 73309.5", f"Samples per second: {qps}"))
    return folder


def ended(folder: Path, exit_code: int, *, tag: str | None = None, interrupted: str | None = None) -> Path:
    """What `workload run` leaves once it ends: run.json with its exit code (and tag), summary.json's verdict."""
    run = json.loads((folder / "run.json").read_text())
    run.update({"exit_code": exit_code, "tag": tag})
    (folder / "run.json").write_text(json.dumps(run))
    summary = json.loads((folder / "summary.json").read_text())
    if exit_code != 0:
        summary["verdict"] = {**summary.get("verdict", {}), "ok": False}
    if interrupted:
        summary.update({"interrupted": True, "interrupt_reason": interrupted})
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def set_parameter(folder: Path, name: str, value: object) -> Path:
    profile = json.loads((folder / "profile.json").read_text())
    profile["Parameters"][name] = value
    (folder / "profile.json").write_text(json.dumps(profile))
    return folder


def test_a_results_folder_is_never_its_own_last_good_baseline(history_url: str, tmp_path: Path) -> None:
    r1, slow = raw_results(tmp_path, "r1"), raw_results(tmp_path, "slow", qps="60000")
    assert cli("results", str(r1), "--record", "--history", history_url)[0] == 0
    assert cli("results", str(slow), "--record", "--history", history_url)[0] == 0
    direct, _, _ = cli("compare", str(r1), str(slow))
    code, out, _ = cli("compare", "--baseline", "last-good", str(slow), "--history", history_url, "--json")
    document = json.loads(out)
    assert direct == code == 7 and document["regressions"] >= 1
    assert document["baseline"] == "r1 (history, last-good)"
    # a copy of the recorded folder is the same result set: not its own baseline either
    copy = tmp_path / "elsewhere" / "slow-copy"
    shutil.copytree(slow, copy)
    code, out, _ = cli("compare", "--baseline", "last-good", str(copy), "--history", history_url, "--json")
    assert code == 7 and json.loads(out)["baseline"] == "r1 (history, last-good)"
    # naming the candidate's own record as baseline is refused, not a pass
    assert invoke(["compare", "--baseline", "slow", str(slow), "--history", history_url]) == 2


def test_re_recording_keeps_the_runs_exit_code_verdict_interruption_and_tag(
    history_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = ended(make_run(tmp_path, "20261101-120000-P", hosts={"n1": "SKU1"}), 0)
    refused = ended(make_run(tmp_path, "20261102-120000-P", hosts={"n1": "SKU1"}), 4, tag="nightly")
    stopped = ended(make_run(tmp_path, "20261103-120000-P", hosts={"n1": "SKU1"}), 130, interrupted="SIGTERM")
    slow = ended(make_run(tmp_path, "20261104-120000-P", hosts={"n1": "SKU1"}, qps="60000"), 0)
    for folder in (good, refused, stopped, slow):  # the results themselves are all VALID: exit 0 on re-reading
        assert cli("results", str(folder), "--record", "--history", history_url)[0] == 0
    assert cli("results", str(refused), "--record", "--history", history_url)[0] == 0  # once more
    with open_history(history_url) as history:
        by_id = {r.run_id: r for r in history.runs()}
    assert len(by_id) == 4
    assert (by_id["20261102-120000-P"].exit_code, by_id["20261102-120000-P"].ok) == (4, False)
    assert by_id["20261102-120000-P"].tag == "nightly"
    assert (by_id["20261103-120000-P"].exit_code, by_id["20261103-120000-P"].interrupted) == (130, "SIGTERM")
    assert by_id["20261101-120000-P"].exit_code == 0 and by_id["20261101-120000-P"].interrupted is None
    # neither the refused nor the interrupted run is last-good; the tag still finds its run
    code, out, _ = cli("compare", "--baseline", "last-good", str(slow), "--history", history_url, "--json")
    assert code == 7 and json.loads(out)["baseline"] == "20261101-120000-P (history, last-good)"
    code, out, _ = cli("compare", "--baseline", "nightly", str(slow), "--history", history_url, "--json")
    assert json.loads(out)["baseline"] == "20261102-120000-P (history, nightly)"
    # a record made by the run itself is not overwritten by a later re-record from an edited folder
    run = json.loads((refused / "run.json").read_text())
    (refused / "run.json").write_text(json.dumps({**run, "exit_code": None, "tag": None}))
    assert cli("results", str(refused), "--record", "--history", history_url)[0] == 0
    with open_history(history_url) as history:
        (again,) = history.runs(run_id="20261102-120000-P")
    assert (again.exit_code, again.ok, again.tag) == (4, False, "nightly")


def test_last_good_is_the_newest_earlier_good_run_of_the_same_kind(history_url: str, tmp_path: Path) -> None:
    def run(name: str, **kw: object) -> Path:
        return ended(make_run(tmp_path, name, **kw), 0)  # type: ignore[arg-type]

    older = run("20261101-120000-P", hosts={"n1": "SKU1"}, qps="70000")
    candidate_old = run("20261102-120000-P", hosts={"n1": "SKU1"}, qps="71000")
    full = run("20261103-120000-P", hosts={"n1": "SKU1"}, qps="72000")
    debug = set_parameter(run("20261104-120000-P", hosts={"n1": "SKU1"}, qps="90000"), "Scenarios", "Offline")
    other_sku = run("20261105-120000-P", hosts={"n1": "SKU2"}, qps="95000")
    two_hosts = run("20261106-120000-P", hosts={"n1": "SKU1", "n2": "SKU1"}, qps="96000")
    other_profile = run("20261107-120000-X", hosts={"n1": "SKU1"}, profile="OTHER", qps="97000")
    newest = run("20261108-120000-P", hosts={"n1": "SKU1"}, qps="72100")
    for folder in (older, candidate_old, full, debug, other_sku, two_hosts, other_profile, newest):
        assert cli("results", str(folder), "--record", "--history", history_url)[0] == 0

    def baseline_of(folder: Path) -> str:
        code, out, err = cli("compare", "--baseline", "last-good", str(folder), "--history", history_url, "--json")
        assert code in (0, 7), err
        return str(json.loads(out)["baseline"]).split(" ")[0]

    # the newest run is compared with the full run, not the newer Offline-only, other-SKU, 2-host or other-profile runs
    assert baseline_of(newest) == "20261103-120000-P"
    # an older run gets a baseline from before it, never a newer one
    assert baseline_of(candidate_old) == "20261101-120000-P"
    # the Offline-only debug run has no earlier run of its kind
    assert invoke(["compare", "--baseline", "last-good", str(debug), "--history", history_url]) == 2
    # a run whose actions were filtered (`--scenarios`): its profile.json lists fewer actions, another kind
    filtered = run("20261109-120000-P", hosts={"n1": "SKU1"}, qps="72200")
    profile = json.loads((filtered / "profile.json").read_text())
    profile["Actions"] = [{"Type": "MLPerfExecutor", "Parameters": {"Scenario": "inferencemodels-bert"}}]
    (filtered / "profile.json").write_text(json.dumps(profile))
    assert invoke(["compare", "--baseline", "last-good", str(filtered), "--history", history_url]) == 2


def test_an_empty_history_fails_by_default_and_passes_when_asked(
    history_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workload.history import open_history

    with open_history(history_url):  # an empty history: made (schema migrated), nothing recorded
        pass
    first = raw_results(tmp_path, "first")
    assert invoke(["compare", "--baseline", "last-good", str(first), "--history", history_url]) == 2
    err = capsys.readouterr().err
    assert "no earlier run that exited 0 with the same profile" in err
    args = ["compare", "--baseline", "last-good", str(first), "--history", history_url, "--if-no-baseline", "pass"]
    code, out, _ = cli(*args)
    assert code == 0 and out.startswith("no baseline, nothing compared (--if-no-baseline pass): --baseline last-good")
    code, out, _ = cli(*args, "--json")
    document = json.loads(out)
    assert code == 0 and document["baseline"] is None and "no earlier run" in document["no_baseline"]


def test_recorded_history_pooled_as_the_baseline_gives_interval_verdicts(history_url: str, tmp_path: Path) -> None:
    for day, qps in ((1, "70500"), (2, "71000"), (3, "71500")):
        good = ended(make_run(tmp_path, f"2026110{day}-120000-P", hosts={"n1": "SKU1"}, qps=qps), 0)
        assert cli("results", str(good), "--record", "--history", history_url)[0] == 0
    slow = ended(make_run(tmp_path, "20261104-120000-P", hosts={"n1": "SKU1"}, qps="52000"), 0)
    same = ended(make_run(tmp_path, "20261105-120000-P", hosts={"n1": "SKU1"}, qps="71500"), 0)
    args = ["--baseline", "last-good", "--baseline-runs", "3", "--history", history_url, "--json"]

    def offline(document: dict[str, object]) -> dict[str, object]:
        changes = document["changes"]
        assert isinstance(changes, list)
        (row,) = [c for c in changes if c["scenario"] == "Offline" and c["metric"] == "samples_per_second"]
        return dict(row)

    code, out, _ = cli("compare", *args, str(slow))
    document = json.loads(out)
    row = offline(document)
    assert code == 7 and document["baseline"] == "20261103-120000-P + 2 earlier (history, last-good)"
    assert row["verdict"] == "regression" and isinstance(row["interval"], dict) and row["before"]["n"] == 3
    code, out, _ = cli("compare", *args, str(same))
    assert code == 0 and offline(json.loads(out))["verdict"] == "no change"


def test_a_baseline_from_a_history_that_is_off_is_refused_without_creating_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = raw_results(tmp_path, "first")
    code, _, err = cli("compare", "--baseline", "last-good", str(first), "--history", "off")
    assert code == 2 and "the history is off" in err and not (tmp_path / "off").exists()


def test_real_runs_record_themselves_and_keep_their_record(
    history_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`workload run` for real (the engine, a run folder, real harness result files copied by a step),
    into SQLite and PostgreSQL: a failed run keeps exit 4 and its tag when recorded again, and a run's
    last-good baseline is an earlier good run, never itself."""
    from tests.steptypes import TEST_TYPES
    from workload import registry

    types = {**TEST_TYPES, "CopyResults": "tests.test_history:CopyResults"}
    monkeypatch.setattr(registry, "STEP_TYPES", {**registry.STEP_TYPES, **types})
    monkeypatch.setenv("WORKLOAD_STATE_PATH", str(tmp_path / "state.json"))
    good = tmp_path / "P.json"
    good.write_text(json.dumps({"Description": "x", "Actions": [{"Type": "CopyResults"}]}))
    failing = tmp_path / "failing" / "P.json"
    failing.parent.mkdir()
    failing.write_text(json.dumps({"Description": "x", "Actions": [{"Type": "CopyResults"}, {"Type": "FailStep"}]}))
    runs = tmp_path / "runs"

    def run(profile: Path, *more: str) -> Path:
        before = set(runs.iterdir()) if runs.exists() else set()
        invoke(["run", "--profile", str(profile), "--output-dir", str(runs), "--history", history_url, *more])
        (folder,) = set(runs.iterdir()) - before
        return folder

    first, second = run(good), run(good)
    failed = run(failing, "--tag", "nightly")
    assert json.loads((failed / "run.json").read_text())["exit_code"] == 4
    assert cli("results", str(failed), "--record", "--history", history_url)[0] == 0  # its results are VALID
    with open_history(history_url) as history:
        (again,) = history.runs(tag="nightly")
        assert (again.run_id, again.exit_code, again.ok, again.command) == (failed.name, 4, False, "run")
        assert len(history.runs()) == 3
    code, out, _ = cli("compare", "--baseline", "last-good", str(second), "--history", history_url, "--json")
    assert code == 0 and json.loads(out)["baseline"] == f"{first.name} (history, last-good)"
    code, out, _ = cli("compare", "--baseline", "nightly", str(second), "--history", history_url, "--json")
    assert json.loads(out)["baseline"] == f"{failed.name} (history, nightly)"
