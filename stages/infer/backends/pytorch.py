"""PyTorch backend: the same ONNX file, converted with onnx2torch, on torch's GPU device.

For machines where PyTorch has a GPU build (CUDA or ROCm) but onnxruntime has none. Needs
``pip install 'vapipe[torch]'``.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from typing import Any, Literal

import numpy as np

from vapipe.pipeline.errors import MissingDependencyError, PipelineError
from vapipe.stages.infer.backends.base import (
    ModelInfo,
    batch_ladder,
    concrete_shape,
    padded_size,
    relative_error,
)
from vapipe.stages.infer.backends.batch_dynamic import make_batch_dynamic
from vapipe.stages.infer.backends.cuda_graphs import GraphedBatches, first_output, specialise
from vapipe.stages.infer.backends.fx_rewrites import fuse_silu
from vapipe.stages.infer.backends.host_wait import HostWait, set_host_wait
from vapipe.stages.infer.backends.registry import BackendSettings, Request, backend
from vapipe.stages.infer.backends.torch_cache import Entry, ModelCache, cache_root
from vapipe.stages.infer.backends.torch_convert import FirstOutput, bridge_newer_opsets

log = logging.getLogger(__name__)


class TorchConfig(BackendSettings):
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
    (1, 2, 4 ... max_batch), so that a batch is one launch instead of hundreds, and with it
    the fixed-shape part of the head decode on the device (one graph per batch size, captured
    the first time the size comes). Unset: on for GPU devices. Where capture fails the model
    runs op by op, with a warning."""
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


