"""Package facts: installed Debian packages, holds, and the versions apt can install.

``dpkg-query`` says what is installed and what is held (dpkg's selection, which ``apt-mark hold``
sets and ``apt-mark showhold`` reads back; one query instead of two, and no load of apt's cache), and
``apt-cache policy`` what the configured sources offer (every version, not only the candidate:
exact pinning needs the full list). :func:`compare_versions` orders Debian version strings
exactly as dpkg does, so "is this a downgrade?" never needs the host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from workload.commands import Command, cmd
from workload.errors import FactError
from workload.facts.fact import Fact
from workload.hosts.base import Host

DPKG_QUERY_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


#: The part of a host that apt's package lists are (see ``Command.scope``): ``apt-cache`` reads
#: only them and ``apt-get update`` changes only them, so a refresh leaves every other fact standing.
APT_LISTS = "apt-lists"


# -- Debian version ordering (deb-version(7)) --------------------------------------------------------
def _order(ch: str) -> int:
    if ch == "~":
        return -1
    if ch.isdigit():
        return 0
    if ch.isalpha():
        return ord(ch)
    return ord(ch) + 256


def _compare_part(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            ac = _order(a[i]) if i < len(a) and not a[i].isdigit() else 0
            bc = _order(b[j]) if j < len(b) and not b[j].isdigit() else 0
            if ac != bc:
                return ac - bc
            i += 1
            j += 1
        while i < len(a) and a[i] == "0":
            i += 1
        while j < len(b) and b[j] == "0":
            j += 1
        while i < len(a) and a[i].isdigit() and j < len(b) and b[j].isdigit():
            if not first_diff:
                first_diff = ord(a[i]) - ord(b[j])
            i += 1
            j += 1
        if i < len(a) and a[i].isdigit():
            return 1
        if j < len(b) and b[j].isdigit():
            return -1
        if first_diff:
            return first_diff
    return 0


def split_version(version: str) -> tuple[int, str, str]:
    """``[epoch:]upstream[-revision]`` -> (epoch, upstream, revision)."""
    epoch = 0
    rest = version.strip()
    if ":" in rest:
        head, rest = rest.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return epoch, upstream, revision


def upstream_version(version: str) -> str:
    """The upstream part of a Debian version: ``550.127.05-0ubuntu1`` -> ``550.127.05``."""
    return split_version(version)[1]


def compare_versions(a: str, b: str) -> int:
    """<0, 0, >0 as dpkg --compare-versions orders a and b."""
    ea, ua, ra = split_version(a)
    eb, ub, rb = split_version(b)
    if ea != eb:
        return ea - eb
    return _compare_part(ua, ub) or _compare_part(ra, rb)


def newest(versions: Iterable[str]) -> str | None:
    best: str | None = None
    for version in versions:
        if best is None or compare_versions(version, best) > 0:
            best = version
    return best


# -- installed packages ------------------------------------------------------------------------------
@dataclass(frozen=True)
class InstalledPackage:
    name: str
    version: str
    status: str  # db:Status-Abbrev, e.g. "ii ", "hi ", "rc ", "iU "

    @property
    def installed(self) -> bool:
        """Unpacked and configured (``ii``/``hi``); half-installed or removed packages are not."""
        return len(self.status) >= 2 and self.status[1] == "i"

    @property
    def broken(self) -> bool:
        """Left half-done by an interrupted dpkg run (unpacked, half-configured, triggers pending...)."""
        return (len(self.status) >= 2 and self.status[1] in "UFHWt") or self.status[2:3] == "R"


def parse_dpkg_query(text: str) -> dict[str, InstalledPackage]:
    """Parse ``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' '*'``.

    Multi-arch packages may appear once per architecture; an installed entry wins. Entries dpkg
    only knows by name (``un``: no selection, not installed) carry nothing and are left out.
    """
    packages: dict[str, InstalledPackage] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            raise FactError(f"unexpected dpkg-query line: {line!r}")
        name, version, status = parts[0].split(":")[0], parts[1], parts[2].ljust(3)
        if status.startswith("un"):
            continue
        pkg = InstalledPackage(name, version, status)
        if name not in packages or (pkg.installed and not packages[name].installed):
            packages[name] = pkg
    return packages


def held_packages(installed: Mapping[str, InstalledPackage]) -> frozenset[str]:
    """The packages on hold: dpkg's selection ``hold`` (``hi``, and ``hn`` for one held before it
    was installed), exactly what ``apt-mark showhold`` lists."""
    return frozenset(name for name, pkg in installed.items() if pkg.status.startswith("h"))


#: The pattern makes dpkg-query list packages that are not installed too, so a hold put on a
#: package before it was installed (``hn``) is seen; without it they are left out.
INSTALLED_QUERY = cmd("dpkg-query", "-W", "-f", DPKG_QUERY_FORMAT, "*", timeout=120, readonly=True)


def read_installed(host: Host) -> dict[str, InstalledPackage]:
    result = host.run(INSTALLED_QUERY)
    if result.returncode == 127:
        raise FactError("dpkg-query is missing: this is not a Debian/Ubuntu system", host=host.name)
    if not result.ok:
        raise FactError(f"dpkg-query failed (exit {result.returncode}): {result.stderr.strip()}", host=host.name)
    return parse_dpkg_query(result.stdout)


# -- what apt can install ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AptPolicy:
    """``apt-cache policy NAME``: installed and candidate versions and every version sources offer."""

    name: str
    installed: str | None
    candidate: str | None
    #: Versions in the version table (from sources and /var/lib/dpkg/status), newest first.
    versions: tuple[str, ...] = ()
    #: Versions some configured source offers (the installed one only if a source also has it).
    available: tuple[str, ...] = field(default=())


_VERSION_LINE = re.compile(r"^ (?:\*\*\*| {3}) (\S+) (-?\d+)\s*$")
_SOURCE_LINE = re.compile(r"^ {8}(-?\d+) (\S+)")


def _none(value: str) -> str | None:
    value = value.strip()
    return None if value in ("", "(none)") else value


def parse_apt_policy(text: str) -> dict[str, AptPolicy]:
    """Parse ``apt-cache policy NAME...`` (LC_ALL=C). Unknown names are simply absent."""
    policies: dict[str, AptPolicy] = {}
    name: str | None = None
    installed: str | None = None
    candidate: str | None = None
    versions: list[str] = []
    available: list[str] = []

    def flush() -> None:
        if name is not None:
            ordered = sorted(dict.fromkeys(versions), key=_Key, reverse=True)
            offered = sorted(dict.fromkeys(available), key=_Key, reverse=True)
            policies[name] = AptPolicy(name, installed, candidate, tuple(ordered), tuple(offered))

    current: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" ") and line.rstrip().endswith(":"):
            flush()
            name = line.rstrip()[:-1].split(":")[0]
            installed, candidate, versions, available, current = None, None, [], [], None
            continue
        if name is None:
            continue  # "N: Unable to locate package" or "Package files:" header lines
        stripped = line.strip()
        if stripped.startswith("Installed:"):
            installed = _none(stripped.partition(":")[2])
        elif stripped.startswith("Candidate:"):
            candidate = _none(stripped.partition(":")[2])
        elif (match := _VERSION_LINE.match(line)) is not None:
            current = match.group(1)
            versions.append(current)
        elif (match := _SOURCE_LINE.match(line)) is not None and current and match.group(2) != "/var/lib/dpkg/status":
            available.append(current)
    flush()
    return policies


class _Key:
    """Sort key wrapper so ``sorted`` orders Debian versions as dpkg does."""

    def __init__(self, version: str) -> None:
        self.version = version

    def __lt__(self, other: _Key) -> bool:
        return compare_versions(self.version, other.version) < 0


def apt_policy_query(names: Iterable[str]) -> Command | None:
    """``apt-cache policy`` for ``names`` (duplicates dropped); None when there are none."""
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return None
    return cmd("apt-cache", "policy", *wanted, env={"LC_ALL": "C"}, timeout=120, readonly=True, scope=APT_LISTS)


def read_apt_policy(host: Host, names: Iterable[str]) -> dict[str, AptPolicy]:
    """What the configured apt sources offer for each name (names apt does not know are absent)."""
    query = apt_policy_query(names)
    if query is None:
        return {}
    result = host.run(query)
    if not result.ok:
        raise FactError(f"apt-cache policy failed (exit {result.returncode}): {result.stderr.strip()}", host=host.name)
    return parse_apt_policy(result.stdout)


@dataclass(frozen=True)
class PackageFacts:
    """Installed packages, holds and apt policies for the names a planner cares about."""

    installed: Mapping[str, InstalledPackage]
    holds: frozenset[str]
    policies: Mapping[str, AptPolicy]

    def version(self, name: str) -> str | None:
        pkg = self.installed.get(name)
        return pkg.version if pkg is not None and pkg.installed else None

    def has_candidate(self, name: str) -> bool:
        policy = self.policies.get(name)
        return policy is not None and bool(policy.available or policy.candidate)

    @property
    def broken(self) -> list[str]:
        return sorted(name for name, pkg in self.installed.items() if pkg.broken)


# -- how fresh apt's package lists are ---------------------------------------------------------------
#: Touched by workload right after each ``apt-get update`` it runs (see ``workload.installers.apt.update``).
APT_LISTS_STAMP = "/var/lib/workload/apt-lists-refreshed"
#: Lists that workload refreshed less than this long ago, with no apt source and no list file
#: changed since, are fresh: the next installer plans from them instead of refreshing again (each
#: ``apt-get update`` against real mirrors takes seconds to minutes).
APT_LISTS_FRESH_S = 600
#: Prints ``now stamp newest`` (epoch seconds): the stamp's time and the last change of an apt
#: source or of the lists folder (files removed or written there by anyone but our own refresh).
LISTS_FRESHNESS_SCRIPT = (
    'now=$(date +%s); s=$(stat -c %Y "$1" 2>/dev/null) || { echo "$now none"; exit 0; }; '
    "n=$(stat -c %Y /etc/apt/sources.list /etc/apt/sources.list.d /etc/apt/sources.list.d/* /var/lib/apt/lists "
    '2>/dev/null | sort -n | tail -n 1); echo "$now $s ${n:-0}"'
)


def parse_lists_freshness(text: str, max_age_s: float = APT_LISTS_FRESH_S) -> bool:
    """Whether ``now stamp newest`` (epoch seconds, the script's output) means fresh lists: refreshed
    by workload at most ``max_age_s`` ago, with no apt source and the lists folder unchanged since.
    Anything else (no stamp, a clock that went back, unreadable output) is not fresh."""
    parts = text.split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return False
    now, stamp, newest_source = (int(p) for p in parts)
    return stamp >= newest_source and 0 <= now - stamp < max_age_s


LISTS_FRESHNESS_QUERY = cmd(
    "sh", "-c", LISTS_FRESHNESS_SCRIPT, "lists-age", APT_LISTS_STAMP, timeout=60, readonly=True, scope=APT_LISTS
)


def read_lists_fresh(host: Host) -> bool:
    """Whether apt's package lists count as fresh (:func:`parse_lists_freshness`); read-only."""
    result = host.run(LISTS_FRESHNESS_QUERY)
    return result.ok and parse_lists_freshness(result.stdout)


def package_fact_queries(names: Iterable[str]) -> list[Command]:
    """The commands :func:`read_package_facts` runs (for :meth:`~workload.hosts.base.Host.prefetch`)."""
    policy = apt_policy_query(names)
    return [INSTALLED_QUERY, *([policy] if policy else [])]


def read_package_facts(host: Host, names: Iterable[str]) -> PackageFacts:
    installed = read_installed(host)
    return PackageFacts(installed=installed, holds=held_packages(installed), policies=read_apt_policy(host, names))


# -- the declarations (see workload/facts/fact.py) --------------------------------------------------
LISTS_FRESH: Fact[bool] = Fact("apt-lists-fresh", read_lists_fresh, (LISTS_FRESHNESS_QUERY,))


def package_facts(names: Iterable[str]) -> Fact[PackageFacts]:
    """What dpkg has installed, and what apt offers for ``names`` (:func:`read_package_facts`)."""
    wanted = tuple(dict.fromkeys(names))
    return Fact(
        f"packages({','.join(wanted)})",
        lambda host: read_package_facts(host, wanted),
        tuple(package_fact_queries(wanted)),
    )
