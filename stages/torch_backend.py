"""PyTorch backend: the same ONNX file, converted with onnx2torch, on torch's GPU device.

For machines where PyTorch has a GPU build (CUDA or ROCm) but onnxruntime has none. Needs
``pip install 'vapipe[torch]'``.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from pipeline.errors import MissingDependencyError, PipelineError

from .backends import ModelInfo
from .batching import make_batch_dynamic

log = logging.getLogger(__name__)


class TorchBackend:
    batch_sizes: tuple[int, ...] | None = None

    def __init__(self, path: str, *, name: str, device: str, fp16: bool) -> None:
        try:
            import onnx
            import torch
            from onnx2torch import convert
        except ImportError as exc:
            raise MissingDependencyError(
                exc.name or "torch", 'backend = "torch"', extra="torch"
            ) from None
        self._torch = torch
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.torch_device = torch.device(device)
        rewrite = make_batch_dynamic(path)
        model = onnx.load_from_string(rewrite.model) if rewrite.model else onnx.load(path)
        try:
            module = convert(model)
        except Exception as exc:
            raise PipelineError(f"onnx2torch cannot convert {path}: {exc}") from exc
        self.dtype = torch.float16 if fp16 else torch.float32
        self.module = module.eval().to(self.torch_device, dtype=self.dtype)
        graph_input = model.graph.input[0]
        dims = [d.dim_value or d.dim_param for d in graph_input.type.tensor_type.shape.dim]
        out_dims = [
            d.dim_value or d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim
        ]
        meta = {prop.key: prop.value for prop in model.metadata_props}
        self.info = ModelInfo(graph_input.name, dims, np.dtype(np.float32), out_dims, meta)
        kind = "rocm" if getattr(torch.version, "hip", None) else self.torch_device.type
        label = (
            torch.cuda.get_device_name(self.torch_device)
            if self.torch_device.type == "cuda"
            else "cpu"
        )
        self.device = f"torch:{kind}:{self.torch_device.index or 0} ({label})"
        self.pinned = self.torch_device.type == "cuda"
        log.info(
            "%s: PyTorch %s on %s%s", name, torch.__version__, self.device, " fp16" if fp16 else ""
        )

    def run(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            tensor = torch.from_numpy(np.ascontiguousarray(batch))
            if self.pinned:
                tensor = tensor.pin_memory()
            tensor = tensor.to(self.torch_device, dtype=self.dtype, non_blocking=True)
            output = self.module(tensor)
            if isinstance(output, list | tuple):
                output = output[0]
            return output.float().cpu().numpy()

    def stats(self) -> dict[str, Any]:
        return {"provider": self.device, "batch_mode": "dynamic"}

    def close(self) -> None:
        self.module = None
