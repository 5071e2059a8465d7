"""Ports for the servers the tests start (sshd in a VM, slurmd, a stand-in LLM server), safe in parallel workers.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), the same range every outgoing connection takes its
local port from. Freed and handed to a daemon that binds it a moment later, it may be taken in
between by any connection of another worker (SSH to a test VM, the Docker API over TCP): a 4-worker
run had a Slurm node's slurmd fail with "Address already in use" and its cluster never came up.

So :func:`free_port` picks below the ephemeral range, where the kernel never assigns a port by
itself, checks that nothing holds it (a bind), and reserves it for :data:`RESERVED_S` in a file
shared by every session under the test bed's lock, so that two workers never get the same port
while their daemons start. After that the bind check alone decides (the daemon holds it by then).
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from pathlib import Path

from tests.testbed.state import file_lock, state_dir

#: How long a port handed out stays reserved for its taker (its daemon binds it well within this).
RESERVED_S = 120.0
#: How many ports below the ephemeral range to use.
SPAN = 10_000


def _candidates() -> range:
    """Ports no kernel assigns by itself: below the ephemeral range (or above it, where that is low)."""
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - SPAN >= 1024:
        return range(low - SPAN, low)
    return range(high + 1, min(65536, high + 1 + SPAN))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive TCP ports on 127.0.0.1 that nothing holds now and no other test gets
    for :data:`RESERVED_S` seconds (a config with several servers takes one port each, upward)."""
    book = state_dir() / "ports.json"
    every = _candidates()
    candidates = range(every.start, every.stop - count + 1)
    with file_lock("ports"):
        now = time.time()
        try:
            taken = {int(k): float(v) for k, v in json.loads(book.read_text()).items()}
        except (OSError, ValueError, AttributeError):
            taken = {}
        taken = {port: at for port, at in taken.items() if now - at < RESERVED_S}
        for _ in range(200):
            base = random.choice(candidates)
            block = range(base, base + count)
            if not any(port in taken for port in block) and all(_bindable(port) for port in block):
                taken.update(dict.fromkeys(block, now))
                tmp = book.with_name(f"ports.json.{os.getpid()}")
                tmp.write_text(json.dumps({str(k): v for k, v in taken.items()}))
                tmp.replace(book)
                return base
    raise OSError(f"test bed: no {count} free port(s) in {candidates.start}-{candidates.stop - 1} after 200 tries")
