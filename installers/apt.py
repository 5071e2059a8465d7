"""apt/dpkg command builders shared by the installers.

Every apt command here is non-interactive (``DEBIAN_FRONTEND=noninteractive``, keep existing
config files) and waits a bounded time for the dpkg lock (``-o DPkg::Lock::Timeout=N``). That
option covers only dpkg's locks, not apt's own: ``apt-get update`` fails at once while apt-daily
holds ``/var/lib/apt/lists/lock``, and downloads while someone holds ``/var/cache/apt/archives/lock``.
So before the first apt command of a step, :func:`wait_for_dpkg_lock` plans an explicit wait for
all four locks (:data:`APT_LOCKS`) that names the holder (``unattended-upgr``, pid, and the lock
file) while it waits and in its failure message.

Retries: only idempotent network operations are retried (:func:`with_retry` around
``apt-get update`` and downloads). ``apt-get install`` of exact versions is idempotent too, but it
is never retried blindly: a failure there is a real problem (conflict, broken package) and
repeating it hides the first error.

Package lists: a planner needs ``apt-cache policy`` to pick exact versions, and a fresh VM has
stale or empty lists. So a plan that installs anything starts with an :class:`AptRefresh` change
(``apt-get update``); :func:`apply_with_refresh` runs it, gathers facts again and plans again from
the fresh lists, so versions are decided from what the sources offer right now.
"""

from __future__ import annotations

import abc
import posixpath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from workload.commands import Command, cmd
from workload.errors import StepError
from workload.facts.fact import Fact, HostFacts
from workload.facts.packages import (
    APT_LISTS,
    APT_LISTS_STAMP,
    LISTS_FRESH,
    PackageFacts,
    newest,
    split_version,
)
from workload.facts.system import (
    ARCHITECTURE,
    OS_RELEASE,
    Architecture,
    OsRelease,
    unsupported_platform,
)
from workload.hosts.base import CommandResult
from workload.steps import Change, FactPhase, Step, StepContext, StepPlan

#: Seconds apt waits for the dpkg lock (and the explicit wait before it).
DEFAULT_LOCK_TIMEOUT_S = 600
#: Every lock apt and dpkg take: dpkg's two (what DPkg::Lock::Timeout waits for), the package
#: lists' (``apt-get update``, apt-daily) and the download cache's (``apt-get install`` downloads).
APT_LOCKS = (
    "/var/lib/dpkg/lock-frontend",
    "/var/lib/dpkg/lock",
    "/var/lib/apt/lists/lock",
    "/var/cache/apt/archives/lock",
)
APT_ENV = {
    "DEBIAN_FRONTEND": "noninteractive",
    # Ubuntu's needrestart would otherwise open a dialog after upgrades of libraries.
    "NEEDRESTART_MODE": "a",
    "LC_ALL": "C",
}
APT_TIMEOUT_S = 3600.0
#: ``Command.lock`` of apt-get, apt-mark and dpkg (they take dpkg's lock) and of the wait for it.
DPKG_LOCK = "dpkg"
#: ``Command.kind`` of ``apt-get`` (it works from the package lists: install, remove, update).
APT_GET = "apt-get"
KEYRING_DIR = "/etc/apt/keyrings"
SOURCES_DIR = "/etc/apt/sources.list.d"


def apt_get(*args: str, lock_timeout: int = DEFAULT_LOCK_TIMEOUT_S, idempotent: bool = True) -> Command:
    """``apt-get`` as root, non-interactive, waiting at most ``lock_timeout`` s for the dpkg lock."""
    return cmd(
        "apt-get",
        "-o",
        f"DPkg::Lock::Timeout={lock_timeout}",
        "-o",
        "Dpkg::Options::=--force-confdef",
        "-o",
        "Dpkg::Options::=--force-confold",
        "-y",
        "-q",
        *args,
        env=APT_ENV,
        sudo=True,
        timeout=APT_TIMEOUT_S,
        idempotent=idempotent,
        kind=APT_GET,
        lock=DPKG_LOCK,
    )


