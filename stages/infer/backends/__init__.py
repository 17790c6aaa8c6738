"""Inference backends behind one small interface: ONNX Runtime, and PyTorch (optional)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vapipe.stages.infer.backends.base import Backend

if TYPE_CHECKING:
    from vapipe.stages.infer.backends.config import BackendConfig
    from vapipe.stages.infer.backends.onnx_runtime import HeadChoice

log = logging.getLogger(__name__)


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
