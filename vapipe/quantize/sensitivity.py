"""Which nodes of a model lose the most to INT8, measured rather than guessed: onnxruntime's
``qdq_loss_debug`` runs the float and the QDQ model on calibration frames with every
intermediate tensor as an output, and each quantised activation's signal-to-quantisation-noise
ratio (SQNR, dB: its value before against after its QuantizeLinear/DequantizeLinear pair,
per channel) says how much that one rounding costs. The nodes that produce the noisiest
tensors are the ones to keep in float; ``models quantize --keep-float sensitive`` keeps more
of them until the copy agrees with the float model on held-out frames.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

STEPS = (0, 4, 8, 16, 32, 64)
"""How many of the noisiest nodes are kept in float at each try, cheapest first."""
PROBE_FRAMES = 8
"""Calibration frames the activations are compared on (every tensor of every frame is held)."""


class CalibrationFrames:
    """onnxruntime's CalibrationDataReader protocol over a few input tensors."""

    def __init__(self, input_name: str, tensors: list[np.ndarray]) -> None:
        self.input_name, self.tensors = input_name, tensors
        self._iterator: Iterator[dict[str, np.ndarray]] = iter(())
        self.rewind()

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._iterator, None)

    def rewind(self) -> None:
        self._iterator = ({self.input_name: t[None]} for t in self.tensors)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        self.rewind()
        return self._iterator


def channel_sqnr(before: Sequence[np.ndarray], after: Sequence[np.ndarray]) -> float:
    """SQNR (dB) per channel, averaged: a whole-tensor SQNR is dominated by the tensor's
    largest values, so a channel of outliers that sets the range for all (rounding every
    other channel to a few levels) still scores well. Tensors without channels: whole."""
    x = np.concatenate([np.asarray(t, np.float64) for t in before])
    y = np.concatenate([np.asarray(t, np.float64) for t in after])
    if x.ndim < 2 or x.shape != y.shape:
        x, y = x.reshape(1, -1), y.reshape(1, -1)
    x, y = (
        np.moveaxis(x, 1, 0).reshape(x.shape[1], -1),
        np.moveaxis(y, 1, 0).reshape(y.shape[1], -1),
    )
    tiny = np.finfo(np.float64).eps
    signal = np.maximum(np.linalg.norm(x, axis=1), tiny)
    noise = np.maximum(np.linalg.norm(x - y, axis=1), tiny)
    return float(np.mean(20 * np.log10(signal / noise)))


def noisiest_nodes(
    float_path: Path, qdq_path: Path, input_name: str, tensors: list[np.ndarray]
) -> list[tuple[str, float]]:
    """(node name, SQNR in dB) for each float node whose output the QDQ model quantises,
    noisiest (lowest SQNR) first. ``float_path`` is the model exactly as it was quantised
    (same tensor and node names)."""
    import onnx
    from onnxruntime.quantization.qdq_loss_debug import (
        collect_activations,
        compute_activation_error,
        create_activation_matching,
        modify_model_output_intermediate_tensors,
    )

    frames = CalibrationFrames(input_name, tensors[:PROBE_FRAMES])
    with tempfile.TemporaryDirectory() as work:
        float_all = str(Path(work) / "float_all.onnx")
        qdq_all = str(Path(work) / "qdq_all.onnx")
        modify_model_output_intermediate_tensors(str(float_path), float_all)
        modify_model_output_intermediate_tensors(str(qdq_path), qdq_all)
        quantised = collect_activations(qdq_all, frames)
        frames.rewind()
        original = collect_activations(float_all, frames)
    errors = compute_activation_error(
        create_activation_matching(quantised, original), err_func=channel_sqnr
    )
    graph = onnx.load(str(float_path)).graph
    producers = {output: node.name for node in graph.node for output in node.output}
    ranked = [
        (producers[tensor], error["qdq_err"])
        for tensor, error in errors.items()
        if tensor in producers and math.isfinite(error["qdq_err"])
    ]
    ranked.sort(key=lambda item: item[1])
    return ranked


def first_steps(ranked: list[tuple[str, float]]) -> Iterator[list[str]]:
    """The node lists to keep in float, in order: none, then the 4, 8, 16 ... noisiest."""
    seen = -1
    for step in STEPS:
        count = min(step, len(ranked))
        if count == seen:
            return
        seen = count
        yield [name for name, _ in ranked[:count]]
