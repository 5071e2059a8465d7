"""The HTML report of a run (``report.html``): one self-contained, offline file.

* :mod:`~workload.report.data` - what a run folder holds, read for the report (verdict, results,
  latency percentiles, retries, telemetry, run metadata).
* :mod:`~workload.report.svg` - inline SVG charts drawn here (bars with a fleet median, lines over
  time or categories); no JavaScript, no fonts or styles from anywhere else.
* :mod:`~workload.report.html` - the page: verdict first, headline table, INVALID reasons and
  fixes, plots, telemetry, trends. Every text from outside is HTML-escaped.
"""
