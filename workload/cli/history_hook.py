"""What ``run`` and ``results`` do after their results are judged: record them in the run history
and write JUnit XML. Only click at import time.

Recording never costs a run its results: any failure to record is one warning on stderr (the
run folder holds everything) and the exit code stays the verdict's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from workload.safefile import read_regular

if TYPE_CHECKING:
    from workload.metrics.collection import Collection

F = TypeVar("F", bound=Callable[..., Any])

#: ``--history`` values that turn recording off
OFF = frozenset({"off", "none", "no", "false", "0"})


_HISTORY_URLS = (
    "sqlite:///PATH, a file path or postgresql://USER@HOST/DB "
    "(default $WORKLOAD_HISTORY, else $XDG_DATA_HOME/workload/history.sqlite"
)


def history_option(func: F) -> F:
    """``--history URL`` of the commands that read the history (``compare``, ``history``)."""
    return click.option(
        "--history", "history", metavar="URL", default=None, help=f"Run history to read: {_HISTORY_URLS})."
    )(func)


def _record_history_option(func: F) -> F:
    """``--history URL`` of the commands that record into it (``run``, ``results``): 'off' turns recording off."""
    return click.option(
        "--history",
        "history",
        metavar="URL",
        default=None,
        help=f"Run history to record in: {_HISTORY_URLS}; 'off' records nothing).",
    )(func)


def record_options(func: F) -> F:
    """``--history``, ``--tag`` and ``--junit`` of ``run`` and ``results``."""
    func = click.option(
        "--junit",
        "junit",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        metavar="FILE",
        help="Also write JUnit XML: a test case per host, benchmark, scenario and mode (failure: why + fix).",
    )(func)
    func = click.option(
        "--tag", "tag", default=None, metavar="NAME", help="Name this run in the history (compare --baseline NAME)."
    )(func)
    return _record_history_option(func)


def recording_off(history: str | None) -> bool:
    import os

    from workload.history.db import ENV_VAR

    value = history if history is not None else os.environ.get(ENV_VAR, "")
    return value.strip().lower() in OFF


def record(
    source: Path,
    collection: Collection | None,
    *,
    command: str,
    exit_code: int,
    ok: bool | None,
    history: str | None,
    tag: str | None,
    echo: Callable[[str], None],
) -> str | None:
    """Record the run or results folder ``source`` in the history; the run id, or None (warned)."""
    if recording_off(history):
        return None
    from workload.commands import mask_text

    try:
        from workload.errors import WorkloadError
        from workload.history import open_history
        from workload.history.record import build_record
        from workload.metrics.outputs import load_run

        if collection is None:
            collection = load_run(source)
        entry = build_record(source, collection, command=command, exit_code=exit_code, ok=ok, tag=tag)
        with open_history(history) as store:
            run_id = store.record(entry)
            where = store.url
    except WorkloadError as exc:
        _warn(f"the run was not recorded in the history: {exc}", source)
        return None
    except Exception as exc:  # a failure to record must never cost the run its results
        _warn(f"the run was not recorded in the history: {type(exc).__name__}: {mask_text(str(exc))}", source)
        return None
    echo(f"recorded in history {history_location(where)} as {run_id}")
    return run_id


def history_location(url: str) -> str:
    """Where a history is, as a person reads it: a SQLite history is its file (``sqlite:////home/me/x.sqlite``
    is ``/home/me/x.sqlite``); any other (PostgreSQL) stays the URL it was shown as (password masked)."""
    for prefix in ("sqlite+pysqlite:///", "sqlite:///"):
        if url.startswith(prefix) and len(url) > len(prefix):
            return url[len(prefix) :]
    return url


def _warn(text: str, source: Path) -> None:
    click.echo(
        f"warning: {text}\n  (the results are kept in {source}; record them later with "
        f"`workload results {source} --record`)",
        err=True,
    )


def junit_write(path: Path, cases: list[Any], *, suite: str) -> Path:
    from workload.errors import UsageError
    from workload.metrics.junit import write

    try:
        return write(path, cases, suite=suite)
    except OSError as exc:
        raise UsageError(f"--junit {path}: cannot write ({exc.strerror or exc})") from None


def write_junit(path: Path, collection: Collection, *, suite: str, outcomes: list[Any] | None = None) -> Path:
    """JUnit XML of ``collection`` (and of hosts whose steps failed, from run.json ``outcomes``)."""
    from workload.metrics.junit import Case, result_cases

    cases = result_cases(collection.results, collection.issues)
    for outcome in outcomes or []:
        if isinstance(outcome, dict) and outcome.get("error"):
            cases.append(Case(f"{outcome.get('host')}", "steps", errors=[str(outcome["error"])]))
    return junit_write(path, cases, suite=suite)


def after_run(
    folder: Path,
    *,
    exit_code: int,
    history: str | None,
    tag: str | None,
    junit: Path | None,
    echo: Callable[[str], None],
) -> None:
    """``workload run``'s last act: JUnit XML and the history record of the run folder ``folder``."""
    import json

    from workload.metrics.collection import Collection

    collection = Collection()
    if (folder / "metrics.jsonl").is_file() or (folder / "summary.json").is_file():
        from workload.metrics.outputs import load_run

        collection = load_run(folder)
    if junit is not None:
        try:
            outcomes = json.loads(read_regular(folder / "run.json")).get("outcomes", [])
        except (OSError, ValueError, AttributeError):
            outcomes = []
        from workload.errors import WorkloadError

        try:
            echo(f"wrote {write_junit(junit, collection, suite=folder.name, outcomes=outcomes)}")
        except WorkloadError as exc:  # the run is done and its folder written: say so, keep the verdict
            click.echo(f"warning: {exc}", err=True)
    record(
        folder,
        collection,
        command="run",
        exit_code=exit_code,
        ok=exit_code == 0,
        history=history,
        tag=tag,
        echo=echo,
    )


Plots = dict[tuple[str, str], dict[str, list[tuple[Any, float]]]]


def history_trends(folder: Path, history: str | None) -> Plots | None:
    """The history of this run's headline metrics, for the report's trend plots; None when there is none.

    One plot per (metric, unit), in it one series per (benchmark, scenario, SKU) of the run's
    headline results, oldest first (a unit never shares an axis with another). A
    history that cannot be read costs the report its trends, never the run (no warning: recording
    already warned).
    """
    if recording_off(history):
        return None
    import json

    try:
        summary = json.loads(read_regular(folder / "summary.json"))
        wanted = {
            (str(r["headline"]["name"]), r.get("model"), r.get("scenario"))
            for r in summary.get("results", [])
            if isinstance(r, dict) and isinstance(r.get("headline"), dict) and r["headline"].get("name")
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not wanted:
        return None
    try:
        from workload.history import open_history

        plots: Plots = {}
        with open_history(history, read_only=True) as store:
            for metric, _model, scenario in sorted(wanted, key=str):
                for point in store.trend(metric, scenario=scenario):
                    if point.started_at is None:
                        continue
                    name = f"{point.benchmark or ''} {point.scenario or ''} ({point.sku or point.host or '?'})"
                    series = plots.setdefault((metric, point.unit), {})
                    series.setdefault(" ".join(name.split()), []).append((point.started_at, point.value))
        return plots or None
    except Exception:  # the report without trends beats no report
        return None
