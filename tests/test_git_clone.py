"""GitRepoClone against local bare repositories made by the tests (file:// URIs), through plan/apply/verify."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.steptypes import step_context
from workload.errors import CommandFailed, StepError
from workload.hosts.local import LocalHost
from workload.installers.git_clone import (
    TRANSIENT,
    CloneFacts,
    GitRepoClone,
    GitRepoCloneParameters,
    clone_commands,
    plan_clone,
    same_remote,
    without_credentials,
)
from workload.steps import HostState, StepContext, StepPlan

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}


def git(*args: str, cwd: Path | None = None) -> str:
    import os

    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **ENV}
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[str, list[str]]:
    """A bare repository with three commits; returns (file:// URI, SHAs oldest first)."""
    bare = tmp_path / "origin.git"
    work = tmp_path / "work"
    git("init", "-q", "--bare", str(bare))
    git("init", "-q", str(work))
    shas = []
    for n in range(3):
        (work / "file.txt").write_text(f"version {n}\n")
        git("add", "file.txt", cwd=work)
        git("commit", "-q", "-m", f"commit {n}", cwd=work)
        shas.append(git("rev-parse", "HEAD", cwd=work))
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=work)
    return f"file://{bare}", shas


def context(tmp_path: Path) -> StepContext:
    return step_context(LocalHost(), tmp_path)


def step(uri: str, tmp_path: Path, **extra: object) -> GitRepoClone:
    params = GitRepoCloneParameters(
        RepoUri=uri, PackageName="MLPerf", PackageDir=str(tmp_path / "packages"), RetryWaitSeconds=0.05, **extra
    )  # type: ignore[arg-type]
    GitRepoClone.check_parameters(params)
    return GitRepoClone(params, location="Dependencies[2]", kind="dependency")


def run(s: GitRepoClone, ctx: StepContext) -> StepPlan:
    plan = s.plan(ctx)
    if plan.changed:
        s.apply(ctx, plan)
    s.verify(ctx)
    return plan


