"""``workload doctor``: preflight checks of GPU hosts, one table row per check, with the fix."""

from __future__ import annotations

from typing import Any

import click

from workload.cli.numbers import FiniteFloatRange
from workload.cli.options import Targets, build_targets, host_options

STATUS = {"pass": ("pass", "green"), "fail": ("FAIL", "red"), "skip": ("skip", "yellow")}
#: the check a host fails when it cannot be reached (alone among the failures: exit 3, as run)
REACH = "reach the host"


@click.command("doctor")
@host_options
@click.option("--scratch", metavar="PATH", help="Check the free space of the file system holding PATH.")
@click.option(
    "--min-free-gb",
    type=FiniteFloatRange(0),
    default=500.0,
    show_default=True,
    help="Free space the scratch path needs (MLPerf data and engines).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON (a list per host) instead of a table.")
def doctor_command(
    targets: Targets,
    scratch: str | None,
    min_free_gb: float,
    as_json: bool,
) -> int:
    """Check that hosts are ready for MLPerf on their GPUs; change nothing.

    \b
    Checks: GPU visible, driver loaded, fabric manager == driver and running (where NVSwitches
    are), Docker works, nvidia runtime registered, scratch space, no reboot pending. Each failed
    check names the command that fixes it. Exit code 0 when nothing failed, 3 when the only
    failures are hosts that could not be reached (as `run`), else 4.
    """
    from concurrent.futures import ThreadPoolExecutor

    from rich.table import Table

    from workload.cli.console import make_console, plain, styled
    from workload.doctor import Check, read_doctor_facts, run_checks
    from workload.errors import EXIT_CONNECT, EXIT_OK, EXIT_STEP_FAILED, WorkloadError

    specs, factory = build_targets(targets)

    def examine(spec: Any) -> tuple[str, list[Check]]:
        try:
            host = factory(spec)
            try:
                facts = read_doctor_facts(host, scratch_path=scratch)
                checks = run_checks(facts, min_free_gb=min_free_gb, admin_managed=not host.allows_changes)
                return spec.name, checks
            finally:
                host.close()
        except WorkloadError as exc:
            return spec.name, [Check(REACH, "fail", str(exc).splitlines()[0], exc.hint or "")]

    with ThreadPoolExecutor(max_workers=max(1, min(targets.parallel, len(specs)))) as pool:
        results = list(pool.map(examine, specs))

    failed = sum(1 for _, checks in results for c in checks if not c.ok)
    unreached = sum(1 for _, checks in results for c in checks if not c.ok and c.name == REACH)
    code = EXIT_OK if not failed else EXIT_CONNECT if unreached == failed else EXIT_STEP_FAILED
    if as_json:
        import json

        hosts = [{"host": name, "checks": [c.__dict__ | {"ok": c.ok} for c in checks]} for name, checks in results]
        click.echo(json.dumps({"hosts": hosts, "failed": failed}, indent=2))
        return code
    console = make_console()
    table = Table(title="workload doctor", show_lines=False)
    for column in ("host", "check", "result", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for name, checks in results:
        for check in checks:
            status = styled(STATUS[check.status])
            table.add_row(plain(name), plain(check.name), status, plain(check.detail), plain(check.fix))
    console.print(table)
    console.print(styled(f"{failed} check(s) failed" if failed else "all checks passed (or did not apply)"))
    return code
