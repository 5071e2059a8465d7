"""Plan operation for a v6.1 run through MLCommons' endpoints client instead of NVIDIA's LoadGen harness.

:class:`RunEndpointsClient` writes the client's config (the schema of NVIDIA's v6.1 ``endpoint.yaml`` files, see
:func:`workload.mlperf.rounds.v6_1.configgen.endpoint_config`) into the checkout, then runs
``inference-endpoint benchmark from-config -c <config> --timeout <s>`` in the harness container (Offline: every
sample at once; Server and Interactive: a Poisson load at a target QPS, :mod:`workload.mlperf.endpoint_target`)
against the trtllm-serve servers a :class:`~workload.mlperf.server_ops.StartServer` before it started, every one in
``endpoint_config.endpoints`` (the client spreads the load over them by worker: see
:func:`~workload.mlperf.rounds.v6_1.configgen.endpoint_config`). The client writes its report (``config.yaml``,
``performance/result_summary.json``, ``accuracy/accuracy_results.json``, ``report.txt``) into the run's
``LOG_DIR/<system>_TRT/<benchmark>/<Scenario>``, where the ``CollectResults`` after it finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from workload.commands import Command
from workload.mlperf.ops import ContainerRef, Op
from workload.mlperf.results import Expected
from workload.mlperf.server_urls import describe


@dataclass(frozen=True)
class RunEndpointsClient(Op):
    container: ContainerRef
    #: The config file, relative to closed/NVIDIA (the container's /work), and its text.
    config_path: str
    config_text: str
    argv: tuple[str, ...]
    #: The run's LOG_DIR relative to closed/NVIDIA, what it must produce, and for messages.
    log_dir: str
    expected: tuple[Expected, ...]
    scenarios: tuple[str, ...]
    test_mode: str
    #: The servers the client sends to (``host:port`` each; its workers spread over them).
    urls: tuple[str, ...]
    #: How the queries are sent, for the summary (``Poisson at 12.5 queries/s (the parameter ServerTargetQps)``).
    load: str = ""

    def summary(self) -> str:
        load = f", {self.load}" if self.load else ""
        return (
            f"run MLCommons' endpoints client ({', '.join(self.scenarios)} {self.test_mode}) against "
            f"{describe(self.urls)}{load}, its config written to {self.config_path}"
        )

    def commands(self) -> tuple[Command, ...]:
        return (self.container.command(self.argv),)
