"""MLPerf Inference v4.1 accuracy targets (submission checker ``accuracy-target``), by ``benchmark_full``.

Used only when a result has accuracy figures but no NVIDIA metadata.json to say pass/fail (an
``accuracy.txt`` on its own). Each entry: metric name -> (lower bound, upper bound or None).
"""

from __future__ import annotations

TARGETS: dict[str, dict[str, tuple[float, float | None]]] = {
    "bert-99": {"F1": (89.96526, None)},
    "bert-99.9": {"F1": (90.783126, None)},
    "3d-unet-99": {"DICE": (0.853083, None)},
    "3d-unet-99.9": {"DICE": (0.860838, None)},
    "gptj-99": {
        "ROUGE1": (42.5566, None),
        "ROUGE2": (19.9223, None),
        "ROUGEL": (29.6882, None),
        "GEN_LEN": (3615190.2, None),
    },
    "gptj-99.9": {
        "ROUGE1": (42.9435, None),
        "ROUGE2": (20.1034, None),
        "ROUGEL": (29.9581, None),
        "GEN_LEN": (3615190.2, None),
    },
    "llama2-70b-99": {
        "ROUGE1": (43.9869, None),
        "ROUGE2": (21.8148, None),
        "ROUGEL": (28.3300, None),
        "TOKENS_PER_SAMPLE": (265.005, 323.895),
    },
    "llama2-70b-99.9": {
        "ROUGE1": (44.3868, None),
        "ROUGE2": (22.0132, None),
        "ROUGEL": (28.5876, None),
        "TOKENS_PER_SAMPLE": (265.005, 323.895),
    },
}


def target(benchmark_full: str | None, metric: str) -> tuple[float, float | None] | None:
    """The (lower, upper) target of ``metric`` for ``benchmark_full``, or None if unknown."""
    if not benchmark_full:
        return None
    return TARGETS.get(benchmark_full.lower(), {}).get(metric.upper())