def test_pinned_shallow_clone_then_noop_and_exports(repo: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, shas = repo
    ctx = context(tmp_path)
    target = tmp_path / "packages" / "mlperf"
    plan = run(step(uri, tmp_path, Commit=shas[1]), ctx)
    assert plan.changed
    assert git("-C", str(target), "rev-parse", "HEAD") == shas[1]
    assert (target / "file.txt").read_text() == "version 1\n"
    assert (target / ".git" / "shallow").exists()  # only the pinned commit was fetched
    assert not (tmp_path / "packages" / ".mlperf.partial").exists()
    assert ctx.exports == {"MLPERF_PATH": str(target), "MLPERF_COMMIT": shas[1]}
    assert HostState(ctx.host, str(tmp_path / "state.json")).get("GitRepoClone:mlperf")["commit"] == shas[1]

    again = run(step(uri, tmp_path, Commit=shas[1]), ctx)
    assert not again.changed and again.noop_reason == f"{target} is a clean clone at {shas[1]}"


def test_abbreviated_sha_full_clone(repo: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, shas = repo
    ctx = context(tmp_path)
    run(step(uri, tmp_path, Commit=shas[0][:10]), ctx)
    target = tmp_path / "packages" / "mlperf"
    assert git("-C", str(target), "rev-parse", "HEAD") == shas[0]
    assert not (target / ".git" / "shallow").exists()
    assert not run(step(uri + "/", tmp_path, Commit=shas[0][:10]), ctx).changed  # same remote spelled differently


def test_server_refusing_sha_fetch_falls_back_to_full_fetch(
    repo: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, shas = repo
    # Protocol v0 servers refuse "want <unadvertised sha>" (uploadpack.allowReachableSHA1InWant=false).
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "protocol.version")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "0")
    ctx = context(tmp_path)
    run(step(uri, tmp_path, Commit=shas[0]), ctx)
    assert git("-C", str(tmp_path / "packages" / "mlperf"), "rev-parse", "HEAD") == shas[0]
    log = (tmp_path / "step.log").read_text()
    assert "Server does not allow request for unadvertised object" in log
    assert "fetching the whole repository" in log


def test_clone_at_another_commit_is_reported_not_reused(repo: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, shas = repo
    ctx = context(tmp_path)
    run(step(uri, tmp_path, Commit=shas[2], Depth=0), ctx)
    target = tmp_path / "packages" / "mlperf"
    with pytest.raises(StepError) as info:
        step(uri, tmp_path, Commit=shas[1]).plan(ctx)
    text = str(info.value)
    assert f"Dependencies[2] GitRepoClone: {target} is at commit {shas[2]}, not at the pinned {shas[1]}" in text
    assert f"hint: 'git -C {target} checkout --detach {shas[1]}'" in text
    assert git("-C", str(target), "rev-parse", "HEAD") == shas[2]  # untouched


def test_dirty_clone_is_reported_and_kept(repo: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, shas = repo
    ctx = context(tmp_path)
    run(step(uri, tmp_path, Commit=shas[2]), ctx)
    target = tmp_path / "packages" / "mlperf"
    (target / "file.txt").write_text("my local work\n")
    (target / "new.txt").write_text("x\n")
    with pytest.raises(StepError, match=r"has local changes \(2: file.txt, new.txt\)"):
        step(uri, tmp_path, Commit=shas[2]).plan(ctx)
    assert (target / "file.txt").read_text() == "my local work\n"
    # Changes a later step makes on purpose can be declared.
    assert not run(step(uri, tmp_path, Commit=shas[2], IgnorePaths="file.txt,new.*"), ctx).changed


def test_other_remote_and_non_clone_folders_are_reported(repo: tuple[str, list[str]], tmp_path: Path) -> None:
    uri, shas = repo
    ctx = context(tmp_path)
    run(step(uri, tmp_path, Commit=shas[2]), ctx)
    with pytest.raises(StepError, match=r"is a clone of file://.*origin.git, not of file:///elsewhere/x.git"):
        step("file:///elsewhere/x.git", tmp_path, Commit=shas[2]).plan(ctx)
    other = tmp_path / "p2"
    (other / "mlperf").mkdir(parents=True)
    (other / "mlperf" / "notes.txt").write_text("mine\n")
    s = GitRepoClone(
        GitRepoCloneParameters(RepoUri=uri, PackageName="mlperf", PackageDir=str(other)),
        location="Dependencies[2]",
        kind="dependency",
    )
    with pytest.raises(StepError, match="exists and is not a git clone"):
        s.plan(ctx)
    assert (other / "mlperf" / "notes.txt").read_text() == "mine\n"


def test_missing_repository_fails_once_without_retries(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    s = step(f"file://{tmp_path}/nope.git", tmp_path, Commit="a" * 40, Retries=3)
    with pytest.raises(CommandFailed):
        s.apply(ctx, s.plan(ctx))
    assert "retrying" not in (tmp_path / "step.log").read_text()
    assert not (tmp_path / "packages" / "mlperf").exists()


def test_connection_refused_is_transient_and_retried(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = context(tmp_path)
    s = step(f"http://127.0.0.1:{port}/repo.git", tmp_path, Commit="b" * 40, Retries=2)
    with pytest.raises(CommandFailed) as info:
        s.apply(ctx, s.plan(ctx))
    assert TRANSIENT.search(info.value.stderr or "")  # the pattern clone_retry's RetryPolicy retries on
    assert "retrying (attempt 2 of 2)" in (tmp_path / "step.log").read_text()


def test_planner_commands_and_helpers() -> None:
    params = GitRepoCloneParameters(
        RepoUri="https://github.com/mlcommons/inference_results_v4.1.git", PackageName="mlperf", Commit="c" * 40
    )
    argvs = [[str(a) for a in c.argv] for c in clone_commands(params, "/opt/workload/packages/mlperf")]
    stage = "/opt/workload/packages/.mlperf.partial"
    assert argvs[1] == ["rm", "-rf", "--", stage]
    assert ["git", "-c", f"safe.directory={stage}", "-C", stage, "fetch", "--depth", "1", "origin", "c" * 40] in argvs
    assert argvs[-1] == ["mv", "-T", "--", stage, "/opt/workload/packages/mlperf"]
    assert same_remote("https://github.com/a/b.git", "https://github.com/a/b/")
    assert not same_remote("https://github.com/a/b.git", "https://github.com/a/c.git")
    unpinned = plan_clone(params.model_copy(update={"Commit": None}), CloneFacts(target="/x", exists=False))
    assert unpinned.notes[0].startswith("no Commit given: https://github.com/mlcommons/inference_results_v4.1.git")
    empty = plan_clone(params, CloneFacts(target="/x", exists=True, empty=True))
    assert [str(a) for a in empty.commands[0].argv] == ["rmdir", "/x"]


def test_a_token_in_the_uri_fetches_but_is_not_kept_on_the_host() -> None:
    uri = "https://ci-bot:ghp_SECRET123@github.com/org/results.git"
    assert without_credentials(uri) == "https://github.com/org/results.git"
    assert without_credentials("git@github.com:org/results.git") == "git@github.com:org/results.git"
    assert same_remote(uri, "https://github.com/org/results")  # the clone's cleaned origin still matches
    params = GitRepoCloneParameters(RepoUri=uri, PackageName="mlperf", Commit="c" * 40)
    commands = clone_commands(params, "/opt/p/mlperf")
    argvs = [[str(a) for a in c.argv] for c in commands]
    fetch_from = next(a for a in argvs if "remote" in a and "add" in a)[-1]
    assert fetch_from == "https://github.com/org/results.git"  # the origin never holds the token...
    fetch = next(c for c in commands if "fetch" in c.argv)
    assert fetch.input == "Authorization: Basic Y2ktYm90OmdocF9TRUNSRVQxMjM=\n"  # ...it goes on stdin
    assert not any("ghp_SECRET123" in c.shell_line() or "Y2ktYm90" in c.shell_line() for c in commands)
    plain = GitRepoCloneParameters(RepoUri="https://github.com/org/results.git", PackageName="mlperf")
    assert not any("set-url" in a for a in [[str(x) for x in c.argv] for c in clone_commands(plain, "/opt/p/m")])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"Commit": "main"}, "Commit: 'main' is not a commit SHA"),
        ({"PackageName": "../x"}, "PackageName: '../x' must be"),
        ({"PackageDir": "rel/dir"}, "PackageDir: 'rel/dir' must be an absolute path"),
        ({"Depth": -1}, "Depth: must be 0"),
        ({"RepoUri": "has space"}, "RepoUri: 'has space' is not a repository URI"),
    ],
)
def test_parameters_are_checked(params: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"RepoUri": "file:///x.git", "PackageName": "mlperf", **params}
    with pytest.raises(ValueError) as info:
        GitRepoClone.check_parameters(GitRepoCloneParameters(**base))  # type: ignore[arg-type]
    assert str(info.value).startswith(message)
