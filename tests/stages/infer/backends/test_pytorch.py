"""The torch backend (optional extra): converted models must match onnxruntime.

Skipped where torch or onnx2torch is not installed (CI installs neither: the GPU benchmark
in bench/gpu_bench.py runs this backend on a real GPU).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import asset
from vapipe.stages.infer.backends.config import OnnxRuntimeConfig, TorchConfig
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

from vapipe.stages.infer.backends.pytorch import TorchBackend  # noqa: E402


@pytest.mark.parametrize(
    ("model", "size", "scale"), [("yolox_nano.onnx", 416, 255.0), ("yolov8n.onnx", 640, 1.0)]
)
def test_torch_matches_onnxruntime_in_batches(model: str, size: int, scale: float) -> None:
    path = str(asset("models", model))
    backend = TorchBackend(path, name="det", config=TorchConfig(device="cpu"))
    assert backend.max_error < 1e-3 and backend.device.startswith("torch:cpu")
    reference = OnnxBackend(
        path, name="ref", config=OnnxRuntimeConfig(providers=["cpu"]), max_batch=1
    )
    batch = np.random.default_rng(3).random((3, 3, size, size), dtype=np.float32) * scale
    expected = np.concatenate([reference.run(batch[i : i + 1]) for i in range(3)])
    got = backend.run(batch)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-3 * np.abs(expected).max()
