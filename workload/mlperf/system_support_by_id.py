"""System support of rounds that name systems by id (``"system_support": "by id"`` in their round.json: v5.1).

NVIDIA's v5.1 ``scripts.get_system_id`` prints the runtime system's id: NVIDIA's (``B200-SXM-180GBx8``) or, for a
machine its list does not know, ``UNREGISTERED_<arch>_<gpu>x<n>``, with which the harness would silently run
``configs/minimal``. :func:`prepare_by_id` never lets that happen:

* a known system whose config files exist runs NVIDIA's configs as they are (no SYSTEM_NAME);
* a known system lacking a file, or an unknown one, without ``RequireCustomSystemSupport``: refused (unknown: the
  step fails naming GPU/CPU, the parameter and, for a GPU the round does not tune, the last round that does;
  known: those results are blocked, naming the missing file);
* with it: a custom system ``WL_<SKU>x<n>`` (SYSTEM_NAME) gets its files ``configs/<id>/<Scenario>/<bench>.py``
  from gpuconfigs (another round's values, marked untuned in the file and the log, for a GPU this round does not
  tune). NVIDIA's files are never written: ours live in our own folder and carry our header.
"""

from __future__ import annotations

import posixpath

from workload.errors import ProfileError
from workload.mlperf import config_sources, custom_system
from workload.mlperf.catalog import workload_setting
from workload.mlperf.exports_config import config_path
from workload.mlperf.gpuconfigs import load_table
from workload.mlperf.ops import IdentifySystem
from workload.mlperf.rounds.v5_1 import (
    custom_files,
    custom_system_id,
    is_unregistered,
    missing_configs,
    system_answer,
)
from workload.mlperf.system_support import SystemSupport, tail
from workload.mlperf.tuning import decide


def prepare_by_id(support: SystemSupport, op: IdentifySystem) -> tuple[dict[tuple[str, str], str], str | None]:
    """Run the check; return (blocked results with why, the SYSTEM_NAME to pass or None)."""
    ctx, settings, nvidia = support.ctx, support.settings, support.facts.nvidia_dir
    assert nvidia
    argv = list(op.argv)
    code, output = support.container.exec(argv, on_line=ctx.line_sink(echo=False))
    answer = system_answer(output)
    if code != 0 or answer is None:
        raise support.fail(
            f"the harness's system detection failed: `{' '.join(argv)}` exited {code} without printing a system id; "
            f"its output:\n{tail(output, 20) or '    (none)'}",
            ctx,
            hint="fix the harness or the container (the output above says what broke), then run again",
        )
    ctx.log(f"harness system: {answer}")
    model, scenarios = settings.model, settings.scenarios
    if not is_unregistered(answer):
        missing = missing_configs(answer, model, scenarios, lambda p: ctx.host.exists(posixpath.join(nvidia, p)))
        if not missing:
            support.sources = config_sources.nvidia(scenarios, settings.benchmarks, answer)
            return {}, None
        if not op.custom_support:
            blocked = {
                (s, b): f"NVIDIA's harness has no {config_path(answer, model, s)} for {answer} and would run "
                "configs/minimal; set the parameter RequireCustomSystemSupport=true to add one from gpuconfigs/"
                for s in scenarios
                if config_path(answer, model, s) in missing
                for b in settings.benchmarks
            }
            support.sources = config_sources.nvidia(scenarios, settings.benchmarks, answer, blocked=blocked)
            return blocked, None
    system = support._system(ctx)
    # The table the values come from: the round's own for a GPU it tunes, else the last round that tunes it.
    tuning = decide(support.round.name, system.gpu_name, system.gpu_memory_mib)
    if not op.custom_support:
        if tuning is not None and tuning.refuses:  # a GPU the round does not tune: the refusal plan shows too
            refusal = tuning.refusal()
            raise support.fail(refusal.message, ctx, hint=refusal.hint)
        raise support.fail(
            f"the harness does not recognise this system ({system.describe()}): it reports {answer} and would run "
            "configs/minimal",
            ctx,
            hint="set the parameter RequireCustomSystemSupport=true to run it as a custom system (SYSTEM_NAME)",
        )
    try:
        table = load_table(harness_round=tuning.values_round if tuning and tuning.values_round else support.round.name)
        sku = table.sku_for_gpu(system.gpu_name)
        settings_list = list(dict.fromkeys(workload_setting(model, cv) for cv in settings.config_versions))
        files = custom_files(system, sku, model, scenarios, settings_list, allow_untuned=True)
    except ProfileError as exc:
        raise support.fail(exc.message, ctx, hint=exc.hint) from None
    except custom_system.CustomSystemError as exc:
        raise support.fail(str(exc), ctx) from None
    try:
        written = custom_system.install(ctx.host, nvidia, None, [f for f, _ in files], make_dirs=True)
    except custom_system.CustomSystemError as exc:
        raise support.fail(str(exc), ctx) from None
    name = custom_system_id(system, sku)
    ctx.log(f"custom system {name} ({system.describe()}): {', '.join(written)}")
    for scenario, (_, provenance) in zip(scenarios, files, strict=True):
        for setting, item in zip(settings_list, provenance, strict=True):
            if item.untuned:
                ctx.log(f"untuned: {item.untuned}")
            benchmark = config_sources.benchmark_of(model, setting.accuracy)
            support.sources.setdefault(
                (scenario, benchmark), config_sources.generated(name, [item.source], item.untuned)
            )
    return {}, name
