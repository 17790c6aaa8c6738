"""ONNX Runtime backend: provider fallback, batch-dynamic rewrite, padding, IO binding."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import asset
from vapipe.pipeline.errors import PipelineError
from vapipe.stages.infer.backends import providers as eps
from vapipe.stages.infer.backends.base import padded_size
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig


def backend(path: Path, max_batch: int = 1, **config: object) -> OnnxBackend:
    settings = OnnxRuntimeConfig.model_validate({"threads": 1, **config})
    return OnnxBackend(str(path), name="det", config=settings, max_batch=max_batch)


def images(count: int, size: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((count, 3, size, size), dtype=np.float32) * 255


@pytest.mark.parametrize(
    ("model", "size", "mode"),
    [
        ("yolox_nano.onnx", 416, "dynamic (rewritten)"),
        ("yolov8n.onnx", 640, "dynamic (rewritten)"),
        # Dynamic quantisation computes one scale over the whole batch: a batch changes each
        # image's result, so the rewrite must be refused and frames run one at a time.
        ("yolov8n_int8.onnx", 640, "frame-by-frame"),
    ],
)
def test_batch_rewrite_is_verified(model: str, size: int, mode: str) -> None:
    path = asset("models", model)
    batched = backend(path, max_batch=4)
    assert batched.batch_mode == mode
    single = backend(path, max_batch=1)
    assert single.batch_mode == "fixed"
    batch = images(3, size)
    out = batched.run(batch)
    expected = np.concatenate([single.run(batch[i : i + 1]) for i in range(3)])
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3 * np.abs(expected).max())


def test_fixed_shape_padding_and_io_binding_give_the_same_outputs() -> None:
    path = asset("models", "yolox_nano.onnx")
    plain = backend(path, max_batch=8, io_binding="off")
    padded = backend(path, max_batch=8, io_binding="on")
    padded.batch_sizes = (1, 2, 4, 8)  # as accelerators get them
    calls: list[int] = []
    run = padded._run
    padded._run = lambda batch: calls.append(len(batch)) or run(batch)  # type: ignore[method-assign]
    batch = images(3, 416, seed=1)
    np.testing.assert_allclose(padded.run(batch), plain.run(batch), rtol=1e-5, atol=1e-3)
    assert calls == [4], "a batch of 3 should run padded to the compiled size 4"
    assert padded.use_io_binding and not plain.use_io_binding


def test_padded_size() -> None:
    assert padded_size(3, (1, 2, 4, 8)) == 4
    assert padded_size(8, (1, 2, 4, 8)) == 8
    assert padded_size(5, None) == 5


def test_unavailable_providers_fall_back_to_cpu_and_say_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    chosen = backend(asset("models", "yolox_nano.onnx"), providers=["migraphx", "rocm", "cpu"])
    assert chosen.device == eps.CPU
    text = caplog.text
    assert "MIGraphXExecutionProvider is not in this onnxruntime build" in text
    assert "ROCMExecutionProvider is not in this onnxruntime build" in text


def test_provider_choice_order_and_options() -> None:
    available = ["CUDAExecutionProvider", "MIGraphXExecutionProvider", "CPUExecutionProvider"]
    names, options, skipped = eps.choose(
        "auto", available, {"cuda": {"device_id": 1}}, fp16=True, cache_dir="/tmp/c"
    )
    assert names == ["MIGraphXExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert options[0] == {"migraphx_fp16_enable": 1, "migraphx_model_cache_dir": "/tmp/c"}
    assert options[1]["device_id"] == 1 and skipped == []
    names, _, skipped = eps.choose(["tensorrt", "rocm"], available, {})
    assert names == ["CPUExecutionProvider"]
    assert skipped == ["TensorrtExecutionProvider", "ROCMExecutionProvider"]
    names, options, _ = eps.choose(
        ["ROCMExecutionProvider", "cpu"], ["ROCMExecutionProvider", "CPUExecutionProvider"], {}
    )
    assert names == ["ROCMExecutionProvider", "CPUExecutionProvider"]
    assert options[0]["tunable_op_enable"] == 1


def test_node_placement_report_counts_kernels_per_provider() -> None:
    path = asset("models", "yolox_nano.onnx")
    chosen = backend(path)
    assert chosen.placement == {}, "CPU-only runs skip the profiled warm-up"
    profiled = chosen._session(str(path), [eps.CPU], [{}], profile=True)
    counts, by_op = eps.placement(chosen, profiled)
    assert set(counts) == {eps.CPU} and counts[eps.CPU] > 50, counts
    assert by_op["Conv"] > 40 and sum(by_op.values()) == counts[eps.CPU], by_op


def test_refused_optional_provider_options_are_dropped_and_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import onnxruntime as ort

    real = ort.InferenceSession
    seen: list[list[dict]] = []

    def picky(model, options=None, providers=None, provider_options=None):
        seen.append(provider_options)
        if any("migraphx_model_cache_dir" in o for o in provider_options or []):
            raise RuntimeError("Unknown provider option: migraphx_model_cache_dir")
        return real(model, options, providers=["CPUExecutionProvider"])

    monkeypatch.setattr(ort, "InferenceSession", picky)
    monkeypatch.setattr(
        ort,
        "get_available_providers",
        lambda: ["MIGraphXExecutionProvider", "CPUExecutionProvider"],
    )
    caplog.set_level(logging.WARNING)
    chosen = backend(
        asset("models", "yolox_nano.onnx"),
        providers=["migraphx", "cpu"],  # the stand-in session runs on the CPU
        cache_dir="/tmp/vapipe-test-cache",
    )
    assert chosen.session is not None
    assert any("migraphx_model_cache_dir" in o for o in seen[1]), "the cache dir was not tried"
    assert not any("migraphx_model_cache_dir" in o for o in seen[-1])
    assert "retrying without migraphx_model_cache_dir" in caplog.text


class FakeCuda:
    """A CPU session that says it runs on CUDA: the accelerator code paths, on this machine.
    ``skew`` adds to every output, as a provider that computes something else would."""

    shapes: list[tuple[int, ...]] = []
    skew = 0.0
    provider = "CUDAExecutionProvider"

    def __init__(self, session: object) -> None:
        self._session = session
        self.seen: list[tuple[int, ...]] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)

    def get_providers(self) -> list[str]:
        return [FakeCuda.provider, "CPUExecutionProvider"]

    def run(self, names, feed):  # type: ignore[no-untyped-def]
        FakeCuda.shapes.append(next(iter(feed.values())).shape)
        self.seen.append(next(iter(feed.values())).shape)
        return [out + FakeCuda.skew for out in self._session.run(names, feed)]


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> type[FakeCuda]:
    import onnxruntime as ort

    real = ort.InferenceSession
    FakeCuda.shapes, FakeCuda.skew, FakeCuda.provider = [], 0.0, "CUDAExecutionProvider"
    given: list[list[dict]] = []

    def session(model, options=None, providers=None, provider_options=None):  # type: ignore[no-untyped-def]
        inner = real(model, options, providers=["CPUExecutionProvider"])
        if providers and FakeCuda.provider in providers:
            given.append(provider_options)
            FakeCuda.threads = options.intra_op_num_threads  # type: ignore[attr-defined]
            return FakeCuda(inner)
        return inner

    monkeypatch.setattr(ort, "InferenceSession", session)
    monkeypatch.setattr(
        ort, "get_available_providers", lambda: [FakeCuda.provider, "CPUExecutionProvider"]
    )
    FakeCuda.given = given  # type: ignore[attr-defined]
    return FakeCuda


def test_an_accelerator_gets_fixed_batch_shapes_warmed_and_checked_at_load(
    fake_cuda: type[FakeCuda], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    chosen = backend(asset("models", "yolox_nano.onnx"), max_batch=8, io_binding="off")
    assert chosen.device == "CUDAExecutionProvider"
    assert chosen.batch_sizes == (1, 2, 4, 8)
    loaded = [shape[0] for shape in fake_cuda.shapes]
    assert set(loaded) >= {1, 2, 4, 8}, f"every batch shape is run once at load: {loaded}"
    assert chosen.max_error is not None and chosen.max_error < 1e-5
    assert "CUDAExecutionProvider agrees with the CPU" in caplog.text
    options = fake_cuda.given[0][0]  # type: ignore[attr-defined]
    assert options["cudnn_conv_algo_search"] == "HEURISTIC" and options["use_tf32"] == 0
    # backend() asks for threads = 1: a CPU setting, not applied to an accelerator's session.
    assert fake_cuda.threads == 0  # type: ignore[attr-defined]
    fake_cuda.shapes.clear()
    chosen.run(images(3, 416))
    assert [shape[0] for shape in fake_cuda.shapes] == [4], "no new shape after load"


def test_an_accelerator_that_disagrees_with_the_cpu_is_refused(fake_cuda: type[FakeCuda]) -> None:
    fake_cuda.skew = 5.0
    with pytest.raises(PipelineError, match=r"det: CUDAExecutionProvider computes different "
                       r"outputs than the CPU \(relative error"):  # fmt: skip
        backend(asset("models", "yolox_nano.onnx"), max_batch=4, io_binding="off")


def test_an_accelerator_gets_one_session_per_batch_shape(fake_cuda: type[FakeCuda]) -> None:
    """The CUDA provider re-plans (NVRTC-compiles) its convolutions whenever a session's input
    shape changes: each session must only ever see one batch size, also under workers."""
    chosen = backend(asset("models", "yolox_nano.onnx"), max_batch=8, io_binding="off")
    assert sorted(chosen.sessions) == [1, 2, 4, 8] and chosen.stats()["sessions"] == 4
    batches = [images(n, 416, seed=n) for n in (1, 3, 8, 2, 5, 1, 4)]
    with ThreadPoolExecutor(3) as workers:
        outputs = list(workers.map(chosen.run, batches))
    for size, session in chosen.sessions.items():
        seen = {shape[0] for shape in session.seen}
        assert seen == {size}, f"the batch-{size} session ran batches of {seen}"
    for batch, output in zip(batches, outputs, strict=True):
        assert output.shape[0] == len(batch)
        np.testing.assert_allclose(output, chosen.run(batch), rtol=1e-5, atol=1e-3)


def test_the_head_is_asked_for_with_whether_an_accelerator_runs_it(
    fake_cuda: type[FakeCuda],
) -> None:
    from vapipe.stages.infer.graph_decode import HeadLayout
    from vapipe.stages.infer.heads import Family

    asked: list[bool] = []

    def head(info, accelerated):  # type: ignore[no-untyped-def]
        asked.append(accelerated)
        return HeadLayout(Family.YOLOX, 416, 416)

    path = str(asset("models", "yolox_nano.onnx"))
    for providers in (["cuda"], ["cpu"]):
        config = OnnxRuntimeConfig(providers=providers, io_binding="off")
        chosen = OnnxBackend(path, name="det", config=config, max_batch=2, head=head)
        assert chosen.run(images(2, 416)).shape == (2, 3549, 6)
        assert chosen.stats()["max_rel_error_vs_cpu"] == (
            None if providers == ["cpu"] else pytest.approx(0, abs=1e-5)
        )
    assert asked == [True, False]


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("migraphx", {"migraphx_fp16_enable": 1, "migraphx_model_cache_dir": "CACHE"}),
        ("rocm", {"tunable_op_enable": 1, "tunable_op_tuning_enable": 0}),
    ],
)
def test_amd_providers_get_their_options_and_a_session_per_shape(
    fake_cuda: type[FakeCuda], tmp_path: Path, alias: str, expected: dict
) -> None:
    """No AMD GPU here: a CPU session that says it is MIGraphX or ROCm takes the same path."""
    fake_cuda.provider = eps.ALIASES[alias]
    cache = str(tmp_path / "compiled")
    chosen = backend(
        asset("models", "yolox_nano.onnx"), max_batch=4, io_binding="off",
        providers=[alias, "cpu"], fp16=True, cache_dir=cache,
    )  # fmt: skip
    assert chosen.device == eps.ALIASES[alias]
    options = fake_cuda.given[0][0]  # type: ignore[attr-defined]
    for key, value in expected.items():
        assert options[key] == (cache if value == "CACHE" else value), options
    assert sorted(chosen.sessions) == [1, 2, 4]
    chosen.run(images(3, 416))
    assert {shape[0] for shape in chosen.sessions[4].seen} == {4}
