"""``run-pipeline doctor``: what this machine offers the pipeline. Run it first on a new box."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from vapipe.stages.infer.backends import openvino
from vapipe.stages.infer.backends import providers as eps

HW_CODEC_SUFFIXES = (
    "_cuvid",
    "_nvenc",
    "_vaapi",
    "_qsv",
    "_amf",
    "_v4l2m2m",
    "_videotoolbox",
    "_mf",
    "_d3d12va",
    "_vulkan",
    "_rkmpp",
)


def report(out: Callable[[str], None] = print, root: Path = Path("/")) -> int:
    from vapipe import __version__

    out(f"vapipe {__version__}, Python {platform.python_version()}, {platform.platform()}")
    _amd_gpus(out, root)
    _onnxruntime(out)
    _opencl(out)
    _pyav(out)
    _device_decoders(out)
    _rtsp_server(out)
    _plate_models(out)
    _torch(out)
    _plugins(out)
    return 0


def _amd_gpus(out: Callable[[str], None], root: Path) -> None:
    """Each AMD GPU's ISA from the kernel (no ROCm needed) and what to set for it."""
    from vapipe.pipeline import amd_gpus

    lines = amd_gpus.report_lines(root, os.environ.get("HSA_OVERRIDE_GFX_VERSION"))
    if lines:
        out("AMD GPUs (the kernel's KFD topology; table and sources: docs/ryzen.md):")
        for line in lines:
            out(line)


def _plugins(out: Callable[[str], None]) -> None:
    from importlib.metadata import entry_points

    from vapipe.pipeline import registry

    registry.load()
    out("\nStage plugins (entry-point group vapipe.stages)")
    found = entry_points(group=registry.ENTRY_POINT_GROUP)
    if not found:
        out("  none installed")
    for entry in found:
        problem = registry.plugin_errors.get(entry.name)
        out(f"  {entry.name} ({entry.value}): " + (f"FAILED: {problem}" if problem else "loaded"))


def _onnxruntime(out: Callable[[str], None]) -> None:
    out("\nONNX Runtime")
    builds = openvino.onnxruntime_builds()
    if len(builds) > 1:
        out(
            f"  WARNING: {len(builds)} onnxruntime builds installed ({', '.join(builds)}): "
            "their files overwrite each other; pip uninstall -y "
            + " ".join(builds)
            + ", then install one"
        )
    try:
        import onnxruntime as ort
    except ImportError as exc:
        out(f"  not importable: {exc}")
        return
    available = ort.get_available_providers()
    found = openvino.devices()
    names, _, _ = eps.choose("auto", available, {}, openvino_devices=found)
    out(f"  version {ort.__version__}, device {ort.get_device()}")
    out(f"  providers available: {', '.join(available)}")
    if found:
        out(f"  OpenVINO devices: {', '.join(found)}")
    out(
        f'  providers = "auto" picks: {names[0]}'
        + (f" (then {', '.join(names[1:])})" if len(names) > 1 else "")
    )
    if found and openvino.PROVIDER not in names:
        out(f"  {openvino.CPU_ONLY_REASON}")
    if eps.ALIASES["rocm"] not in available and eps.ALIASES["migraphx"] not in available:
        out(
            "  AMD GPUs: install onnxruntime-migraphx (or onnxruntime-rocm <= 1.22, which still "
            "has the ROCm provider) in place of onnxruntime"
        )
    if openvino.PROVIDER not in available and openvino.intel_gpus():
        out(
            "  This machine has an Intel GPU, which the onnxruntime-openvino build runs on: "
            f"{openvino.INSTALL}"
        )


def _opencl(out: Callable[[str], None]) -> None:
    out("\nOpenCL")
    try:
        from vapipe.stages.cl_program import (
            OpenCLUnavailable,
            candidate_devices,
            list_devices,
        )
        from vapipe.stages.preprocess.cl_kernel import LetterboxProgram

        devices = list_devices()
    except Exception as exc:
        out(f"  unavailable: {exc}")
        return
    if not devices:
        out('  no platforms or devices (pre.backend = "opencl" will fall back to numpy)')
        return
    import numpy as np
    import pyopencl as cl

    built: list[Any] = []
    for platform_name, device in devices:
        # Not device_type.to_string: it names the ALL mask too ("ALL | CPU").
        kind = " | ".join(
            name for name in DEVICE_KINDS if device.type & getattr(cl.device_type, name)
        )
        line = (
            f"  {platform_name.strip()} / {device.name.strip()} [{kind}], "
            f"{device.max_compute_units} compute units, "
            f"{device.global_mem_size / 2**30:.1f} GiB"
        )
        try:
            program = LetterboxProgram(device, np.dtype(np.float32))
            built.append(device)
            line += (
                f", work-group multiple {program.multiple}, letterbox kernel builds "
                f"(work-group {program.local[0]}x{program.local[1]})"
            )
        except OpenCLUnavailable as exc:
            line += f", {exc}"
        out(line)
    # As cl_kernel.open_program chooses: the first device, in "auto" order, whose kernel builds.
    usable = [device for device in candidate_devices("auto") if device in built]
    if usable:
        out(f'  device = "auto" picks: {usable[0].name.strip()}')
    else:
        out('  device = "auto": no device builds the kernel; preprocessing falls back to numpy')


