"""ONNX Runtime backend: provider choice, batch-dynamic rewrite, node placement report."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from pydantic import Field

from vapipe.pipeline.errors import PipelineError
from vapipe.stages.infer.backends import openvino
from vapipe.stages.infer.backends import providers as eps
from vapipe.stages.infer.backends.base import (
    ModelInfo,
    batch_ladder,
    concrete_shape,
    padded_size,
    relative_error,
)
from vapipe.stages.infer.backends.batch_dynamic import DTYPES, dynamic_model
from vapipe.stages.infer.backends.registry import BackendSettings, Request, backend
from vapipe.stages.infer.graph_decode import CANDIDATES, HeadLayout, append_decode, unsupported

log = logging.getLogger(__name__)

FP16_PROVIDERS = {eps.ALIASES["migraphx"], eps.ALIASES["tensorrt"], eps.ALIASES["openvino"]}
HeadChoice = Callable[[ModelInfo, bool], HeadLayout | None]


def model_info(session: Any) -> ModelInfo:
    """What a session's model says about its first input and output."""
    model_in, model_out = session.get_inputs()[0], session.get_outputs()[0]
    return ModelInfo(
        model_in.name,
        list(model_in.shape),
        np.dtype(DTYPES.get(model_in.type, np.float32)),
        list(model_out.shape),
        dict(session.get_modelmeta().custom_metadata_map),
    )


class OnnxRuntimeConfig(BackendSettings):
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
        return eps.migraphx_offered() if self.providers == "auto" else frozenset()


