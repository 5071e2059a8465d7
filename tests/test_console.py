"""Console rendering details that users read: compact plans, parameters shown per step."""

from __future__ import annotations

from workload.cli.console import compact_command
from workload.commands import Secret, cmd, shell


def test_long_embedded_scripts_are_labelled_not_dumped() -> None:
    script = "for f in a b c; do echo $f; done; " * 10
    command = cmd("sh", "-c", script, "wait-for-dpkg-lock", "600", "/var/lib/dpkg/lock")
    shown = compact_command(command)
    assert shown == f"sh -c <script wait-for-dpkg-lock, {len(script)} chars> wait-for-dpkg-lock 600 /var/lib/dpkg/lock"


def test_short_commands_and_secrets_are_shown_exactly_and_masked() -> None:
    command = cmd("curl", "-H", Secret("token-123"), "https://x/a b", env={"A": "1"}, cwd="/tmp")
    shown = compact_command(command)
    assert shown == "cd /tmp && env A=1 curl -H '***' 'https://x/a b'"
    assert "token-123" not in shown
    assert compact_command(shell("echo hi")) == "bash -c 'echo hi'"
