"""What every inference backend is and answers: the protocol, what a loaded model says
about itself, and the batch-shape arithmetic the fixed-shape backends share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


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