class OnnxBackend:
    def __init__(
        self,
        path: str,
        *,
        name: str,
        config: OnnxRuntimeConfig,
        max_batch: int,
        head: HeadChoice | None = None,
        workers: int = 1,
        rect: bool = False,
    ) -> None:
        """``workers``: calls in flight at once. ``head`` says, from the model's shapes and
        whether an accelerator was requested, which YOLO head to decode inside the model
        (:mod:`graph_decode`); None: on the host. ``rect``: let the model take other input
        sizes than its own (``rect_problem`` says why it cannot)."""
        import onnxruntime as ort

        self._ort = ort
        self.name = name
        names, options = self._providers(config, workers)
        for folder in {chosen["cache_dir"] for chosen in options if chosen.get("cache_dir")}:
            os.makedirs(folder, exist_ok=True)
        self._names, self._options = names, options
        # The thread count is a CPU setting: on one thread the nodes an accelerator leaves to
        # the CPU cost 23 ms a frame where its own pool takes 8 (CUDA provider, H200).
        self._threads = config.threads if names[0] == eps.CPU else 0
        if config.threads and names[0] not in (eps.CPU, openvino.PROVIDER):
            log.info("%s: threads = %d applies to the CPU provider only", name, config.threads)
        self.batch_mode = "fixed"
        probe = self._session(path, [eps.CPU], [{}])
        first = probe.get_inputs()[0]
        fixed_batch = first.shape[0] if isinstance(first.shape[0], int) else None
        # The model to run, and a CPU session of it (reused when the CPU is all there is).
        model: str | bytes = path
        on_cpu = probe
        self.rect_problem: str | None = None
        if (fixed_batch == 1 and max_batch > 1) or rect:
            chosen = dynamic_model(path, probe, self._cpu_session, name, spatial=rect)
            model, on_cpu, self.batch_mode = chosen.model, chosen.cpu_session, chosen.batch_mode
            self.rect_problem = chosen.rect_problem
        elif fixed_batch is None:
            self.batch_mode = "dynamic"
        on_cpu_only = names == [eps.CPU]
        self.info = model_info(on_cpu)
        # The model's own size stays its default (a rect model's is symbolic now).
        own = model_info(probe)
        self.info.input_shape[1:], self.info.output_shape[1:] = (
            own.input_shape[1:],
            own.output_shape[1:],
        )
        self._raw_output = on_cpu.get_outputs()[0].name
        self.head: HeadLayout | None = None
        self.head_problem: str | None = None
        if head is not None:
            model = self._with_decode(model, head(self.info, not on_cpu_only))
        if on_cpu_only:
            self.session = on_cpu if self.head is None else self._session(model, names, options)
        else:
            self.session = self._session(model, names, options, profile=True)
        self.device = self.session.get_providers()[0]
        eps.check_started(name, config.providers, names[0], self.device)
        if config.fp16 and self.device not in FP16_PROVIDERS:
            log.warning(
                "%s: fp16 is not applied on %s (use a float16 model there)", name, self.device
            )
        self.batch_sizes = self._batch_sizes(fixed_batch, max_batch)
        self.use_io_binding = config.io_binding == "on" or (
            config.io_binding == "auto" and self.device != eps.CPU
        )
        self._output_name = CANDIDATES if self.head else self._raw_output
        self.sessions = self._sessions_per_shape(model, names, options)
        self.placement: dict[str, int] = {}
        self.cpu_ops: dict[str, int] = {}
        if not on_cpu_only:
            self.placement, cpu_ops = eps.placement(self, self.session)
            self.cpu_ops = cpu_ops if len(self.placement) > 1 else {}
        self.max_error: float | None = None
        if self.device != eps.CPU:
            fp16 = config.fp16 and self.device in FP16_PROVIDERS
            self.max_error = self._verify(on_cpu, tolerance=5e-2 if fp16 else 1e-3)
            self._warm()

    def _with_decode(self, model: str | bytes, layout: HeadLayout | None) -> str | bytes:
        """``model`` with the head decode appended when ``layout`` is given and it fits."""
        if layout is None:
            return model
        import onnx

        proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(model)
        self.head_problem = unsupported(proto, layout)
        if self.head_problem:
            log.info("%s: head decoded on the host: %s", self.name, self.head_problem)
            return model
        self.head = layout
        log.info("%s: head decode appended to the model (%s)", self.name, layout.family.value)
        return append_decode(proto, layout).SerializeToString()

    def _providers(
        self, config: OnnxRuntimeConfig, workers: int
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """The providers to try, in order, with their options; unavailable ones are logged."""
        available = self._ort.get_available_providers()
        found = openvino.devices()
        names, options, skipped = eps.choose(
            config.providers,
            available,
            config.provider_options,
            fp16=config.fp16,
            cache_dir=None if config.cache_dir == "off" else config.cache_dir,
            workers=workers,
            threads=config.threads,
            openvino_devices=found,
        )
        openvino.settle(self.name, names, options, found, config)
        for provider in skipped:
            log.warning(
                "%s: %s is not in this onnxruntime build (available: %s); skipped",
                self.name,
                provider,
                ", ".join(available),
            )
        return names, options

    def _batch_sizes(self, fixed_batch: int | None, max_batch: int) -> tuple[int, ...] | None:
        """Batch shapes the session runs: the fixed one, powers of two up to ``max_batch`` for
        providers that compile per shape, or None for any."""
        if self.batch_mode in ("fixed", "frame-by-frame"):
            return (fixed_batch or 1,)
        if self.device != eps.CPU:
            # Every accelerator gets a few fixed shapes, each warmed at load: MIGraphX and
            # TensorRT compile per shape, CUDA and ROCm search convolution kernels per shape.
            # Batches of any size would compile or search in the middle of a run.
            return batch_ladder(max_batch)
        return None

    def _sessions_per_shape(
        self, model: str | bytes, names: list[str], options: list[dict[str, Any]]
    ) -> dict[int, Any]:
        """One session per batch shape on an accelerator, each with that shape fixed.

        Whenever the input shape differs from its previous call, the CUDA provider builds its
        cuDNN convolution plans again, compiling kernels with NVRTC: py-spy caught a pipeline's
        one session doing that in steady state, with batches of 1 to 16 frames (5-35 fps
        where the same session ran 200-470 fps at one size). MIGraphX likewise recompiles on a
        shape change. A session that only ever sees one shape plans once, at load."""
        if self.device == eps.CPU or not self.batch_sizes or len(self.batch_sizes) < 2:
            return {}
        started = time.monotonic()
        # The profiled session has run batch 1 (the placement report): it keeps that size.
        sessions = {1: self.session} if 1 in self.batch_sizes else {}
        for size in self.batch_sizes:
            if size not in sessions:
                sessions[size] = self._session(model, names, options, batch=size)
        log.info(
            "%s: one %s session per batch shape (%s) in %.1f s",
            self.name,
            self.device,
            ", ".join(map(str, self.batch_sizes)),
            time.monotonic() - started,
        )
        return sessions

    def _verify(self, on_cpu: Any, tolerance: float) -> float:
        """The accelerator's output against the CPU's on the same input, once at load, at the
        second and the largest batch shape: a provider that computes something else must
        fail here, not draw wrong boxes."""
        sizes = self.batch_sizes or (2,)
        error = max(
            self._error_at(on_cpu, size) for size in {sizes[min(1, len(sizes) - 1)], sizes[-1]}
        )
        if not np.isfinite(error) or error > tolerance:
            raise PipelineError(
                f"{self.name}: {self.device} computes different outputs than the CPU "
                f"(relative error {error:.3g}, tolerance {tolerance:g}); choose another "
                "provider, or set fp16 = false"
            )
        log.info("%s: %s agrees with the CPU (relative error %.2g)", self.name, self.device, error)
        return error

    def _error_at(self, on_cpu: Any, size: int) -> float:
        shape = concrete_shape(self.info, size)
        sample = np.random.default_rng(size).random(shape, np.float32)
        sample = sample.astype(self.info.input_dtype)
        expected = on_cpu.run(None, {self.info.input_name: sample})[0].astype(np.float32)
        return relative_error(self._run(sample, self._raw_output).astype(np.float32), expected)

    def _warm(self) -> None:
        """Run every batch shape once now, so that no frame waits for a compile or a search."""
        if not self.batch_sizes:
            return
        started = time.monotonic()
        for size in self.batch_sizes:
            self._run(np.zeros(concrete_shape(self.info, size), self.info.input_dtype))
        log.info(
            "%s: batch shapes %s ready on %s in %.1f s",
            self.name,
            ", ".join(map(str, self.batch_sizes)),
            self.device,
            time.monotonic() - started,
        )

    def _session(
        self,
        model: str | bytes,
        names: list[str],
        options: list[dict[str, Any]],
        profile: bool = False,
        batch: int | None = None,
    ) -> Any:
        """A session of ``model``; with ``batch``, the model's batch dimension fixed to it
        (so shape arithmetic folds at load) where the dimension has a name."""
        ort = self._ort
        session_options = ort.SessionOptions()
        dimension = self.info.input_shape[0] if batch else None
        if isinstance(dimension, str):
            session_options.add_free_dimension_override_by_name(dimension, batch)
        if profile:  # for the node placement report; stopped after the warm-up run
            session_options.enable_profiling = True
            session_options.profile_file_prefix = os.path.join(
                tempfile.gettempdir(), f"vapipe-{os.getpid()}"
            )
        session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session_options.log_severity_level = 3
        if self._threads:
            session_options.intra_op_num_threads = self._threads
        # Spinning intra-op threads would steal the cores that decode and encode run on.
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            return ort.InferenceSession(
                model, session_options, providers=names, provider_options=options
            )
        except Exception as exc:
            trimmed = [eps.without_optional(o) for o in options]
            if trimmed != options:
                # Older provider builds refuse options they do not know (MIGraphX's cache dir).
                log.warning(
                    "%s: provider options refused (%s); retrying without %s",
                    self.name,
                    exc,
                    ", ".join(sorted(eps.OPTIONAL_KEYS)),
                )
                return self._session(model, names, trimmed, profile, batch)
            shown = model if isinstance(model, str) else "the batch-dynamic model"
            raise PipelineError(f"cannot load model {shown}: {exc}") from exc

    def _cpu_session(self, model: str | bytes) -> Any:
        return self._session(model, [eps.CPU], [{}])

    def run(self, batch: np.ndarray) -> np.ndarray:
        count = batch.shape[0]
        largest = self.batch_sizes[-1] if self.batch_sizes else count
        if count > largest:
            return np.concatenate(
                [self.run(batch[i : i + largest]) for i in range(0, count, largest)]
            )
        size = padded_size(count, self.batch_sizes)
        if size > count:
            pad = np.zeros((size - count, *batch.shape[1:]), batch.dtype)
            return self._run(np.concatenate((batch, pad)))[:count]
        return self._run(batch)

    def _run(self, batch: np.ndarray, output: str | None = None) -> np.ndarray:
        """The named output (default: what ``run`` returns) for an exactly-sized batch."""
        output = output or self._output_name
        session = self.sessions.get(batch.shape[0], self.session)
        if self.use_io_binding:
            binding = session.io_binding()
            binding.bind_cpu_input(self.info.input_name, batch)
            binding.bind_output(output)
            session.run_with_iobinding(binding)
            return binding.copy_outputs_to_cpu()[0]
        return session.run([output], {self.info.input_name: batch})[0]

    def stats(self) -> dict[str, Any]:
        return {
            "provider": self.device,
            "providers_requested": self._names,
            "batch_mode": self.batch_mode,
            "batch_sizes": self.batch_sizes,
            "sessions": len(self.sessions) or 1,
            "io_binding": self.use_io_binding,
            "node_placement": self.placement or None,
            "cpu_ops": self.cpu_ops or None,
            "max_rel_error_vs_cpu": self.max_error,
        }

    def close(self) -> None:
        self.sessions.clear()
        self.session = None


@backend("onnxruntime", OnnxRuntimeConfig)
def load(config: OnnxRuntimeConfig, request: Request) -> OnnxBackend:
    return OnnxBackend(
        request.path, name=request.name, config=config, max_batch=request.max_batch,
        head=request.head, workers=request.workers, rect=request.rect,
    )  # fmt: skip
