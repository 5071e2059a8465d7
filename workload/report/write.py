"""Write ``report.html``: for one run folder (``<run>/report.html``) or several (one combined file)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from workload.report.data import load_run
from workload.report.html import Trends, render
from workload.safefile import atomic_write_text

REPORT_FILE = "report.html"


def write_report(
    run_dirs: Sequence[Path],
    output: Path | None = None,
    *,
    trends: Trends | None = None,
) -> Path:
    """Render the runs in ``run_dirs`` into ``output`` (default: the single run's ``report.html``).

    ``trends`` maps each (metric, unit) to its series (one per benchmark, scenario and SKU) and
    their ``(time, value)`` points, as a run history provides them: one plot each; without it the
    report says there is no history to show.
    """
    runs = [load_run(path) for path in run_dirs]
    if output is None:
        if len(run_dirs) != 1:
            raise ValueError("several runs need an output file")
        output = run_dirs[0] / REPORT_FILE
    output.parent.mkdir(parents=True, exist_ok=True)
    # O_EXCL temporary renamed over the target: a link planted in a shared folder is never followed
    atomic_write_text(output, render(runs, trends=trends))
    return output
