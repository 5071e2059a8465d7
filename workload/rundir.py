"""The run folder: one per ``workload run``, everything a run produced, nothing else.

Layout::

    <output-dir>/<YYYYmmdd-HHMMSS>-<profile>/
        profile.json            the resolved profile (references inlined, overrides applied)
        run.json                hosts, options, start/end, outcome of each host and step
        <host>/NN-<Type>[-<Scenario>].log    one log per step: commands and their output
        <host>/results/...      result files of the actions (copied back from remote hosts)
        metrics.jsonl  metrics.csv  summary.json   merged over all hosts
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workload.safefile import atomic_write_text

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a step or profile name (``10.0.0.4:2222`` -> ``10.0.0.4_2222``).

    Not one-to-one (``a:b`` and ``a_b`` give the same name): host folders use :func:`host_folder_name`.
    """
    return _UNSAFE.sub("_", text).strip("_") or "_"


_PLAIN_HOST = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


#: folders the run folder holds besides the hosts' (a host with such a name gets the hashed form)
RUN_FOLDER_NAMES = frozenset({"telemetry"})


def host_folder_name(host: str) -> str:
    """The name of ``host``'s folder in a run folder: one-to-one, and always a plain child folder.

    A name of letters, digits, ``.``, ``_`` and ``-`` (not starting with ``.``, at most 100
    characters) is its own folder name (``vm-07``, ``10.0.0.4``) unless the run folder uses that name
    itself (:data:`RUN_FOLDER_NAMES`: a host called ``telemetry``). Any other name (``10.0.0.4:2222``,
    ``ü``, ``..``, ``.``) becomes its :func:`safe_name` (cut to 60 characters) plus ``~`` and 16 hex
    digits of its SHA-256: ``~`` never occurs in a plain name, so a changed name cannot meet a plain
    one, and two changed names meet only if their hashes do. Neither form can be ``.`` or ``..``
    or contain ``/``, so every host writes inside the run folder.
    """
    if _PLAIN_HOST.fullmatch(host) and host not in RUN_FOLDER_NAMES:
        return host
    digest = hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe_name(host)[:60]}~{digest}"


def remote_run_name(root: Path) -> str:
    """The name of run folder ``root`` on the hosts it runs on remotely (their state folders).

    A run id (``<UTC second>-<profile>``) is unique only within its output folder, so two controllers, or two
    output folders of one controller, starting a run in the same second against one host would write into one
    remote folder. The id is kept readable and made unique by 12 hex digits of a SHA-256 of this controller's
    host name and the run folder's absolute path.
    """
    origin = f"{socket.gethostname()}\0{root.resolve()}"
    return f"{root.name}~{hashlib.sha256(origin.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


@dataclass
class RunFolder:
    root: Path

    @classmethod
    def create(cls, output_dir: Path, profile_name: str, *, now: datetime | None = None) -> RunFolder:
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
        base = output_dir / f"{stamp}-{safe_name(profile_name)}"
        output_dir.mkdir(parents=True, exist_ok=True)
        # mkdir without exist_ok claims the name atomically: two runs started in the same second
        # get -2, -3... instead of one of them crashing (a check-then-create race).
        root, n = base, 1
        while True:
            try:
                root.mkdir()
                return cls(root)
            except FileExistsError:
                n += 1
                root = base.with_name(f"{base.name}-{n}")

    @property
    def run_id(self) -> str:
        return self.root.name

    def host_dir(self, host: str) -> Path:
        """``host``'s folder (made on first use); a link planted in its place is refused."""
        path = self.root / host_folder_name(host)
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
        except FileExistsError:
            if path.is_symlink() or not path.is_dir():
                raise FileExistsError(f"{path} is not a folder this run made (a link or a file)") from None
        return path

    def step_log(self, host: str, index: int, type_name: str, scenario: str | None) -> Path:
        suffix = f"-{safe_name(scenario)}" if scenario and scenario != type_name else ""
        return self.host_dir(host) / f"{index:02d}-{type_name}{suffix}.log"

    def write_json(self, name: str, data: Any) -> Path:
        text = json.dumps(data, indent=2, sort_keys=False, default=str) + "\n"
        return atomic_write_text(self.root / name, text)
