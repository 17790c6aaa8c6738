"""The ``[nodes.NAME.backend]`` table: one config class per backend type, keyed on ``type``.

A key that belongs to another backend is an error (``device`` under onnxruntime, say), and
``backend = "torch"`` is short for ``backend = { type = "torch" }``.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.infer.backends.host_wait import HostWait

GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")
"""NVIDIA's and AMD's (ROCm) kernel drivers: without either, importing torch (seconds) to ask
for a GPU is not worth it."""


class OnnxRuntimeConfig(StageConfig):
    """ONNX Runtime, on the first execution provider available in ``providers``."""

    type: Literal["onnxruntime"] = "onnxruntime"
    """The backend: ``onnxruntime``, ``torch``, or ``auto`` (the default when the node has no
    backend table; a table without ``type`` is ``onnxruntime``)."""
    providers: str | list[str] = "auto"
    """Execution providers in order of preference (``migraphx``, ``rocm``, ``tensorrt``,
    ``cuda``, ``openvino``, ``cpu`` or full names), or ``auto`` for that order. Unavailable
    ones are skipped with a warning; CPU always ends the list."""
    provider_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per provider options, passed through as they are, over the defaults, e.g.
    ``{ migraphx = { migraphx_exhaustive_tune = 0 } }`` or
    ``{ openvino = { device_type = "NPU" } }`` (OpenVINO's default: its first GPU, else
    its first NPU, else the CPU; one stream per worker)."""
    fp16: bool = False
    """Half precision where the provider supports it (MIGraphX, TensorRT, OpenVINO)."""
    cache_dir: str | None = None
    """Compiled-model cache for MIGraphX / TensorRT / OpenVINO, so restarts do not recompile.
    Unset: OpenVINO's blobs go to ``$XDG_CACHE_HOME/vapipe/openvino``, the others keep none;
    ``off``: none for any."""
    io_binding: Literal["auto", "on", "off"] = "auto"
    """IO binding; ``auto`` uses it on every provider but the CPU."""
    threads: int = Field(0, ge=0, le=256)
    """Intra-op threads per call on the CPU provider; 0 lets ONNX Runtime choose (one per
    core). When an accelerator is chosen, its session keeps ONNX Runtime's own pool: the few
    nodes it leaves on the CPU ran 2.8x slower on one thread (CUDA, H200)."""

    def preloads(self) -> tuple[str, ...]:
        return ("onnxruntime",)

    def native_stacks(self) -> frozenset[str]:
        """``migraphx`` where this session would load it (ROCm's own LLVM: see
        pipeline/prepare.py): asked for by name, or ``auto`` where onnxruntime offers it."""
        named = [self.providers] if isinstance(self.providers, str) else self.providers
        if any(n.lower() in ("migraphx", "migraphxexecutionprovider") for n in named):
            return frozenset({"migraphx"})
        return migraphx_offered() if self.providers == "auto" else frozenset()


class TorchConfig(StageConfig):
    """PyTorch on its GPU (CUDA or ROCm builds) via onnx2torch: ``pip install 'vapipe[torch]'``."""

    type: Literal["torch"] = "torch"
    """The backend: ``torch``."""

    def preloads(self) -> tuple[str, ...]:
        return ("onnxruntime", "torch")  # onnxruntime: the conversion is checked against it

    device: str = "auto"
    """Torch device (``cuda``, ``cuda:1``, ``cpu``); ``auto`` picks the GPU when there is one
    (ROCm builds of PyTorch call it ``cuda`` too)."""
    fp16: bool = False
    """Half precision weights and inputs (checked against onnxruntime at load, looser)."""
    cuda_graphs: bool | None = None
    """Capture the model as one CUDA graph (HIP graph on ROCm) per padded batch size
    (1, 2, 4 ... max_batch), so that a batch is one launch instead of hundreds. Unset: on for
    GPU devices. Where capture fails the model runs op by op, with a warning."""
    host_wait: HostWait = "sleep"
    """How a thread waiting for the GPU waits: ``sleep`` (blocked until the GPU signals, its
    core free for other work meanwhile), ``auto`` (the driver's choice: it spins while the
    process has fewer contexts than the machine has cores), ``yield`` or ``spin``. Set before
    the device's context is made; the log says if it was too late. On the H200 machine,
    16 x 1080p in 8 shards with torch preprocessing: ``sleep`` 1,639 and 1,617 frames/s,
    ``auto`` 1,433 and 1,393 (two threads per shard wait for the GPU, each spinning on a core
    the decoders need; bench/results/streams/variants_torch_pre.json)."""
    cache_dir: str = "auto"
    """The compiled-model cache: the converted model traced per batch size, with its check
    against onnxruntime, so a restart neither converts nor checks again (and imports neither
    onnx nor onnx2torch). Keyed by the model's sha256, the torch/onnx2torch/vapipe versions,
    the device, dtype and batch sizes; a corrupt entry is rebuilt. ``auto``:
    ``$XDG_CACHE_HOME/vapipe/compiled`` (``~/.cache/vapipe/compiled``); ``off``: none."""


class AutoConfig(StageConfig):
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
        return migraphx_offered()


def migraphx_offered() -> frozenset[str]:
    """``{"migraphx"}`` when the installed onnxruntime offers the MIGraphX provider."""
    import onnxruntime

    offered = "MIGraphXExecutionProvider" in onnxruntime.get_available_providers()
    return frozenset({"migraphx"}) if offered else frozenset()


BACKEND_TYPES: dict[str, type[StageConfig]] = {
    "auto": AutoConfig,
    "onnxruntime": OnnxRuntimeConfig,
    "torch": TorchConfig,
}


def backend_shorthand(data: Any) -> Any:
    """A node's raw keys with ``backend = "torch"`` made ``backend = { type = "torch" }``
    (a ``mode="before"`` validator of every node that takes a backend)."""
    if isinstance(data, dict) and isinstance(data.get("backend"), str):
        return {**data, "backend": {"type": data["backend"]}}
    return data


def _backend_type(value: Any) -> str | None:
    if isinstance(value, dict):
        kind = value.get("type", "onnxruntime")
        return kind if isinstance(kind, str) else None
    return getattr(value, "type", None)


BackendConfig = Annotated[
    Annotated[OnnxRuntimeConfig, Tag("onnxruntime")]
    | Annotated[TorchConfig, Tag("torch")]
    | Annotated[AutoConfig, Tag("auto")],
    Discriminator(
        _backend_type,
        custom_error_type="unknown_type",
        custom_error_message="unknown backend type",
    ),
]
