"""What makes a recorded result set *itself*, and what makes two runs *of the same kind*.

* :func:`result_identity` - the identity of a result set, the same whichever way it is recorded
  (``workload run``, or ``results FOLDER --record`` of the run folder, of a copy of it): a SHA-256
  of the run id ``run.json`` gives (None for a folder without one) and of what was measured where
  (host, benchmark, scenario, mode, every metric's name, value and unit). A result set with no
  result (a refused or failed run) and no run id is named by its folder. ``compare --baseline``
  computes the identity of the run it is given and never picks a recorded run with the same
  identity: a run is never its own baseline.
* :func:`run_kind` - a SHA-256 of what decides whether two runs can be compared as baseline and
  candidate: the profile (case-insensitive), the parameters that change results, the SKUs of the
  hosts and the host count. The parameters are the profile's ``Parameters`` and its actions (type
  and resolved parameters, as ``profile.json`` of the run folder has them: ``--scenarios`` leaves
  out actions, ``--parameters`` changes values); all count except secrets, which are stored
  masked (``***``), so a rotated token does not make a new kind. ``last-good`` only picks runs of
  the candidate's kind.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from workload.metrics.model import BenchmarkResult


def _digest(document: Any) -> str:
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def result_identity(results: Sequence[BenchmarkResult], *, run_id: str | None, folder: str) -> str:
    """The identity of ``results`` of the run ``run_id`` (None: a folder without run.json) in ``folder``."""
    if not results and run_id is None:
        return _digest(["empty", folder])
    measured = sorted(
        [
            str(r.host or ""),
            str(r.benchmark_full or r.model or ""),
            str(r.scenario or ""),
            str(r.test_mode or ""),
            sorted([m.name, repr(float(m.value)), m.unit or ""] for m in r.metrics),
        ]
        for r in results
    )
    return _digest(["results", run_id, measured])


def run_kind(
    profile: str | None,
    parameters: Mapping[str, Any],
    skus: Iterable[str | None],
    host_count: int,
    actions: Sequence[Any] = (),
) -> str:
    """The kind of a run (see the module's docstring); ``parameters`` and ``actions`` already masked."""
    return _digest(
        {
            "profile": (profile or "").lower(),
            "parameters": {str(k): v for k, v in parameters.items()},
            "actions": list(actions),
            "skus": sorted(s or "" for s in skus),
            "hosts": host_count,
        }
    )
