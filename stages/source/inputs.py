"""How each kind of URI is opened with PyAV: files, network streams, webcams."""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vapipe.pipeline.assets import local_media, resolve_media
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.source.images import IMAGE_SUFFIXES, image_paths

if TYPE_CHECKING:
    from vapipe.stages.source.config import SourceConfig

log = logging.getLogger(__name__)

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


def files_read(uri: str) -> list[str | Names]:
    """The local files a source of ``uri`` reads (none for cameras and URLs)."""
    local = local_media(uri)
    if local is None or is_network(local) or local.lower().startswith(HTTP_SCHEMES):
        return []
    if webcam_device(local) is not None:
        return []
    images = image_paths(local)
    if images is None:
        return [local]
    # A folder is read whole at each run: a picture written into it is read next time.
    folder = (
        [
            Names(os.path.join(local, ""), suffix, many=True)
            for ending in IMAGE_SUFFIXES
            for suffix in (ending, ending.upper())
        ]
        if os.path.isdir(local)
        else []
    )
    return [*images, *folder]


def check_inputs(uri: str) -> None:
    """A ConfigError (key ``uri``) when a file the source of ``uri`` reads is not there."""
    for name in files_read(uri):
        if isinstance(name, str) and not os.path.exists(name):
            raise ConfigError(f"input not found: {mask_credentials(name)}", key="uri")


def is_live(config: SourceConfig) -> bool:
    """Whether the source is a live stream: reconnected when lost, its queues leaky."""
    if config.live is not None:
        return config.live
    uri = config.uri.lower()
    playlist = uri.startswith(HTTP_SCHEMES) and uri.split("?")[0].endswith((".m3u8", ".mpd"))
    return config.realtime or is_network(uri) or playlist or webcam_device(uri) is not None


def spec_of(config: SourceConfig) -> InputSpec:
    """How the source's own input is opened."""
    return input_spec(
        resolve_media(config.uri),
        transport=config.transport,
        open_timeout_s=config.open_timeout_s,
        read_timeout_s=config.read_timeout_s,
        low_latency=config.low_latency,
        width=config.width,
        height=config.height,
        fps=config.fps,
        pixel_format=config.pixel_format,
        extra=config.options,
    )


def check_delivered(name: str, uri: str, delivered: int, announced: int, corrupt: int) -> None:
    """A file read to its end: no frame is a failure; fewer than announced, a warning."""
    if delivered == 0:
        raise PipelineError(
            f"{uri}: no frame could be decoded"
            + (f" ({corrupt} corrupt packets)" if corrupt else "")
        )
    if announced and delivered < announced:
        log.warning(
            "%s: %d of the %d frames %s announces were decoded (%d corrupt packets): "
            "it may be truncated or damaged",
            name,
            delivered,
            announced,
            uri,
            corrupt,
        )
