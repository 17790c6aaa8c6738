"""``backend = "auto"`` (the default): which backend runs the model on this machine.

Decided from what is installed, without loading a model twice:

1. onnxruntime with a compiling provider (MIGraphX, TensorRT): it builds an engine for the
   model, which a per-op runtime does not beat;
2. PyTorch on a GPU (CUDA or ROCm builds) with onnx2torch: CUDA graphs, head decode and NMS on
   the device (measured against onnxruntime's CUDA provider: bench/results/streams.md);
3. onnxruntime with another accelerator (CUDA, ROCm, OpenVINO on an Intel GPU or NPU);
4. onnxruntime on the CPU.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Collection, Sequence
from typing import Literal

from vapipe.stages.infer.backends import openvino
from vapipe.stages.infer.backends import providers as eps
from vapipe.stages.infer.backends.base import Backend
from vapipe.stages.infer.backends.onnx_runtime import OnnxRuntimeConfig
from vapipe.stages.infer.backends.pytorch import TorchConfig
from vapipe.stages.infer.backends.registry import BackendSettings, Request, backend, types

COMPILING = ("migraphx", "tensorrt")
OTHER_ACCELERATORS = ("rocm", "cuda", "openvino")
RUNTIME_LIBRARIES = {
    "tensorrt": ("libnvinfer.so.10", "libnvinfer.so.8", "nvinfer_10.dll"),
    "migraphx": ("libmigraphx_c.so.3", "libmigraphx_c.so"),
}
"""onnxruntime lists the providers it was built with, loadable or not: onnxruntime-gpu offers
TensorRT on machines without TensorRT (the session then falls back to CUDA)."""


GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")
"""NVIDIA's and AMD's (ROCm) kernel drivers: without either, importing torch (seconds) to ask
for a GPU is not worth it."""

log = logging.getLogger(__name__)


class AutoConfig(BackendSettings):
    """The backend chosen at load from what this machine has: onnxruntime with MIGraphX or
    TensorRT, else PyTorch on a GPU, else onnxruntime with CUDA, ROCm or OpenVINO, else
    onnxruntime on the CPU. The log says which and why; for any setting, name the type."""

    type: Literal["auto"] = "auto"
    """The backend: ``auto``."""

    def preloads(self) -> tuple[str, ...]:
        """torch too on a machine with a GPU driver, where ``auto`` may pick it."""
        gpu_driver = any(os.path.exists(node) for node in GPU_DEVICE_NODES)
        return ("onnxruntime", "torch") if gpu_driver else ("onnxruntime",)

    def native_stacks(self) -> frozenset[str]:
        """``migraphx`` where ``auto`` would pick it: onnxruntime offers it here."""
        return eps.migraphx_offered()


@backend("auto", AutoConfig)
def load(config: AutoConfig, request: Request) -> Backend:
    """The backend this machine runs best (``resolve``), loaded."""
    chosen, why = resolve()
    log.info("%s: backend %s (auto: %s)", request.name, chosen.type, why)
    return types()[chosen.type].load(chosen, request)


def torch_gpu() -> str | None:
    """What PyTorch would run on (``cuda`` or ``rocm``), or None: no torch, no onnx2torch, or
    no GPU it can use."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("onnx2torch") is None:
        return None
    if sys.platform.startswith("linux") and not any(map(os.path.exists, GPU_DEVICE_NODES)):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def runtime_loads(provider: str) -> bool:
    """Whether a compiling provider's own runtime library can be loaded here."""
    import ctypes

    for library in RUNTIME_LIBRARIES.get(provider, ()):
        try:
            ctypes.CDLL(library)
            return True
        except OSError:
            continue
    return False


def choose(
    available: Sequence[str],
    torch_device: str | None,
    runtimes: Collection[str] = COMPILING,
) -> tuple[str, str]:
    """(backend type, why), from onnxruntime's available providers, :func:`torch_gpu`, and
    the compiling providers whose runtime was found (``runtimes``)."""
    offered = {eps.short_name(p) for p in available}
    compiling = [name for name in COMPILING if name in offered and name in runtimes]
    if compiling:
        return "onnxruntime", f"onnxruntime offers {compiling[0]}, which compiles the model"
    if torch_device:
        return "torch", f"PyTorch has a {torch_device} GPU (CUDA graphs, decode on the device)"
    # A compiling provider whose library was not found by name may still load: onnxruntime
    # tries it first and falls back by itself, which beats the CPU.
    other = [name for name in (*OTHER_ACCELERATORS, *COMPILING) if name in offered]
    if other:
        return "onnxruntime", f"onnxruntime offers {other[0]}; PyTorch has no GPU here"
    return "onnxruntime", "no GPU found for onnxruntime or PyTorch: the CPU"


def resolve() -> tuple[OnnxRuntimeConfig | TorchConfig, str]:
    """The concrete backend config for this machine, and why it was chosen."""
    import onnxruntime as ort

    available = openvino.auto_offered(ort.get_available_providers(), openvino.devices())
    offered = {eps.short_name(p) for p in available}
    runtimes = [name for name in COMPILING if name in offered and runtime_loads(name)]
    # Import torch only when its answer can change the choice.
    torch_device = None if runtimes else torch_gpu()
    kind, why = choose(available, torch_device, runtimes)
    config = TorchConfig() if kind == "torch" else OnnxRuntimeConfig()
    return config, why