def pin(name: str, version: str | None) -> str:
    """``name=version`` (apt's exact-version syntax) or just ``name``."""
    return f"{name}={version}" if version else name


def update(*, lock_timeout: int = DEFAULT_LOCK_TIMEOUT_S, attempts: int = 4) -> Command:
    """``apt-get update``, retried with backoff (a mirror hiccup is the common failure).

    It changes only the package lists (scope :data:`APT_LISTS`): the facts read before it, but
    what apt offers, still hold.
    """
    refresh = apt_get("update", lock_timeout=lock_timeout).with_options(scope=APT_LISTS)
    return with_retry(refresh, attempts=attempts)


def mark_lists_refreshed() -> Command:
    """Touch the stamp that says when workload last refreshed the lists (see ``read_lists_fresh``)."""
    return cmd(
        "sh", "-c", 'mkdir -p "${1%/*}" && touch "$1"', "stamp", APT_LISTS_STAMP, sudo=True, timeout=60, scope=APT_LISTS
    )


def install(
    packages: Sequence[str],
    *,
    allow_downgrades: bool = False,
    lock_timeout: int = DEFAULT_LOCK_TIMEOUT_S,
) -> Command:
    """``apt-get install`` of ``packages`` (``name`` or ``name=version``), never retried automatically."""
    if not packages:
        raise ValueError("install() needs at least one package")
    extra = ["--allow-downgrades"] if allow_downgrades else []
    return apt_get("install", *extra, *packages, lock_timeout=lock_timeout)


def hold(packages: Iterable[str]) -> Command:
    return cmd("apt-mark", "hold", *packages, sudo=True, env=APT_ENV, timeout=120, lock=DPKG_LOCK)


def unhold(packages: Iterable[str]) -> Command:
    return cmd("apt-mark", "unhold", *packages, sudo=True, env=APT_ENV, timeout=120, lock=DPKG_LOCK)


def configure_pending() -> Command:
    """Finish an interrupted dpkg run (apt refuses to work until this is done)."""
    return cmd(
        "dpkg",
        "--force-confdef",
        "--force-confold",
        "--configure",
        "-a",
        env=APT_ENV,
        sudo=True,
        timeout=APT_TIMEOUT_S,
        lock=DPKG_LOCK,
    )


# The explicit lock wait. fcntl locks (what dpkg/apt take) are listed in /proc/locks with the
# holder's pid and the file's inode, which is how the holder is named without fuser or lsof.
LOCK_WAIT_SCRIPT = (
    't=$1; shift; s=$(date +%s); said=; while :; do who=; for f in "$@"; do [ -e "$f" ] || continue; '
    'i=$(stat -c %i "$f"); while read -r _ _ _ _ p d _; do case "$d" in *":$i") '
    '[ "$p" -gt 0 ] 2>/dev/null && who="$(cat /proc/$p/comm 2>/dev/null || echo ?) (pid $p) holds $f" && break;; '
    'esac; done </proc/locks; [ -n "$who" ] && break; done; [ -z "$who" ] && break; '
    'if [ $(($(date +%s) - s)) -ge "$t" ]; then echo "the apt/dpkg lock is still held after ${t}s: $who '
    '(unattended-upgrades or apt-daily on a fresh VM usually finish within minutes; wait or stop them)" >&2; '
    "exit 75; fi; "
    'if [ "$who" != "$said" ]; then echo "waiting for the apt/dpkg lock: $who"; said=$who; fi; sleep 2; done; '
    'if [ -n "$said" ]; then echo "the apt/dpkg locks are free after $(($(date +%s) - s))s"; fi; exit 0'
)


#: The scope and kind of the lock wait: it changes nothing itself, so no remembered fact is forgotten by
#: running it; when it did wait, another process worked on the host (see :func:`waited_for_lock`).
LOCK_WAIT = "apt-lock-wait"