def _pyav(out: Callable[[str], None]) -> None:
    out("\nPyAV / FFmpeg")
    try:
        import av
    except ImportError as exc:
        out(f"  not importable: {exc}")
        return
    versions: dict[str, Any] = getattr(av, "library_versions", {})
    libavcodec = ".".join(map(str, versions.get("libavcodec", ()))) or "?"
    out(f"  PyAV {av.__version__}, libavcodec {libavcodec}")
    hardware = sorted(name for name in av.codecs_available if name.endswith(HW_CODEC_SUFFIXES))
    decoders: list[str] = []
    encoders: list[str] = []
    buckets: tuple[tuple[Literal["r", "w"], list[str]], ...] = (("r", decoders), ("w", encoders))
    for name in hardware:
        for mode, bucket in buckets:
            try:
                av.codec.Codec(name, mode)
                bucket.append(name)
            except Exception:
                continue
    # Built into this FFmpeg; each works only with its hardware and driver present, so the
    # encoders are really opened here: a listed one that does not open would fail the run.
    usable = [name for name in encoders if _opens(name) is None]
    out(f"  hardware decoders built in: {', '.join(decoders) or 'none'}")
    out(f"  hardware encoders built in: {', '.join(encoders) or 'none'}")
    out(f"  hardware encoders that open here (video.codec): {', '.join(usable) or 'none'}")
    for name in encoders:
        if name not in usable:
            out(f"    {name}: {_opens(name)}")
    hwaccel = getattr(getattr(av, "codec", None), "hwaccel", None)
    if hwaccel is not None and hasattr(hwaccel, "hwdevices_available"):
        out(f"  hardware device types: {', '.join(hwaccel.hwdevices_available()) or 'none'}")


def _rtsp_server(out: Callable[[str], None]) -> None:
    """The ``live`` node's RTSP server: GStreamer's, run by a Python that imports it."""
    from vapipe.stages.media.rtsp_out import INSTALL_HINT, gst_python

    out("\nLive streams (the live node)")
    python = gst_python()
    if python is None:
        out(f"  RTSP: no; {INSTALL_HINT}. The page's live video works without it.")
    else:
        out(f"  RTSP: yes, GStreamer's RTSP server through {python}")


def _plate_models(out: Callable[[str], None]) -> None:
    """The ``plates`` node's two models: the installed rapidocr package's."""
    from vapipe.pipeline.errors import ConfigError
    from vapipe.stages.plates.ocr import rapidocr_model

    out("\nLicence plates (the plates node)")
    try:
        det, rec = rapidocr_model("det", "model"), rapidocr_model("rec", "rec_model")
    except ConfigError as exc:
        out(f"  models: no; {exc.message}")
        return
    out(f"  models: yes, {Path(det).name} and {Path(rec).name} in {Path(det).parent}")


DEVICE_KINDS = ("GPU", "CPU", "ACCELERATOR", "CUSTOM")


def _opens(codec: str) -> str | None:
    """None if an encoder context of ``codec`` opens on this machine (as the video sink opens
    it), else why not."""
    from vapipe.stages.media.encoder import open_error

    error = open_error(codec)
    return None if error is None else f"does not open: {codec} {error}"


def _device_decoders(out: Callable[[str], None]) -> None:
    """The GPU video decoders a source can decode into GPU memory with, in the order
    ``hwaccel = "auto"`` tries them, and why any cannot be used here."""
    from vapipe.stages.source.device_stream import DeviceDecoderUnavailable
    from vapipe.stages.source.hardware import BACKENDS

    out('\nGPU video decoders, pictures kept on the GPU (source hwaccel = "auto" tries in order)')
    chosen = None
    for name, backend in BACKENDS.items():
        try:
            opened = backend(0)
        except DeviceDecoderUnavailable as exc:
            out(f"  {name}: not here ({exc})")
            continue
        chosen = chosen or name
        out(f"  {name}: {opened.describe()}; {opened.takes()}")
    out(f'  hwaccel = "auto" decodes on: {chosen or "the CPU (software)"}')


def _torch(out: Callable[[str], None]) -> None:
    out('\nPyTorch backend (infer.backend = "torch")')
    try:
        import torch
    except ImportError:
        out("  torch not installed (pip install 'vapipe[torch]')")
        return
    gpu = torch.cuda.is_available()
    kind = "ROCm" if getattr(torch.version, "hip", None) else "CUDA"
    detail = f"{kind} {torch.cuda.get_device_name(0)}" if gpu else "no GPU"
    try:
        import onnx2torch  # noqa: F401

        converter = "onnx2torch present"
    except ImportError:
        converter = "onnx2torch missing (pip install onnx2torch)"
    out(f"  torch {torch.__version__}: {detail}; {converter}")


if __name__ == "__main__":
    sys.exit(report())
