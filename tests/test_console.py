"""Console rendering details that users read: compact plans, parameters shown per step."""

from __future__ import annotations

from workload.cli.console import compact_command
from workload.commands import Secret, cmd, shell


def test_long_embedded_scripts_are_labelled_not_dumped() -> None:
    script = "for f in a b c; do echo $f; done; " * 10
    command = cmd("sh", "-c", script, "wait-for-dpkg-lock", "600", "/var/lib/dpkg/lock")
    shown = compact_command(command)
    assert shown == f"sh -c <script wait-for-dpkg-lock, {len(script)} chars> wait-for-dpkg-lock 600 /var/lib/dpkg/lock"


def test_a_program_passed_as_an_argument_is_labelled_and_one_line_arguments_are_kept() -> None:
    program = "import sys\nprint(sys.argv)\n"
    command = cmd("bash", "-c", 'exec python3 -c "$2" "$1"', "probe", "http://x/health", program)
    shown = compact_command(command)
    assert (
        shown == f'bash -c \'exec python3 -c "$2" "$1"\' probe http://x/health <2-line argument, {len(program)} chars>'
    )
    assert compact_command(cmd("echo", "one line\n")) == "echo 'one line\n'"


def test_short_commands_and_secrets_are_shown_exactly_and_masked() -> None:
    command = cmd("curl", "-H", Secret("token-123"), "https://x/a b", env={"A": "1"}, cwd="/tmp")
    shown = compact_command(command)
    assert shown == "cd /tmp && env A=1 curl -H '***' 'https://x/a b'"
    assert "token-123" not in shown
    assert compact_command(shell("echo hi")) == "bash -c 'echo hi'"


def test_url_passwords_are_masked_in_compact_plans_and_parameters() -> None:
    from rich.console import Console

    from tests.steptypes import EchoParameters, EchoStep
    from workload.cli.console import render_plan, shown_parameters
    from workload.steps import Change, StepPlan

    url = "https://user:ghp_SECRET123@example.invalid/r.git"
    command = cmd("git", "clone", url, "/opt/r", env={"GIT_ASKPASS": url}, cwd="/tmp")
    shown = compact_command(command)
    assert "ghp_SECRET123" not in shown and "'https://user:***@example.invalid/r.git'" in shown
    step = EchoStep(EchoParameters(Message=url, Marker="/tmp/m"), location="Actions[0]", kind="action")
    assert shown_parameters(step)["Message"] == "https://user:***@example.invalid/r.git"
    console = Console(record=True, width=200)
    plan = StepPlan(changes=(Change(f"clone {url}", (command,)),), notes=(f"not pinned: {url}",))
    render_plan(console, plan, full=True)
    text = console.export_text()
    assert "ghp_SECRET123" not in text and text.count("user:***@") == 4