def wait_for_dpkg_lock(timeout_s: int = DEFAULT_LOCK_TIMEOUT_S, locks: Sequence[str] = APT_LOCKS) -> Command:
    """Wait until nobody holds the apt/dpkg locks, printing who holds which; fail (exit 75) after ``timeout_s``."""
    return cmd(
        "sh",
        "-c",
        LOCK_WAIT_SCRIPT,
        "wait-for-dpkg-lock",
        str(timeout_s),
        *locks,
        sudo=True,
        timeout=float(timeout_s) + 60,
        scope=LOCK_WAIT,
        kind=LOCK_WAIT,
        lock=DPKG_LOCK,
    )


def waited_for_lock(result: CommandResult) -> bool:
    """Whether a :func:`wait_for_dpkg_lock` run found a lock held: then another process
    (unattended-upgrades, apt-daily) changed packages meanwhile, and facts read before are stale."""
    return "waiting for the apt/dpkg lock" in result.stdout


RETRY_SCRIPT = (
    'a=$1 d=$2; shift 2; n=1; until "$@"; do c=$?; '
    'if [ "$n" -ge "$a" ]; then echo "gave up after $n attempts (exit $c): $1" >&2; exit "$c"; fi; '
    'echo "attempt $n failed (exit $c); retrying in $((d * n))s" >&2; sleep $((d * n)); n=$((n + 1)); done'
)


def with_retry(command: Command, *, attempts: int = 4, delay_s: int = 5) -> Command:
    """The same command, re-run on failure up to ``attempts`` times with a growing pause.

    Only for idempotent commands; the argv is passed through as positional arguments, so nothing
    is re-quoted or pasted into the script.
    """
    if not command.idempotent:
        raise ValueError(f"refusing to retry a non-idempotent command: {command.display()}")
    return command.with_options(argv=("sh", "-c", RETRY_SCRIPT, "retry", str(attempts), str(delay_s), *command.argv))


# -- repositories ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AptRepository:
    """An apt source signed by its own key (never added to the global trusted keyring)."""

    name: str  # file stem: /etc/apt/sources.list.d/<name>.list, /etc/apt/keyrings/<name>.asc
    key_url: str
    #: What follows ``deb [options]``, e.g. ``https://download.docker.com/linux/ubuntu jammy stable``.
    source: str
    architecture: str = ""

    @property
    def keyring(self) -> str:
        # apt (>= 1.4) reads ASCII-armoured keys named *.asc directly: no gpg --dearmor needed.
        return posixpath.join(KEYRING_DIR, f"{self.name}.asc")

    @property
    def list_file(self) -> str:
        return posixpath.join(SOURCES_DIR, f"{self.name}.list")

    @property
    def line(self) -> str:
        options = f"signed-by={self.keyring}"
        if self.architecture:
            options = f"arch={self.architecture} {options}"
        return f"deb [{options}] {self.source}\n"


def add_repository(repo: AptRepository) -> tuple[Command, ...]:
    """Commands that install the key and the source list (download retried; no ``curl | sh``)."""
    return (
        cmd("install", "-d", "-m", "0755", KEYRING_DIR, sudo=True, timeout=60),
        with_retry(
            cmd(
                "curl",
                "-fsSL",
                "--connect-timeout",
                "30",
                "-o",
                repo.keyring,
                "--",
                repo.key_url,
                sudo=True,
                timeout=300,
            )
        ),
        cmd("chmod", "0644", repo.keyring, sudo=True, timeout=60),
        cmd("tee", repo.list_file, input=repo.line, sudo=True, timeout=60),
    )


# -- refresh, then plan again ------------------------------------------------------------------------
@dataclass(frozen=True)
class AptRefresh(Change):
    """A change that updates apt's package lists; the rest of its plan is a preview to recompute."""


