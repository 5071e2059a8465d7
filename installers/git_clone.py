"""``GitRepoClone``: a pinned, verified clone of a git repository (VirtualClient-compatible names).

Parameters: ``RepoUri``, ``PackageName``, ``Commit`` (a full or abbreviated SHA; strongly
recommended), ``PackageDir``, ``Depth`` (default 1 = shallow; 0 = full history), ``Retries`` and
``RetryWaitSeconds`` (transient network errors only), ``IgnorePaths`` (comma-separated globs of
paths whose local changes are expected, e.g. files a later step overlays).

Where: ``<PackageDir>/<packagename lower-cased>``. ``PackageDir`` defaults to
``/opt/workload/packages`` when connected as root, else ``~/.local/share/workload/packages``
(VirtualClient uses ``<VC dir>/packages/<name>``); ``~/`` is expanded on the host.

How: into a staging folder ``<PackageDir>/.<name>.partial`` (ours; removed before each try), so
the final folder only ever appears complete. With a full 40-hex ``Commit`` and ``Depth`` > 0 the
pinned commit alone is fetched (``git fetch --depth 1 origin <sha>``); a server that refuses
unadvertised objects gets a full fetch instead. An abbreviated SHA needs a full clone. Then
``checkout --detach`` the commit and ``mv`` the staging folder into place.

An existing clone: the right remote, the pinned commit (or any commit when none is pinned) and
clean -> no-op. A different remote, another commit, local changes, or a folder that is not a clone
-> a StepError with the reason and the fix; nothing is reused silently or deleted.

Exports ``<NAME>_PATH`` and ``<NAME>_COMMIT`` where NAME is PackageName upper-cased with
non-alphanumerics as ``_`` (``mlperf`` -> ``MLPERF_PATH``); the state key is ``GitRepoClone:<name>``.
"""

from __future__ import annotations

import base64
import fnmatch
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from workload.commands import Command, RetryPolicy, cmd
from workload.errors import EXIT_STEP_FAILED, CommandFailed, WorkloadError
from workload.facts.fact import Fact
from workload.hosts.base import Host
from workload.steps import Change, FactPhase, Step, StepContext, StepParameters, StepPlan, package_export, split_list

_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
_FULL_SHA = re.compile(r"^[0-9a-fA-F]{40}$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: stderr of git that means "try again later": DNS, TCP, TLS, HTTP 5xx, a connection cut mid-way.
TRANSIENT = re.compile(
    r"Could not resolve host|Connection (timed out|refused|reset)|Operation timed out|Failed to connect"
    r"|early EOF|The remote end hung up unexpectedly|RPC failed|gnutls_handshake|SSL_ERROR|TLS connection"
    r"|returned error: 5\d\d|HTTP 5\d\d|Temporary failure in name resolution|Network is unreachable"
    r"|unexpected disconnect|transfer closed with",
    re.IGNORECASE,
)
#: ``Command.kind`` of the shallow fetch of one commit by SHA (a server may refuse it: then fetch all).
FETCH_COMMIT = "git-fetch-commit"
#: ``Command.kind`` of the other commands that talk to the remote (clone, full fetch).
NETWORK = "git-network"
#: stderr of a server that will not serve a commit by SHA (then fetch everything instead).
SHA_REFUSED = re.compile(r"not our ref|unadvertised object|couldn't find remote ref|no such remote ref", re.IGNORECASE)


class CloneRefused(WorkloadError):
    """The clone folder is in a state GitRepoClone must not touch; the step names itself."""

    exit_code = EXIT_STEP_FAILED


class GitRepoCloneParameters(StepParameters):
    RepoUri: str
    PackageName: str
    Commit: str | None = None
    PackageDir: str | None = None
    Depth: int = 1
    Retries: int = 3
    RetryWaitSeconds: float = 5.0
    IgnorePaths: str | None = None


@dataclass(frozen=True)
class CloneFacts:
    """What is at the target folder now."""

    target: str
    exists: bool
    empty: bool = False
    is_clone: bool = False
    origin: str | None = None
    head: str | None = None
    #: ``Commit`` resolved in the existing clone (None when absent or not pinned).
    resolved: str | None = None
    #: ``git status --porcelain`` lines (local changes).
    changes: tuple[str, ...] = ()


def export_name(package: str) -> str:
    """``mlperf`` -> ``MLPERF`` (prefix of ``_PATH`` / ``_COMMIT`` exports, see :func:`package_export`)."""
    return package_export(package, "")[:-1]


_URL_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@]*)@")


