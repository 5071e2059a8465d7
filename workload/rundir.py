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

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a host or step name (``10.0.0.4:2222`` -> ``10.0.0.4_2222``)."""
    return _UNSAFE.sub("_", text).strip("_") or "_"


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
        path = self.root / safe_name(host)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def step_log(self, host: str, index: int, type_name: str, scenario: str | None) -> Path:
        suffix = f"-{safe_name(scenario)}" if scenario and scenario != type_name else ""
        return self.host_dir(host) / f"{index:02d}-{type_name}{suffix}.log"

    def write_json(self, name: str, data: Any) -> Path:
        path = self.root / name
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path