def refresh_change(
    summary: str = "refresh the apt package lists",
    *,
    lock_timeout: int = DEFAULT_LOCK_TIMEOUT_S,
    before: Sequence[Command] = (),
) -> AptRefresh:
    commands = (wait_for_dpkg_lock(lock_timeout), *before, update(lock_timeout=lock_timeout), mark_lists_refreshed())
    return AptRefresh(summary, commands)


def apply_with_refresh(
    ctx: StepContext,
    plan: StepPlan,
    replan: Callable[[], StepPlan],
    *,
    label: str,
    max_rounds: int = 3,
) -> StepPlan:
    """Apply ``plan``; after each :class:`AptRefresh` change, plan again from fresh facts.

    Returns the last plan applied (the one whose changes were all made). Raises StepError when
    the plan keeps asking for refreshes (a source that never offers the wanted package).
    """
    for _ in range(max_rounds + 1):
        refreshed = False
        for change in plan.changes:
            ctx.log(f"-> {change.summary}")
            for command in change.commands:
                result = ctx.check(command)
                if command.scope == LOCK_WAIT and waited_for_lock(result):
                    ctx.host.forget_facts()
            if isinstance(change, AptRefresh):
                refreshed = True
                break  # what follows was a preview from the old lists
        if not refreshed:
            return plan
        plan = replan()
        outcome = f"{len(plan.changes)} change(s)" if plan.changed else f"no change: {plan.noop_reason}"
        ctx.log(f"planned again with the refreshed package lists: {outcome}")
    raise StepError(
        label,
        f"the package lists were refreshed {max_rounds} times and the plan still wants another refresh",
        host=ctx.host.name,
    )


# -- refusing to plan --------------------------------------------------------------------------------
class PlanRefused(StepError):
    """A pure planner's refusal (unsupported OS, a version no source offers...).

    Raised without a step label; the step's ``plan`` re-raises it with its label and host via
    :meth:`workload.steps.Step.fail`, so the message names the place.
    """

    def __init__(self, problem: str, *, hint: str | None = None) -> None:
        super().__init__("plan", problem, hint=hint)
        self.problem = problem


class AptInstallerStep(Step):
    """An installer whose plan depends on the host's apt package lists.

    Subclasses declare their facts (:meth:`facts`, extending this class's platform and list
    freshness) and give :meth:`plan_from_host` (facts, then a pure planner that may raise
    :class:`PlanRefused`). ``plan`` uses the lists as they are; ``apply`` runs the plan and, after
    an :class:`AptRefresh` change, plans again from the refreshed lists (exact versions are only
    known then), up to a bound. Lists workload refreshed less than ``APT_LISTS_FRESH_S`` ago, with
    no apt source and no list file changed since, count as refreshed, so consecutive installers
    refresh once.
    """

    @abc.abstractmethod
    def plan_from_host(self, ctx: StepContext, facts: HostFacts, *, refreshed: bool) -> StepPlan:
        """Read the declared ``facts`` and call the pure planner; ``refreshed``: the lists were just updated."""

    def _plan(self, ctx: StepContext, *, refreshed: bool) -> StepPlan:
        facts = self.read_facts(ctx, "plan")
        # Lists an earlier step (or run) refreshed minutes ago, with no source or list file changed
        # since, are as good as refreshed now: the plan installs from them, no second refresh.
        fresh = refreshed or facts[LISTS_FRESH]
        try:
            return self.plan_from_host(ctx, facts, refreshed=fresh)
        except PlanRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None

    def plan(self, ctx: StepContext) -> StepPlan:
        return self._plan(ctx, refreshed=False)

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Preflight and plan read the platform and the lists' freshness; subclasses add theirs."""
        return [LISTS_FRESH, OS_RELEASE, ARCHITECTURE] if phase == "plan" else []

    def apply(self, ctx: StepContext, plan: StepPlan) -> StepPlan:
        """Apply, re-planning after each refresh; returns the plan applied last (its reboot counts)."""
        return apply_with_refresh(ctx, plan, lambda: self._replan_after_refresh(ctx), label=self.label)

    def _replan_after_refresh(self, ctx: StepContext) -> StepPlan:
        # The refresh made the host forget its facts; drive_step prefetched only for the first plan.
        ctx.host.prefetch(self.fact_queries(ctx, "plan"))
        return self._plan(ctx, refreshed=True)

    def preflight(self, ctx: StepContext) -> None:
        """Refuse an OS or architecture these apt-based installers do not support."""
        try:
            facts = self.read_facts(ctx, "plan")
            require_supported(facts[OS_RELEASE], facts[ARCHITECTURE])
        except PlanRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None


