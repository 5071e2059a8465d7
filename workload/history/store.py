"""The run history: record runs, list and filter them, follow a metric over time, find a baseline.

Everything goes through SQLAlchemy Core on the tables of :mod:`workload.history.schema`, so the
same code serves SQLite and PostgreSQL. Recording a run is one transaction: a run is in the
history with all its hosts, results and metrics, or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, Select, and_, delete, desc, exists, func, insert, or_, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from workload.errors import HistoryError, NoBaseline, UsageError
from workload.history.db import display_url, masked, open_engine, retry_busy, writing
from workload.history.schema import hosts, metrics, results, runs
from workload.metrics.collection import Collection
from workload.metrics.model import BenchmarkResult, Categorization, Metric, Relativity


@dataclass(frozen=True)
class HostFacts:
    """What is known about one host of a run. Any field may be None (the run did not say)."""

    name: str
    sku: str | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    driver: str | None = None
    cuda: str | None = None
    harness_round: str | None = None
    cpu: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """One run to record. ``parameters`` must already be masked (see ``record.build_record``)."""

    run_id: str
    command: str
    results: Sequence[BenchmarkResult]
    profile: str | None = None
    tag: str | None = None
    source: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    exit_code: int | None = None
    ok: bool | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    hosts: Sequence[HostFacts] = ()
    tool_version: str | None = None
    identity: str | None = None  # what was measured (history/identity.py: result_identity)
    kind: str | None = None  # profile, result-changing parameters, SKUs, host count (run_kind)
    interrupted: str | None = None  # why the run was stopped (SIGINT, SIGTERM, ...); None if it ran to its end


@dataclass(frozen=True)
class RunRow:
    """A recorded run as listed by :meth:`History.runs`."""

    run_id: str
    profile: str | None
    tag: str | None
    command: str
    source: str | None
    started_at: datetime | None
    ended_at: datetime | None
    recorded_at: datetime
    exit_code: int | None
    ok: bool | None
    parameters: dict[str, Any]
    tool_version: str | None
    hosts: list[HostFacts]
    metric_count: int
    identity: str | None = None
    kind: str | None = None
    interrupted: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (times in ISO 8601, UTC)."""
        return {
            "run_id": self.run_id,
            "profile": self.profile,
            "tag": self.tag,
            "command": self.command,
            "source": self.source,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "recorded_at": _iso(self.recorded_at),
            "exit_code": self.exit_code,
            "ok": self.ok,
            "parameters": self.parameters,
            "tool_version": self.tool_version,
            "identity": self.identity,
            "interrupted": self.interrupted,
            "hosts": [{k: v for k, v in h.__dict__.items() if k != "facts"} | {"facts": h.facts} for h in self.hosts],
            "metric_count": self.metric_count,
        }


@dataclass(frozen=True)
class TrendPoint:
    """One value of a metric in one run on one host (:meth:`History.trend`)."""

    sku: str | None
    host: str | None
    benchmark: str | None
    scenario: str | None
    mode: str | None
    run_id: str
    tag: str | None
    started_at: datetime | None
    value: float
    unit: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "started_at": _iso(self.started_at)}


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _utc(when: datetime | None) -> datetime | None:
    """Aware UTC (SQLite gives back naive datetimes; they were stored as UTC)."""
    if when is None:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")
