"""Per-round facts of NVIDIA's harness the gpuconfigs table is validated against.

Which benchmarks (``--benchmarks`` names), scenarios and config file layout each harness round has, which
fields a scenario cannot do without, which fields scale with the GPU count. Pure data: the per-round values are
read from the rounds' data files; :mod:`workload.mlperf.gpuconfigs_schema` checks every table file against them.
"""

from __future__ import annotations

from workload.mlperf.catalog import SCENARIOS
from workload.mlperf.round_spec import builtin_specs

#: Fields that scale with the number of GPUs (throughput); everything else is per system as is.
THROUGHPUT_FIELDS = ("offline_expected_qps", "server_target_qps")
#: The field each scenario cannot do without (the harness sizes the LoadGen run from it).
REQUIRED_BY_SCENARIO = {
    "Offline": "offline_expected_qps",
    "Server": "server_target_qps",
    "SingleStream": "single_stream_expected_latency_ns",
    "MultiStream": "multi_stream_expected_latency_ns",
}
#: NVIDIA's ``AccuracyTarget`` members: 99 % and 99.9 % of the reference accuracy.
ACCURACY_TARGETS = ("k_99", "k_99_9")

# The per-round facts are each round's data (``round.json`` of its folder, :mod:`workload.mlperf.round_spec`), with
# the upstream file of every value; here they are only gathered for the tables of the ``entries`` form.
_TABLED = [s for s in reversed(builtin_specs()) if s.data.gpuconfigs and s.data.gpuconfigs.form == "entries"]

#: Rounds with a table of the ``entries`` form, oldest first, and the folder of its files below ``gpuconfigs/``
#: ("" = the folder itself).
ROUNDS: dict[str, str] = {spec.name: spec.data.gpuconfigs.folder for spec in _TABLED if spec.data.gpuconfigs}
#: The round a file without ``"round"`` belongs to (the one whose files lie in ``gpuconfigs/`` itself: written before
#: rounds had folders).
DEFAULT_ROUND = next(name for name, folder in ROUNDS.items() if folder == "")
#: ``--benchmarks`` names each round's harness has (``benchmarks`` of its ``round.json``).
ROUND_MODELS: dict[str, tuple[str, ...]] = {spec.name: spec.data.benchmarks for spec in _TABLED}
#: Scenarios of each round (``scenarios`` of its ``round.json``; v5.1 adds ``Interactive``).
ROUND_SCENARIOS: dict[str, tuple[str, ...]] = {spec.name: spec.data.scenarios or SCENARIOS for spec in _TABLED}
#: Where NVIDIA's config file of a round lies (``gpuconfigs.file_pattern`` of its ``round.json``).
ROUND_FILE_PATTERNS: dict[str, str] = {
    spec.name: spec.data.gpuconfigs.file_pattern or "" for spec in _TABLED if spec.data.gpuconfigs
}
#: What one entry of a round's table is called in messages (``class`` or ``config``).
ENTRY_KINDS: dict[str, str] = {spec.name: spec.data.gpuconfigs.entry_kind for spec in _TABLED if spec.data.gpuconfigs}
