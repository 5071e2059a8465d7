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


def _group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def slow_first(items: list[pytest.Item]) -> None:
    """Order the tests for the workers: the ``heavy(seconds)`` ones, longest first, then the other ``slow`` ones
    (the test bed's: containers, VMs, whole runs), then the rest; within each part, the tests of bigger
    ``xdist_group`` groups first (a group runs on one worker, one test after another), otherwise in collection
    order. A group takes the earliest part of any of its tests, and its tests stay together.

    pytest-xdist's ``loadgroup`` scheduler hands out work in this order when its own reordering is off
    (``--no-loadscope-reorder``, as ``.ci/run`` runs it): that reordering puts every group of two or more tests
    ahead of every single test, so a heavy single test (``test_upstream_nvidia_run.py``, 150 s) started after
    the quick groups and ran on alone at the end while the other workers idled. Started first, the shorter tests
    fill the workers around it.
    """

    def part(item: pytest.Item) -> int:
        heavy = item.get_closest_marker("heavy")
        if heavy is not None:  # the longest first: heavy(seconds) parts are 0 (longest) .. -1 (shortest)
            return -int(heavy.kwargs.get("seconds", heavy.args[0] if heavy.args else 30))
        return 1 if item.get_closest_marker("slow") is not None else 2

    parts = [part(item) for item in items]
    groups = [_group(item) for item in items]
    group_part: dict[str, int] = {}  # the earliest part of any of the group's tests
    group_size: dict[str, int] = {}
    group_first: dict[str, int] = {}  # where the group's first test was collected
    for index, (name, own) in enumerate(zip(groups, parts, strict=True)):
        if name is not None:
            group_part[name] = min(group_part.get(name, own), own)
            group_size[name] = group_size.get(name, 0) + 1
            group_first.setdefault(name, index)

    def key(index: int) -> tuple[int, int, int, int]:
        name = groups[index]
        if name is None:
            return (parts[index], -1, index, index)
        return (group_part[name], -group_size[name], group_first[name], index)

    items[:] = [items[index] for index in sorted(range(len(items)), key=key)]
