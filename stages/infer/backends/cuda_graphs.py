"""The torch model captured once per batch size as a CUDA graph (HIP graph on ROCm builds).

A small detector is launch-bound: onnx2torch runs each of its ~400 ops from Python, and the
GPU waits for the host to issue them. A graph replays the whole forward pass in one launch.

Capture needs a forward pass that never reads device memory back to the host. onnx2torch's
Shape, Reshape, Slice and Resize modules do (``.tolist()``, ``.cpu()`` on their shape inputs),
which a capture forbids. Specialising the model to one batch size first (what a graph is
anyway) folds all of that shape arithmetic into host constants. Tracing (torch.jit.trace) was
tried first: its graph still copied a constant between host and device inside the capture.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from vapipe.stages.infer.backends.base import relative_error

log = logging.getLogger(__name__)

TOLERANCE = 1e-3
"""Replayed output against the specialised module's own output on the same input."""


def first_output(output: Any) -> Any:
    return output[0] if isinstance(output, list | tuple) else output


def specialise(torch: Any, module: Any, example: Any) -> Any:
    """The module with everything that does not depend on the input's values folded into
    constants, at ``example``'s shape (batch size included).

    A node depends on the input's values if one of its inputs does, except a Shape node,
    whose output is known at a fixed shape. Each folded value that feeds a dependent node
    becomes a constant: integer ones (shapes, slice bounds, axes) and Resize's scales stay in
    host memory, where onnx2torch reads them without a device-to-host copy; the rest (grids,
    strides) live on the device.
    """
    import torch.fx as fx

    graph: fx.Graph = module.graph
    dependent: set[fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" or (
            node.op != "output"
            and any(i in dependent for i in node.all_input_nodes)
            and type(_target(module, node)).__name__ != "OnnxShape"
        ):
            dependent.add(node)
    values = _node_values(torch, module, example, keep=lambda n: n not in dependent)
    folded = fx.Graph()
    mapping: dict[fx.Node, fx.Node] = {}
    constants: dict[str, tuple[Any, bool]] = {}
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or node in dependent:
            mapping[node] = folded.node_copy(node, lambda n: mapping[n])
            continue
        consumers = [user for user in node.users if user in dependent or user.op == "output"]
        if not consumers:
            continue  # only feeds other folded nodes
        value = values[node]
        if not isinstance(value, torch.Tensor):
            raise RuntimeError(f"node {node.name} folds to a {type(value).__name__}")
        on_host = not value.is_floating_point() or all(
            type(_target(module, user)).__name__ == "OnnxResize" for user in consumers
        )
        name = f"_folded_{len(constants)}"
        constants[name] = (value.detach().cpu() if on_host else value.detach(), on_host)
        mapping[node] = folded.get_attr(name)
    used = {n.target for n in folded.nodes if n.op in ("call_module", "get_attr")}
    root = {
        name: constants[name][0] if name in constants else module.get_submodule(name)
        for name in used
    }
    result = fx.GraphModule(root, folded)
    for name in used & constants.keys():
        value, on_host = constants[name]
        if on_host:  # a plain attribute, not a buffer: .to(device) leaves it on the host
            result._buffers.pop(name, None)
            setattr(result, name, value)
    return result


def _target(module: Any, node: Any) -> Any:
    return module.get_submodule(node.target) if node.op == "call_module" else None


def _node_values(
    torch: Any, module: Any, example: Any, keep: Callable[[Any], bool]
) -> dict[Any, Any]:
    """The outputs, for ``example``, of the nodes ``keep`` names (one forward pass, op by op;
    activations are not kept: at batch 32 they would take gigabytes)."""
    import torch.fx as fx

    values: dict[fx.Node, Any] = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            result = super().run_node(n)
            if keep(n):
                values[n] = result
            return result

    with torch.inference_mode():
        Recorder(module).run(example)
    return values


class GraphedBatches:
    """One captured graph per batch size, all replayed on the caller's stream.

    Replays share the static input and output buffers, so a lock covers copying the batch
    in, the replay and cloning the output out. The lock is held only while the work is
    queued: the GPU runs it later, in stream order, so the next caller's copy cannot
    overtake this one's clone.
    """

    def __init__(self, torch: Any, modules: dict[int, Any], sample: Any) -> None:
        """``modules``: batch size to a module that takes exactly that batch (specialised or
        traced); ``sample``: one input on the device (batch 1), repeated to each size."""
        self._torch = torch
        self._lock = threading.Lock()
        self._graphs: dict[int, tuple[Any, Any, Any]] = {}
        started = time.monotonic()
        pool = None
        # One side stream for every warm-up: the allocator caches blocks per stream, and a
        # stream per size kept each size's warm-up memory reserved for good.
        self._side = torch.cuda.Stream(device=sample.device)
        for size, fixed in sorted(modules.items()):
            static_in = sample.repeat(size, *([1] * (sample.dim() - 1))).contiguous()
            graph, static_out, expected = self._capture(fixed, static_in, pool)
            pool = graph.pool()  # one memory pool: replays never overlap (the lock)
            graph.replay()
            error = relative_error(static_out.float().cpu().numpy(), expected.float().cpu().numpy())
            if not error <= TOLERANCE:
                raise RuntimeError(f"replay at batch {size} differs (relative error {error:.3g})")
            self._graphs[size] = (graph, static_in, static_out)
        del expected
        torch.cuda.empty_cache()  # the warm-ups' blocks: replays use the graphs' own pool
        self.capture_s = time.monotonic() - started

    def _capture(self, fixed: Any, static_in: Any, pool: Any) -> tuple[Any, Any, Any]:
        torch = self._torch
        # Warm-up on a side stream, as capture requires: lazy initialisation (cuDNN handles,
        # kernel choice) must not happen inside the graph.
        side = self._side
        side.wait_stream(torch.cuda.current_stream(static_in.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                expected = first_output(fixed(static_in))
        torch.cuda.current_stream(static_in.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            static_out = first_output(fixed(static_in))
        return graph, static_out, expected

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(self._graphs)

    def run(self, staged: Any, count: int, rows: int | None = None) -> Any:
        """The output for the first ``count`` rows of ``staged`` (host or device memory),
        by the graph of ``rows`` rows (default: as many as ``staged`` has, a captured batch
        size); rows of the graph's input past ``staged`` keep an earlier batch's."""
        graph, static_in, static_out = self._graphs[rows or staged.shape[0]]
        with self._lock:
            static_in[: staged.shape[0]].copy_(staged, non_blocking=True)
            graph.replay()
            return static_out[:count].clone()
