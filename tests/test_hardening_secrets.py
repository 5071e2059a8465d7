"""Issue 16: secrets masked everywhere, and values starting with '-' never reach a command as options.

The clone test runs real git against a real HTTP server on 127.0.0.1 that demands Basic auth, and
watches every process's command line (``/proc/*/cmdline``, readable by any local user) while it runs.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.steptypes import step_context
from workload.commands import mask_text
from workload.errors import ProfileError, UsageError
from workload.hosts.local import LocalHost
from workload.installers.git_clone import GitRepoClone, GitRepoCloneParameters, clone_commands
from workload.installers.nvidia_cuda import NvidiaCudaParameters, runfile_path
from workload.params import display_value, parse_parameters
from workload.profile import load_profile, resolve_profile

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}


def _cli(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "workload", *args], capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout + done.stderr


def _profile(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _clone_profile(**parameters: Any) -> dict[str, Any]:
    return {
        "Description": "clone",
        "Parameters": parameters,
        "Dependencies": [
            {"Type": "GitRepoClone", "Parameters": {"RepoUri": "$.Parameters.Repo", "PackageName": "mlperf"}}
        ],
    }


# -- 2. secrets masked everywhere -----------------------------------------------------------------
def test_description_and_metadata_secrets_are_masked_in_show_and_profile_json(tmp_path: Path) -> None:
    document = _clone_profile(Repo="https://github.com/o/r.git")
    document["Description"] = "mirror at https://ci:Hunter2Pass@mirror.example/r.git"
    document["Metadata"] = {
        "Mirror": "https://bot:MetaPass77@git.example/x",
        "UploadToken": "tok-ABCDEF-123",
        "Owner": "team-a",
        "Nested": {"ApiKey": "k-998877", "Urls": ["https://ghp_NestedTok1@github.com/o/r.git"]},
    }
    path = _profile(tmp_path, document)
    resolved = resolve_profile(load_profile(str(path)))
    text = json.dumps(resolved.to_json())
    for secret in ("Hunter2Pass", "MetaPass77", "tok-ABCDEF-123", "k-998877", "ghp_NestedTok1"):
        assert secret not in text
        assert secret not in resolved.secrets.mask(f"later a log line says {secret}")  # the run masks it everywhere
    assert "team-a" in text and "https://ci:***@mirror.example/r.git" in text
    for args in (["show", str(path)], ["show", str(path), "--json"]):
        code, output = _cli(*args)
        assert code == 0, output
        assert "Hunter2Pass" not in output and "MetaPass77" not in output and "tok-ABCDEF-123" not in output


def test_a_token_as_the_user_of_a_url_is_masked_but_ssh_logins_are_not() -> None:
    assert mask_text("git clone https://ghp_abcdef123456@github.com/o/r.git") == (
        "git clone https://***@github.com/o/r.git"
    )
    assert mask_text("ssh://azureuser@10.0.0.4:22") == "ssh://azureuser@10.0.0.4:22"
    assert mask_text("https://user:pw12345@h/x") == "https://user:***@h/x"


def test_numeric_values_of_password_parameters_are_secret(tmp_path: Path) -> None:
    assert display_value("SudoPassword", 123456) == "***" and display_value("SudoPassword", "123456") == "***"
    assert display_value("ApiSecret", 98765.5) == "***"
    assert display_value("MaxTokens", 1024) == 1024 and display_value("KeySize", "4096") == "4096"
    document = _clone_profile(Repo="https://github.com/o/r.git", SudoPassword=31415926)
    resolved = resolve_profile(load_profile(str(_profile(tmp_path, document))))
    assert resolved.to_json()["Parameters"]["SudoPassword"] == "***"
    assert "31415926" not in resolved.secrets.mask("the password is 31415926")


def test_parameters_parse_error_does_not_echo_a_piece_of_a_value() -> None:
    with pytest.raises(UsageError) as info:
        parse_parameters(["GitPassword=abc,SecretPiece99"])
    assert "SecretPiece99" not in str(info.value) and "after the value of 'GitPassword'" in str(info.value)
    code, output = _cli("show", "PERF-CPU-MLPERF", "-p", "Token=x1,TailOfToken42")
    assert code == 2 and "TailOfToken42" not in output and "not key=value" in output


class _AuthHandler(SimpleHTTPRequestHandler):
    """A dumb-HTTP git server that serves only requests with the expected Basic credentials."""

    expected = ""
    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        self.seen.append(auth)
        if auth != self.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(http://127.0.0.1:PORT, served folder) with a bare repository ``r.git`` of one commit."""
    served = tmp_path / "served"
    work = tmp_path / "work"
    env = {**os.environ, **ENV}
    subprocess.run(["git", "init", "-q", "--bare", str(served / "r.git")], check=True, env=env)
    subprocess.run(["git", "init", "-q", str(work)], check=True, env=env)
    (work / "f.txt").write_text("hello\n")
    subprocess.run(["git", "-C", str(work), "add", "f.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "commit", "-q", "-m", "one"], check=True, env=env)
    subprocess.run(["git", "-C", str(work), "push", "-q", str(served / "r.git"), "HEAD:refs/heads/main"], check=True)
    subprocess.run(["git", "-C", str(served / "r.git"), "symbolic-ref", "HEAD", "refs/heads/main"], check=True)
    subprocess.run(["git", "-C", str(served / "r.git"), "update-server-info"], check=True)
    handler = functools.partial(_AuthHandler, directory=str(served))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()


def _cmdlines_holding(needles: list[bytes], stop: threading.Event, hits: list[str]) -> None:
    while not stop.is_set():
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    line = f.read()
            except OSError:
                continue
            if any(n in line for n in needles):
                hits.append(line.replace(b"\0", b" ").decode(errors="replace"))


def test_clone_with_a_token_keeps_it_off_every_command_line(
    auth_server: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_TERMINAL_PROMPT", "0")  # a failed authentication must fail, not prompt
    base, _ = auth_server
    token = "ghp_CmdlineToken1234567890"
    _AuthHandler.expected = "Basic " + base64.b64encode(f"{token}:".encode()).decode()
    _AuthHandler.seen = []
    uri = base.replace("http://", f"http://{token}@") + "/r.git"
    params = GitRepoCloneParameters(RepoUri=uri, PackageName="m", PackageDir=str(tmp_path / "pk"), Depth=0)
    GitRepoClone.check_parameters(params)
    step = GitRepoClone(params, location="Dependencies[0]", kind="dependency")
    ctx = step_context(LocalHost(), tmp_path)
    stop, hits = threading.Event(), []
    needles = [token.encode(), _AuthHandler.expected.split()[1].encode()]
    watcher = threading.Thread(target=_cmdlines_holding, args=(needles, stop, hits), daemon=True)
    watcher.start()
    try:
        plan = step.plan(ctx)
        step.apply(ctx, plan)
        step.verify(ctx)
    finally:
        stop.set()
        watcher.join()
    assert hits == []
    assert _AuthHandler.expected in _AuthHandler.seen  # the credentials did reach the server, as a header
    clone = tmp_path / "pk" / "m"
    assert (clone / "f.txt").read_text() == "hello\n"
    origin = subprocess.run(["git", "-C", str(clone), "remote", "get-url", "origin"], capture_output=True, text=True)
    assert token not in origin.stdout and token not in (clone / ".git" / "config").read_text()
    assert all(token not in c.shell_line() for c in clone_commands(params, str(clone)))


# -- 3. values starting with '-' --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("document", "where"),
    [
        (_clone_profile(Repo="--upload-pack=touch /tmp/pwned"), "Dependencies[0].Parameters.RepoUri"),
        (
            {
                "Description": "d",
                "Dependencies": [
                    {
                        "Type": "NvidiaCudaInstallation",
                        "Parameters": {"LinuxDriverVersion": "550", "LinuxLocalRunFile": "-o/etc/passwd"},
                    }
                ],
            },
            "Dependencies[0].Parameters.LinuxLocalRunFile",
        ),
    ],
)
def test_option_like_values_are_refused_at_load_with_the_json_path(
    tmp_path: Path, document: dict[str, Any], where: str
) -> None:
    with pytest.raises(ProfileError) as info:
        resolve_profile(load_profile(str(_profile(tmp_path, document))))
    assert where in str(info.value) and "starts with '-'" in str(info.value)


def test_option_like_override_is_refused_and_names_its_parameter(tmp_path: Path) -> None:
    path = _profile(tmp_path, _clone_profile(Repo="https://github.com/o/r.git"))
    with pytest.raises(ProfileError, match=r"RepoUri: value starts with '-' \(from \$\.Parameters\.Repo\)"):
        resolve_profile(load_profile(str(path)), {"Repo": "-uhttps://evil/x"})
    code, output = _cli("show", str(path), "-p", "Repo=--upload-pack=id")
    assert code == 2 and "RepoUri" in output and "Traceback" not in output


def test_positional_arguments_follow_a_double_dash() -> None:
    params = GitRepoCloneParameters(RepoUri="https://github.com/o/r.git", PackageName="m")
    for command in clone_commands(params, "/opt/p/m"):
        argv = [str(a) for a in command.argv]
        if "clone" in argv:
            assert argv[argv.index("--") + 1] == "https://github.com/o/r.git"
    from workload.installers.download import fetch_command

    for tool in ("curl", "wget"):
        argv = [str(a) for a in fetch_command("https://h/f.run", "/c/f.run.part", tool).argv]  # type: ignore[arg-type]
        assert argv[-2:] == ["--", "https://h/f.run"]
    cuda = NvidiaCudaParameters(LinuxDriverVersion="550", LinuxLocalRunFile="https://h/cuda.run")
    assert runfile_path(cuda).endswith("/cuda.run")
