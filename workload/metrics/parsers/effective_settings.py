"""``effective_settings.json``: what our LoadGen runner (``workload.loadgen.runner``, run by the
LoadGenExecutor) was asked and what LoadGen used, written next to the LoadGen logs of every run.

It holds no metric; it tells the verdict that the result is the runner's, whose ``user.conf`` is
rewritten from the profile parameters on every run: a fix must then name the parameter to pass
(``--parameters OfflineTargetQps=224``), not a user.conf line. A JSON object without the runner's
keys (``conf_model``, ``user_conf``) is another tool's file and is left alone.
"""

from __future__ import annotations

from workload.metrics.raw import NOT_JSON, RUNNER_LOADGEN, RawResult


def parse(path: str, text: str, raw: RawResult) -> None:
    """Mark ``raw`` as a result of the LoadGen runner when ``text`` (from ``path``) is its settings record."""
    data = raw.load_json(path, text)
    if data is NOT_JSON:
        return
    if isinstance(data, dict) and isinstance(data.get("conf_model"), str) and isinstance(data.get("user_conf"), dict):
        raw.runner = RUNNER_LOADGEN
        raw.files.append(path)