def require_supported(os_release: OsRelease, arch: Architecture) -> None:
    """Refuse, before anything changes, an OS or architecture these apt-based installers do not support."""
    problem = unsupported_platform(os_release, arch)
    if problem is not None:
        raise PlanRefused(problem, hint="use Ubuntu 22.04/24.04 or Debian 12 on x86_64 or aarch64")


# -- "these packages, from this repository if no source has them" ----------------------------------
@dataclass(frozen=True)
class PackagesDecision:
    """What :func:`decide_packages` found: install these pins, or refresh first (and why)."""

    pins: tuple[str, ...] = ()
    refresh: AptRefresh | None = None
    note: str = ""


def decide_packages(
    names: Sequence[str],
    packages: PackageFacts,
    *,
    version: str | None,
    versioned: Sequence[str],
    refreshed: bool,
    repository: AptRepository,
    repository_configured: bool,
    lock_timeout: int = DEFAULT_LOCK_TIMEOUT_S,
) -> PackagesDecision:
    """Pins for the ``names`` not yet installed (``versioned`` ones at ``version``'s newest match).

    Repositories are added only where no configured source offers the packages (an offline test
    bed or a mirror that already has them needs no internet). Raises PlanRefused where even the
    added repository does not offer them.
    """

    def match(name: str) -> str | None:
        policy = packages.policies.get(name)
        offered = list(policy.available) if policy else []
        if version is None or name not in versioned:
            return newest(offered)
        return newest(v for v in offered if _version_matches(v, version))

    def satisfied(name: str) -> bool:
        installed = packages.version(name)
        if installed is None:
            return False
        return version is None or name not in versioned or _version_matches(installed, version)

    missing = [n for n in names if not satisfied(n)]
    if not missing:
        return PackagesDecision()
    unknown = [n for n in missing if match(n) is None]
    if not unknown:
        pins = tuple(pin(n, match(n) if (version and n in versioned) else None) for n in missing)
        if not refreshed:
            return PackagesDecision(pins=pins, refresh=refresh_change(lock_timeout=lock_timeout))
        return PackagesDecision(pins=pins)
    wanted = ", ".join(f"{n}={version}" if version and n in versioned else n for n in unknown)
    if not refreshed:
        return PackagesDecision(
            refresh=refresh_change(lock_timeout=lock_timeout), note=f"apt does not offer {wanted} yet"
        )
    if not repository_configured:
        return PackagesDecision(
            refresh=refresh_change(
                f"add the apt repository {repository.source} and refresh the package lists",
                lock_timeout=lock_timeout,
                before=add_repository(repository),
            ),
            note=f"no configured apt source offers {wanted}",
        )
    raise PlanRefused(
        f"no configured apt source offers {wanted}, not even {repository.source}",
        hint=f"check `apt-cache policy {unknown[0]}`" + (" and the Version parameter" if version else ""),
    )


def _version_matches(full: str, wanted: str) -> bool:
    """``5:27.3.1-1~ubuntu.22.04~jammy`` matches ``27.3.1``, ``27.3`` and the full string."""
    upstream = split_version(full)[1]
    return full == wanted or upstream == wanted or upstream.startswith(wanted + ".")
