"""Telemetry while actions run (VirtualClient's Monitors): on every host of a run, local or SSH, the
GPUs through ``nvidia-smi --query-gpu`` and the host through ``/proc``.

* :mod:`~workload.monitors.nvsmi` - the query, and the parser of nvidia-smi's CSV output.
* :mod:`~workload.monitors.hostsample` - a host's CPU, memory and load from one ``cat`` of ``/proc``.
* :mod:`~workload.monitors.hostmonitor` - one host's sampler: a thread and a connection of its own.
* :mod:`~workload.monitors.stats` - one host's summary (min/avg/max, throttling seen, notes, errors).
* :mod:`~workload.monitors.sampler` - the run-wide monitor: a sampler per host of the run, the files
  in the run folder (``telemetry/``) and the console lines of their summary.
* :mod:`~workload.monitors.step` - the profile element types (``NvidiaSmiMonitor``) that set the
  interval, as VirtualClient's ``Monitors`` section does.
"""
