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


def test_workers_calling_at_once_get_their_own_results() -> None:
    """Several inference workers share one backend: each call must return its own batch's
    output, exactly as a serial call does."""
    import threading

    path = str(asset("models", "yolox_nano.onnx"))
    backend = TorchBackend(path, name="det", config=TorchConfig(device="cpu"))
    rng = np.random.default_rng(5)
    batches = [rng.random((2, 3, 416, 416), dtype=np.float32) * 255 for _ in range(6)]
    serial = [backend.run(batch) for batch in batches]
    results: dict[int, np.ndarray] = {}

    def work(index: int) -> None:
        for _ in range(3):
            results[index] = backend.run(batches[index])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for index, expected in enumerate(serial):
        np.testing.assert_allclose(results[index], expected, rtol=1e-5, atol=1e-4)
