"""Driving NVIDIA's MLPerf Inference harness (``closed/NVIDIA`` of an inference_results repository).

Modules, one job each:

* :mod:`~workload.mlperf.catalog` - models, scenarios and config versions the harness knows.
* :mod:`~workload.mlperf.harness` - make targets, RUN_ARGS, the per-run LOG_DIR, user.conf.
* :mod:`~workload.mlperf.container` - the harness container through the docker SDK.
* :mod:`~workload.mlperf.system` - the host's GPUs, CPU and memory.
* :mod:`~workload.mlperf.gpuconfigs` - NVIDIA's published config values, per class.
* :mod:`~workload.mlperf.nvidia_fields` - fields NVIDIA's registry allows only for its own systems.
* :mod:`~workload.mlperf.custom_system` - generated ``custom_list.py`` / ``custom.py`` files.
* :mod:`~workload.mlperf.results` - this run's results, mapped to (model, scenario, mode).
"""
