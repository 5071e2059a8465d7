"""``accuracy.txt``: the stdout of the MLCommons accuracy scripts, as captured by the NVIDIA harness.

Patterns (the submission checker's ``ACC_PATTERN``): bert ``{"exact_match": x, "f1": y}``; 3d-unet
``Accuracy: mean = x``; ROUGE dicts ``'rouge1': x`` (and rouge2, rougeL, rougeLsum); ``'tokens_per_sample': x``;
``'gen_len': x``; ``'gen_num': x``. Only the figures are read here; targets come from metadata.json
or, failing that, :mod:`workload.metrics.thresholds`.
"""

from __future__ import annotations

import json
import math
import re

from workload.metrics.model import AccuracyCheck
from workload.metrics.raw import RawResult

_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_SQUAD = re.compile(r'^\{"exact_match": ' + _NUMBER + r', "f1": ' + _NUMBER + r"\}", re.MULTILINE)
_DICE = re.compile(r"Accuracy: mean = " + _NUMBER)
_DICT_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum", "tokens_per_sample", "gen_len", "gen_num")
_DICT_ITEM = re.compile(r"'(" + "|".join(_DICT_KEYS) + r")': (?:np\.float64\()?" + _NUMBER)


def _float(text: object) -> float:
    """A figure as a float; ``inf`` for numbers too large for one (refused below as not finite)."""
    try:
        return float(text)  # type: ignore[arg-type]
    except OverflowError:
        return math.inf


def parse(path: str, text: str, raw: RawResult) -> None:
    """Read accuracy figures from ``text`` (from ``path``) into ``raw``; a figure that is not a finite number
    (``nan``, an overflowing literal) is an issue naming it."""
    found: dict[str, float] = {}
    squad = _SQUAD.search(text)
    if squad:
        try:
            data = json.loads(squad.group(0))
            found["exact_match"] = _float(data["exact_match"])
            found["F1"] = _float(data["f1"])
        except (ValueError, KeyError, TypeError):
            pass
    dice = _DICE.search(text)
    if dice:
        found["DICE"] = _float(dice.group(1))
    for match in _DICT_ITEM.finditer(text):
        # upper-case names match the NVIDIA metadata.json names (ROUGE1, TOKENS_PER_SAMPLE, GEN_LEN)
        found.setdefault(match.group(1).upper(), _float(match.group(2)))
    for name in [k for k, v in found.items() if not math.isfinite(v)]:
        raw.issue(path, f"{name} is {found.pop(name)!r}, not a finite number; the figure was ignored")
    if not found:
        if not raw.issues or raw.issues[-1].path != path:
            raw.issue(path, "no known accuracy pattern (SQuAD exact_match/f1, 'Accuracy: mean =', ROUGE dict) found")
        return
    for name, value in found.items():
        raw.add_accuracy(AccuracyCheck(name=name, value=value))
    raw.files.append(path)
