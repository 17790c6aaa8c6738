"""Inference backends behind one small interface: ONNX Runtime, and PyTorch (optional)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from vapipe.stages.infer.backends.base import Backend
from vapipe.stages.infer.backends.registry import Request, types

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
    """The backend that ``config.type`` names (registry.py), with ``path`` loaded and
    verified. ``head`` chooses the YOLO head to decode inside the model where the backend can
    (onnxruntime); ``rect`` asks for a model that takes other input sizes."""
    request = Request(path, name, max_batch, head, workers, rect)
    return types()[config.type].load(config, request)
