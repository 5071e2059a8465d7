"""Where the real upstream sources are for conformance tests: ``$WORKLOAD_UPSTREAM``, else ``../shared/upstream``.

They are read at test time, never copied (see ``../shared/upstream/README.md``). Where they are absent a test
that needs them is skipped, except under CI (``CI=true``), where their absence is a failure: CI runs in a clone
whose sibling is ``shared/``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parent.parent
#: MLCommons' submission checker below the upstream root (run as ``python3 -m submission_checker.main``)
CHECKER_TOOLS = Path("mlcommons-inference/tools/submission")


UPSTREAM_ENV = "WORKLOAD_UPSTREAM"


def root() -> Path:
    """The upstream root: ``$WORKLOAD_UPSTREAM``, else ``shared/upstream`` beside the repository (not checked)."""
    given = os.environ.get(UPSTREAM_ENV)
    return Path(given).expanduser().resolve() if given else (REPO.parent / "shared" / "upstream").resolve()


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason`` (something upstream is missing), or fail it under CI, which must have it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must have them (the upstream sources and their test dependencies)", pytrace=False)
    pytest.skip(reason)


def upstream_root() -> Path:
    """The upstream root, or skip (fail under CI) when it does not hold MLCommons' checker."""
    found = root()
    if not (found / CHECKER_TOOLS / "submission_checker" / "constants.py").is_file():
        unavailable(f"MLCommons' submission checker not found under {found} (set {UPSTREAM_ENV})")
    return found