def without_credentials(uri: str) -> str:
    """``uri`` without the userinfo of a URL (``https://user:TOKEN@host/r`` -> ``https://host/r``).

    What is kept on the host (the clone's ``origin``, the state file) must not hold a token that was
    only needed to fetch. scp-like ``git@host:repo`` names carry no secret and stay as they are.
    """
    return _URL_USERINFO.sub(r"\g<scheme>", uri.strip(), count=1)


def same_remote(a: str, b: str) -> bool:
    """Whether two remote URIs name the same repository (``.git``, trailing ``/``, file://, credentials ignored)."""

    def norm(uri: str) -> str:
        uri = without_credentials(uri).rstrip("/")
        uri = uri.removeprefix("file://")
        uri = uri.removesuffix(".git").rstrip("/")
        return uri

    return norm(a) == norm(b)


def staging_path(target: str) -> str:
    parent, name = posixpath.split(target)
    return posixpath.join(parent, f".{name}.partial")


def git(directory: str, *args: str, **options: object) -> Command:
    # safe.directory: a clone made by another user (root vs the VM user) must still be readable.
    return cmd("git", "-c", f"safe.directory={directory}", "-C", directory, *args, **options)


#: Runs ``"$@"`` (a git command) with an HTTP header read from stdin in git's environment
#: (``GIT_CONFIG_COUNT``: config from the environment, git >= 2.31). The credentials of an HTTP(S)
#: ``RepoUri`` travel this way: never in an argument (any local user can read every process's
#: command line in ``/proc/*/cmdline``; a process's environment only its owner and root), never in
#: a file, never in the clone's ``origin``.
AUTH_SCRIPT = (
    "IFS= read -r header || exit 2; "
    'export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader GIT_CONFIG_VALUE_0="$header"; '
    'exec "$@"'
)


def credentials_header(uri: str) -> str | None:
    """The ``Authorization`` header of an HTTP(S) URI's userinfo (``https://user:TOKEN@h/r``, ``https://TOKEN@h/r``).

    None for a URI without userinfo, and for other schemes (an ``ssh://user@host`` user is a login name).
    """
    parts = urlsplit(uri.strip())
    if parts.scheme.lower() not in ("http", "https") or "@" not in parts.netloc:
        return None
    userinfo = parts.netloc.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
    return f"Authorization: Basic {token}"


def fetch_uri(uri: str) -> str:
    """The URI git is given: without the userinfo when it goes as a header (:func:`credentials_header`)."""
    return without_credentials(uri) if credentials_header(uri) is not None else uri.strip()


def authenticated(command: Command, header: str | None) -> Command:
    """``command`` run through :data:`AUTH_SCRIPT` with ``header`` on its stdin (unchanged without one)."""
    if header is None:
        return command
    return command.with_options(argv=("sh", "-c", AUTH_SCRIPT, "git-auth", *command.argv), input=header + "\n")


def network_retry(params: GitRepoCloneParameters) -> RetryPolicy:
    """How a clone or fetch is retried: ``Retries`` runs, exponential pauses, transient failures only."""
    return RetryPolicy(attempts=params.Retries, wait_s=params.RetryWaitSeconds, max_wait_s=120, when=TRANSIENT)


