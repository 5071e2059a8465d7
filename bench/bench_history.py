"""Benchmark recording into the run history: SQLite file vs a local PostgreSQL server, side by side.

Records a run folder of N hosts (each a copy of the real H200 harness results in
tests/fixtures: 3 results, 92 metrics per host) and prints, per backend, the time to open the
history (schema already current), to record the run (one transaction), and to read it back
(``runs``, ``trend``, ``collection``), as the median of ``--repeat`` runs, and the ratio
PostgreSQL / SQLite. PostgreSQL is the test suite's throw-away server (tests/history_db.py);
without its binaries only SQLite is measured.

    .venv/bin/python bench/bench_history.py [--hosts 16] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.history_db import PostgresServer, pg_bindir  # noqa: E402
from tests.test_history import make_run  # noqa: E402
from workload.history import open_history  # noqa: E402
from workload.history.record import build_record  # noqa: E402
from workload.metrics.outputs import load_run  # noqa: E402


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def measure(url: str, folder: Path, repeat: int) -> dict[str, float]:
    collection = load_run(folder)
    open_history(url).close()  # create and migrate once: the runs below find the schema current
    samples: dict[str, list[float]] = {"open": [], "record": [], "runs": [], "trend": [], "collection": []}
    for i in range(repeat):
        entry = build_record(folder, collection, command="run", exit_code=0, ok=True, tag=f"r{i}")
        t0 = time.perf_counter()
        history = open_history(url)
        samples["open"].append(time.perf_counter() - t0)
        with history:
            samples["record"].append(timed(lambda e=entry, h=history: h.record(e)))  # type: ignore[misc]
            samples["runs"].append(timed(lambda h=history: h.runs()))  # type: ignore[misc]
            samples["trend"].append(timed(lambda h=history: h.trend("samples_per_second")))  # type: ignore[misc]
            run_id = history.runs(limit=1)[0].run_id
            samples["collection"].append(timed(lambda h=history, r=run_id: h.collection(r)))  # type: ignore[misc]
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = make_run(root, "20261101-120000-BENCH", hosts={f"n{i}": f"SKU{i % 2}" for i in range(args.hosts)})
        metrics = len(load_run(folder).metrics)
        print(f"run of {args.hosts} host(s), {metrics} metrics; median of {args.repeat}")
        results = {"sqlite": measure(f"sqlite:///{root / 'h.sqlite'}", folder, args.repeat)}
        bindir = pg_bindir()
        server = None
        if bindir is not None:
            server = PostgresServer(bindir)
            server.start()
        try:
            if server is not None:
                results["postgresql"] = measure(server.url(server.create_database()), folder, args.repeat)
        finally:
            if server is not None:
                server.stop()
    print(f"{'step':<12}" + "".join(f"{name:>14}" for name in results) + ("   pg/sqlite" if len(results) > 1 else ""))
    for step in results["sqlite"]:
        row = "".join(f"{results[name][step] * 1000:>11.1f} ms" for name in results)
        ratio = f"   {results['postgresql'][step] / results['sqlite'][step]:8.2f}" if len(results) > 1 else ""
        print(f"{step:<12}{row}{ratio}")


if __name__ == "__main__":
    main()
