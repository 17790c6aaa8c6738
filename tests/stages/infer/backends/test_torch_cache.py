"""The torch backend's compiled-model cache: a warm start loads the traced modules without
onnx or onnx2torch and gives the same output; a damaged or stale entry is rebuilt, never used;
shards that start together build one entry."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from vapipe.stages.infer.backends.pytorch import TorchConfig

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

from vapipe.stages.infer.backends.pytorch import TorchBackend  # noqa: E402
from vapipe.stages.infer.backends.torch_cache import ModelCache  # noqa: E402

SIZE = 64


def tiny_model(path: Path) -> str:
    """A two-layer convolutional model (batch 1 in the file, as exported detectors are): the
    cache's logic is the same for any model, and this one converts, checks and traces in a
    fraction of YOLOX-Nano's time (test_pytorch.py covers the real ones)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
        for name, shape in (("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (6, 8, 3, 3)))
    ]
    nodes = [
        helper.make_node("Conv", ["images", "w1", "b1"], ["c1"], pads=[1] * 4, strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1] * 4, strides=[2, 2]),
        helper.make_node("Sigmoid", ["c2"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT,
                                       [1, 6, SIZE // 4, SIZE // 4])],
        initializer=weights,
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return str(path)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny_model(tmp_path_factory.mktemp("model") / "tiny.onnx")


# A fresh interpreter: what a restart imports, its output on fixed input, its start-up stats.
LOAD = """
import json, sys
import numpy as np
from vapipe.stages.infer.backends.pytorch import TorchConfig
from vapipe.stages.infer.backends.pytorch import TorchBackend
backend = TorchBackend(sys.argv[1], name="det", max_batch=2,
                       config=TorchConfig(device="cpu", cache_dir=sys.argv[2]))
batch = np.random.default_rng(11).random((2, 3, int(sys.argv[4]), int(sys.argv[4])),
                                         dtype=np.float32) * 255
np.save(sys.argv[3], backend.run(batch))
print(json.dumps({"startup": backend.stats()["startup"], "sizes": backend.batch_sizes,
                  "imported": sorted(m for m in ("onnx", "onnx2torch", "torchvision")
                                     if m in sys.modules)}))
"""


def load_in_a_fresh_process(model: str, cache: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", LOAD, model, str(cache), str(out), str(SIZE)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "log": done.stderr}


def entry_of(cache: Path) -> Path:
    (entry,) = [p for p in (cache / "torch").iterdir() if p.is_dir()]
    return entry


def test_a_warm_start_loads_the_same_model_without_onnx2torch(tmp_path: Path, model: str) -> None:
    cache = tmp_path / "cache"
    cold = load_in_a_fresh_process(model, cache, tmp_path / "cold.npy")
    assert cold["startup"]["cache"] == "built" and "onnx2torch" in cold["imported"]
    assert {"convert_s", "check_s", "trace_s"} <= cold["startup"].keys()
    warm = load_in_a_fresh_process(model, cache, tmp_path / "warm.npy")
    assert warm["startup"]["cache"] == "hit", warm["log"]
    assert warm["imported"] == [] and warm["sizes"] == [1, 2]
    assert not {"convert_s", "check_s", "trace_s"} & warm["startup"].keys()
    assert np.array_equal(np.load(tmp_path / "cold.npy"), np.load(tmp_path / "warm.npy"))
    meta = json.loads((entry_of(cache) / "meta.json").read_text())
    assert meta["key"]["batch_sizes"] == [1, 2] and meta["max_error"] < 1e-3


def build(model: str, cache: Path, **config: object) -> TorchBackend:
    return TorchBackend(model, name="det", max_batch=2,
                        config=TorchConfig(device="cpu", cache_dir=str(cache), **config))  # type: ignore[arg-type]  # fmt: skip


def damage(entry: Path, how: str) -> None:
    module = entry / "batch2.ts"
    if how == "flipped byte":
        data = bytearray(module.read_bytes())
        data[len(data) // 2] ^= 0xFF
        module.write_bytes(bytes(data))
    elif how == "truncated":
        module.write_bytes(module.read_bytes()[:1000])
    elif how == "other key":
        meta = json.loads((entry / "meta.json").read_text())
        meta["key"]["torch"] = "0.0.1"
        (entry / "meta.json").write_text(json.dumps(meta))
    else:
        (entry / "meta.json").unlink()


def test_a_damaged_or_stale_entry_is_rebuilt_and_never_used(
    tmp_path: Path, caplog, model: str
) -> None:
    cache = tmp_path / "cache"
    batch = np.random.default_rng(4).random((2, 3, SIZE, SIZE), dtype=np.float32) * 255
    expected = build(model, cache).run(batch)
    for how in ("flipped byte", "truncated", "other key", "no meta"):
        caplog.clear()
        entry = entry_of(cache)
        damage(entry, how)
        again = build(model, cache)
        assert again.startup["cache"] == "built", how
        assert "unusable" in caplog.text and str(entry) in caplog.text, how
        assert np.array_equal(again.run(batch), expected), how
    assert build(model, cache).startup["cache"] == "hit"


def test_the_key_tells_devices_dtypes_and_batch_sizes_apart(tmp_path: Path, model: str) -> None:
    cache = tmp_path / "cache"
    build(model, cache)
    TorchBackend(model, name="det", max_batch=1,
                 config=TorchConfig(device="cpu", cache_dir=str(cache)))  # fmt: skip
    entries = [p for p in (cache / "torch").iterdir() if p.is_dir()]
    keys = [json.loads((p / "meta.json").read_text())["key"]["batch_sizes"] for p in entries]
    assert sorted(keys) == [[1], [1, 2]]


def test_shards_starting_together_build_one_entry(tmp_path: Path, model: str) -> None:
    cache = tmp_path / "cache"
    command = [sys.executable, "-c", LOAD, model, str(cache)]
    runs = [subprocess.Popen([*command, str(tmp_path / f"{i}.npy"), str(SIZE)],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for i in range(2)]  # fmt: skip
    results = []
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["startup"]["cache"] for r in results) == ["built", "hit"]
    assert np.array_equal(np.load(tmp_path / "0.npy"), np.load(tmp_path / "1.npy"))
    assert not [p for p in (cache / "torch").iterdir() if ".tmp" in p.name]


def test_a_shard_that_waited_for_the_build_loads_it_after_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    # Shards that wait for one builder load side by side, not one by one under the lock.
    cache = tmp_path / "cache"
    build(model, cache)  # what the builder shard left
    seen = {"locked": False, "loads": [], "missed": False}
    real_load, real_locked = ModelCache.load, ModelCache.locked

    def load(self: ModelCache, torch_module: object) -> object:
        seen["loads"].append(seen["locked"])
        if not seen["missed"]:  # the look before the lock: the builder was not done yet
            seen["missed"] = True
            return None
        return real_load(self, torch_module)

    @contextlib.contextmanager
    def locked(self: ModelCache) -> Iterator[None]:
        with real_locked(self):
            seen["locked"] = True
            try:
                yield
            finally:
                seen["locked"] = False

    monkeypatch.setattr(ModelCache, "load", load)
    monkeypatch.setattr(ModelCache, "locked", locked)
    backend = build(model, cache)
    assert backend.startup["cache"] == "hit", "built again what another shard had built"
    assert seen["loads"] == [False, False], "loaded while holding the lock"


def test_a_trace_that_changes_the_output_is_refused(
    tmp_path: Path, monkeypatch, model: str
) -> None:
    from vapipe.stages.infer.backends import pytorch
    from vapipe.stages.infer.backends.cuda_graphs import first_output

    real = pytorch.specialise

    class OffByOne(torch.nn.Module):
        def __init__(self, inner: object) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, batch: object) -> object:
            return first_output(self.inner(batch)) + 1

    def off_by_one(torch_module, module, example):  # type: ignore[no-untyped-def]
        return OffByOne(real(torch_module, module, example))

    monkeypatch.setattr(pytorch, "specialise", off_by_one)
    with pytest.raises(Exception, match=r"traced module .* differs"):
        build(model, tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache" / "torch").iterdir() if p.is_dir()]
