"""The torch letterbox of decoder pictures captured as one CUDA graph (a HIP graph on ROCm
builds) per batch size and picture size, replayed in one call.

Run op by op, a batch of 32 NV12 pictures costs some twenty torch calls after the stack, each
of which lets go of the interpreter lock and must win it back from the sixteen source threads
of a one-process GPU run (issue 61's profile: preprocess 0.28-0.6 ms a frame for about 0.05
ms of GPU work). A replay is one call. The pictures are stacked into the graph's own input
(one call), the graph runs the same kernels on it, and its output is cloned out (one call),
since the next replay writes over it.

A graph is captured the first time its batch size and picture size come, on the letterbox's
stream, in ``thread_local`` error mode (other threads keep issuing work while it captures),
into one memory pool for all of them (replays never overlap: one stream, one thread), each
reading the first rows of one input buffer per picture size (32 inputs of their own would
hold 1.6 GB of 1080p pictures). Its
first replay is checked against the same batch run op by op, bit for bit; where they differ,
or capture fails, graphs are turned off for the run with a warning and every batch runs op by
op (the same pixels either way).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Letterboxed = Callable[[Any], Any]
"""(count, rows, width) uint8 NV12 on the device -> the (count, 3, height, width) batch."""


class LetterboxGraphs:
    """One captured graph per (count, rows, width); ``run`` is None where graphs are off."""

    def __init__(self, torch: Any, device: Any, stream: Any, max_batch: int) -> None:
        self.torch, self.device, self.stream = torch, device, stream
        self.max_batch = max_batch
        self._graphs: dict[tuple[int, ...], tuple[Any, Any, Any]] = {}
        self._inputs: dict[tuple[int, ...], Any] = {}
        self._pool: Any = None
        self.enabled = True
        self.replays = 0

    def run(self, pictures: Sequence[Any], letterboxed: Letterboxed) -> Any | None:
        """The batch of ``pictures`` (same-shaped NV12 tensors on the device, already safe to
        read on the letterbox's stream) by a replay, on the current stream (the letterbox's);
        None where graphs are off (the caller runs ``letterboxed`` op by op)."""
        if not self.enabled:
            return None
        torch = self.torch
        key = (len(pictures), *pictures[0].shape)
        entry = self._graphs.get(key)
        if entry is None:
            return self._first(key, pictures, letterboxed)
        graph, static_in, static_out = entry
        torch.stack(list(pictures), out=static_in)
        graph.replay()
        self.replays += 1
        return static_out.clone()

    def _first(
        self, key: tuple[int, ...], pictures: Sequence[Any], letterboxed: Letterboxed
    ) -> Any:
        """Capture the graph for ``key``; the batch comes from the op-by-op run (the graph's
        warm-up), after its replay has been checked against it."""
        torch = self.torch
        shape = tuple(key[1:])
        if shape not in self._inputs:
            self._inputs[shape] = torch.empty(
                (self.max_batch, *shape), dtype=pictures[0].dtype, device=self.device
            )
        static_in = self._inputs[shape][: key[0]]
        torch.stack(list(pictures), out=static_in)
        # The warm-up: lazy set-up (the taps' tables, kernel choice) happens outside capture.
        expected = letterboxed(static_in)
        try:
            graph, static_out = self._capture(letterboxed, static_in)
            graph.replay()
            same = bool(torch.equal(static_out, expected))
        except RuntimeError as exc:  # a capture the driver or an op refuses
            return self._off(f"capture failed ({exc})", expected)
        if not same:
            return self._off("a replay differed from the same batch run op by op", expected)
        self._graphs[key] = (graph, static_in, static_out)
        log.debug("letterbox graph captured for %d pictures of %dx%d", *key)
        return expected

    def _capture(self, letterboxed: Letterboxed, static_in: Any) -> tuple[Any, Any]:
        """The graph of ``letterboxed`` on ``static_in``, and its output (written by replays:
        capture runs nothing)."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(
            graph, pool=self._pool, stream=self.stream, capture_error_mode="thread_local"
        ):
            static_out = letterboxed(static_in)
        self._pool = graph.pool()
        return graph, static_out

    def _off(self, why: str, batch: Any) -> Any:
        self.enabled = False
        self._graphs.clear()
        log.warning("letterbox CUDA graphs off for this run: %s; running op by op", why)
        return batch

    def stats(self) -> dict[str, Any]:
        return {"graphs": len(self._graphs), "graph_replays": self.replays,
                "graphs_on": self.enabled}  # fmt: skip