_UNIT_S = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: the oldest age ``--since`` takes: no history is older than a century
MAX_SINCE_S = 100 * 366 * 86400
_SINCE_HINT = "e.g. 2026-11-01, 2026-11-01T12:00, 12h, 7d, 2w"


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``--since``: an ISO date/time (UTC unless it says otherwise) or an age (``30m``, ``12h``, ``7d``, ``2w``).

    The result is aware UTC. An age past :data:`MAX_SINCE_S` or a time that UTC cannot hold (the
    year 1 or 9999 shifted by its offset) is a UsageError, never an ``OverflowError``.
    """
    from datetime import timedelta

    from workload.numbers import NumberProblem, parse_int

    value = text.strip()
    match = _RELATIVE.match(value.lower())
    if match:
        unit = _UNIT_S[match[2]]
        try:
            amount = parse_int(match[1], maximum=MAX_SINCE_S // unit)
        except NumberProblem as exc:
            raise UsageError(f"--since {value[:40]!r}: {exc} (at most 100 years)", hint=_SINCE_HINT) from None
        return (now or datetime.now(UTC)) - timedelta(seconds=amount * unit)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(f"--since {value[:40]!r}: not a date or an age", hint=_SINCE_HINT) from None
    try:
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except OverflowError:
        raise UsageError(f"--since {value!r}: outside the years UTC can hold", hint=_SINCE_HINT) from None


class History:
    """A run history (see :func:`workload.history.open_history`). Close it, or use it as a context manager."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = display_url(url)
        self._url_text = url
        self.engine: Engine = open_engine(url, read_only=read_only)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _fail(self, exc: SQLAlchemyError) -> HistoryError:
        orig = getattr(exc, "orig", None)
        text = str(orig if orig is not None else exc).strip().splitlines()
        return HistoryError(f"history {self.url}: {masked(text[0], self._url_text) if text else type(exc).__name__}")

    # -- writing --------------------------------------------------------------------------------------

    def record(self, run: RunRecord) -> str:
        """Store ``run`` in one transaction; return the run id it is stored under.

        A result set already recorded (the same ``identity``: ``results --record`` of a recorded run
        folder, or of a copy of it) is recorded again under its run id, and keeps what belongs to the
        run itself: its exit code, verdict, interruption, command, start time and tag (a new
        ``--tag`` replaces the tag; none keeps it). Otherwise a run id already recorded from the
        same source is replaced; one from elsewhere gets a ``-2``, ``-3``... suffix.
        """

        def write(attempt: int) -> str:
            nonlocal run
            with writing(self.engine).begin() as conn:
                kept = self._recorded_before(conn, run) if attempt == 0 else None
                if kept is not None:
                    run = kept  # the run's own fields, kept for the attempts that follow
                run_id = self._free_run_id(conn, run, attempt)
                self._insert(conn, run, run_id)
                return run_id

        for attempt in range(20):
            try:
                return retry_busy(lambda: write(attempt))  # noqa: B023 (called at once, in this iteration)
            except IntegrityError:
                continue  # another process took that run id between our check and our insert
            except SQLAlchemyError as exc:
                raise self._fail(exc) from None
        raise HistoryError(f"history {self.url}: could not find a free run id for {run.run_id}")

    def _recorded_before(self, conn: Any, run: RunRecord) -> RunRecord | None:
        """``run`` with the run's own fields of the record of the same result set, which is deleted
        (to be inserted again in the same transaction); None when there is none."""
        if run.identity is None:
            return None
        row = conn.execute(select(runs).where(runs.c.identity == run.identity).order_by(runs.c.id).limit(1)).first()
        if row is None:
            return None
        self._delete(conn, row.id)
        return replace(
            run,
            run_id=row.run_id,
            source=row.source,
            command=row.command,
            tag=run.tag if run.tag is not None else row.tag,
            started_at=_utc(row.started_at) or run.started_at,
            exit_code=row.exit_code,
            ok=row.ok,
            interrupted=row.interrupted,
        )

    @staticmethod
    def _delete(conn: Any, pk: int) -> None:
        conn.execute(delete(metrics).where(metrics.c.run_pk == pk))
        conn.execute(delete(results).where(results.c.run_pk == pk))
        conn.execute(delete(hosts).where(hosts.c.run_pk == pk))
        conn.execute(delete(runs).where(runs.c.id == pk))

    def _free_run_id(self, conn: Any, run: RunRecord, attempt: int) -> str:
        candidate, n = run.run_id, 1
        while True:
            row = conn.execute(select(runs.c.id, runs.c.source).where(runs.c.run_id == candidate)).first()
            if row is None:
                return candidate
            if run.source is not None and row.source == run.source and attempt == 0:
                self._delete(conn, row.id)
                return candidate
            n += 1
            candidate = f"{run.run_id}-{n}"

    def _insert(self, conn: Any, run: RunRecord, run_id: str) -> None:
        now = datetime.now(UTC)
        run_pk = conn.execute(
            insert(runs).returning(runs.c.id),
            {
                "run_id": run_id,
                "profile": run.profile,
                "tag": run.tag,
                "command": run.command,
                "source": run.source,
                "started_at": _utc(run.started_at),
                "ended_at": _utc(run.ended_at),
                "recorded_at": now,
                "exit_code": run.exit_code,
                "ok": run.ok,
                "parameters": run.parameters,
                "tool_version": run.tool_version,
                "identity": run.identity,
                "kind": run.kind,
                "interrupted": run.interrupted,
            },
        ).scalar_one()
        if run.hosts:
            conn.execute(insert(hosts), [{"run_pk": run_pk, **h.__dict__} for h in run.hosts])
        for result in run.results:
            result_pk = conn.execute(
                insert(results).returning(results.c.id),
                {
                    "run_pk": run_pk,
                    "host": result.host,
                    "benchmark": result.benchmark_full or result.model,
                    "model": result.model,
                    "scenario": result.scenario,
                    "mode": result.test_mode,
                    "system": result.system,
                    "validity": result.validity,
                    "accuracy_pass": result.accuracy_pass,
                    "headline": result.headline.name if result.headline is not None else None,
                    "invalid_reasons": list(result.invalid_reasons),
                    "fixes": list(result.fixes),
                    "source": result.source,
                },
            ).scalar_one()
            rows = [
                {
                    "run_pk": run_pk,
                    "result_pk": result_pk,
                    "name": m.name,
                    "value": m.value,
                    "unit": m.unit,
                    "relativity": m.relativity.value,
                    "categorization": m.categorization.value,
                    "verbosity": m.verbosity,
                    "meta": dict(m.metadata),
                }
                for m in result.metrics
            ]
            if rows:
                conn.execute(insert(metrics), rows)

    # -- reading --------------------------------------------------------------------------------------

    def runs(
        self,
        *,
        profile: str | None = None,
        sku: str | None = None,
        metric: str | None = None,
        since: datetime | None = None,
        tag: str | None = None,
        ok: bool | None = None,
        exit_code: int | None = None,
        run_id: str | None = None,
        exclude: str | None = None,
        exclude_identity: str | None = None,
        kind: str | None = None,
        before: datetime | None = None,
        limit: int | None = 50,
    ) -> list[RunRow]:
        """Recorded runs, newest first, filtered (every filter given must hold; ``sku`` on any host;
        ``exclude`` is a run id left out, ``exclude_identity`` a result set; ``before``: started no
        later: a copy of the same logs has the same start)."""
        query: Select[Any] = select(runs)
        if run_id is not None:
            query = query.where(runs.c.run_id == run_id)
        if exclude is not None:
            query = query.where(runs.c.run_id != exclude)
        if exclude_identity is not None:
            query = query.where(or_(runs.c.identity.is_(None), runs.c.identity != exclude_identity))
        if kind is not None:
            query = query.where(runs.c.kind == kind)
        if before is not None:
            query = query.where(runs.c.started_at <= _utc(before))
        if exit_code is not None:
            query = query.where(runs.c.exit_code == exit_code)
        if profile is not None:
            query = query.where(func.lower(runs.c.profile) == profile.lower())
        if tag is not None:
            query = query.where(runs.c.tag == tag)
        if ok is not None:
            query = query.where(runs.c.ok == ok)
        if since is not None:
            query = query.where(runs.c.started_at >= _utc(since))
        if sku is not None:
            query = query.where(exists().where(and_(hosts.c.run_pk == runs.c.id, hosts.c.sku == sku)))
        if metric is not None:
            query = query.where(exists().where(and_(metrics.c.run_pk == runs.c.id, metrics.c.name == metric)))
        query = query.order_by(desc(runs.c.started_at), desc(runs.c.id))
        if limit is not None:
            query = query.limit(limit)
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(query).all()
                pks = [r.id for r in rows]
                host_rows: dict[int, list[HostFacts]] = {pk: [] for pk in pks}
                counts: dict[int, int] = {}
                if pks:
                    for h in conn.execute(select(hosts).where(hosts.c.run_pk.in_(pks)).order_by(hosts.c.id)):
                        host_rows[h.run_pk].append(_host_of(h))
                    count_query = (
                        select(metrics.c.run_pk, func.count())
                        .where(metrics.c.run_pk.in_(pks))
                        .group_by(metrics.c.run_pk)
                    )
                    counts = {int(row[0]): int(row[1]) for row in conn.execute(count_query).all()}
        except SQLAlchemyError as exc:
            raise self._fail(exc) from None
        return [
            RunRow(
                run_id=r.run_id,
                profile=r.profile,
                tag=r.tag,
                command=r.command,
                source=r.source,
                started_at=_utc(r.started_at),
                ended_at=_utc(r.ended_at),
                recorded_at=_utc(r.recorded_at) or datetime.now(UTC),
                exit_code=r.exit_code,
                ok=r.ok,
                parameters=dict(r.parameters or {}),
                tool_version=r.tool_version,
                hosts=host_rows[r.id],
                metric_count=counts.get(r.id, 0),
                identity=r.identity,
                kind=r.kind,
                interrupted=r.interrupted,
            )
            for r in rows
        ]

    def trend(
        self,
        metric: str,
        *,
        sku: str | None = None,
        profile: str | None = None,
        since: datetime | None = None,
        benchmark: str | None = None,
        scenario: str | None = None,
    ) -> list[TrendPoint]:
        """Every recorded value of ``metric``, oldest first, with the SKU of the host that measured it.

        The report's trend plots read this: group the points by (sku, benchmark, scenario, mode).
        A host without a SKU fact has ``sku`` None.
        """
        join = metrics.join(results, results.c.id == metrics.c.result_pk).join(runs, runs.c.id == metrics.c.run_pk)
        join = join.outerjoin(hosts, and_(hosts.c.run_pk == runs.c.id, hosts.c.name == results.c.host))
        query: Select[Any] = select(
            hosts.c.sku,
            results.c.host,
            results.c.benchmark,
            results.c.scenario,
            results.c.mode,
            runs.c.run_id,
            runs.c.tag,
            runs.c.started_at,
            metrics.c.value,
            metrics.c.unit,
        ).select_from(join)
        query = query.where(metrics.c.name == metric)
        if sku is not None:
            query = query.where(hosts.c.sku == sku)
        if profile is not None:
            query = query.where(func.lower(runs.c.profile) == profile.lower())
        if since is not None:
            query = query.where(runs.c.started_at >= _utc(since))
        if benchmark is not None:
            query = query.where(or_(results.c.benchmark == benchmark, results.c.model == benchmark))
        if scenario is not None:
            query = query.where(func.lower(results.c.scenario) == scenario.lower())
        query = query.order_by(runs.c.started_at, runs.c.id, metrics.c.id)
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(query).all()
        except SQLAlchemyError as exc:
            raise self._fail(exc) from None
        return [
            TrendPoint(
                sku=r.sku,
                host=r.host,
                benchmark=r.benchmark,
                scenario=r.scenario,
                mode=r.mode,
                run_id=r.run_id,
                tag=r.tag,
                started_at=_utc(r.started_at),
                value=float(r.value),
                unit=r.unit or "",
            )
            for r in rows
        ]

    def baseline(
        self,
        ref: str,
        *,
        profile: str | None = None,
        exclude: str | None = None,
        candidate: RunRecord | None = None,
    ) -> RunRow:
        """The run ``ref`` names: ``last-good``, a run id, or a tag (its newest run). UsageError if none.

        ``last-good`` is the newest run with exit code 0 (of ``profile`` if given); with the
        ``candidate`` it is compared with, the newest run that exited 0 that started no later than
        the candidate, of its kind (profile, result-changing parameters, SKUs, host count). ``exclude``
        (a run id) and the candidate's result set (its identity) are never picked.
        """
        return self.baselines(ref, profile=profile, exclude=exclude, candidate=candidate, count=1)[0]

    def baselines(
        self,
        ref: str,
        *,
        profile: str | None = None,
        exclude: str | None = None,
        candidate: RunRecord | None = None,
        count: int = 1,
    ) -> list[RunRow]:
        """:meth:`baseline`, and for ``last-good`` up to ``count`` runs that qualify, newest first
        (their values pooled are a baseline with a spread: ``compare --baseline-runs``)."""
        candidates: list[RunRow]
        same = candidate.identity if candidate is not None else None
        if ref == "last-good":
            if candidate is not None:
                candidates = self.runs(
                    exit_code=0,
                    kind=candidate.kind,
                    profile=candidate.profile if candidate.kind is None else None,  # recorded before kinds
                    before=candidate.started_at,
                    exclude=exclude,
                    exclude_identity=same,
                    limit=count,
                )
                what = (
                    "no earlier run that exited 0 with the same profile"
                    f" ({candidate.profile or 'none'}), parameters, SKU(s) and host count"
                )
            else:
                candidates = self.runs(profile=profile, exit_code=0, exclude=exclude, limit=count)
                what = "no run with exit code 0" + (f" for profile {profile}" if profile else "")
        else:
            found = self.runs(run_id=ref, exclude=exclude, exclude_identity=same, limit=1)
            candidates = found or self.runs(tag=ref, exclude=exclude, exclude_identity=same, limit=1)
            what = f"no run with id or tag {ref!r}" + (" other than the run compared" if same else "")
        if not candidates:
            raise NoBaseline(f"--baseline {ref}: {what} in the history {self.url}", hint="see `workload history`")
        return candidates

    def collection(self, run_id: str) -> Collection:
        """The results and metrics of a recorded run, as :func:`workload.metrics.load_run` would give them."""
        try:
            with self.engine.connect() as conn:
                pk = conn.execute(select(runs.c.id).where(runs.c.run_id == run_id)).scalar_one_or_none()
                if pk is None:
                    raise UsageError(f"history {self.url}: no run {run_id!r}")
                result_rows = conn.execute(select(results).where(results.c.run_pk == pk).order_by(results.c.id)).all()
                metric_rows = conn.execute(select(metrics).where(metrics.c.run_pk == pk).order_by(metrics.c.id)).all()
        except SQLAlchemyError as exc:
            raise self._fail(exc) from None
        by_result: dict[int, list[Metric]] = {}
        for m in metric_rows:
            meta = dict(m.meta or {})
            by_result.setdefault(m.result_pk, []).append(
                Metric(
                    name=m.name,
                    value=m.value,
                    unit=m.unit or "",
                    relativity=Relativity(m.relativity or Relativity.UNDEFINED.value),
                    categorization=Categorization(m.categorization or Categorization.PERFORMANCE.value),
                    verbosity=m.verbosity if m.verbosity is not None else 5,
                    scenario_name=str(meta.get("model") or meta.get("benchmark_full") or ""),
                    host=host if isinstance(host := meta.get("host"), str) else None,
                    metadata=meta,
                )
            )
        collection = Collection()
        for r in result_rows:
            members = by_result.get(r.id, [])
            headline = next((m for m in members if m.name == r.headline), None) if r.headline else None
            collection.results.append(
                BenchmarkResult(
                    model=r.model,
                    benchmark_full=r.benchmark,
                    scenario=r.scenario,
                    test_mode=r.mode,
                    system=r.system,
                    validity=r.validity,
                    accuracy_pass=r.accuracy_pass,
                    headline=headline,
                    invalid_reasons=list(r.invalid_reasons or []),
                    fixes=list(r.fixes or []),
                    metrics=members,
                    source=r.source or "",
                    host=r.host,
                )
            )
        return collection


def _host_of(row: Any) -> HostFacts:
    return HostFacts(
        name=row.name,
        sku=row.sku,
        gpu_model=row.gpu_model,
        gpu_count=row.gpu_count,
        driver=row.driver,
        cuda=row.cuda,
        harness_round=row.harness_round,
        cpu=row.cpu,
        facts=dict(row.facts or {}),
    )