def clone_commands(params: GitRepoCloneParameters, target: str) -> tuple[Command, ...]:
    """The commands of a fresh clone into the staging folder, then into place (the primary path).

    Positional arguments follow ``--``; credentials in an HTTP(S) ``RepoUri`` go as a header on
    stdin (:func:`authenticated`), so no argument and no file holds them.
    """
    stage = staging_path(target)
    parent = posixpath.dirname(target)
    head = (cmd("mkdir", "-p", "--", parent, timeout=60), cmd("rm", "-rf", "--", stage, timeout=600))
    commit = params.Commit
    header = credentials_header(params.RepoUri)
    uri = fetch_uri(params.RepoUri)
    retry = network_retry(params)
    if commit and _FULL_SHA.match(commit) and params.Depth > 0:
        body: tuple[Command, ...] = (
            cmd("git", "init", "-q", "--", stage, timeout=60),
            git(stage, "remote", "add", "--", "origin", uri, timeout=60),
            authenticated(
                git(stage, "fetch", "--depth", str(params.Depth), "origin", commit, timeout=3600).with_options(
                    retry=retry, kind=FETCH_COMMIT
                ),
                header,
            ),
            git(stage, "checkout", "-q", "--detach", commit, timeout=600),
        )
    elif commit:
        body = (
            authenticated(
                cmd("git", "clone", "--no-checkout", "--", uri, stage, timeout=3600, retry=retry, kind=NETWORK), header
            ),
            git(stage, "checkout", "-q", "--detach", commit, timeout=600),
        )
    else:
        depth = ("--depth", str(params.Depth)) if params.Depth > 0 else ()
        body = (
            authenticated(
                cmd("git", "clone", *depth, "--", uri, stage, timeout=3600, retry=retry, kind=NETWORK), header
            ),
        )
    clean = without_credentials(params.RepoUri)
    if clean != uri:  # git keeps the URL as given: drop a token (of a non-HTTP URI) from the clone
        body += (git(stage, "remote", "set-url", "--", "origin", clean, timeout=60),)
    return (*head, *body, cmd("mv", "-T", "--", stage, target, timeout=60))


def plan_clone(params: GitRepoCloneParameters, facts: CloneFacts) -> StepPlan:
    """What GitRepoClone would do (pure). Raises :class:`CloneRefused` for a clone it must not touch."""
    target = facts.target
    pin = params.Commit
    notes: tuple[str, ...] = () if pin else (f"no Commit given: {params.RepoUri} is not pinned (set Commit to a SHA)",)
    if not facts.exists or facts.empty:
        commands = clone_commands(params, target)
        if facts.exists:
            commands = (cmd("rmdir", target, timeout=60), *commands)  # rmdir fails unless still empty
        what = f"clone {params.RepoUri}" + (f" at {pin}" if pin else "") + f" into {target}"
        if pin and _FULL_SHA.match(pin) and params.Depth > 0:
            notes += ("fetches the pinned commit only; falls back to a full fetch if the server refuses",)
        return StepPlan(changes=(Change(what, commands),), notes=notes)
    fix_move = f"move {target} away (or set PackageDir) and run again"
    if not facts.is_clone:
        raise CloneRefused(f"{target} exists and is not a git clone", hint=fix_move)
    if facts.origin is None or not same_remote(facts.origin, params.RepoUri):
        raise CloneRefused(
            f"{target} is a clone of {facts.origin or '(no origin remote)'}, not of {params.RepoUri}", hint=fix_move
        )
    ignored = split_list(params.IgnorePaths)
    changes = [line for line in facts.changes if not any(fnmatch.fnmatch(line[3:], pat) for pat in ignored)]
    if changes:
        shown = ", ".join(line[3:] for line in changes[:5]) + (" ..." if len(changes) > 5 else "")
        raise CloneRefused(
            f"{target} has local changes ({len(changes)}: {shown})",
            hint=f"inspect them with 'git -C {target} status'; commit, stash or discard them, or {fix_move}",
        )
    if pin:
        if facts.resolved is None:
            raise CloneRefused(
                f"{target} does not contain commit {pin} (it is at {facts.head})",
                hint=f"'git -C {target} fetch origin' then check out {pin}, or {fix_move}",
            )
        if facts.head != facts.resolved:
            raise CloneRefused(
                f"{target} is at commit {facts.head}, not at the pinned {pin} ({facts.resolved})",
                hint=f"'git -C {target} checkout --detach {pin}' if nothing there is needed, or {fix_move}",
            )
        return StepPlan.noop(f"{target} is a clean clone at {facts.head}")
    return StepPlan.noop(f"{target} is a clean clone at {facts.head} (not pinned)", notes=notes)


