"""The test bed's ports for the servers tests start: never from the kernel's ephemeral range, never twice at once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.testbed.ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def _ephemeral() -> range:
    low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    return range(low, high + 1)


def test_ports_come_from_outside_the_ephemeral_range_and_two_workers_never_share_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An outgoing connection's local port is taken from the ephemeral range: a port from there, freed and
    bound by a daemon a moment later, may be gone (a 4-worker run: slurmd "Address already in use")."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WORKLOAD_TESTBED_DIR": str(tmp_path)}
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import json; from tests.testbed.ports import free_port; "
            "print(json.dumps([free_port() for _ in range(60)]))",
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    monkeypatch.setenv("WORKLOAD_TESTBED_DIR", str(tmp_path))
    mine = [free_port() for _ in range(30)]
    blocks = [free_port(3) for _ in range(10)]  # consecutive ports for a config's several servers
    mine += [port for base in blocks for port in range(base, base + 3)]
    theirs = json.loads(other.communicate(timeout=60)[0])
    ports = mine + theirs
    assert len(set(ports)) == len(ports)  # reserved: never handed out twice while its taker starts
    assert not [p for p in ports if p in _ephemeral()]
    with socket.socket() as s:  # and free
        s.bind(("127.0.0.1", mine[0]))
