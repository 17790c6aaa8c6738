"""The model as data: loaded once whoever asks, what it reads from the file and the backend
(family, names, input conventions, the decode on the device and why not), the config
mistakes it names, and the nms node's settings handed to it by binding."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.infer import model as model_module
from vapipe.stages.infer.backends.base import ModelInfo
from vapipe.stages.infer.config import InferConfig
from vapipe.stages.infer.graph_decode import HeadLayout
from vapipe.stages.infer.heads import Family
from vapipe.stages.infer.model import Model
from vapipe.stages.nms import NmsConfig, NmsStage, Selection

YOLOX_416 = [1, 3549, 85]  # 416x416: 52^2 + 26^2 + 13^2 cells, 80 classes + 5
V8_640 = [1, 84, 8400]


class Fake:
    """A backend: what it says of the model, and how often it was made."""

    def __init__(self, shape: list[Any], output: list[Any], metadata: dict[str, str]) -> None:
        self.info = ModelInfo("images", shape, np.dtype(np.float32), output, metadata)
        self.device = "fake"
        self.closed = 0

    batch_sizes = None

    def run(self, batch: np.ndarray) -> np.ndarray:
        raise AssertionError("not run here")

    def stats(self) -> dict[str, Any]:
        return {"provider": self.device}

    def close(self) -> None:
        self.closed += 1


class FakeTorch(Fake):
    def __init__(self, device_type: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.torch_device = type("Device", (), {"type": device_type})()

    def run_on_device(self, batch: Any) -> Any:
        return batch


class FakeOrt(Fake):
    def __init__(self, rect_problem: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rect_problem = rect_problem
        self.head: HeadLayout | None = None
        self.head_problem: str | None = "this provider cannot"


@pytest.fixture
def onnx_file(tmp_path: Path) -> Path:
    """An ONNX file (the load checks it is one) whose graph the fake backend never reads."""
    image = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 8, 8])
    identity = helper.make_node("Identity", ["images"], ["out"])
    graph = helper.make_graph([identity], "g", [image], [out])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), path)
    return path


def loaded(
    monkeypatch: pytest.MonkeyPatch, backend: Fake, path: Path, **keys: Any
) -> tuple[Model, list[Any]]:
    """A model of ``path`` loaded on ``backend``; the load_backend calls it made."""
    calls: list[Any] = []

    def load_backend(file: str, name: str, config: Any, max_batch: int, **kwargs: Any) -> Fake:
        calls.append((file, name, max_batch, kwargs))
        head = kwargs["head"](backend.info, True) if kwargs.get("head") else None
        if isinstance(backend, FakeOrt):
            backend.head = head
        return backend

    monkeypatch.setattr(model_module, "load_backend", load_backend)
    model = Model("det", InferConfig.model_validate({"model": str(path), **keys}))
    return model.load(), calls


def test_a_yolox_model_says_its_conventions_and_loads_once(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    backend = Fake([1, 3, 416, 416], YOLOX_416, {})
    model, calls = loaded(monkeypatch, backend, onnx_file, max_batch=8, workers=2)
    assert model.loaded and model.family is Family.YOLOX and model.backend is backend
    assert (model.input.width, model.input.height) == (416, 416)
    assert (model.input.color, model.input.scale, model.input.placement) == ("bgr", 1.0, "top-left")
    assert model.input.dtype == np.float32 and model.input.rect is False
    assert model.names[0] == "person" and len(model.names) == 80
    assert model.torch_device is None and model.on_device is None and model.head is None
    assert model.max_batch == 8 and model.batch_timeout_s == pytest.approx(0.005)
    assert calls == [(str(onnx_file), "det", 8, {"head": calls[0][3]["head"], "workers": 2,
                                                 "rect": False})]  # fmt: skip
    assert model.load() is model and len(calls) == 1  # a second node asking loads nothing
    assert model.close() == {"provider": "fake"} and backend.closed == 1
    assert model.backend is None and model.close() == {} and backend.closed == 1


def test_many_nodes_asking_at_once_load_it_once(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    model, calls = loaded(monkeypatch, Fake([1, 3, 416, 416], YOLOX_416, {}), onnx_file)
    model._loaded = False  # as made, not loaded: many threads ask together
    barrier = threading.Barrier(4)

    def ask() -> None:
        barrier.wait()
        model.load()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 2  # the first load, then exactly one more


def test_an_ultralytics_model_is_rgb_scaled_and_centred(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    names = str({i: f"c{i}" for i in range(80)})
    model, _ = loaded(monkeypatch, Fake([1, 3, 640, 640], V8_640, {"names": names}), onnx_file)
    assert model.family is Family.YOLOV8 and model.names[:2] == ("c0", "c1")
    assert (model.input.color, model.input.scale, model.input.placement) == (
        "rgb", pytest.approx(1 / 255), "center")  # fmt: skip


def test_an_input_without_a_size_needs_input_size(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    backend = Fake([1, 3, "h", "w"], YOLOX_416, {})
    with pytest.raises(ConfigError, match="has no fixed size: set input_size") as caught:
        loaded(monkeypatch, backend, onnx_file)
    assert caught.value.key == "input_size"
    model, _ = loaded(monkeypatch, backend, onnx_file, input_size=[416, 416])
    assert (model.input.width, model.input.height) == (416, 416)


def test_input_size_wins_over_the_files_own(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    model, _ = loaded(monkeypatch, Fake([1, 3, 640, 640], YOLOX_416, {}), onnx_file,
                      input_size=[416, 416], family="yolox")  # fmt: skip
    assert (model.input.width, model.input.height) == (416, 416)


def test_a_family_that_does_not_fit_the_output_is_named(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="family 'yolov8' does not fit output shape") as caught:
        loaded(monkeypatch, Fake([1, 3, 416, 416], [1, 5], {}), onnx_file, family="yolov8")
    assert caught.value.key == "family"


def test_an_unknown_head_asks_for_the_family(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="cannot tell the YOLO family") as caught:
        loaded(monkeypatch, Fake([1, 3, 416, 416], [1, 77, 9], {}), onnx_file)
    assert caught.value.key == "family"


def test_rect_needs_onnxruntime_and_a_model_that_takes_other_sizes(  # type: ignore[no-untyped-def]
    monkeypatch, onnx_file, caplog
) -> None:
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    model, _ = loaded(monkeypatch, FakeOrt(**shape), onnx_file, rect=True)
    assert model.input.rect is True
    with pytest.raises(ConfigError, match=r"m\.onnx cannot take other input sizes: fixed") as e:
        loaded(monkeypatch, FakeOrt(rect_problem="fixed", **shape), onnx_file, rect=True)
    assert e.value.key == "rect"
    model, _ = loaded(monkeypatch, FakeTorch("cuda", **shape), onnx_file, rect=True)
    assert model.input.rect is False and "rect = true needs the onnxruntime backend" in caplog.text


def test_the_head_goes_into_the_model_on_an_accelerator_unless_told(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    model, _ = loaded(monkeypatch, FakeOrt(**shape), onnx_file)
    assert model.head == HeadLayout(Family.YOLOX, 416, 416)
    model, _ = loaded(monkeypatch, FakeOrt(**shape), onnx_file, decode_on_device=False)
    assert model.head is None
    model, _ = loaded(monkeypatch, FakeOrt(**shape), onnx_file, rect=True)
    assert model.head is None  # one grid for one input size


def test_the_decode_on_a_torch_gpu_uses_the_bound_nms_settings(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch", reason="the decode on the device is torch's (extra 'torch')")
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    backend = FakeTorch("cuda", **shape)
    calls: list[Any] = []
    monkeypatch.setattr(model_module, "load_backend", lambda *a, **k: calls.append(a) or backend)
    model = Model("det", InferConfig(model=str(onnx_file)))
    nms = NmsStage("nms", NmsConfig(conf=0.4, iou=0.5, classes=[0, 2]))
    nms.bind(model)
    assert model.suppression == Selection("nms", 0.4, 0.5, 300, 30000, False, (0, 2))
    model.load()
    assert model.on_device is backend and model.torch_device is backend.torch_device
    decoder = model.device_decoder
    assert decoder is not None and decoder.selection is model.suppression
    assert decoder.names == model.names


def test_without_an_nms_node_or_on_a_cpu_the_decode_stays_on_the_host(
    monkeypatch, onnx_file
) -> None:  # type: ignore[no-untyped-def]
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    model, _ = loaded(monkeypatch, FakeTorch("cuda", **shape), onnx_file)
    assert model.device_decoder is None  # nothing bound its settings: nms runs as a node
    with pytest.raises(ConfigError, match="no nms node follows this one") as caught:
        loaded(monkeypatch, FakeTorch("cuda", **shape), onnx_file, decode_on_device=True)
    assert caught.value.key == "decode_on_device"
    model, _ = loaded(monkeypatch, FakeTorch("cpu", **shape), onnx_file)
    assert model.device_decoder is None


def test_asked_for_a_device_decode_the_backend_that_cannot_says_why(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    with pytest.raises(ConfigError, match="this backend cannot"):
        loaded(monkeypatch, Fake(**shape), onnx_file, decode_on_device=True)
    end2end = dict(shape=[1, 3, 640, 640], output=[1, 300, 6], metadata={})
    with pytest.raises(ConfigError, match="end2end heads are suppressed in the model already"):
        loaded(monkeypatch, FakeTorch("cuda", **end2end), onnx_file, decode_on_device=True)


def test_an_nms_node_binds_only_to_a_model() -> None:
    nms = NmsStage("nms", NmsConfig())
    nms.bind(None)
    nms.bind(object())  # another node's object: nothing to hand over, no error


def test_what_loading_found_is_read_only_and_a_new_model_is_not_loaded(onnx_file) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from vapipe.stages.model_input import ModelInput

    model = Model("det", InferConfig(model=str(onnx_file)))
    assert model.loaded is False and model.backend is None and model.close() == {}
    seen = ModelInput(416, 416, "bgr", 1.0, "top-left", np.dtype(np.float32))
    assert seen.rect is False  # square inputs unless rect is asked for and possible
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen.width = 640  # type: ignore[misc]


def test_one_size_missing_is_as_bad_as_both(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    for shape in ([1, 3, "h", 416], [1, 3, 416, None]):
        with pytest.raises(ConfigError, match="has no fixed size"):
            loaded(monkeypatch, Fake(shape, YOLOX_416, {}), onnx_file)


def test_on_the_cpu_the_head_goes_into_the_model_only_when_asked(monkeypatch, onnx_file) -> None:  # type: ignore[no-untyped-def]
    shape = dict(shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    for wanted, expected in ((None, None), (True, HeadLayout(Family.YOLOX, 416, 416))):
        backend = FakeOrt(**shape)
        keys = {} if wanted is None else {"decode_on_device": wanted}

        def load_backend(*args: Any, backend: FakeOrt = backend, **kwargs: Any) -> FakeOrt:
            backend.head = kwargs["head"](backend.info, False)  # a CPU provider
            return backend

        monkeypatch.setattr(model_module, "load_backend", load_backend)
        model = Model("det", InferConfig.model_validate({"model": str(onnx_file), **keys}))
        assert model.load().head == expected


def test_decode_on_device_false_keeps_the_decode_on_the_host_even_on_a_gpu(  # type: ignore[no-untyped-def]
    monkeypatch, onnx_file
) -> None:
    backend = FakeTorch("cuda", shape=[1, 3, 416, 416], output=YOLOX_416, metadata={})
    monkeypatch.setattr(model_module, "load_backend", lambda *a, **k: backend)
    model = Model("det", InferConfig(model=str(onnx_file), decode_on_device=False))
    NmsStage("nms", NmsConfig()).bind(model)
    assert model.load().device_decoder is None and model.on_device is backend


def test_the_preprocess_node_binds_to_a_model_before_it_loads_and_refuses_other_shares(
    onnx_file: Any,
) -> None:
    from vapipe.pipeline.errors import ConfigError
    from vapipe.stages.model_input import InputModel
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    model = Model("det", InferConfig(model=str(onnx_file)))
    assert isinstance(model, InputModel) and not model.loaded
    pre = PreprocessStage("pre", PreprocessConfig())
    pre.bind(model)
    assert pre.bound is model
    with pytest.raises(ConfigError, match="shares a NmsStage, not a model"):
        pre.bind(NmsStage("nms", NmsConfig()))
