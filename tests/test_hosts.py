"""One behavioural suite for every transport: the same assertions on LocalHost and on SshHost.

SshHost talks to a real OpenSSH server on 127.0.0.1 (tests/testbed/sshd.py); both run on this
machine, so a test can check the effects (files, killed processes) directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.testbed.sshd import LocalUser, SshServer, local_user, ssh_host, sshd  # noqa: F401  (fixture)
from workload.commands import Command, Secret, cmd
from workload.errors import CommandFailed, CommandTimeout
from workload.hosts import FileTransferError, Host, LocalHost, drain

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest) -> Iterator[Host]:
    if request.param == "local":
        yield LocalHost()
        return
    server: SshServer = request.getfixturevalue("sshd")
    with ssh_host(server) as h:
        yield h


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (it holds nothing and runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# -- exit codes and output ---------------------------------------------------------------------


def test_exit_code_stdout_and_stderr_are_kept_apart(host: Host) -> None:
    result = host.run(cmd("sh", "-c", "echo out; echo err >&2; exit 3"))
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok and not result.timed_out


def test_check_raises_command_failed_naming_host_command_and_output(host: Host) -> None:
    with pytest.raises(CommandFailed) as info:
        host.check(cmd("sh", "-c", "echo boom >&2; exit 7"))
    err = info.value
    assert err.returncode == 7 and err.host == host.name
    assert f"[{host.name}]" in str(err) and "exit 7" in str(err) and "boom" in str(err)


def test_success_returns_the_result(host: Host) -> None:
    assert host.check(cmd("echo", "fine")).stdout == "fine\n"


def test_death_by_signal_is_reported_as_128_plus_n(host: Host) -> None:
    assert host.run(cmd("sh", "-c", "kill -TERM $$")).returncode == 128 + 15


AWKWARD = [
    "a b",
    "$(touch /tmp/workload-pwned)",
    "`id`",
    "it's",
    'say "hi"',
    "line1\nline2",
    "ünïcødé ✓ 日本",
    "",
    "*",
    "$HOME",
    "; exit 9",
    "back\\slash",
    "-n",
    "tab\there",
]


def test_awkward_arguments_arrive_verbatim(host: Host) -> None:
    result = host.check(cmd("printf", "<%s>", *AWKWARD))
    assert result.stdout == "".join(f"<{a}>" for a in AWKWARD)
    assert not os.path.exists("/tmp/workload-pwned")


def test_env_and_cwd(host: Host, tmp_path: Path) -> None:
    workdir = tmp_path / "dir with space $x"
    workdir.mkdir()
    value = "v a l $(u) `w` 'q' \"d\" ✓"
    result = host.check(cmd("sh", "-c", 'printf "%s|%s" "$FOO" "$(pwd)"', env={"FOO": value}, cwd=str(workdir)))
    assert result.stdout == f"{value}|{workdir}"


def test_stdin_is_fed_to_the_command(host: Host) -> None:
    data = "line one\nligne deux ✓\n" * 1000
    assert host.check(cmd("cat", input=data)).stdout == data


def test_secrets_are_masked_in_output_display_and_stream(host: Host) -> None:
    lines: list[str] = []
    command = cmd("echo", "token:", Secret("s3cr3t-value"))
    result = host.run(command, on_line=lambda _stream, line: lines.append(line))
    assert result.stdout == "token: ***\n" and lines == ["token: ***"]
    assert "s3cr3t-value" not in result.command


def test_url_passwords_in_plain_arguments_run_real_and_show_masked(host: Host) -> None:
    # A repository URL with a token, as a profile gives it: the command gets the real value, every
    # display (command line, output, the error of a failure) shows user:***@.
    url = "https://user:ghp_SECRET123@example.invalid/org/repo.git"
    lines: list[str] = []
    command = cmd("sh", "-c", 'echo "cloning $1"; echo "fatal: no $1" >&2; exit 128', "sh", url)
    result = host.run(command, on_line=lambda _stream, line: lines.append(line))
    assert result.returncode == 128
    assert result.stdout == "cloning https://user:***@example.invalid/org/repo.git\n"
    assert lines == [
        "cloning https://user:***@example.invalid/org/repo.git",
        "fatal: no https://user:***@example.invalid/org/repo.git",
    ]
    assert "ghp_SECRET123" not in result.command and "https://user:***@example.invalid" in result.command
    assert "ghp_SECRET123" in command.shell_line()  # the real value is what runs
    with pytest.raises(CommandFailed) as info:
        host.check(command)
    assert "ghp_SECRET123" not in str(info.value) and "user:***@" in str(info.value)


# -- timeouts ------------------------------------------------------------------------------------


def test_timeout_kills_the_command_and_its_children(host: Host) -> None:
    command = cmd("sh", "-c", "sleep 60 & echo $!; echo $$; sleep 60", timeout=1)
    started = time.monotonic()
    result = host.run(command)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.returncode == 124
    assert 0.9 <= elapsed < 60, elapsed  # at its 1 s timeout (the clock's resolution below), not the sleep's 60 s
    pids = [int(p) for p in result.stdout.split()]
    assert len(pids) == 2
    end = time.monotonic() + 3
    while not all(_dead(p) for p in pids) and time.monotonic() < end:
        time.sleep(0.05)
    assert all(_dead(p) for p in pids), f"still running: {pids}"


def test_check_reports_a_timeout_as_command_timeout(host: Host) -> None:
    with pytest.raises(CommandTimeout) as info:
        host.check(cmd("sleep", "30", timeout=0.5))
    assert "timeout" in str(info.value) and "sleep 30" in str(info.value)


def test_finished_command_is_not_held_by_a_background_child(host: Host) -> None:
    started = time.monotonic()
    result = host.run(cmd("sh", "-c", "sleep 20 & echo started"))
    assert result.ok and result.stdout == "started\n"
    assert time.monotonic() - started < 20  # the drain grace, not the 20 s of the child


def test_output_still_coming_after_the_exit_is_read_to_its_end(host: Host) -> None:
    # sshd sends the exit status when the command exits and the rest of its pipe after it: a loaded host can take
    # seconds over that rest. Here a child writes for 4 s after the command exited, a line every 0.2 s; a drain cut
    # a fixed 2 s after the exit lost the second half (and a result file copied back from a Slurm node lost its end).
    result = host.run(cmd("sh", "-c", "(for i in $(seq 1 20); do sleep 0.2; echo $i; done) & echo exited"))
    assert result.ok and result.stdout.split() == ["exited", *map(str, range(1, 21))]


def test_a_child_that_never_stops_writing_is_cut_at_the_drain_cap(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain, "DRAIN_CAP_S", 3.0)
    started = time.monotonic()
    # (300 lines in 30 s: a child left over ends by itself)
    forever = "(i=0; while [ $i -lt 300 ]; do echo more; sleep 0.1; i=$((i + 1)); done) & echo exited"
    result = host.run(cmd("sh", "-c", forever))
    lines = result.stdout.split()
    assert result.ok and "exited" in lines and lines.count("more") >= 2
    assert time.monotonic() - started < 20  # the cap, not the child's forever


# -- streaming -----------------------------------------------------------------------------------


def test_lines_stream_while_the_command_runs(host: Host, tmp_path: Path) -> None:
    # The command waits (at most 30 s) for a file that the sink creates when it is shown the first
    # line: "second" follows at once only if "first" reached the sink while the command still ran.
    flag = tmp_path / "first-seen"
    seen: list[str] = []

    def sink(stream: str, line: str) -> None:
        if stream == "stdout":
            seen.append(line)
            if line == "first":
                flag.touch()

    script = 'echo first; i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; '
    script += '[ -e "$1" ] && echo second || echo "never shown first"'
    host.check(cmd("sh", "-c", script, "sh", str(flag)), on_line=sink)
    assert seen == ["first", "second"]


def test_ten_megabytes_of_output_stream_in_bounded_memory(host: Host) -> None:
    total = 73 * (10 * 1024 * 1024 // 73)  # 10 MiB of whole 73-byte lines
    counted = {"bytes": 0, "lines": 0}

    def sink(_stream: str, line: str) -> None:
        counted["bytes"] += len(line) + 1
        counted["lines"] += 1

    tracemalloc.start()
    try:
        result = host.run(
            cmd(
                "sh",
                "-c",
                f"yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c {total}",
            ),
            on_line=sink,
            capture_limit=64 * 1024,
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok and result.truncated
    assert counted["bytes"] == total and counted["lines"] == total // 73
    assert len(result.stdout) <= 64 * 1024 + 100
    assert peak < 4 * 1024 * 1024, f"peak traced memory {peak} bytes"


def test_output_without_newlines_is_cut_into_bounded_pieces(host: Host) -> None:
    shown: list[tuple[str, str]] = []
    result = host.run(
        cmd("sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x"), on_line=lambda s, line: shown.append((s, line))
    )
    assert result.ok and result.stdout == "x" * 300000
    # Only the command's stdout is judged: the sink also shows stderr, where an SSH login shell's own
    # startup lines arrive (labelled). A CI run once showed two such lines of 94 and 69 characters.
    pieces = [len(line) for stream, line in shown if stream == "stdout"]
    others = [(stream, line) for stream, line in shown if stream != "stdout"]
    assert sum(pieces) == 300000 and max(pieces) <= 64 * 1024, f"pieces {pieces}, other lines {others!r}"


# -- files ---------------------------------------------------------------------------------------


def test_binary_round_trip_with_write_and_read(host: Host, tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    target = tmp_path / "blob.bin"
    host.write_bytes(str(target), data, mode=0o600)
    assert target.read_bytes() == data and (target.stat().st_mode & 0o777) == 0o600
    assert host.read_bytes(str(target)) == data
    assert [p.name for p in tmp_path.iterdir()] == ["blob.bin"]  # no temporary file left behind


def test_overwrite_is_atomic_and_keeps_the_mode(host: Host, tmp_path: Path) -> None:
    target = tmp_path / "config.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    host.write_text(str(target), "new ✓\n")
    assert host.read_text(str(target)) == "new ✓\n" and (target.stat().st_mode & 0o777) == 0o640


def test_put_and_get(host: Host, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(300_000))
    remote = tmp_path / "remote.bin"
    host.put(str(src), str(remote), mode=0o755)
    assert remote.read_bytes() == src.read_bytes() and (remote.stat().st_mode & 0o777) == 0o755
    back = tmp_path / "back.bin"
    host.get(str(remote), str(back))
    assert back.read_bytes() == src.read_bytes()


def test_exists_and_missing_files(host: Host, tmp_path: Path) -> None:
    (tmp_path / "here").write_text("x")
    assert host.exists(str(tmp_path / "here")) and host.exists(str(tmp_path))
    assert not host.exists(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError) as info:
        host.read_bytes(str(tmp_path / "nope"))
    assert str(tmp_path / "nope") in str(info.value)
    with pytest.raises(FileNotFoundError):
        host.get(str(tmp_path / "nope"), str(tmp_path / "local"))


def test_writing_into_a_missing_directory_is_a_clear_error(host: Host, tmp_path: Path) -> None:
    with pytest.raises((FileNotFoundError, FileTransferError)) as info:
        host.write_text(str(tmp_path / "no-such-dir" / "f"), "x")
    assert "no-such-dir" in str(info.value)


# -- sudo as a non-root user ---------------------------------------------------------------------

_AS_USER = """
import json, sys
from workload.commands import Secret, cmd
from workload.errors import WorkloadError
from workload.hosts import LocalHost
spec = json.load(sys.stdin)
host = LocalHost(sudo_password=Secret(spec["sudo_password"]) if spec["sudo_password"] else None)
out = []
for c in spec["commands"]:
    try:
        opts = {k: c[k] for k in ("sudo", "user", "input", "timeout") if k in c}
        r = host.check(cmd(*c["argv"], **opts))
        out.append({"stdout": r.stdout, "stderr": r.stderr})
    except WorkloadError as e:
        out.append({"error": str(e), "stdout": getattr(e, "stdout", "")})
