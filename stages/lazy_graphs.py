"""A fixed-shape run of torch calls captured as one CUDA graph (a HIP graph on ROCm builds)
per shape, the first time the shape comes, and replayed in one call from then on.

In a one-process GPU run every torch call lets go of the interpreter lock and must win it back
from the sixteen source threads (issue 61's profile: the letterbox and the head decode made
some twenty such calls a batch each, for a few microseconds of GPU work apiece). A replay is
one call. Used by the torch letterbox (stages/preprocess/torch_letterbox.py) and the device
head decode (stages/infer/device_decode.py).

Capture runs on the caller's stream in ``thread_local`` error mode (other threads keep issuing
work while it captures), into one memory pool for every shape. Callers share one stream (the
letterbox's own; the infer workers' current one): a lock held while a call is queued (its
input written, the replay, its outputs cloned) keeps two callers' replays of one graph apart,
and the GPU runs them in the order they were queued. The first replay of each shape is checked
against the same call run op by op, bit for bit; where they differ, or capture fails, graphs
are turned off for the run with a warning and the caller runs op by op (the same numbers
either way).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any

log = logging.getLogger(__name__)

CAPTURING = threading.Lock()
"""One capture at a time in the process: entering a capture synchronises the whole device,
which breaks a capture under way in another thread (on the H100 the letterbox's capture failed
with "operation failed due to a previous error during capture" while the head decode's ran)."""

Outputs = tuple[Any, ...]


class LazyGraphs:
    """``run(key, fill, make_input, function)``: ``function``'s outputs for the input ``fill``
    writes, by the graph of ``key``; None where graphs are off."""

    def __init__(self, torch: Any, stream: Any, what: str) -> None:
        self.torch, self.stream, self.what = torch, stream, what
        self._graphs: dict[Hashable, tuple[Any, Any, Outputs]] = {}
        self._pool: Any = None
        self._lock = threading.Lock()
        self.enabled = True
        self.replays = 0

    def run(
        self,
        key: Hashable,
        fill: Callable[[Any], None],
        make_input: Callable[[], Any],
        function: Callable[[Any], Outputs],
    ) -> Outputs | None:
        """``make_input()`` gives the graph's own input for a new ``key`` (kept for its
        replays); ``fill`` writes this call's data into it (on the current stream, the
        capture's); the outputs are clones (the next replay writes over the graph's own)."""
        with self._lock:
            if not self.enabled:
                return None
            entry = self._graphs.get(key)
            if entry is None:
                return self._first(key, fill, make_input(), function)
            graph, static_in, static_out = entry
            fill(static_in)
            graph.replay()
            self.replays += 1
            return tuple(out.clone() for out in static_out)

    def _first(
        self, key: Hashable, fill: Callable[[Any], None], static_in: Any,
        function: Callable[[Any], Outputs],
    ) -> Outputs:  # fmt: skip
        """Capture the graph for ``key``; the outputs come from the op-by-op run (the graph's
        warm-up: lazy set-up happens outside capture), after its replay was checked."""
        fill(static_in)
        expected = function(static_in)
        try:
            with CAPTURING:
                graph, static_out = self._capture(function, static_in)
            graph.replay()
            same = all(map(self.torch.equal, static_out, expected))
        except RuntimeError as exc:  # a capture the driver or an op refuses
            return self._off(f"capture failed ({exc})", expected)
        if not same:
            return self._off("a replay differed from the same call run op by op", expected)
        self._graphs[key] = (graph, static_in, static_out)
        log.debug("%s: CUDA graph captured for %s", self.what, key)
        return expected

    def _capture(self, function: Callable[[Any], Outputs], static_in: Any) -> tuple[Any, Outputs]:
        """The graph of ``function`` on ``static_in``, and its outputs (written by replays:
        capture runs nothing). The caller holds ``CAPTURING``."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(
            graph, pool=self._pool, stream=self.stream, capture_error_mode="thread_local"
        ):
            static_out = function(static_in)
        self._pool = graph.pool()
        return graph, static_out

    def _off(self, why: str, outputs: Outputs) -> Outputs:
        self.enabled = False
        self._graphs.clear()
        log.warning("%s: CUDA graphs off for this run: %s; running op by op", self.what, why)
        return outputs

    def stats(self) -> dict[str, Any]:
        return {"graphs": len(self._graphs), "graph_replays": self.replays,
                "graphs_on": self.enabled}  # fmt: skip