def default_package_dir(host: Host) -> str:
    if host.is_root:
        return "/opt/workload/packages"
    return posixpath.join(host.identity.home, ".local/share/workload/packages")


def target_dir(host: Host, params: GitRepoCloneParameters) -> str:
    base = params.PackageDir or default_package_dir(host)
    if base == "~" or base.startswith("~/"):
        base = host.identity.home + base[1:]
    return posixpath.join(posixpath.normpath(base), params.PackageName.lower())


def clone_queries(target: str, commit: str | None) -> dict[str, Command]:
    """The read-only queries :func:`read_clone_facts` runs on ``target`` (``resolved`` only with a pinned commit)."""
    queries = {
        "listing": cmd("ls", "-A", target, timeout=60, readonly=True),
        "top": git(target, "rev-parse", "--show-toplevel", timeout=60, readonly=True),
        "real": cmd("realpath", target, timeout=60, readonly=True),
        "origin": git(target, "remote", "get-url", "origin", timeout=60, readonly=True),
        "head": git(target, "rev-parse", "HEAD", timeout=60, readonly=True),
        "status": git(target, "status", "--porcelain", timeout=600, readonly=True),
    }
    if commit:
        queries["resolved"] = git(
            target, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", timeout=60, readonly=True
        )
    return queries


def read_clone_facts(host: Host, target: str, commit: str | None) -> CloneFacts:
    """Read-only queries of the target folder (:func:`clone_queries`; each runs only where the one before says the
    folder is a clone)."""
    if not host.exists(target):
        return CloneFacts(target=target, exists=False)
    query = clone_queries(target, commit)
    listing = host.run(query["listing"])
    if listing.ok and not listing.stdout.strip():
        return CloneFacts(target=target, exists=True, empty=True)
    top = host.run(query["top"])
    real = host.run(query["real"]).stdout.strip()
    if not top.ok or top.stdout.strip() != real:
        return CloneFacts(target=target, exists=True)  # not a clone, or a folder inside another clone
    origin = host.run(query["origin"])
    head = host.run(query["head"])
    resolved = None
    if "resolved" in query:
        found = host.run(query["resolved"])
        resolved = found.stdout.strip() if found.ok else None
    status = host.run(query["status"])
    return CloneFacts(
        target=target,
        exists=True,
        is_clone=True,
        origin=origin.stdout.strip() if origin.ok else None,
        head=head.stdout.strip() if head.ok else None,
        resolved=resolved,
        changes=tuple(line for line in status.stdout.splitlines() if line.strip()),
    )


def clone_facts(target: str, commit: str | None) -> Fact[CloneFacts]:
    """The clone at ``target`` (:func:`read_clone_facts`), declared once (:mod:`workload.facts.fact`)."""
    return Fact(
        f"clone({target},{commit or ''})",
        lambda host: read_clone_facts(host, target, commit),
        tuple(clone_queries(target, commit).values()),
    )