json.dump(out, sys.stdout)
"""


# The venv's interpreter may live where other users cannot reach it (under /root); the system one
# can import workload.hosts.local, which needs nothing outside the standard library.
_USER_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _run_as(
    transport: str,
    user: LocalUser,
    commands: list[dict[str, Any]],
    sudo_password: str | None,
    request: pytest.FixtureRequest,
) -> list[dict[str, str]]:
    """Run ``commands`` with ``check`` as ``user`` on the given transport; results or error texts."""
    if transport == "local":
        # A LocalHost inside a process of that user: the only honest way to be non-root locally.
        proc = subprocess.run(
            ["runuser", "-u", user.name, "--", _USER_PYTHON, "-c", _AS_USER],
            input=json.dumps({"sudo_password": sudo_password, "commands": commands}),
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]
    server: SshServer = request.getfixturevalue("sshd")
    from workload.errors import WorkloadError

    results: list[dict[str, str]] = []
    with ssh_host(
        server,
        user=user.name,
        key_filename=None,
        password=Secret(user.password),
        sudo_password=Secret(sudo_password) if sudo_password else None,
    ) as h:
        for c in commands:
            try:
                r = h.check(
                    cmd(
                        *c["argv"],
                        sudo=c.get("sudo", False),
                        user=c.get("user"),
                        input=c.get("input"),
                        timeout=c.get("timeout"),
                    )
                )
                results.append({"stdout": r.stdout, "stderr": r.stderr})
            except WorkloadError as e:
                results.append({"error": str(e), "stdout": getattr(e, "stdout", "")})
    return results


SUDO_CHECKS: list[dict[str, Any]] = [
    {"argv": ["id", "-u"]},
    {"argv": ["id", "-u"], "sudo": True},
    {"argv": ["cat"], "sudo": True, "input": "payload\n"},
    {"argv": ["id", "-un"], "user": "nobody"},
]


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_passwordless_sudo(transport: str, request: pytest.FixtureRequest) -> None:
    with local_user(sudo="nopasswd") as user:
        mine, root, cat, nobody = _run_as(transport, user, SUDO_CHECKS, None, request)
        assert mine["stdout"].strip() != "0" and root["stdout"] == "0\n"
        assert cat["stdout"] == "payload\n" and nobody["stdout"] == "nobody\n"
        # A configured password is not sent when sudo does not ask for it: it must not reach stdin.
        _, root, cat, _ = _run_as(transport, user, SUDO_CHECKS, "unused-password", request)
        assert root["stdout"] == "0\n" and cat["stdout"] == "payload\n"


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_sudo_that_needs_a_password(transport: str, request: pytest.FixtureRequest) -> None:
    with local_user(sudo="password") as user:
        _, root, *_ = _run_as(transport, user, SUDO_CHECKS, None, request)
        assert "a password is required" in root["error"] and "--sudo-password-env" in root["error"]
        _, root, cat, nobody = _run_as(transport, user, SUDO_CHECKS, user.password, request)
        assert root["stdout"] == "0\n" and cat["stdout"] == "payload\n" and nobody["stdout"] == "nobody\n"
        assert user.password not in json.dumps([root, cat, nobody])
        # (One command only: every refused password costs sudo's 2 s failure delay.)
        (wrong,) = _run_as(transport, user, SUDO_CHECKS[1:2], "not-the-password", request)
        assert "sudo password was refused" in wrong["error"] and "not-the-password" not in wrong["error"]


def test_remembered_facts_are_read_once_and_forgotten_on_any_change(host: Host, tmp_path: Path) -> None:
    counter = tmp_path / "reads"
    # A fact that counts its own runs: the count shows whether a result came from the host or the memo.
    fact = cmd("sh", "-c", 'echo x >> "$1"; wc -l < "$1"', "fact", str(counter), readonly=True)
    assert host.run(fact).stdout.strip() == "1"  # no memo outside the block
    with host.remembering_facts():
        assert host.run(fact).stdout.strip() == "2"
        assert host.run(fact).stdout.strip() == "2"  # remembered: the host saw no second read
        host.run(cmd("true"))  # any command that is not readonly may change what facts read
        assert host.run(fact).stdout.strip() == "3"
        assert host.run(fact).stdout.strip() == "3"
        host.write_text(str(tmp_path / "other"), "changed")  # so may any file write
        assert host.run(fact).stdout.strip() == "4"
        host.forget_facts()  # the engine forgets at each step boundary
        assert host.run(fact).stdout.strip() == "5"
        with host.remembering_facts():  # nested: the same memo
            assert host.run(fact).stdout.strip() == "5"
    assert host.run(fact).stdout.strip() == "6"  # the memo ends with the block
    assert counter.read_text().count("x") == 6


# Facts of every awkward shape: no final newline, stderr only, both streams, non-zero and
# signal exits, empty output, text that looks like our framing, sudo, env, non-ASCII.
PREFETCH_FACTS = [
    cmd("printf", "no newline", readonly=True),
    cmd("sh", "-c", "echo out; echo err >&2; exit 3", readonly=True),
    cmd("sh", "-c", "echo 'workload-batch-0 0 exit 0'; printf '\\n\\n' >&2", readonly=True),
    cmd("true", readonly=True),
    cmd("sh", "-c", "kill -TERM $$", readonly=True),
    cmd("sh", "-c", 'echo "$X"; cat', env={"X": "ünï cödé"}, readonly=True),  # stdin must be empty
    cmd("id", "-u", sudo=True, readonly=True),
    cmd("/nonexistent/tool", "--version", readonly=True),
]


def test_prefetched_facts_are_what_each_command_gives_alone(host: Host) -> None:
    alone = [host.run(c) for c in PREFETCH_FACTS]
    with host.remembering_facts():
        assert host.prefetch(PREFETCH_FACTS) == len(PREFETCH_FACTS)
        batched = [host.run(c) for c in PREFETCH_FACTS]  # from the memo: no round trip
    for one, other in zip(alone, batched, strict=True):
        assert (other.returncode, other.stdout, other.stderr) == (one.returncode, one.stdout, one.stderr)
    assert [r.returncode for r in alone[:2]] == [0, 3] and alone[4].returncode == 128 + 15


def test_prefetch_runs_one_command_and_leaves_what_it_cannot_batch(host: Host, tmp_path: Path) -> None:
    counter = tmp_path / "reads"
    fact = cmd("sh", "-c", 'echo x >> "$1"; wc -l < "$1"', "fact", str(counter), readonly=True)
    other = cmd("sh", "-c", 'echo y >> "$1"', "other", str(counter), readonly=True)
    assert host.prefetch([fact, other]) == 0  # outside remembering_facts nothing would keep them
    assert not counter.exists()
    with host.remembering_facts():
        change = cmd("touch", str(tmp_path / "x"))  # not readonly: never run ahead of time
        with_stdin = cmd("cat", input="in", readonly=True)
        assert host.prefetch([fact, fact, other, change, with_stdin]) == 2
        assert counter.read_text() == "x\ny\n"  # one run each, in order
        assert not (tmp_path / "x").exists()
        assert host.run(fact).stdout == "1\n"
        assert host.prefetch([fact, other]) == 0  # all remembered already
        host.run(change)  # a change forgets the prefetched results like any others
        assert host.run(fact).stdout == "3\n"


def test_a_prefetch_cut_short_remembers_nothing(host: Host, tmp_path: Path) -> None:
    counter = tmp_path / "reads"
    fact = cmd("sh", "-c", 'echo x >> "$1"; wc -l < "$1"', "fact", str(counter), readonly=True, timeout=1)
    slow = cmd("sleep", "30", readonly=True, timeout=1)
    with host.remembering_facts():
        started = time.monotonic()
        assert host.prefetch([fact, slow]) == 0  # the batch's bound is the sum of its commands'
        assert time.monotonic() - started < 30  # the batch's bound, not the sleep's 30 s
        assert host.run(fact).stdout == "2\n"  # read again, on its own


def test_root_needs_no_sudo_and_can_run_as_another_user(host: Host) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs as root")
    assert host.wrap(cmd("id", "-u", sudo=True))[0] == "id -u"
    assert host.check(cmd("id", "-un", user="nobody")).stdout == "nobody\n"


def test_a_user_without_sudo_rights_gets_a_hint(request: pytest.FixtureRequest) -> None:
    with local_user(sudo=None) as user:
        (root,) = _run_as("ssh", user, [{"argv": ["id", "-u"], "sudo": True}], user.password, request)
        assert "not in the sudoers file" in root["error"] and "hint" in root["error"]


def test_command_is_a_value_rendered_once(host: Host) -> None:
    command = Command(("printf", "%s", "$(echo no)"))
    assert host.check(command).stdout == "$(echo no)"


def test_many_commands_in_parallel_threads_do_not_mix_output(host: Host) -> None:
    # Steps run one at a time per host, but the fleet runner may share a host object with a
    # reporter thread; concurrent calls must still keep outputs apart.
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = host.check(cmd("sh", "-c", f"for n in 1 2 3; do echo {i}; done")).stdout

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {i: f"{i}\n{i}\n{i}\n" for i in range(4)}


@pytest.mark.parametrize("transport", ["local", "ssh"])
def test_timeout_as_a_non_root_user_kills_sudo_commands_too(transport: str, request: pytest.FixtureRequest) -> None:
    # The user's login shell is /bin/sh (dash): the kill must work with dash's builtin, and the
    # root-owned processes of a sudo'd command need the kill to go through sudo as well.
    spawn = "sleep 60 & echo $!; echo $$; sleep 60"
    checks = [
        {"argv": ["sh", "-c", spawn], "timeout": 1},
        {"argv": ["sh", "-c", spawn], "timeout": 1, "sudo": True},
    ]
    with local_user(sudo="nopasswd") as user:
        results = _run_as(transport, user, checks, None, request)
        pids = []
        for result in results:
            assert "timeout" in result["error"]
            pids += [int(p) for p in result["stdout"].split()]
        assert len(pids) == 4
        end = time.monotonic() + 3
        while not all(_dead(p) for p in pids) and time.monotonic() < end:
            time.sleep(0.05)
        assert all(_dead(p) for p in pids), f"still running: {[p for p in pids if not _dead(p)]}"
