"""``accuracy.txt``: the output of the MLCommons accuracy scripts (as the harness or the submitter kept it).

The figures are read as MLCommons' submission checker reads them: each of the round's
``ACC_PATTERN`` regexes (kept in :mod:`workload.metrics.rules`) is matched at the start of every
line and the last match wins (``accuracy=75.730%, good=...``, ``mAP=37.358%``, ``AUC=...``,
``{"exact_match": x, "f1": y}``, ``Accuracy: mean = x``, ``'rouge1': x`` / ``'rouge1': 'x'``, SDXL's
``'CLIP_SCORE': x`` also on lines of a multi-line dict, ``Word Error Rate: ..., accuracy=x%``,
``'exact_match': x``, ``metric/lifetime_ne/rating: x``, ``'vbench_score': x``, ``{"f1": x}``,
pointpainting's ``'Total': x`` ...). The round is only known once the whole folder is read, so
:func:`parse` keeps the lines and :func:`read_figures` (called by the builder with the round's rules)
turns them into figures. The SQuAD line's ``exact_match`` (bert) is kept as a figure of its own.
A file holding nothing but the submission's ``hash=`` line (compliance folders) has no figure and
is not an error.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Iterable

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import RawResult
from workload.metrics.rules import RoundRules

#: bert's SQuAD line, as the F1 pattern of the checker reads it; its exact_match is kept too
_SQUAD = re.compile(r"^\{[\"']exact_match[\"']:\s*([-+\d.eE]+),\s*[\"']f1[\"']:\s*([-+\d.eE]+)\}", re.MULTILINE)
_HASH_ONLY = re.compile(r"^\s*(?:hash=[\w]+\s*)?$")
_MAX_LINE = 20_000  # a longer line is no figure (and would cost the checker's `.*` patterns quadratic time)


def parse(path: str, text: str, raw: RawResult) -> None:
    """Keep the lines of the accuracy.txt ``text`` (from ``path``) for :func:`read_figures`."""
    lines = [line for line in text.split("\n") if len(line) <= _MAX_LINE]
    raw.accuracy_texts.append((path, lines))


def read_figures(raw: RawResult, rules: RoundRules, prefer: Iterable[str] = ()) -> None:
    """The figures of every accuracy.txt kept in ``raw``, read with ``rules``' patterns, as accuracy checks.

    A figure that is not a finite number is an issue naming it; a file without any figure is an
    issue too, unless it holds only a ``hash=`` line. ``prefer``: the benchmark's own metric names (see
    :meth:`RoundRules.accuracy_figures`).
    """
    for path, lines in raw.accuracy_texts:
        found: dict[str, float] = {}
        squad = _SQUAD.search("\n".join(line for line in lines if "exact_match" in line))
        if squad:
            with contextlib.suppress(ValueError, OverflowError):
                found["exact_match"] = float(json.loads(squad.group(1)))
        found.update(rules.accuracy_figures(lines, prefer))
        for name in [k for k, v in found.items() if not math.isfinite(v)]:
            raw.issue(path, f"{name} is {found.pop(name)!r}, not a finite number; the figure was ignored")
        if not found:
            if not all(_HASH_ONLY.match(line) for line in lines):
                raw.issue(
                    path,
                    f"no accuracy figure found by the {rules.round} submission checker's patterns "
                    "(accuracy=, mAP=, AUC=, SQuAD f1, 'Accuracy: mean =', ROUGE, CLIP/FID, exact_match ...)",
                )
            continue
        for name, value in found.items():
            raw.add_accuracy(AccuracyCheck(name=name, value=value))
        raw.files.append(path)
