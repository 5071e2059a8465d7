"""Open a history database by URL: SQLite (embedded default) or PostgreSQL, migrated to the newest schema.

URLs: ``sqlite:///ABS/PATH.sqlite`` or a plain file path (SQLite), ``postgresql://user@host:5432/db``
(PostgreSQL through psycopg 3; ``postgresql+psycopg://`` works too; ``?host=/run/dir`` for a Unix
socket). The default is ``$WORKLOAD_HISTORY``, else ``$XDG_DATA_HOME/workload/history.sqlite``
(``~/.local/share/...`` without XDG_DATA_HOME): nothing to set up.

Concurrency: several processes may open and write one history at once. Migrations run under a
lock held in the migrating transaction (PostgreSQL: a transaction-scoped advisory lock; SQLite:
``BEGIN IMMEDIATE``, the database's write lock), so the second process waits and then finds the
schema current.

Every wait is bounded and Ctrl-C/SIGTERM end it within a second or two:

* SQLite: only writers (:func:`writing`) take the write lock at ``BEGIN IMMEDIATE``; readers begin
  deferred and, under WAL, read the last committed state without ever waiting for a writer. A
  writer that finds the lock taken waits in :func:`retry_busy`, a Python loop of short busy
  timeouts (:data:`SQLITE_BUSY_SLICE_S`: SQLite's own wait is C code no signal interrupts) up to
  :data:`SQLITE_BUSY_TIMEOUT_S`, then gives up with a HistoryError.
* PostgreSQL: every session sets ``lock_timeout`` and ``statement_timeout`` (the server cancels a
  wait or a statement past them, a HistoryError here); psycopg cancels the running statement on
  Ctrl-C. A held table lock therefore costs a recording at most :data:`PG_LOCK_TIMEOUT_MS`.

Reading commands (``history``, ``compare --baseline``) open with ``read_only=True``: a history that
does not exist is an error, never created (no folder, no file).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, OperationalError, SQLAlchemyError

from workload.commands import Secrets, mask_text, mask_url_passwords, url_passwords, userinfo_end
from workload.errors import HistoryError, UsageError
from workload.history.migrations import HEAD
from workload.stop_signals import raise_if_signalled_since, signal_count

#: environment variable naming the history URL (the ``--history`` option wins over it)
ENV_VAR = "WORKLOAD_HISTORY"
#: key of PostgreSQL's advisory lock serialising migrations ("wkld" in ASCII)
_PG_LOCK_KEY = 0x776B6C64
#: seconds a SQLite writer waits for another one before giving up
SQLITE_BUSY_TIMEOUT_S = 60.0
#: seconds of one SQLite busy wait (uninterruptible C code): the longest a signal waits to be handled
SQLITE_BUSY_SLICE_S = 1.0
#: PostgreSQL's lock_timeout and statement_timeout of every session (milliseconds)
PG_LOCK_TIMEOUT_MS = 30_000
PG_STATEMENT_TIMEOUT_MS = 300_000
#: the execution option that makes a transaction a writer's (see :func:`writing`)
_WRITE_OPTION = "workload_write"

T = TypeVar("T")


def default_url() -> str:
    """``$WORKLOAD_HISTORY``, else the SQLite file in the user's data directory (XDG base directories)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME", "").strip() or str(Path.home() / ".local" / "share")
    return f"sqlite:///{Path(base) / 'workload' / 'history.sqlite'}"


def display_url(url: str | URL) -> str:
    """The URL as it may be shown: its secrets (password, secret query parameters) masked."""
    if isinstance(url, URL):
        url = url.render_as_string(hide_password=False)
    return mask_url_passwords(url)


def url_secrets(text: str) -> Secrets:
    """The secrets of the history URL ``text``, to mask in what a database driver says about it.

    A driver's error may quote a part of the URL outside any URL (``failed to resolve host ...``).
    """
    return Secrets(url_passwords(text))


def masked(text: str, url_text: str) -> str:
    """``text`` (a driver's message) with the secrets of the history URL ``url_text`` masked."""
    return mask_text(text, url_secrets(url_text))


def _encoded_userinfo(text: str) -> str:
    """``text`` with the ``@`` of its user information percent-encoded, as SQLAlchemy needs it.

    SQLAlchemy ends a password at its first ``@`` (``bob:p@ss@host`` would connect to the host
    ``ss@host`` and name it in errors); the user information ends at the last one
    (:func:`workload.commands.userinfo_end`). SQLAlchemy decodes the password again.
    """
    start = text.index("://") + 3
    at = userinfo_end(text, start, len(text))
    if at is None or "@" not in text[start:at]:
        return text
    return text[:start] + text[start:at].replace("@", "%40") + text[at:]