class TorchBackend:
    graphs: GraphedBatches | None = None
    fixed: dict[int, Any] | None = None
    """With the compiled-model cache: one traced module per batch size (batches are padded
    to one); without it, ``module`` takes any batch."""
    module: Any = None

    def __init__(self, path: str, *, name: str, config: TorchConfig, max_batch: int = 1) -> None:
        device, fp16 = config.device, config.fp16
        self.startup: dict[str, Any] = {}
        clock = time.perf_counter()
        try:
            import torch
        except ImportError as exc:
            raise MissingDependencyError(
                exc.name or "torch", 'backend = "torch"', extra="torch"
            ) from None
        self._torch = torch
        self.startup["import_s"] = round(time.perf_counter() - clock, 3)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.torch_device = torch.device(device)
        hip = bool(getattr(torch.version, "hip", None))
        if self.torch_device.type == "cuda":
            waits = set_host_wait(config.host_wait, self.torch_device.index or 0, hip)
            log.info("%s: host threads wait for the GPU: %s (%s)", name, config.host_wait, waits)
        label = (
            torch.cuda.get_device_name(self.torch_device)
            if self.torch_device.type == "cuda"
            else "cpu"
        )
        self.startup["device_s"] = round(
            max(time.perf_counter() - clock - self.startup["import_s"], 0.0), 3
        )
        self.dtype = torch.float16 if fp16 else torch.float32
        if not fp16:
            # PyTorch runs float32 convolutions as TF32 on NVIDIA GPUs by default: about three
            # significant digits, enough to move boxes. float32 here means float32.
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False
        kind = "rocm" if hip else self.torch_device.type
        self.device = f"torch:{kind}:{self.torch_device.index or 0} ({label})"
        self.pinned = self.torch_device.type == "cuda"
        self._staging = threading.local()
        log.info(
            "%s: PyTorch %s on %s%s", name, torch.__version__, self.device, " fp16" if fp16 else ""
        )
        tolerance = 5e-2 if fp16 else 1e-3
        root = cache_root(config.cache_dir)
        if root is None:
            self.startup["cache"] = "off"
            self._convert(path, name)
            self.max_error = self._timed("check_s", self._verify, path, tolerance)
        else:
            cache = ModelCache(
                root, path, torch_version=torch.__version__,
                device=f"{kind}:{self.torch_device} ({label})",
                dtype=str(self.dtype), sizes=batch_ladder(max_batch),
            )  # fmt: skip
            # Entries appear whole (renamed into place), so shards read without the lock and
            # load side by side; only a miss takes it, to build once. A shard that waited for
            # another's build loads it after the lock, beside the other waiters: loading under
            # the lock made them ready one after another, some 2 s apart each (8 shards on
            # the H200: ready from 15 s to 31 s, the first ones' span mostly alone).
            entry = self._timed("load_s", cache.load, torch)
            for _ in range(2):  # a second round where what another built does not load here
                if entry is not None:
                    break
                with cache.locked():
                    if not cache.present():
                        entry = self._build(path, name, cache.sizes, tolerance)
                        self._timed("store_s", cache.store, torch, entry)
                        self.startup["cache"] = "built"
                if entry is None:
                    entry = self._timed("load_s", cache.load, torch)
            if entry is None:
                raise PipelineError(f"{name}: the compiled-model cache {cache.dir} cannot be used")
            self.startup.setdefault("cache", "hit")
            self.info, self.fixed, self.max_error = entry.info, entry.modules, entry.max_error
            # TorchScript's executor would re-optimise the modules on their first calls
            # (fusing kernels, compiled with NVRTC on a GPU): slower to start and other
            # arithmetic than the module that was checked. Process-wide, but nothing else
            # here runs TorchScript.
            torch._C._set_graph_executor_optimize(False)
            self.module = None  # onnx2torch's module: the traced ones replace it
            log.info(
                "%s: compiled-model cache %s: %s", name,
                "hit" if self.startup["cache"] == "hit" else "entry built", cache.dir,
            )  # fmt: skip
        self.graphs = self._timed("capture_s", self._capture, name, config, max_batch)
        self.startup["total_s"] = round(time.perf_counter() - clock, 3)
        log.info(
            "%s: model ready in %.2f s (%s)", name, self.startup["total_s"],
            ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in self.startup.items()
                      if k.endswith("_s") and k != "total_s"),
        )  # fmt: skip

    def _timed(self, phase: str, call: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            spent = time.perf_counter() - started
            self.startup[phase] = round(self.startup.get(phase, 0.0) + spent, 3)

    def _convert(self, path: str, name: str) -> None:
        """onnx2torch's module of ``path`` (any batch) in ``self.module``, and its info."""
        started = time.perf_counter()
        try:
            import onnx
            from onnx2torch import convert
        except ImportError as exc:
            raise MissingDependencyError(
                exc.name or "onnx2torch", 'backend = "torch"', extra="torch"
            ) from None
        rewrite = make_batch_dynamic(path)
        model = onnx.load_from_string(rewrite.model) if rewrite.model else onnx.load(path)
        bridged = bridge_newer_opsets(model)
        if bridged:
            log.info(
                "%s: onnx2torch has no converter for %s; using the nearest older one, "
                "checked against onnxruntime below",
                name,
                ", ".join(bridged),
            )
        try:
            module = convert(model)
        except Exception as exc:
            raise PipelineError(f"onnx2torch cannot convert {path}: {exc}") from exc
        fused = fuse_silu(module)
        if fused:
            log.info("%s: %d Sigmoid x Mul pairs run as SiLU (one kernel each)", name, fused)
        self.module = module.eval().to(self.torch_device, dtype=self.dtype)
        graph_input = model.graph.input[0]
        dims = [d.dim_value or d.dim_param for d in graph_input.type.tensor_type.shape.dim]
        out_dims = [
            d.dim_value or d.dim_param for d in model.graph.output[0].type.tensor_type.shape.dim
        ]
        meta = {prop.key: prop.value for prop in model.metadata_props}
        self.info = ModelInfo(graph_input.name, dims, np.dtype(np.float32), out_dims, meta)
        self.startup["convert_s"] = round(time.perf_counter() - started, 3)

    def _build(self, path: str, name: str, sizes: tuple[int, ...], tolerance: float) -> Entry:
        """Convert, check against onnxruntime, then trace one module per batch size, each
        checked against the converted module on input it was not traced with."""
        self._convert(path, name)
        max_error = self._timed("check_s", self._verify, path, tolerance)
        started = time.perf_counter()
        torch, rng = self._torch, np.random.default_rng(2)
        modules = {}
        for size in sizes:
            traced_on, checked_on = (
                torch.from_numpy(rng.random(concrete_shape(self.info, size), np.float32)).to(
                    self.torch_device, dtype=self.dtype
                )
                for _ in range(2)
            )
            with torch.inference_mode():
                fixed = FirstOutput(specialise(torch, self.module, traced_on))
            with torch.no_grad(), warnings.catch_warnings():
                # The tracer warns of every shape read from a tensor: at a fixed shape those
                # are constants, and the check below runs the trace on other input.
                warnings.simplefilter("ignore", torch.jit.TracerWarning)
                warnings.simplefilter("ignore", FutureWarning)  # see torch_cache's docstring
                traced = torch.jit.trace(fixed, traced_on, check_trace=False).eval()
                error = relative_error(
                    traced(checked_on).float().cpu().numpy(),
                    first_output(self.module(checked_on)).float().cpu().numpy(),
                )
            if not error <= tolerance:
                raise PipelineError(
                    f"the traced module of {path} at batch {size} differs from the converted "
                    f'one (relative error {error:.3g}); set cache_dir = "off"'
                )
            modules[size] = traced
        self.startup["trace_s"] = round(time.perf_counter() - started, 3)
        return Entry(modules, self.info, max_error)

    @property
    def batch_sizes(self) -> tuple[int, ...] | None:
        """The captured or traced batch sizes (batches are padded to one), or None: any."""
        if self.graphs is not None:
            return self.graphs.sizes
        return tuple(sorted(self.fixed)) if self.fixed else None

    def _capture(self, name: str, config: TorchConfig, max_batch: int) -> GraphedBatches | None:
        """CUDA graphs for every padded batch size, or None (CPU, turned off, or the capture
        failed: then the model runs op by op, as it always can)."""
        wanted = config.cuda_graphs
        if wanted is False or self.torch_device.type != "cuda":
            if wanted:
                log.warning("%s: cuda_graphs needs a GPU device; running without", name)
            return None
        torch = self._torch
        sample = torch.from_numpy(
            np.random.default_rng(1).random(concrete_shape(self.info, 1), np.float32)
        ).to(self.torch_device, dtype=self.dtype)
        try:
            with torch.inference_mode():
                modules = self.fixed or {
                    size: specialise(torch, self.module, sample.repeat(size, 1, 1, 1))
                    for size in batch_ladder(max_batch)
                }
                graphs = GraphedBatches(torch, modules, sample)
        except Exception as exc:
            log.warning(
                "%s: CUDA graphs cannot be captured for this model (%s: %s); running op by op",
                name,
                type(exc).__name__,
                str(exc).splitlines()[0][:200] if str(exc) else "",
            )
            log.debug("capture failed", exc_info=True)
            self._torch.cuda.synchronize(self.torch_device)
            return None
        log.info(
            "%s: CUDA graphs captured for batch sizes %s in %.1f s",
            name,
            ", ".join(map(str, graphs.sizes)),
            graphs.capture_s,
        )
        return graphs

    def _verify(self, path: str, tolerance: float) -> float:
        """Compare with onnxruntime on the CPU once, on random input: a converter that changes
        the model's meaning must fail here, not produce wrong boxes."""
        import onnxruntime as ort

        sample = np.random.default_rng(0).random(concrete_shape(self.info, 2), np.float32)
        reference = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        expected = np.concatenate(
            [reference.run(None, {self.info.input_name: sample[i : i + 1]})[0] for i in range(2)]
        )
        got = self.run(sample)
        error = relative_error(got, expected)
        if error > tolerance:
            raise PipelineError(
                f"the torch conversion of {path} differs from onnxruntime (relative error "
                f"{error:.3g}, shapes {got.shape} vs {expected.shape}); use the onnxruntime backend"
            )
        return error

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.run_on_device(batch).float().cpu().numpy()

    def run_on_device(self, batch: Any) -> Any:
        """The model's first output for a batch (a host array, or a torch tensor already on
        the device), left on the device (a torch tensor)."""
        torch = self._torch
        count = batch.shape[0]
        with torch.inference_mode():
            if self.graphs is not None and count <= self.graphs.sizes[-1]:
                rows = padded_size(count, self.graphs.sizes)
                if isinstance(batch, torch.Tensor):
                    return self.graphs.run(batch, count, rows)
                return self.graphs.run(self._staged(batch, rows), count)
            if self.fixed is None:
                tensor = self._staged(batch, count)
                tensor = tensor.to(self.torch_device, dtype=self.dtype, non_blocking=True)
                return first_output(self.module(tensor))
        largest = max(self.fixed)
        if count > largest:
            return torch.cat([self.run_on_device(batch[i : i + largest])
                              for i in range(0, count, largest)])  # fmt: skip
        rows = padded_size(count, tuple(sorted(self.fixed)))
        tensor = self._staged(batch, rows)
        with torch.inference_mode():
            tensor = tensor.to(self.torch_device, dtype=self.dtype, non_blocking=True)
            return self.fixed[rows](tensor)[:count]

    def _staged(self, batch: Any, rows: int) -> Any:
        """The batch in a host tensor of ``rows`` rows (rows past the batch: zeros or an
        earlier batch's, whose outputs nobody reads); a batch on the device is padded there."""
        torch = self._torch
        if isinstance(batch, torch.Tensor):
            if rows == len(batch):
                return batch
            return torch.cat([batch, batch.new_zeros((rows - len(batch), *batch.shape[1:]))])
        tensor = torch.from_numpy(np.ascontiguousarray(batch))
        if not self.pinned and rows == len(batch):
            return tensor
        # Page-locked staging, allocated once per batch shape and per thread: pinning per
        # call costs more than the copy it speeds up, and two inference workers sharing one
        # buffer overwrite each other's batch before it reaches the GPU.
        shape = (rows, *tensor.shape[1:])
        buffers = self._staging.__dict__.setdefault("by_shape", {})
        staging = buffers.get(shape)
        if staging is None:
            staging = torch.zeros(shape, dtype=tensor.dtype, pin_memory=self.pinned)
            buffers[shape] = staging
        staging[: len(batch)].copy_(tensor)
        return staging

    def stats(self) -> dict[str, Any]:
        return {
            "provider": self.device,
            "batch_mode": "padded" if self.batch_sizes else "dynamic",
            "max_rel_error_vs_onnxruntime": self.max_error,
            "cuda_graphs": self.graphs.sizes if self.graphs else None,
            "cuda_graph_capture_s": round(self.graphs.capture_s, 2) if self.graphs else None,
            "startup": dict(self.startup),
        }

    def close(self) -> None:
        self.module = None
        self.fixed = None
        self.graphs = None


@backend("torch", TorchConfig)
def load(config: TorchConfig, request: Request) -> TorchBackend:
    return TorchBackend(request.path, name=request.name, config=config, max_batch=request.max_batch)
