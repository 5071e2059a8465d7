"""GPU qualification (``PERF-GPU-QUALIFY``): real LoadGen on every GPU alone and on all at once, then verdicts.

* :mod:`.verdicts` - pure functions of recorded per-GPU figures (parity, throttling, output agreement,
  math throughput against a matmul probe);
* :mod:`.models` - the model interface: a BERT-large-shaped ``torch.nn.TransformerEncoder`` (the ``gpu``
  extra, imported lazily) and a small numpy stand-in for the CPU and CI;
* :mod:`.probe` - one pinned process: the fixed sample set's outputs and the matmul peak probe.
"""
