"""The LLM server lifecycle on real processes: a real HTTP server (Python's http.server serving a ``health`` file,
so ``GET /health`` answers 200 like trtllm-serve's) started through the real bash commands ServerSpec renders."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.test_mlperf_exec_guard import wait_for
from tests.testbed.ports import free_port as _free_port
from workload.errors import BenchmarkFailed
from workload.mlperf import llm_server
from workload.mlperf.llm_server import ServerSpec


def _exec(cwd: Path) -> llm_server.Exec:
    def run(argv: Sequence[str]) -> tuple[int, str]:
        done = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True, timeout=60, check=False)
        return done.returncode, done.stdout + done.stderr

    return run


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    # A zombie leader still counts for killpg(0); it is gone once nothing in the group runs.
    out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True, check=False).stdout
    return any(not line.strip().startswith("Z") for line in out.splitlines() if line.strip())


def _spec(tmp_path: Path, argv: tuple[str, ...], port: int, **kw: float) -> ServerSpec:
    (tmp_path / "health").write_text("ok\n")
    return ServerSpec(
        argv=argv,
        urls=(f"127.0.0.1:{port}",),
        log_path=str(tmp_path / "server.log"),
        pid_path=str(tmp_path / "server.pgid"),
        ready_timeout_s=kw.get("ready_timeout_s", 20.0),
        poll_s=0.2,
        stop_grace_s=kw.get("stop_grace_s", 5.0),
    )


def _http_server(tmp_path: Path, port: int) -> tuple[str, ...]:
    # A make-like parent that spawns the real server as a child: the stop must reach the whole group.
    return ("bash", "-c", f"python3 -m http.server {port} --bind 127.0.0.1 --directory {tmp_path} & wait")


def test_serving_waits_until_it_answers_then_stops_the_whole_group(tmp_path: Path) -> None:
    port = _free_port()
    spec = _spec(tmp_path, _http_server(tmp_path, port), port)
    run = _exec(tmp_path)
    with llm_server.serving(run, spec) as took:
        pgid = int((tmp_path / "server.pgid").read_text())
        assert took >= 0
        assert _group_alive(pgid)
        # The harness would talk to it now: it answers.
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
    assert not _group_alive(pgid)
    assert not (tmp_path / "server.pgid").exists()
    assert "GET /health" in (tmp_path / "server.log").read_text()


def test_a_server_slow_to_make_its_process_group_is_not_taken_for_dead(tmp_path: Path) -> None:
    # On a loaded machine the started child may not have run setsid yet when the first probe asks for its group
    # ("exited before answering", with an empty log: seen at load ~5). A `setsid` first on PATH that sleeps a
    # second before exec'ing the real one makes that delay happen every time (a scheduler delay cannot be had on
    # demand). The start waits, bounded, for the group; without that wait the first probe finds none.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = shutil.which("setsid")
    assert real is not None
    slow = bin_dir / "setsid"
    slow.write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')
    slow.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}

    def run(argv: Sequence[str]) -> tuple[int, str]:
        done = subprocess.run(list(argv), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout + done.stderr

    port = _free_port()
    spec = _spec(tmp_path, _http_server(tmp_path, port), port)
    with llm_server.serving(run, spec):
        pgid = int((tmp_path / "server.pgid").read_text())
        assert _group_alive(pgid)
    assert not _group_alive(pgid)
    assert "GET /health" in (tmp_path / "server.log").read_text()


def test_a_failing_harness_still_stops_the_server(tmp_path: Path) -> None:
    port = _free_port()
    spec = _spec(tmp_path, _http_server(tmp_path, port), port)
    with pytest.raises(RuntimeError, match="harness failed"), llm_server.serving(_exec(tmp_path), spec):
        pgid = int((tmp_path / "server.pgid").read_text())
        raise RuntimeError("harness failed")
    assert not _group_alive(pgid)


def test_ctrl_c_during_the_harness_stops_the_server(tmp_path: Path) -> None:
    port = _free_port()
    spec = _spec(tmp_path, _http_server(tmp_path, port), port)
    with pytest.raises(KeyboardInterrupt), llm_server.serving(_exec(tmp_path), spec):
        pgid = int((tmp_path / "server.pgid").read_text())
        raise KeyboardInterrupt
    assert not _group_alive(pgid)


def test_a_server_that_dies_is_reported_with_its_log(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ("bash", "-c", "echo 'CUDA error: out of memory'; exit 1"), _free_port())
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    text = str(info.value)
    assert "exited before answering" in text and "CUDA error: out of memory" in text


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ("bash", "-c", "echo loading weights; exec sleep 300"), _free_port(), ready_timeout_s=1.5)
    began = time.monotonic()
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    # Bounded by the 1.5 s readiness timeout, not the default 1800 s: the margin is for loaded CI machines
    # (each probe starts a Python; 15 s was exceeded once at load ~10).
    assert time.monotonic() - began < 60
    assert "did not answer" in str(info.value) and "loading weights" in str(info.value)
    assert not (tmp_path / "server.pgid").exists()


def test_a_server_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    port = _free_port()
    stubborn = ("bash", "-c", f"trap '' TERM; python3 -m http.server {port} --bind 127.0.0.1 --directory {tmp_path}")
    spec = _spec(tmp_path, stubborn, port, stop_grace_s=0.5)
    with llm_server.serving(_exec(tmp_path), spec):
        pgid = int((tmp_path / "server.pgid").read_text())
    # SIGKILL is sent when the stop returns; the kernel ends the processes a moment later (on a loaded machine,
    # more than a moment). The server ignores TERM, so without the KILL it would never go.
    deadline = time.monotonic() + 10
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _group_alive(pgid)


def test_stop_without_a_server_is_a_no_op(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ("true",), _free_port())
    llm_server.stop(_exec(tmp_path), spec)


def test_stop_runs_through_stop_exec_when_the_runner_refuses(tmp_path: Path) -> None:
    port = _free_port()
    spec = _spec(tmp_path, _http_server(tmp_path, port), port)
    run = _exec(tmp_path)
    refused: list[Sequence[str]] = []

    def refusing(argv: Sequence[str]) -> tuple[int, str]:
        if refused or "llm-server-stop" in argv:
            refused.append(argv)
            raise RuntimeError("runner stopped")
        return run(argv)

    with pytest.raises(KeyboardInterrupt), llm_server.serving(refusing, spec, stop_exec=run):
        pgid = int((tmp_path / "server.pgid").read_text())
        raise KeyboardInterrupt
    assert not refused
    assert not _group_alive(pgid)


def test_spec_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        ServerSpec(argv=())
    with pytest.raises(ValueError):
        ServerSpec(argv=("make",), ready_timeout_s=0)


def test_probe_of_a_dead_group_says_dead(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()
    (tmp_path / "server.pgid").write_text(str(proc.pid))
    spec = _spec(tmp_path, ("true",), _free_port())
    code, _ = _exec(tmp_path)(spec.probe_argv())
    assert code == llm_server.DEAD


def test_a_port_something_already_listens_on_is_refused(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = int(other.getsockname()[1])
        spec = _spec(tmp_path, _http_server(tmp_path, port), port)
        with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
            pytest.fail("the body must not run")
    assert "already listens on 127.0.0.1:" in str(info.value)
    assert not (tmp_path / "server.pgid").exists()  # nothing was started


# The stand-in of trtllm-serve (--host/--port as TensorRT-LLM's; /health 200 once "loaded"), as NVIDIA's
# run_llm_server starts it: a make-like parent with the server as its child, on the port its config names.
STANDIN_SERVE = Path(__file__).resolve().parent / "fixtures" / "harness" / "rounds" / "standin_trtllm_serve.py"


def _standin_server(tmp_path: Path, port: int) -> tuple[str, ...]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    return ("bash", "-c", f"python3 {STANDIN_SERVE} {model} --host 0.0.0.0 --port {port} & wait")


def test_a_server_answering_on_another_port_fails_at_once_naming_both_and_the_parameter(tmp_path: Path) -> None:
    ours, theirs = _free_port(), _free_port()
    spec = _spec(tmp_path, _standin_server(tmp_path, theirs), ours, ready_timeout_s=120.0)
    began = time.monotonic()
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    took = time.monotonic() - began
    assert took < spec.ready_timeout_s, took  # not the 120 s timeout: as soon as the server answers on its own port
    text = str(info.value)
    assert f"answers on 127.0.0.1:{theirs}, not on 127.0.0.1:{ours} where this run waits for it" in text, text
    assert f"(the parameter LLMServerPort is {ours}); set LLMServerPort={theirs}" in text, text
    assert f"Uvicorn running on http://0.0.0.0:{theirs}" in text  # the server's log tail
    assert not (tmp_path / "server.pgid").exists()  # stopped


def test_a_server_still_loading_on_our_port_beside_one_up_on_another_is_waited_for(tmp_path: Path) -> None:
    """Several servers (P, P+1...): P+1 may answer before P has loaded; P is named on a command line of the group,
    so the probe keeps waiting instead of calling it the wrong port."""
    ours, theirs = _free_port(), _free_port()
    loading = f"python3 -c 'import time; time.sleep(300)' --port {ours}"
    argv = ("bash", "-c", f"python3 -m http.server {theirs} --bind 127.0.0.1 --directory {tmp_path} & {loading}")
    spec = _spec(tmp_path, argv, ours, ready_timeout_s=4.0)
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    assert "did not answer" in str(info.value) and "answers on" not in str(info.value)


# --- several servers from one command (v6.1: one trtllm-serve per data-parallel rank, ports P, P+1...) ----------


def _free_ports(count: int) -> list[int]:
    """``count`` consecutive free ports (as a config writes them: base port upward), reserved by the test bed."""
    base = _free_port(count)
    return list(range(base, base + count))


def _multi_spec(tmp_path: Path, argv: tuple[str, ...], ports: list[int], **kw: float) -> ServerSpec:
    spec = _spec(tmp_path, argv, ports[0], **kw)
    return ServerSpec(
        argv=spec.argv,
        urls=tuple(f"127.0.0.1:{p}" for p in ports),
        log_path=spec.log_path,
        pid_path=spec.pid_path,
        ready_timeout_s=spec.ready_timeout_s,
        poll_s=spec.poll_s,
        stop_grace_s=spec.stop_grace_s,
        server_logs=str(tmp_path / "servers"),
    )


def _ranks(tmp_path: Path, ports: list[int], *, loaded_when: Sequence[Path] = ()) -> tuple[str, ...]:
    """NVIDIA's run_llm_server as it starts a multi-rank config: one parent, one stand-in trtllm-serve per port
    spawned at once (launch_server.py ``RunTrtllmServeOp.run``), each loading 0.2 s before it answers or, given
    ``loaded_when``, until the path ``loaded_when[i]`` exists."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    servers = []
    for index, port in enumerate(ports):
        scratch = tmp_path / f"rank{index}"
        scratch.mkdir(exist_ok=True)
        (scratch / "standin_server_load_s").write_text("0.2")
        if loaded_when:
            (scratch / "standin_server_load_until").write_text(str(loaded_when[index]))
        servers.append(f"MLPERF_SCRATCH_PATH={scratch} python3 {STANDIN_SERVE} {model} --host 0.0.0.0 --port {port}")
    return ("bash", "-c", " & ".join(servers) + " & wait")


