"""The torch backend (optional extra): converted models must match onnxruntime.

Skipped where torch or onnx2torch is not installed (CI installs neither: the GPU benchmark
in bench/gpu_bench.py runs this backend on a real GPU).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.conftest import asset
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
from vapipe.stages.infer.backends.pytorch import TorchConfig

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

from vapipe.stages.infer.backends.pytorch import TorchBackend  # noqa: E402


@pytest.mark.parametrize("cached", [False, True], ids=["cache-off", "traced-and-cached"])
@pytest.mark.parametrize(
    ("model", "size", "scale"), [("yolox_nano.onnx", 416, 255.0), ("yolov8n.onnx", 640, 1.0)]
)
def test_torch_matches_onnxruntime_in_batches(
    model: str, size: int, scale: float, cached: bool, tmp_path: Path
) -> None:
    path = str(asset("models", model))
    config = TorchConfig(device="cpu", cache_dir=str(tmp_path) if cached else "off")
    backend = TorchBackend(path, name="det", config=config, max_batch=2)
    assert backend.batch_sizes == ((1, 2) if cached else None)
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


@pytest.mark.parametrize("model", ["yolox_nano.onnx", "yolov8n.onnx"])
def test_specialised_module_reads_nothing_back_from_the_device(model: str) -> None:
    """What CUDA graph capture needs: onnx2torch's Shape/Reshape/Slice/Resize read shapes
    back from device tensors; specialised to one batch size, they read host constants.

    The "meta" device stands in for a GPU: its tensors have no data, so any read back to the
    host raises. The converted module fails there; the specialised one must not."""
    from vapipe.stages.infer.backends.cuda_graphs import first_output, specialise

    path = str(asset("models", model))
    backend = TorchBackend(path, name="det", config=TorchConfig(device="cpu", cache_dir="off"))
    size = backend.info.input_shape[2]
    batch = torch.rand((2, 3, size, size)) * 255
    fixed = specialise(torch, backend.module, batch)
    with torch.inference_mode():
        assert torch.equal(first_output(fixed(batch)), first_output(backend.module(batch)))
    assert not any(type(m).__name__ == "OnnxShape" for m in fixed.modules())
    on_meta = batch.to("meta")
    with torch.inference_mode():
        out = first_output(fixed.to("meta")(on_meta))
        assert out.device.type == "meta" and out.shape[0] == 2
        with pytest.raises((NotImplementedError, RuntimeError)):
            backend.module.to("meta")(on_meta)


def test_cuda_graphs_asked_for_on_a_cpu_device_run_without(caplog) -> None:
    path = str(asset("models", "yolox_nano.onnx"))
    backend = TorchBackend(
        path,
        name="det",
        config=TorchConfig(device="cpu", cuda_graphs=True, cache_dir="off"),
        max_batch=8,
    )
    assert backend.graphs is None and backend.batch_sizes is None
    assert "cuda_graphs needs a GPU device" in caplog.text
    assert backend.stats()["cuda_graphs"] is None


class RecordingGraphs:
    """Stands in for captured graphs: what a replay would be handed."""

    sizes = (1, 2, 4, 8)

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, int]] = []
        self.rows: list[int | None] = []

    def run(self, staged, count, rows=None):  # type: ignore[no-untyped-def]
        self.calls.append((staged.numpy().copy(), count))
        self.rows.append(rows)
        return staged[:count] * 2


def test_batches_are_padded_to_a_captured_size() -> None:
    path = str(asset("models", "yolox_nano.onnx"))
    backend = TorchBackend(path, name="det", config=TorchConfig(device="cpu", cache_dir="off"))
    backend.graphs = RecordingGraphs()  # type: ignore[assignment]
    rng = np.random.default_rng(7)
    for count, rows in ((1, 1), (3, 4), (5, 8), (8, 8)):
        batch = rng.random((count, 3, 4, 4), dtype=np.float32)
        out = backend.run_on_device(batch)
        staged, passed = backend.graphs.calls[-1]  # type: ignore[attr-defined]
        assert staged.shape == (rows, 3, 4, 4) and passed == count
        assert np.array_equal(staged[:count], batch)
        assert np.array_equal(out.numpy(), batch * 2)
    # Larger than the largest captured size: op by op, as without graphs.
    big = rng.random((9, 3, 416, 416), dtype=np.float32)
    assert backend.run_on_device(big).shape[0] == 9
    assert len(backend.graphs.calls) == 4  # type: ignore[attr-defined]


def test_a_batch_already_on_the_device_goes_to_the_graph_of_its_padded_size() -> None:
    """A torch preprocess node's batch is on the device already: no host staging; the graph
    of the padded size takes it (its input rows past the batch keep what they held)."""
    path = str(asset("models", "yolox_nano.onnx"))
    backend = TorchBackend(path, name="det", config=TorchConfig(device="cpu", cache_dir="off"))
    backend.graphs = RecordingGraphs()  # type: ignore[assignment]
    rng = np.random.default_rng(8)
    for count, rows in ((1, 1), (3, 4), (5, 8)):
        batch = torch.from_numpy(rng.random((count, 3, 4, 4), dtype=np.float32))
        out = backend.run_on_device(batch)
        staged, passed = backend.graphs.calls[-1]  # type: ignore[attr-defined]
        assert staged.shape == (count, 3, 4, 4) and passed == count
        assert backend.graphs.rows[-1] == rows  # type: ignore[attr-defined]
        assert torch.equal(out, batch * 2)


def test_a_device_batch_is_padded_on_the_device_for_traced_modules(tmp_path: Path) -> None:
    from tests.stages.infer.backends.test_torch_cache import tiny_model

    model = tiny_model(tmp_path / "tiny.onnx")
    config = TorchConfig(device="cpu", cache_dir=str(tmp_path / "c"))
    backend = TorchBackend(model, name="det", max_batch=4, config=config)
    assert backend.batch_sizes == (1, 2, 4)
    batch = np.random.default_rng(3).random((3, 3, 64, 64), dtype=np.float32)
    on_device = backend.run_on_device(torch.from_numpy(batch))
    assert on_device.shape[0] == 3
    assert torch.equal(on_device, backend.run_on_device(batch))
    assert np.array_equal(backend.run(torch.from_numpy(batch)), backend.run(batch))
    padded = backend._staged(torch.from_numpy(batch), 4)
    assert padded.shape == (4, 3, 64, 64) and not padded[3].any()
    assert torch.equal(padded[:3], torch.from_numpy(batch))
    same = torch.from_numpy(batch)
    assert backend._staged(same, 3) is same


class _ReplayDoubles:
    """Stands in for a captured CUDA graph: a replay writes twice its static input."""

    def __init__(self, static_in, static_out) -> None:  # type: ignore[no-untyped-def]
        self.static_in, self.static_out = static_in, static_out

    def replay(self) -> None:
        self.static_out.copy_(self.static_in * 2)


def test_a_replay_takes_fewer_rows_than_its_graph() -> None:
    import threading

    from vapipe.stages.infer.backends.cuda_graphs import GraphedBatches

    graphs = object.__new__(GraphedBatches)
    graphs._lock = threading.Lock()
    graphs._graphs = {}
    for size in (2, 4):
        static_in, static_out = torch.full((size, 5), 7.0), torch.zeros(size, 5)
        graphs._graphs[size] = (_ReplayDoubles(static_in, static_out), static_in, static_out)
    batch = torch.arange(15, dtype=torch.float32).reshape(3, 5)  # rows != columns
    out = graphs.run(batch, 3, 4)
    assert torch.equal(out, batch * 2) and out.shape == (3, 5)
    _, static_in, static_out = graphs._graphs[4]
    assert torch.equal(static_in[:3], batch) and torch.equal(static_in[3], torch.full((5,), 7.0))
    out[0, 0] = -1  # a copy: the next replay does not change what was returned
    assert static_out[0, 0] == 0
    # Without rows, the staged batch's own length names the graph.
    assert torch.equal(graphs.run(batch[:2], 1), batch[:1] * 2)
    assert torch.equal(graphs._graphs[2][1], batch[:2])