def parse_url(text: str) -> URL:
    """A SQLAlchemy URL for ``text`` (a URL or a file path); UsageError for anything but SQLite/PostgreSQL."""
    text = text.strip()
    if not text:
        raise UsageError("--history: empty URL", hint="give sqlite:///PATH, a file path or postgresql://USER@HOST/DB")
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).expanduser().absolute()))
    try:
        url = make_url(_encoded_userinfo(text))
    except (ArgumentError, ValueError) as exc:
        raise UsageError(f"--history {display_url(text)}: not a database URL ({exc})") from None
    backend = url.get_backend_name()
    if backend == "sqlite":
        if url.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise UsageError(f"--history {display_url(url)}: use sqlite:///PATH (the built-in driver)")
        if not url.database or url.database == ":memory:":
            raise UsageError(
                f"--history {display_url(url)}: an in-memory database keeps nothing", hint="give sqlite:///PATH"
            )
        return url
    if backend == "postgresql":
        if url.drivername not in ("postgresql", "postgresql+psycopg"):
            raise UsageError(f"--history {display_url(url)}: use postgresql:// (psycopg 3 is the driver)")
        return url.set(drivername="postgresql+psycopg")
    raise UsageError(
        f"--history {display_url(url)}: unsupported database {backend!r}",
        hint="the history lives in SQLite (sqlite:///PATH) or PostgreSQL (postgresql://USER@HOST/DB)",
    )


def writing(engine: Engine) -> Engine:
    """``engine`` for a transaction that writes: on SQLite it begins ``IMMEDIATE`` (see the module)."""
    return engine.execution_options(**{_WRITE_OPTION: True})


def _is_busy(exc: OperationalError) -> bool:
    orig = getattr(exc, "orig", None)
    text = str(orig).lower()
    return isinstance(orig, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def retry_busy(operation: Callable[[], T], *, timeout_s: float = SQLITE_BUSY_TIMEOUT_S) -> T:
    """``operation()``, again while SQLite says the database is locked, until ``timeout_s`` have passed.

    Each try waits at most :data:`SQLITE_BUSY_SLICE_S` inside SQLite; the pauses between tries are
    Python sleeps, where Ctrl-C and SIGTERM (KeyboardInterrupt in this process) end the wait.
    """
    since = signal_count()
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return operation()
        except OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        raise_if_signalled_since(since)  # a signal whose KeyboardInterrupt a finalizer swallowed
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def _sqlite_path(url: URL, *, read_only: bool) -> Path:
    """The database file of ``url``; its folder made for a writer; HistoryError for a reader when absent."""
    path = Path(str(url.database))
    if read_only:
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise HistoryError(
                f"history {path}: no such history (nothing has been recorded there)",
                hint="`workload run` records each run; `workload results DIR --record` records a results folder",
            ) from None
        except OSError as exc:
            raise HistoryError(f"history {path}: cannot be read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise HistoryError(f"history {path}: not a regular file")
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryError(f"history {path}: cannot create its folder ({exc.strerror or exc})") from None
    return path


def _sqlite_engine(url: URL, *, read_only: bool) -> Engine:
    _sqlite_path(url, read_only=read_only)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_SLICE_S})

    # pysqlite starts transactions lazily and never for DDL; SQLAlchemy's documented recipe hands
    # transaction control to SQLAlchemy. A writer's IMMEDIATE takes the write lock at BEGIN so that
    # two writers queue (retry_busy) instead of one failing when it upgrades a read lock; a reader
    # begins deferred and, under WAL, never waits for a writer.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            with contextlib.suppress(sqlite3.OperationalError):  # WAL: readers read while one writes
                cursor.execute("PRAGMA journal_mode=WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        write = bool(connection.get_execution_options().get(_WRITE_OPTION))
        connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _postgresql_engine(url: URL) -> Engine:
    timeouts = f"-c lock_timeout={PG_LOCK_TIMEOUT_MS} -c statement_timeout={PG_STATEMENT_TIMEOUT_MS}"
    return create_engine(url, connect_args={"connect_timeout": 10, "options": timeouts})


def open_engine(text: str, *, read_only: bool = False) -> Engine:
    """An engine on the history at ``text``, its schema migrated to ``HEAD``; HistoryError if unreachable.

    ``read_only``: the history must exist already (nothing is created for a command that only reads).
    """
    url = parse_url(text)
    engine = _sqlite_engine(url, read_only=read_only) if url.get_backend_name() == "sqlite" else _postgresql_engine(url)
    try:
        retry_busy(lambda: migrate(engine))
    except SQLAlchemyError as exc:
        engine.dispose()
        raise HistoryError(f"history {display_url(url)}: {masked(_first_line(exc), text)}") from None
    return engine


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def current_revision(connection: Connection) -> str | None:
    """The database's Alembic revision, or None where it has none yet."""
    row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
    return None if row is None else str(row[0])


def migrate(engine: Engine) -> None:
    """Bring the schema to ``HEAD`` (Alembic, in one transaction, under the migration lock)."""
    try:
        with engine.connect() as probe:  # the common case: already current, no Alembic import
            if current_revision(probe) == HEAD:
                return
    except SQLAlchemyError:
        pass  # no alembic_version table yet
    with writing(engine).begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        # (SQLite: BEGIN IMMEDIATE already holds the write lock)
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", "workload.history:migrations")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
