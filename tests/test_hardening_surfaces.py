"""Issue 30: the newest surfaces attacked (history, report, JUnit, telemetry files, remote state).

One section per numbered defect of the issue; each test plants what an attacker, a damaged disk or
a careless hand could leave, and checks the real code path (the CLI where the user meets it).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import click
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.history_db import PostgresServer
from workload.cli.compare_cmd import compare_command
from workload.cli.results_cmd import results_command
from workload.metrics.collection import collect
from workload.metrics.outputs import OutputContext, write_outputs

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
    assert shown.endswith(" done") and shown.startswith(prefix + "postgresql://bob:***@")
    if not set("?#") & set(password) and "@" not in query_value:  # unambiguous: it connects as written
        parsed = parse_url(url)
        assert parsed.password == password.replace("%40", "@") or "%" in password
        assert parsed.host == "db.example" and password not in display_url(parsed)
