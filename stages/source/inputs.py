"""How each kind of URI is opened with PyAV: files, network streams, webcams."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

LIVE_SCHEMES = (
    "rtsp://",
    "rtsps://",
    "rtmp://",
    "rtmps://",
    "srt://",
    "udp://",
    "rtp://",
    "tcp://",
)
HTTP_SCHEMES = ("http://", "https://")
"""Files or streams on a web server: opened by FFmpeg, read once unless ``live = true``."""
_WEBCAM = re.compile(r"^(?:webcam:(\d+)|(/dev/video\d+))$")


@dataclass(frozen=True)
class InputSpec:
    """Arguments for ``av.open``."""

    file: str
    format: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    timeout: tuple[float, float] | None = None
    kind: str = "file"  # "file" | "url" (http) | "network" (live protocols) | "webcam"

    def open_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"options": dict(self.options)}
        if self.format:
            kwargs["format"] = self.format
        if self.timeout:
            kwargs["timeout"] = self.timeout
        return kwargs


def webcam_device(uri: str) -> str | None:
    """``webcam:0`` or ``/dev/video0`` -> ``/dev/video0``; None for anything else."""
    match = _WEBCAM.match(uri)
    if not match:
        return None
    return f"/dev/video{match.group(1)}" if match.group(1) is not None else match.group(2)


def is_network(uri: str) -> bool:
    return uri.lower().startswith(LIVE_SCHEMES)


def input_spec(
    uri: str,
    *,
    transport: str = "tcp",
    open_timeout_s: float = 10.0,
    read_timeout_s: float = 5.0,
    low_latency: bool = True,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    pixel_format: str | None = None,
    extra: dict[str, str] | None = None,
) -> InputSpec:
    device = webcam_device(uri)
    options: dict[str, str] = {}
    if device is not None:
        if width and height:
            options["video_size"] = f"{width}x{height}"
        if fps:
            options["framerate"] = f"{fps:g}"
        if pixel_format:
            options["input_format"] = pixel_format
        options.update(extra or {})
        return InputSpec(device, "v4l2", options, (open_timeout_s, read_timeout_s), "webcam")
    if is_network(uri):
        if uri.lower().startswith(("rtsp://", "rtsps://")):
            options["rtsp_transport"] = transport
        if low_latency:
            # A short demuxer delay and reorder window. Not fflags=nobuffer: it drops the
            # packets read while probing the stream, the keyframe among them, and nothing
            # decodes until the next one (seconds away on many cameras).
            options.update(
                {
                    "flags": "low_delay",
                    "max_delay": "500000",
                    "reorder_queue_size": "64" if transport == "udp" else "0",
                }
            )
        options.update(extra or {})
        return InputSpec(uri, None, options, (open_timeout_s, read_timeout_s), "network")
    if uri.lower().startswith(HTTP_SCHEMES):
        return InputSpec(uri, None, dict(extra or {}), (open_timeout_s, read_timeout_s), "url")
    return InputSpec(uri, None, dict(extra or {}), None, "file")
