"""The torch model captured once per batch size as a CUDA graph (HIP graph on ROCm builds).

A small detector is launch-bound: onnx2torch runs each of its ~400 ops from Python, and the
GPU waits for the host to issue them. A graph replays the whole forward pass in one launch.

Capture needs a forward pass that never talks to the host. onnx2torch's Shape, Reshape, Slice
and Resize modules read shapes back from tensors (``.tolist()``, ``.cpu()``), which a capture
forbids. Tracing the module at a fixed batch size first turns all of that shape arithmetic
into constants (the model is then specialised to that size, which is what a graph is anyway).
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Any

from vapipe.stages.infer.backends import relative_error

log = logging.getLogger(__name__)

TOLERANCE = 1e-3
"""Replayed output against the traced module's own output on the same input."""


def first_output(output: Any) -> Any:
    return output[0] if isinstance(output, list | tuple) else output


def specialise(torch: Any, module: Any, example: Any) -> Any:
    """The module traced on ``example``: its shape arithmetic becomes constants."""
    with warnings.catch_warnings():
        # The tracer warns for every shape it freezes: exactly what is wanted here.
        warnings.simplefilter("ignore")
        return torch.jit.trace(module, example, check_trace=False)


class GraphedBatches:
    """One captured graph per batch size, all replayed on the caller's stream.

    Replays share the static input and output buffers, so a lock covers copying the batch
    in, the replay and cloning the output out. The lock is held only while the work is
    queued: the GPU runs it later, in stream order, so the next caller's copy cannot
    overtake this one's clone.
    """

    def __init__(self, torch: Any, module: Any, sizes: tuple[int, ...], sample: Any) -> None:
        """``sample``: one input on the device (batch 1), repeated to each batch size."""
        self._torch = torch
        self._lock = threading.Lock()
        self._graphs: dict[int, tuple[Any, Any, Any]] = {}
        self.max_error = 0.0
        started = time.monotonic()
        pool = None
        for size in sizes:
            static_in = sample.repeat(size, *([1] * (sample.dim() - 1))).contiguous()
            graph, static_out, expected = self._capture(module, static_in, pool)
            pool = graph.pool()  # one memory pool: replays never overlap (the lock)
            graph.replay()
            error = relative_error(static_out.float().cpu().numpy(), expected.float().cpu().numpy())
            if not error <= TOLERANCE:
                raise RuntimeError(f"replay at batch {size} differs (relative error {error:.3g})")
            self.max_error = max(self.max_error, error)
            self._graphs[size] = (graph, static_in, static_out)
        self.capture_s = time.monotonic() - started

    def _capture(self, module: Any, static_in: Any, pool: Any) -> tuple[Any, Any, Any]:
        torch = self._torch
        traced = specialise(torch, module, static_in)
        # Warm-up on a side stream, as capture requires: lazy initialisation (cuDNN handles,
        # kernel selection) must not happen inside the graph.
        side = torch.cuda.Stream(device=static_in.device)
        side.wait_stream(torch.cuda.current_stream(static_in.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                expected = first_output(traced(static_in))
        torch.cuda.current_stream(static_in.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            static_out = first_output(traced(static_in))
        return graph, static_out, expected

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self._graphs)

    def run(self, staged: Any, count: int) -> Any:
        """The output for the first ``count`` rows of ``staged`` (host or device memory,
        exactly one captured batch size long)."""
        graph, static_in, static_out = self._graphs[staged.shape[0]]
        with self._lock:
            static_in.copy_(staged, non_blocking=True)
            graph.replay()
            return static_out[:count].clone()
