"""backend = "auto": the choice from what the machine has, and its cost where there is no GPU."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from vapipe.pipeline.stage import StageContext
from vapipe.stages.infer.backends.choice import choose
from vapipe.stages.infer.stage import InferConfig, InferStage

CPU, CUDA, ROCM = "CPUExecutionProvider", "CUDAExecutionProvider", "ROCMExecutionProvider"
MIGRAPHX, TENSORRT, OPENVINO = (
    "MIGraphXExecutionProvider",
    "TensorrtExecutionProvider",
    "OpenVINOExecutionProvider",
)


@pytest.mark.parametrize(
    ("available", "torch_device", "chosen", "reason"),
    [
        ([CPU], None, "onnxruntime", "the CPU"),
        ([CPU], "cuda", "torch", "cuda GPU"),
        ([CUDA, CPU], "cuda", "torch", "cuda GPU"),
        ([CUDA, CPU], None, "onnxruntime", "offers cuda"),
        ([ROCM, CPU], "rocm", "torch", "rocm GPU"),
        ([MIGRAPHX, ROCM, CPU], "rocm", "onnxruntime", "offers migraphx"),
        ([TENSORRT, CUDA, CPU], "cuda", "onnxruntime", "offers tensorrt"),
        ([OPENVINO, CPU], None, "onnxruntime", "offers openvino"),
    ],
)
def test_choice(available, torch_device, chosen: str, reason: str) -> None:
    kind, why = choose(available, torch_device)
    assert kind == chosen and reason in why


def test_a_compiling_provider_without_its_runtime_found_still_beats_the_cpu() -> None:
    """MIGraphX's library may sit where ctypes does not look: onnxruntime still tries it."""
    assert choose([MIGRAPHX, CPU], None, runtimes=()) == (
        "onnxruntime",
        "onnxruntime offers migraphx; PyTorch has no GPU here",
    )
    assert choose([TENSORRT, CUDA, CPU], "cuda", runtimes=())[0] == "torch"


def test_a_compiling_provider_counts_only_where_its_runtime_loads(monkeypatch) -> None:
    """onnxruntime-gpu lists TensorRT whether or not TensorRT is installed."""
    import onnxruntime as ort

    from vapipe.stages.infer.backends import choice

    monkeypatch.setattr(ort, "get_available_providers", lambda: [TENSORRT, CUDA, CPU])
    monkeypatch.setattr(choice, "torch_gpu", lambda: None)
    assert not choice.runtime_loads("tensorrt")  # not on this machine
    config, why = choice.resolve()
    assert config.type == "onnxruntime" and "offers cuda" in why
    monkeypatch.setattr(choice, "runtime_loads", lambda provider: True)
    assert "offers tensorrt" in choice.resolve()[1]


def test_no_gpu_driver_means_torch_is_not_even_imported() -> None:
    """Asking torch for a GPU costs seconds of import; without NVIDIA's or AMD's driver there
    is nothing to ask (this machine has neither)."""
    code = (
        "import sys; from vapipe.stages.infer.backends.choice import torch_gpu; "
        "print(torch_gpu(), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "False"]


def test_an_infer_node_without_a_backend_table_runs_what_auto_chose(caplog) -> None:
    caplog.set_level(logging.INFO)
    stage = InferStage("det", InferConfig(model="yolox-nano"))
    assert stage.config.backend.type == "auto"
    stage.open(StageContext("det"))
    try:
        assert stage.stats()["provider"] == CPU
        assert "det: backend onnxruntime (auto: no GPU found" in caplog.text
    finally:
        stage.close()
