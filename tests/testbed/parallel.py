"""Parallel test runs (pytest-xdist, ``-n N --dist loadgroup``): which tests must share a worker.

Each xdist worker is its own process, so everything the test bed makes per process is already
private to it: VM, Slurm and harness container names carry the pid and a random suffix, ports come
from the kernel (``free_port``), PostgreSQL listens on a socket in its own temporary folder,
``tmp_path`` is per worker. What is shared across processes (the state directory, the Docker
Engine, cached images and repositories) is built under a file lock and leased (``state.py``,
``dockerd.py``), the same way concurrent sessions of several engineers share it.

What a worker does NOT share is a fixture wider than a function: a ``module`` (or ``class``,
``package``) scoped fixture is made once per worker that runs a test needing it. Its tests
often build on each other (a VM a first test reboots, a run the others read), so
:func:`group_by_shared_fixtures` keeps them on ONE worker: every test that uses such a fixture gets
``@pytest.mark.xdist_group`` named after the module (class, package) the fixture is made for. Tests
of a module that use only function-scoped fixtures spread over the workers. ``session`` fixtures are
made once per worker, which is why the test bed's are cached on disk and safe to make concurrently.

So a new test is parallel-safe by default when it names what it creates after the process (or
``uuid``), takes ports from the kernel and writes under ``tmp_path``; a test that needs a resource
one worker at a time marks itself ``@pytest.mark.xdist_group("<resource>")`` with the same name as
the other users of that resource (tests/testbed/README.md, "Parallel runs").
"""

from __future__ import annotations

import pytest

#: Fixture scopes wider than a test, narrowest first (the widest one a test uses names its group).
_SHARED_SCOPES = ("class", "module", "package")


def _group_of(item: pytest.Item, scope: str) -> str:
    module = item.nodeid.split("::", 1)[0]
    if scope == "class" and item.cls is not None:
        return f"{module}::{item.cls.__name__}"
    if scope == "package":
        return module.rsplit("/", 1)[0] if "/" in module else module
    return module


def shared_scope(item: pytest.Item) -> str | None:
    """The widest fixture scope between ``function`` and ``session`` that ``item`` uses, or None."""
    # _fixtureinfo is pytest's own record of an item's resolved fixtures (there is no public accessor).
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    scopes = {fixturedef.scope for defs in info.name2fixturedefs.values() for fixturedef in defs}
    widest = [scope for scope in _SHARED_SCOPES if scope in scopes]
    return widest[-1] if widest else None


def group_by_shared_fixtures(items: list[pytest.Item]) -> None:
    """Mark every test that uses a class/module/package-scoped fixture with that scope's xdist group.

    A test that already carries an ``xdist_group`` marker keeps its own (its author named the
    resource it shares).
    """
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        scope = shared_scope(item)
        if scope is not None:
            item.add_marker(pytest.mark.xdist_group(_group_of(item, scope)))


def slow_first(items: list[pytest.Item]) -> None:
    """Move the tests marked ``slow`` (the test bed's: containers, VMs, whole runs; up to 100 s each) ahead of the
    rest, keeping the order within each part.

    pytest-xdist's ``loadgroup`` scheduler hands out work in collection order, after the groups of several tests
    (it sorts scopes by size, stably). A long test collected late (``test_upstream_nvidia_run.py`` sorts near the
    end) starts when the quick tests are gone and the other workers idle while it runs; started first, the quick
    tests fill the workers around it.
    """
    items[:] = sorted(items, key=lambda item: item.get_closest_marker("slow") is None)
