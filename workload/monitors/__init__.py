"""Telemetry while actions run (VirtualClient's Monitors): GPUs through ``nvidia-smi --query-gpu``,
the host through ``/proc``.

* :mod:`~workload.monitors.nvsmi` - the query, and the parser of nvidia-smi's CSV output.
* :mod:`~workload.monitors.hostsample` - CPU, memory and load of this machine.
* :mod:`~workload.monitors.sampler` - the background sampler, the files it writes in the run
  folder (``telemetry/``) and their summary (min/avg/max, throttling seen).
* :mod:`~workload.monitors.step` - the profile element types (``NvidiaSmiMonitor``) that set the
  interval, as VirtualClient's ``Monitors`` section does.
"""
