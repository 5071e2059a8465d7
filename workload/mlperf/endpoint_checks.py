"""What a v6.1 run through MLCommons' endpoints client (``Client=endpoints``) cannot do, refused before it runs.

:func:`check` is pure (parameters in, a :class:`~workload.errors.ProfileError` naming the parameter out). It runs at
profile load (``MLPerfExecutor.check_parameters``, so ``workload plan`` and ``workload run`` both stop before any
step) and again in the v6.1 plan (:meth:`~workload.mlperf.rounds.v6_1.V6_1Round.system_check`), for callers that
plan without loading a profile. Each refusal is a result the run would otherwise produce under a false name:

* ``TestModes`` other than PerformanceOnly. The client's config this run writes
  (:func:`workload.mlperf.rounds.v6_1.configgen.endpoint_config`) has one ``type: performance`` dataset and no accuracy
  one; ``from-config`` then runs performance only (``mlcommons/endpoints`` ``commands/benchmark/cli.py``
  ``from_config``: ``--mode``, else both phases for a ``type: submission`` config, else perf). Its accuracy phase
  needs a ``datasets`` entry of ``type: accuracy`` whose ``accuracy_config`` names the scorer (``eval_method``),
  the answer ``extractor`` and the ``ground_truth`` column of that dataset (``config/schema.py`` ``Dataset``,
  ``AccuracyConfig``; ``commands/benchmark/execute.py`` ``_load_datasets``: "--accuracy-only requires at least one
  accuracy dataset", ``_resolve_accuracy_components``: "requires accuracy_config with eval_method"), and this run
  neither prepares the benchmark's accuracy dataset with its ground truth in the client's format nor names it
  there. AccuracyOnly would be a performance run filed as an accuracy result; SubmissionRun (LoadGen's performance
  and accuracy in one run; the client's ``type: submission``) needs the same dataset; FindPeakPerformance is
  LoadGen's search for the highest passing rate, and the client has no such search (its ``LoadPatternType``:
  ``max_throughput``, ``poisson``, ``concurrency``, ``agentic_inference``; ``burst`` and ``step`` are declared there
  but not implemented upstream), it runs one load.
* ``LoadGenOverrides`` (or an override given as a parameter named like its key) that this run's model and
  scenarios would read. NVIDIA's harness takes them as RUN_ARGS fields of ``make run_harness``
  (:func:`workload.mlperf.harness.run_groups`); with the client there is no ``make run_harness`` and no LoadGen
  ``user.conf``: the client's settings come from its own config
  (:func:`~workload.mlperf.rounds.v6_1.configgen.endpoint_config` writes none of them), so they would be silently
  ignored. Overrides for another model or a scenario not run are only noted by the plan, as for the harness.
"""

from __future__ import annotations

from workload.errors import ProfileError
from workload.mlperf.harness import LoadGenOverride, parse_override, parse_override_list
from workload.mlperf.settings import MLPerfParameters, Settings

#: The one test mode the client's run here produces.
RUNS = "PerformanceOnly"
#: Modes that need the client's accuracy phase (SubmissionRun: performance and accuracy, the client's type: submission).
ACCURACY_MODES = ("AccuracyOnly", "SubmissionRun")
WHY_NO_ACCURACY = (
    "the client's accuracy phase, which scores its answers to the benchmark's accuracy dataset against that "
    "dataset's ground truth, read from a datasets entry of type accuracy (accuracy_config: eval_method, extractor, "
    "ground_truth column; mlcommons/endpoints config/schema.py, commands/benchmark/execute.py _load_datasets); this "
    "run neither prepares that dataset nor names it in the client's config, so the client would run a performance "
    "test only"
)
WHY_NO_PEAK = (
    "FindPeakPerformance is LoadGen's search for the highest passing rate, and the client has none (it runs one "
    "load: max_throughput, or Poisson at one target QPS)"
)


def check(params: MLPerfParameters, settings: Settings) -> None:
    """ProfileError naming the parameter when ``Client=endpoints`` is asked for what its run cannot give."""
    if params.Client != "endpoints":
        return
    modes = [m for m in settings.test_modes if m != RUNS]
    if modes:
        reasons = []
        accuracy = [m for m in modes if m in ACCURACY_MODES]
        if accuracy:
            reasons.append(f"{' and '.join(accuracy)} need{'s' if len(accuracy) == 1 else ''} {WHY_NO_ACCURACY}")
        if "FindPeakPerformance" in modes:
            reasons.append(WHY_NO_PEAK)
        default = (
            ""
            if "TestModes" in params.model_fields_set
            else f" (TestModes not given: its default is {params.TestModes})"
        )
        raise ProfileError(
            "TestModes",
            f"MLCommons' endpoints client (Client=endpoints) runs only {RUNS} here, not {', '.join(modes)}{default}: "
            + "; ".join(reasons)
            + f". Set TestModes={RUNS}, or Client=harness for the other modes (NVIDIA's harness runs them)",
        )
    read = [o for o in settings.overrides if any(o.applies_to(settings.model, s) for s in settings.scenarios)]
    if read:
        parameter = _parameter_of(params, read[0])
        rate = any(o.key == "target_qps" for o in read)
        raise ProfileError(
            parameter,
            f"MLCommons' endpoints client (Client=endpoints) does not read LoadGen overrides: NVIDIA's harness takes "
            f"them as RUN_ARGS fields of make run_harness, which the client replaces, and the client's own config "
            f"(endpoint.yaml) gets none of them, so {', '.join(o.name for o in read)} would be silently ignored; "
            "remove them"
            + (
                " (the client's Server / Interactive rate is the parameter ServerTargetQps / InteractiveTargetQps)"
                if rate
                else ""
            )
            + ", or run with Client=harness",
        )


def _parameter_of(params: MLPerfParameters, override: LoadGenOverride) -> str:
    """Where the user gave ``override``: ``LoadGenOverrides``, else the parameter named like its key."""
    try:
        given = parse_override_list(params.LoadGenOverrides or "")
    except ValueError:
        given = []
    if override in given:
        return "LoadGenOverrides"
    for key, value in (params.model_extra or {}).items():
        if key.count(".") == 2 and parse_override(key, value) == override:
            return key
    return "LoadGenOverrides"
