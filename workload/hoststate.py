"""``HostState``: small persistent key/value state kept ON the target host (it survives reboots).

Stored as JSON at ``/var/lib/workload/state.json`` (root) or in the node's own folder under the
home, ``~/.local/state/workload/nodes/<node>/state.json`` (``WORKLOAD_STATE_PATH`` moves it): nodes
that share a home (NFS, a Slurm cluster) keep a state each. A node without one yet starts from the
file earlier versions kept for the whole home, ``~/.local/state/workload/state.json``, if any.
Two runs may work on one host at once (a fleet run and a ``doctor``, two profiles side by side),
so a change is never "write back what was read at the start": every change is one
read-modify-write on the host, under an exclusive ``flock`` of the state file's folder (no lock
file), written to a temporary made with ``O_EXCL`` (never through a planted link), flushed and renamed over the file
(:data:`UPDATE_SCRIPT`, run by the host's Python). A change that finds the file unreadable (not
JSON, not an object) says so with the file's name and starts from empty.

Values of the wrong shape (a list where a mapping belongs, written by hand or by another version)
never stop a run: :meth:`HostState.mapping` gives an empty mapping and a warning naming the file
and key, and the facts of the host decide what is installed anyway.
"""

from __future__ import annotations

import json
import posixpath
import threading
from typing import Any, Literal

from workload.commands import cmd
from workload.errors import StepError
from workload.hosts.base import Host

#: How the host's Python runs :data:`UPDATE_SCRIPT`: isolated (``-I -S``), so the host's ``PYTHON*``
#: variables, user site and ``site`` hooks can neither break nor slow it. It needs only the standard
#: library, and a run makes hundreds of these (``bench/bench_state_update.py``).
UPDATE_FLAGS = ("-I", "-S")
#: One change to the state file, made on the host by its Python: argv[1] is the file, stdin is
#: ``{"op": "set" | "merge", "key": ..., "value": ...}`` (set with null deletes the key; merge
#: updates a mapping's entries). It prints ``{"data": <the state after>, "problem": <text or "">}``.
UPDATE_SCRIPT = r"""
import fcntl, json, os, sys
path = sys.argv[1]
change = json.loads(sys.stdin.read())
folder = os.path.dirname(path) or "."
os.makedirs(folder, exist_ok=True)
lock = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(lock, fcntl.LOCK_EX)
data, problem, mode = {}, "", 0o644
try:
    with open(path, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode & 0o7777
        raw = f.read()
except FileNotFoundError:
    raw = None
if raw is not None:
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as e:
        data, problem = {}, "not JSON (%s)" % e
    if not isinstance(data, dict):
        data, problem = {}, problem or "not a JSON object"
key, value = change["key"], change["value"]
if change["op"] == "merge":
    old = data.get(key)
    merged = dict(old if isinstance(old, dict) else {}, **value)
    data[key] = {k: v for k, v in merged.items() if v is not None}
elif value is None:
    data.pop(key, None)
else:
    data[key] = value
for _ in range(100):  # mkstemp's way (O_EXCL, a random name, 0600) without importing tempfile at every change
    tmp = os.path.join(folder, ".state.%d.%s.tmp" % (os.getpid(), os.urandom(6).hex()))
    try:
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        break
    except FileExistsError:
        continue
else:
    raise FileExistsError("no free temporary name in " + folder)
try:
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())
        os.fchmod(f.fileno(), mode)
    os.replace(tmp, path)
except BaseException:
    os.unlink(tmp)
    raise
sys.stdout.write(json.dumps({"data": data, "problem": problem}))
"""


