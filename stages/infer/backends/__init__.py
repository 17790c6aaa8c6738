"""Inference backends behind one small interface: ONNX Runtime, and PyTorch (optional)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from vapipe.stages.infer.backends.config import BackendConfig
    from vapipe.stages.infer.backends.onnx_runtime import HeadChoice

log = logging.getLogger(__name__)


@dataclass
class ModelInfo:
    """What a loaded model says about itself."""

    input_name: str
    input_shape: list[int | str | None]
    input_dtype: np.dtype
    output_shape: list[int | str | None]
    metadata: dict[str, str] = field(default_factory=dict)


class Backend(Protocol):
    info: ModelInfo
    device: str
    """What actually runs the model, e.g. ``CUDAExecutionProvider`` or ``torch:cuda:0``."""

    @property
    def batch_sizes(self) -> tuple[int, ...] | None:
        """Batch sizes the backend was compiled for (fixed-shape providers); None = any."""
        ...

    def run(self, batch: np.ndarray) -> np.ndarray:
        """The model's first output for a batch."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def concrete_shape(info: ModelInfo, batch: int | None = None) -> list[int]:
    """The model's input shape with symbolic sizes as 1, and the batch size if given."""
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in info.input_shape]
    if batch is not None:
        shape[0] = batch
    return shape


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """The largest difference relative to the largest expected value (inf: other shapes)."""
    if got.shape != expected.shape:
        return float("inf")
    return float(np.abs(got - expected).max() / (np.abs(expected).max() or 1.0))


def batch_ladder(max_batch: int) -> tuple[int, ...]:
    """The batch shapes a fixed-shape backend prepares: powers of two below ``max_batch``,
    and ``max_batch``. A batch is padded up to the next one."""
    return tuple(sorted({*(2**i for i in range(8) if 2**i < max_batch), max_batch}))


def padded_size(count: int, sizes: tuple[int, ...] | None) -> int:
    """The smallest compiled batch size that holds ``count`` frames."""
    if not sizes:
        return count
    return next((size for size in sizes if size >= count), sizes[-1])


def load_backend(
    path: str,
    name: str,
    config: BackendConfig,
    max_batch: int,
    head: HeadChoice | None = None,
    workers: int = 1,
    rect: bool = False,
) -> Backend:
    """The backend that ``config.type`` names, with ``path`` loaded and verified. ``head``
    chooses the YOLO head to decode inside the model on onnxruntime (see OnnxBackend);
    ``rect`` asks onnxruntime for a model that takes other input sizes."""
    if config.type == "auto":
        from vapipe.stages.infer.backends.choice import resolve

        config, why = resolve()
        log.info("%s: backend %s (auto: %s)", name, config.type, why)
    if config.type == "torch":
        from vapipe.stages.infer.backends.pytorch import TorchBackend

        return TorchBackend(path, name=name, config=config, max_batch=max_batch)
    from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend

    return OnnxBackend(
        path, name=name, config=config, max_batch=max_batch, head=head, workers=workers, rect=rect
    )
