"""Where the real upstream sources are for conformance tests: ``$WORKLOAD_UPSTREAM``, else ``../shared/upstream``.

They are read at test time, never copied (see ``../shared/upstream/README.md``). Where they are absent a test
that needs them is skipped, except under CI (``CI=true``), where their absence is a failure: CI runs in a clone
whose sibling is ``shared/``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: MLCommons' submission checker below the upstream root (run as ``python3 -m submission_checker.main``)
CHECKER_TOOLS = Path("mlcommons-inference/tools/submission")


def upstream_root() -> Path:
    """The upstream root, or skip (fail under CI) when it does not hold MLCommons' checker."""
    root = Path(os.environ.get("WORKLOAD_UPSTREAM") or REPO.parent / "shared" / "upstream")
    if not (root / CHECKER_TOOLS / "submission_checker" / "constants.py").is_file():
        message = f"MLCommons' submission checker not found under {root} (set WORKLOAD_UPSTREAM)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return root
