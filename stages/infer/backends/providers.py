"""ONNX Runtime execution providers: names, default options, and the fallback order.

``providers = "auto"`` tries, in order: MIGraphX, ROCm, TensorRT, CUDA, OpenVINO (where it
offers an Intel GPU or NPU: :mod:`openvino` says why), CPU.
Only providers that the installed onnxruntime build offers are passed to the session;
the CPU provider always ends the list, so a node that no accelerator takes still runs.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from vapipe.pipeline.errors import PipelineError
from vapipe.stages.infer.backends import openvino
from vapipe.stages.infer.backends.base import concrete_shape

ALIASES: dict[str, str] = {
    "migraphx": "MIGraphXExecutionProvider",
    "rocm": "ROCMExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "dml": "DmlExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "cpu": "CPUExecutionProvider",
}
AUTO_ORDER = ("migraphx", "rocm", "tensorrt", "cuda", "openvino", "cpu")
OPTIONAL_KEYS = frozenset({"migraphx_model_cache_dir", "use_tf32"})
"""Defaults that some provider builds do not know; dropped if the session refuses them."""
CPU = ALIASES["cpu"]
log = logging.getLogger(__name__)


def full_name(name: str) -> str:
    """``rocm`` or ``ROCMExecutionProvider`` -> ``ROCMExecutionProvider``."""
    return ALIASES.get(name.lower(), name)


def short_name(provider: str) -> str:
    for alias, full in ALIASES.items():
        if full == provider:
            return alias
    return provider


def default_options(
    provider: str,
    *,
    fp16: bool,
    cache_dir: str | None,
    workers: int = 1,
    threads: int = 0,
    openvino_devices: Sequence[str] = (),
) -> dict[str, Any]:
    """Options that make each accelerator provider behave well for fixed-shape YOLO batches;
    ``workers`` (calls in flight) and ``threads`` (per call) shape OpenVINO's streams."""
    options: dict[str, Any] = {}
    if provider == ALIASES["migraphx"]:
        options["migraphx_fp16_enable"] = int(fp16)
        if cache_dir:
            # onnxruntime >= 1.20 names it migraphx_model_cache_dir; older builds save/load files.
            options["migraphx_model_cache_dir"] = cache_dir
    elif provider == ALIASES["rocm"]:
        options["tunable_op_enable"] = 1
        options["tunable_op_tuning_enable"] = 0
    elif provider == ALIASES["tensorrt"]:
        options["trt_fp16_enable"] = bool(fp16)
        if cache_dir:
            options["trt_engine_cache_enable"] = True
            options["trt_engine_cache_path"] = cache_dir
            options["trt_timing_cache_enable"] = True
            options["trt_timing_cache_path"] = cache_dir
    elif provider == ALIASES["cuda"]:
        # cuDNN's exhaustive search costs seconds per new input shape; with the few fixed
        # batch shapes warmed at load, its heuristic pick is within a few percent.
        options["cudnn_conv_algo_search"] = "HEURISTIC"
        # Ampere and later run float32 convolutions as TF32 (about 3 significant digits) by
        # default, enough to move boxes: float32 here means float32 unless asked.
        options["use_tf32"] = 0
    elif provider == ALIASES["openvino"]:
        options = openvino.default_options(
            openvino_devices, fp16=fp16, cache_dir=cache_dir, workers=workers, threads=threads
        )
    return options


def choose(
    requested: str | Sequence[str],
    available: Sequence[str],
    user_options: Mapping[str, Mapping[str, Any]],
    *,
    fp16: bool = False,
    cache_dir: str | None = None,
    workers: int = 1,
    threads: int = 0,
    openvino_devices: Sequence[str] = (),
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(providers to pass, their options, requested ones skipped as unavailable). ``auto``
    passes over OpenVINO where ``openvino_devices`` holds no GPU or NPU (see :mod:`openvino`)."""
    if requested == "auto":
        available = openvino.auto_offered(available, openvino_devices)
    wanted = (
        list(AUTO_ORDER)
        if requested == "auto"
        else [requested]
        if isinstance(requested, str)
        else list(requested)
    )
    names: list[str] = []
    skipped: list[str] = []
    for name in wanted:
        provider = full_name(name)
        if provider in names:
            continue
        if provider in available:
            names.append(provider)
        elif requested != "auto":
            skipped.append(provider)
    if CPU not in names:
        names.append(CPU)
    options = []
    for provider in names:
        given = user_options.get(short_name(provider), user_options.get(provider, {}))
        merged = default_options(
            provider,
            fp16=fp16,
            cache_dir=cache_dir,
            workers=workers,
            threads=threads,
            # A device the user names is the one whose defaults apply (threads: CPU only).
            openvino_devices=[given["device_type"]] if "device_type" in given else openvino_devices,
        )
        merged.update(given)
        options.append(merged)
    return names, options, skipped


def without_optional(options: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in options.items() if key not in OPTIONAL_KEYS}


def check_started(stage: str, requested: str | Sequence[str], wanted: str, got: str) -> None:
    """onnxruntime runs a session on the providers it could start, printing the others'
    errors to stderr. A provider that did not start is an error where ``providers`` named
    it without the CPU as a fallback, else a warning (``auto``, or a list ending in cpu)."""
    if got == wanted:
        return
    message = (
        f"onnxruntime could not start {wanted} (its own error is printed above) "
        f"and fell back to {got}"
    )
    named = [requested] if isinstance(requested, str) else list(requested)
    if requested != "auto" and CPU not in map(full_name, named):
        # The stage runner puts the stage's name in front.
        raise PipelineError(message + "; fix its provider_options or name another provider")
    log.warning("%s: %s", stage, message)


def migraphx_offered() -> frozenset[str]:
    """``{"migraphx"}`` when the installed onnxruntime offers the MIGraphX provider."""
    import onnxruntime

    offered = "MIGraphXExecutionProvider" in onnxruntime.get_available_providers()
    return frozenset({"migraphx"}) if offered else frozenset()


def placement(backend: Any, session: Any) -> tuple[dict[str, int], dict[str, int]]:
    """Kernels per provider, and the CPU's by op type, from one profiled warm-up run of a
    backend's session (its ``info``, ``name``, ``device``): ONNX Runtime may silently put nodes
    that the accelerator cannot take on the CPU."""
    shape = concrete_shape(backend.info)
    try:
        session.run(None, {backend.info.input_name: np.zeros(shape, backend.info.input_dtype)})
        profile = session.end_profiling()
        with open(profile, encoding="utf-8") as handle:
            events = json.load(handle)
        os.unlink(profile)
    except Exception as exc:  # a report, never a reason to fail the run
        log.debug("%s: node placement unknown: %s", backend.name, exc)
        return {}, {}
    kernels = [
        event["args"]
        for event in events
        if event.get("cat") == "Node"
        and "provider" in event.get("args", {})
        and event["name"].endswith("_kernel_time")
    ]
    counts = Counter(args["provider"] for args in kernels)
    on_cpu = Counter(args.get("op_name", "?") for args in kernels if args["provider"] == CPU)
    if counts.get(CPU) and len(counts) > 1:
        log.warning(
            "%s: %d of %d kernels run on the CPU, not on %s (%s)",
            backend.name,
            counts[CPU],
            sum(counts.values()),
            backend.device,
            ", ".join(f"{op} x{n}" for op, n in on_cpu.most_common()),
        )
    return dict(counts), dict(on_cpu)