class GitRepoClone(Step):
    """Clone a repository at a pinned commit and verify it."""

    type_name: ClassVar[str] = "GitRepoClone"
    Parameters: ClassVar[type[StepParameters]] = GitRepoCloneParameters

    @property
    def p(self) -> GitRepoCloneParameters:
        assert isinstance(self.params, GitRepoCloneParameters)
        return self.params

    @classmethod
    def check_parameters(cls, params: StepParameters) -> None:
        assert isinstance(params, GitRepoCloneParameters)
        if not params.RepoUri.strip() or any(c.isspace() for c in params.RepoUri.strip()):
            raise ValueError(f"RepoUri: {params.RepoUri!r} is not a repository URI")
        if not _NAME.match(params.PackageName):
            raise ValueError(f"PackageName: {params.PackageName!r} must be letters, digits, '.', '_' or '-'")
        if params.Commit is not None and not _SHA.match(params.Commit):
            raise ValueError(
                f"Commit: {params.Commit!r} is not a commit SHA (7 to 40 hex digits); branches and tags move"
            )
        if params.Depth < 0:
            raise ValueError(f"Depth: must be 0 (full history) or more, got {params.Depth}")
        if params.Retries < 1:
            raise ValueError(f"Retries: must be at least 1, got {params.Retries}")
        if params.PackageDir is not None and not (
            params.PackageDir.startswith(("/", "~/")) or params.PackageDir == "~"
        ):
            raise ValueError(f"PackageDir: {params.PackageDir!r} must be an absolute path (or start with ~/)")

    def facts(self, ctx: StepContext, phase: FactPhase) -> Sequence[Fact[Any]]:
        """Plan and verify read the clone at the target folder."""
        return (clone_facts(target_dir(ctx.host, self.p), self.p.Commit),)

    def _facts(self, ctx: StepContext, phase: FactPhase) -> CloneFacts:
        return self.read_facts(ctx, phase)[clone_facts(target_dir(ctx.host, self.p), self.p.Commit)]

    def exports(self) -> tuple[str, ...]:
        """The clone's path and commit, under the package's names (``MLPERF_PATH``, ``MLPERF_COMMIT``)."""
        return (package_export(self.p.PackageName), package_export(self.p.PackageName, "COMMIT"))

    def plan(self, ctx: StepContext) -> StepPlan:
        facts = self._facts(ctx, "plan")
        try:
            plan = plan_clone(self.p, facts)
        except CloneRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None
        ctx.exports[package_export(self.p.PackageName)] = facts.target  # in memory, for later plans
        return plan

    def apply(self, ctx: StepContext, plan: StepPlan) -> None:
        """Run the plan; clones and fetches retry as their commands' policy says (``ctx.check``)."""
        for change in plan.changes:
            ctx.log(f"-> {change.summary}")
            for command in change.commands:
                if command.kind == FETCH_COMMIT:
                    self._fetch_commit(ctx, command)
                else:
                    ctx.check(command)

    def _fetch_commit(self, ctx: StepContext, command: Command) -> None:
        """The fetch of the pinned commit; when the server refuses one commit by SHA, a full fetch."""
        try:
            ctx.check(command)
        except CommandFailed as exc:
            if not SHA_REFUSED.search(exc.stderr or ""):
                raise
            ctx.log("the server does not serve a single commit by SHA; fetching the whole repository")
            stage = staging_path(target_dir(ctx.host, self.p))
            full = git(stage, "fetch", "origin", timeout=3600, retry=network_retry(self.p), kind=NETWORK)
            ctx.check(authenticated(full, credentials_header(self.p.RepoUri)))

    def verify(self, ctx: StepContext) -> None:
        facts = self._facts(ctx, "verify")
        if not facts.is_clone:
            raise self.fail(f"{facts.target} is not a git clone after cloning", ctx)
        try:
            plan_clone(self.p, facts)
        except CloneRefused as exc:
            raise self.fail(exc.problem, ctx, hint=exc.hint) from None
        ctx.exports[package_export(self.p.PackageName)] = facts.target
        ctx.exports[package_export(self.p.PackageName, "COMMIT")] = facts.head or ""
        ctx.state.set(
            f"GitRepoClone:{self.p.PackageName.lower()}",
            {"path": facts.target, "commit": facts.head, "repo": without_credentials(self.p.RepoUri)},
        )
