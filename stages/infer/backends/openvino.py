"""OpenVINO through the ``onnxruntime-openvino`` build: the devices it offers, when
``providers = "auto"`` takes it, and the options it gets.

``auto`` takes OpenVINO only where it offers an Intel GPU or NPU. Where it offers only the CPU,
onnxruntime's own CPU provider ran the pipeline faster (configs/file.toml on a 2-core AMD EPYC,
median of 3: YOLOX-Nano 60.6 against 48.5 frames/s, YOLOv8n 16.8 against 15.7; the model
alone, batch 1 on both cores, 1.01x and 1.21x for OpenVINO: bench/results/openvino.md), so a
CPU-only machine gets the CPU provider even with this build installed; ``providers =
["openvino"]`` still runs it there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from vapipe.pipeline.errors import PipelineError


class Settings(Protocol):
    """What OpenVINO's set-up reads of the onnxruntime backend's table."""

    @property
    def cache_dir(self) -> str | None: ...

    @property
    def providers(self) -> str | list[str]: ...


log = logging.getLogger(__name__)

PROVIDER = "OpenVINOExecutionProvider"
ACCELERATORS = ("GPU", "NPU")
"""Device kinds (``GPU``, ``GPU.1``, ``NPU``) for which ``auto`` prefers OpenVINO."""
INSTALL = "pip uninstall -y onnxruntime && pip install onnxruntime-openvino"
"""The two builds share one folder: the plain one goes first (docs/gpus.md says why)."""
CPU_ONLY_REASON = (
    "OpenVINO offers only the CPU here, where onnxruntime's CPU provider ran the pipeline "
    'faster (bench/results/openvino.md); providers = ["openvino"] runs it anyway'
)


def default_cache_dir() -> Path:
    """Where compiled blobs go unless ``cache_dir`` names a folder (``off``: nowhere): the
    user cache, ``$XDG_CACHE_HOME/vapipe/openvino``. A GPU compile takes seconds; a restart
    with the blob skips it."""
    from vapipe.pipeline.assets import cache_dir

    return cache_dir() / "openvino"


def onnxruntime_builds() -> list[str]:
    """The onnxruntime distributions (``onnxruntime``, ``onnxruntime-openvino``, ...) that
    share the folder ``import onnxruntime`` finds: each installs the same files there, the
    last installed winning file by file, and uninstalling one breaks the other."""
    from importlib.metadata import distributions
    from importlib.util import find_spec

    spec = find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        return []
    folder = Path(spec.origin).parent.parent.resolve()
    names = set()
    for dist in distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("onnxruntime") and Path(str(dist.locate_file(""))).resolve() == folder:
            names.add(name)
    return sorted(names)


def intel_gpus(drm: Path = Path("/sys/class/drm")) -> list[str]:
    """The Linux DRM cards whose PCI vendor is Intel (0x8086)."""
    cards = []
    for vendor in sorted(drm.glob("card*/device/vendor")):
        try:
            if vendor.read_text().strip().lower() == "0x8086":
                cards.append(vendor.parent.parent.name)
        except OSError:
            continue
    return cards


def devices() -> list[str]:
    """The devices the installed build's OpenVINO sees (``CPU``, ``GPU.0``, ``NPU``); empty
    without the OpenVINO build (the plain build's module lacks the query), so callers need
    not check the provider list first."""
    try:
        from onnxruntime.capi import _pybind_state
    except ImportError:
        return []
    listed = getattr(_pybind_state, "get_available_openvino_device_ids", None)
    if listed is None:
        return []
    try:
        return [str(device) for device in listed()]
    except Exception as exc:  # a device query is a report, never a reason to fail
        log.debug("OpenVINO devices unknown: %s", exc)
        return []


def accelerated(found: Sequence[str]) -> bool:
    """Whether OpenVINO offers a device other than the CPU."""
    return any(device.split(".")[0] in ACCELERATORS for device in found)


def default_device(found: Sequence[str]) -> str:
    """The first GPU, else the first NPU, else the CPU: what OpenVINO is installed for."""
    for kind in ACCELERATORS:
        for device in found:
            if device.split(".")[0] == kind:
                return device
    return "CPU"


def auto_offered(available: Sequence[str], found: Sequence[str]) -> list[str]:
    """``available`` as ``auto`` considers it: without OpenVINO where it offers only the CPU."""
    if PROVIDER in available and not accelerated(found):
        return [name for name in available if name != PROVIDER]
    return list(available)


def default_options(
    found: Sequence[str], *, fp16: bool, cache_dir: str | None, workers: int, threads: int
) -> dict[str, Any]:
    """Options for OpenVINO: its best device, one stream per call in flight (with one stream,
    concurrent calls wait for each other: 37-47 frames/s against 53 with two, workers = 2, on
    configs/file.toml), and on the CPU device the stage's threads per call (OpenVINO counts
    them for all streams together: one thread for two streams ran at 42 frames/s against 53)."""
    device = default_device(found)
    # OpenVINO's CPU device refuses FP16 ("CPU only supports FP32, ACCURACY"), and onnxruntime
    # then quietly runs the CPU provider instead: fp16 applies to GPUs and NPUs.
    half = fp16 and device != "CPU"
    options: dict[str, Any] = {"device_type": device, "precision": "FP16" if half else "FP32"}
    if workers > 1:
        options["num_streams"] = str(workers)
    if threads and device == "CPU":
        options["num_of_threads"] = str(threads * max(workers, 1))
    if cache_dir:
        options["cache_dir"] = cache_dir
    return options


def settle(
    stage: str,
    names: Sequence[str],
    options: Sequence[dict[str, Any]],
    found: Sequence[str],
    config: Settings,
) -> None:
    """Give a chosen OpenVINO its default blob cache and log what it runs on; or log why
    ``auto`` passed it over."""
    if PROVIDER in names:
        chosen = options[list(names).index(PROVIDER)]
        missing = absent_devices(str(chosen.get("device_type", "CPU")), found)
        if missing:
            raise PipelineError(  # the stage runner puts the stage's name in front
                f"OpenVINO has no device {', '.join(missing)} here "
                f"(devices: {', '.join(found) or 'none'}); set "
                "provider_options.openvino.device_type to one of them"
            )
        if "cache_dir" not in chosen and config.cache_dir != "off":
            chosen["cache_dir"] = str(default_cache_dir())
        log.info("%s: %s", stage, describe(chosen, found))
    elif found and config.providers == "auto":
        log.info("%s: %s", stage, CPU_ONLY_REASON)


def absent_devices(device_type: str, found: Sequence[str]) -> list[str]:
    """The devices ``device_type`` names (``GPU.1``, ``HETERO:GPU,CPU``, ``AUTO:NPU,CPU``)
    that OpenVINO does not list; none when the list is unknown."""
    if not found:
        return []
    named = device_type.split(":", 1)[-1].split(",")
    kinds = {device.split(".")[0] for device in found}
    return [
        device
        for device in named
        if device and device not in found and not ("." not in device and device in kinds)
    ]


def describe(options: dict[str, Any], found: Sequence[str]) -> str:
    """One log line's worth: the device and the options that decide speed and precision."""
    shown = ", ".join(
        f"{key} {options[key]}"
        for key in ("precision", "num_streams", "num_of_threads", "cache_dir")
        if key in options
    )
    seen = ", ".join(found) or "unknown"
    return f"OpenVINO device {options.get('device_type', 'CPU')} (devices: {seen}); {shown}"
