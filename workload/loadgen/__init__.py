"""The embedded CPU benchmark: real MLPerf LoadGen driving a small real ONNX model.

Layout (one job per module):

* :mod:`~workload.loadgen.settings` - what one LoadGen test is asked to do (``settings.json``) and
  the ``user.conf`` rendered from it.
* :mod:`~workload.loadgen.model` - the int8 MiniLM ONNX model (or a user's ONNX file) and the
  synthetic, seeded token ids it is fed.
* :mod:`~workload.loadgen.sut` - the system under test for each scenario, and the QSL.
* :mod:`~workload.loadgen.findperf` - a few-second measurement that picks target QPS / latency.
* :mod:`~workload.loadgen.accuracy` - reference outputs and the cosine-similarity check.
* :mod:`~workload.loadgen.logs` - readers for LoadGen's ``:::MLLOG`` detail log and summary.
* :mod:`~workload.loadgen.runner` - the CLI run as ONE subprocess per (scenario, mode).

Importing this package is cheap: numpy, onnxruntime and LoadGen are imported only by the modules
that use them.
"""