def test_every_server_of_the_command_is_waited_for_then_all_are_stopped(tmp_path: Path) -> None:
    ports = _free_ports(3)
    # The ranks answer one after another, each once the wait has said how many answer so far (however long a
    # loaded machine's probes take): the wait is over only when the last one answers.
    loaded = [tmp_path / f"loaded{i}" for i in range(3)]
    spec = _multi_spec(tmp_path, _ranks(tmp_path, ports, loaded_when=loaded), ports)
    assert spec.probe_argv()[-3:] == tuple(f"127.0.0.1:{p}" for p in ports)
    assert spec.where() == f"127.0.0.1:{ports[0]}-{ports[-1]} (3 servers)"
    lines: list[str] = []
    missed: list[str] = []

    def load_one_by_one() -> None:
        for count, path in enumerate(loaded):
            said = f"LLM server: {count} of 3 answer (127.0.0.1:"
            if count and not wait_for(lambda said=said: any(line.startswith(said) for line in list(lines)), 60):
                missed.append(said)
            path.touch()

    loader = threading.Thread(target=load_one_by_one, daemon=True)
    loader.start()
    with llm_server.serving(_exec(tmp_path), spec, log=lines.append):
        pgid = int((tmp_path / "server.pgid").read_text())
        assert loaded[2].exists()  # not when the first answered
        for port in ports:  # every one answers once the wait is over
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                pass
    loader.join(5)
    assert missed == [], lines  # each change of how many answer was said while the wait went on
    progress = [line.split(" answer ")[0] for line in lines if " of 3 answer (" in line]
    assert progress == ["LLM server: 1 of 3", "LLM server: 2 of 3"], lines
    assert not _group_alive(pgid)  # the stop reached every server of the group
    for port in ports:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, port
    assert f"LLM server answers on 127.0.0.1:{ports[0]}-{ports[-1]} (3 servers) after" in " ".join(lines)


