"""The systems under test, one per LoadGen scenario, and how they answer LoadGen.

* Offline: LoadGen issues every sample at once; one worker thread runs them in batches of
  ``offline_batch_size`` so the issue callback returns at once.
* Server: samples arrive one by one (Poisson); ``server_workers`` threads each take up to
  ``server_max_batch`` queued samples at a time (dynamic batching keeps latency low at low load
  and throughput high at high load).
* SingleStream / MultiStream: the query is run directly in the issue callback (one sample, or
  the MultiStream query's samples as one batch); LoadGen waits for each query anyway.

Every answer carries the embedding bytes (float32, ``hidden`` values per sample) so LoadGen's
accuracy log holds the outputs. The array that owns those bytes is kept referenced until
``QuerySamplesComplete`` returns, which is when LoadGen has copied them.

A model failure never leaves LoadGen waiting: the failed samples are completed (with no data)
and the first error is kept in :attr:`SUT.error` for the runner to report.
"""

from __future__ import annotations

import abc
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from workload.loadgen.model import Embedder, FloatArray, TokenBatch
from workload.loadgen.settings import RunSettings, Scenario


class Sample(Protocol):
    """What LoadGen's ``QuerySample`` offers: a response id and a QSL index."""

    @property
    def id(self) -> int: ...

    @property
    def index(self) -> int: ...


#: Answers samples: ``(response ids, embeddings with one row per id)``, or ``None`` rows on failure.
Responder = Callable[[Sequence[int], FloatArray | None], None]


def loadgen_responder() -> Responder:
    """A responder that hands results to LoadGen with ``QuerySamplesComplete``."""
    import mlperf_loadgen as lg

    def respond(ids: Sequence[int], out: FloatArray | None) -> None:
        if out is None:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])
            return
        data = np.ascontiguousarray(out, dtype=np.float32)
        row_bytes = int(data.shape[1]) * data.itemsize
        base = int(data.ctypes.data)
        responses = [lg.QuerySampleResponse(i, base + k * row_bytes, row_bytes) for k, i in enumerate(ids)]
        lg.QuerySamplesComplete(responses)
        # LoadGen copied the bytes inside the call above; only now may ``data`` be freed.
        del data

    return respond


class SUT(abc.ABC):
    """Runs samples of ``data`` through ``model`` and answers with ``respond``."""

    def __init__(self, model: Embedder, data: TokenBatch, respond: Responder) -> None:
        self.model = model
        self.data = data
        self.respond = respond
        self.error: BaseException | None = None
        self._error_lock = threading.Lock()

    @abc.abstractmethod
    def issue(self, samples: Sequence[Sample]) -> None:
        """LoadGen's issue callback: accept samples; answer them now or later."""

    def flush(self) -> None:
        """LoadGen's flush callback (no queued work is held back, so nothing to do)."""

    def close(self) -> None:
        """Stop worker threads (after LoadGen's test has returned)."""

    def run_batch(self, samples: Sequence[Sample]) -> None:
        """Run one batch and answer it; errors are recorded and the samples still answered."""
        ids = [s.id for s in samples]
        try:
            out: FloatArray | None = self.model.embed(self.data.take([s.index for s in samples]))
        except Exception as exc:  # any model failure must still complete the samples
            with self._error_lock:
                self.error = self.error or exc
            out = None
        self.respond(ids, out)


class _QueueSUT(SUT):
    """Shared worker-thread plumbing for Offline and Server."""

    def __init__(self, model: Embedder, data: TokenBatch, respond: Responder, workers: int) -> None:
        super().__init__(model, data, respond)
        self._queue: queue.SimpleQueue[Sample | None] = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"sut-{i}", daemon=True) for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def issue(self, samples: Sequence[Sample]) -> None:
        for sample in samples:
            self._queue.put(sample)

    @abc.abstractmethod
    def _max_batch(self) -> int: ...

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            # Take what is already waiting, up to the batch size; never wait for more.
            while len(batch) < self._max_batch():
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            self.run_batch(batch)
            if stop:
                return

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()


class OfflineSUT(_QueueSUT):
    """Offline: one worker, fixed-size batches."""

    def __init__(self, model: Embedder, data: TokenBatch, respond: Responder, batch_size: int) -> None:
        self.batch_size = batch_size
        super().__init__(model, data, respond, workers=1)

    def _max_batch(self) -> int:
        return self.batch_size


class ServerSUT(_QueueSUT):
    """Server: a pool of workers with dynamic batching up to ``max_batch``."""

    def __init__(self, model: Embedder, data: TokenBatch, respond: Responder, workers: int, max_batch: int) -> None:
        self.max_batch = max_batch
        super().__init__(model, data, respond, workers=workers)

    def _max_batch(self) -> int:
        return self.max_batch


class StreamSUT(SUT):
    """SingleStream / MultiStream: the whole query runs in the issue callback, as one batch."""

    def issue(self, samples: Sequence[Sample]) -> None:
        self.run_batch(samples)


def make_sut(scenario: Scenario, model: Embedder, data: TokenBatch, settings: RunSettings, respond: Responder) -> SUT:
    """The SUT for ``scenario`` (see the module docstring)."""
    if scenario == "Offline":
        return OfflineSUT(model, data, respond, settings.offline_batch_size)
    if scenario == "Server":
        return ServerSUT(model, data, respond, settings.server_workers, settings.server_max_batch)
    return StreamSUT(model, data, respond)


def model_threads(scenario: Scenario, settings: RunSettings, cpus: int) -> int:
    """onnxruntime intra-op threads per model call.

    ``threads`` (default: one per CPU) is the total budget; Server splits it between its workers
    so concurrent calls do not fight over the same cores.
    """
    total = settings.threads or cpus
    if scenario == "Server":
        return max(1, total // settings.server_workers)
    return total