class HostState:
    """The host's state file: read once at the start, each change an atomic read-modify-write there.

    ``warnings`` collects problems with the file (unreadable, values of the wrong shape), each
    naming the file; the engine shows them.
    """

    def __init__(self, host: Host, path: str | None = None) -> None:
        self._host = host
        self.path = path or self._default_path(host)
        self._lock = threading.Lock()
        self.warnings: list[str] = []
        try:
            loaded = json.loads(host.read_text(self.path))
        except FileNotFoundError:
            loaded = self._earlier(host) if path is None and not host.is_root else {}
        except ValueError as exc:
            # A corrupt state file must not block a run: facts decide what is installed anyway.
            self._warn(f"it is not JSON ({exc}); starting from an empty state")
            loaded = {}
        if not isinstance(loaded, dict):
            self._warn("it is not a JSON object; starting from an empty state")
            loaded = {}
        self._data: dict[str, Any] = loaded

    @staticmethod
    def _default_path(host: Host) -> str:
        if host.is_root:
            return "/var/lib/workload/state.json"
        return f"{host.identity.state_root}/state.json"

    @staticmethod
    def _earlier(host: Host) -> Any:
        """The state an earlier version kept for the whole home (read once, never written again)."""
        try:
            return json.loads(host.read_text(f"{host.identity.home}/.local/state/workload/state.json"))
        except (OSError, ValueError):
            return {}

    def _warn(self, problem: str) -> None:
        text = f"host state {self.path}: {problem}"
        if text not in self.warnings:
            self.warnings.append(text)

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def mapping(self, key: str) -> dict[str, Any]:
        """The mapping stored under ``key`` (a copy); empty, with a warning, when it is something else."""
        value = self._data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            self._warn(f"{key!r} is not a JSON object; it is ignored")
            return {}
        return dict(value)

    def set(self, key: str, value: Any) -> None:
        """Set one key (None deletes it) in the file on the host, under its lock, at once."""
        if self._data.get(key) == value and (value is not None or key not in self._data):
            return  # nothing to change: no write (re-checking a provisioned host writes nothing)
        self._change("set", key, value)

    def merge(self, key: str, entries: dict[str, Any]) -> None:
        """Update entries of the mapping under ``key`` (None deletes one; other entries, other runs', stay)."""
        current = self._data.get(key)
        current = current if isinstance(current, dict) else {}
        if all(current.get(k) == v and (v is not None or k not in current) for k, v in entries.items()):
            return
        self._change("merge", key, entries)

    def _change(self, op: Literal["set", "merge"], key: str, value: Any) -> None:
        python = self._host.python
        change = json.dumps({"op": op, "key": key, "value": value})
        with self._lock:
            # scope: it changes no fact a step reads, so the facts read so far stay remembered
            update = cmd(
                python, *UPDATE_FLAGS, "-c", UPDATE_SCRIPT, self.path, input=change, timeout=120, scope="workload-state"
            )
            result = self._host.run(update)
            if result.returncode == 127:  # no Python on the host: the same change, without the lock
                self._change_unlocked(op, key, value)
                return
            try:
                answer = json.loads(result.stdout)
                data, problem = answer["data"], answer["problem"]
            except (ValueError, KeyError, TypeError):
                last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
                raise StepError(
                    "host state",
                    f"could not update {self.path} (exit {result.returncode}): {last[0]}",
                    host=self._host.name,
                ) from None
            if problem:
                self._warn(f"{problem}; it was replaced by a new state")
            if isinstance(data, dict):
                self._data = data

    def _change_unlocked(self, op: str, key: str, value: Any) -> None:
        try:
            current = json.loads(self._host.read_text(self.path))
        except (FileNotFoundError, ValueError):
            current = {}
        data: dict[str, Any] = current if isinstance(current, dict) else {}
        if op == "merge":
            old = data.get(key)
            merged = {**(old if isinstance(old, dict) else {}), **value}
            data[key] = {k: v for k, v in merged.items() if v is not None}
        elif value is None:
            data.pop(key, None)
        else:
            data[key] = value
        directory = posixpath.dirname(self.path)
        if not self._host.exists(directory):
            self._host.check(cmd("mkdir", "-p", "--", directory, timeout=60))
        self._host.write_text(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n")
        self._data = data