def test_a_rank_that_never_answers_times_out_naming_it_and_what_answered(tmp_path: Path) -> None:
    up, stuck = _free_ports(2)
    loading = f"python3 -c 'import time; time.sleep(300)' --port {stuck}"  # named on its command line: waited for
    argv = ("bash", "-c", f"python3 -m http.server {up} --bind 127.0.0.1 --directory {tmp_path} & {loading}")
    spec = _multi_spec(tmp_path, argv, [up, stuck], ready_timeout_s=3.0)
    began = time.monotonic()
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    # Bounded by the 3 s readiness timeout, not the default 1800 s (the margin is a loaded machine's, as above).
    assert time.monotonic() - began < 60
    text = str(info.value)
    assert f"did not answer on http://127.0.0.1:{stuck}/health within 3s (answered: 127.0.0.1:{up})" in text, text
    assert not (tmp_path / "server.pgid").exists()


def test_a_rank_that_exits_ends_the_wait_at_once_naming_it(tmp_path: Path) -> None:
    up, gone = _free_ports(2)
    dies = f"python3 -c 'import sys; sys.exit(1)' --port {gone}"
    argv = ("bash", "-c", f"python3 -m http.server {up} --bind 127.0.0.1 --directory {tmp_path} & {dies}; wait")
    spec = _multi_spec(tmp_path, argv, [up, gone], ready_timeout_s=120.0)
    began = time.monotonic()
    with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
        pytest.fail("the body must not run")
    assert time.monotonic() - began < spec.ready_timeout_s  # not the 120 s timeout
    text = str(info.value)
    assert f"answers on 127.0.0.1:{up} but nothing in its process group listens on or names 127.0.0.1:{gone}" in text, (
        text
    )
    assert f"each server's log is in {tmp_path / 'servers'}" in text


def test_any_taken_port_of_the_servers_is_refused_naming_it(tmp_path: Path) -> None:
    free, taken = _free_ports(2)
    with socket.socket() as other:
        other.bind(("127.0.0.1", taken))
        other.listen()
        spec = _multi_spec(tmp_path, _ranks(tmp_path, [free, taken]), [free, taken])
        with pytest.raises(BenchmarkFailed) as info, llm_server.serving(_exec(tmp_path), spec):
            pytest.fail("the body must not run")
    text = str(info.value)
    assert f"something already listens on 127.0.0.1:{taken} (another LLM server?)" in text, text
    assert f"127.0.0.1:{free}" not in text
    assert not (tmp_path / "server.pgid").exists()  # nothing was started


def test_spec_needs_a_server_address() -> None:
    with pytest.raises(ValueError):
        ServerSpec(argv=("make",), urls=())
    with pytest.raises(ValueError):
        ServerSpec(argv=("make",), urls=("nohostport",))
