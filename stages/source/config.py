"""The ``source`` node's keys: the input, how it is opened, how a live one is kept alive."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from vapipe.pipeline.stage import StageConfig
from vapipe.stages.source.backoff import ReconnectConfig

DEVICE_DECODERS = ("auto", "nvdec", "rocdecode")
"""``hwaccel`` values decoded by this project into GPU memory (stages/source/hardware.py),
not by FFmpeg."""


class SourceConfig(StageConfig):
    """The input, how it is opened, and how a live one is kept alive."""

    uri: str
    """A file path, ``sample:NAME`` (people, traffic, horses, dog), ``rtsp://...`` (any URL
    FFmpeg opens), a webcam (``webcam:0`` or ``/dev/video0``), or a folder or glob of images
    (``photos/`` or ``photos/*.jpg``: one frame each, in name order)."""
    source_id: str | None = None
    """Name carried by every frame and event; default: the node's name."""
    live: bool | None = None
    """Treat as a live source (leaky queues, reconnects); default: true for network URLs and
    webcams, false for files."""
    realtime: bool = False
    """Files: deliver frames at their timestamps' pace, like a camera."""
    loop: bool = False
    """Files: start again at the end (seq and pts keep counting)."""
    transport: Literal["tcp", "udp"] = "tcp"
    """RTSP transport. TCP survives lossy networks; UDP has less latency."""
    open_timeout_s: float = Field(10.0, gt=0)
    """Give up opening a network stream or webcam after this long."""
    read_timeout_s: float = Field(5.0, gt=0)
    """Give up a read that returns nothing for this long (a server that accepts and is silent)."""
    stall_timeout_s: float = Field(5.0, gt=0)
    """Reconnect when packets arrive but no frame has decoded for this long. Before a
    connection's first frame, only video packets stopping for this long counts (a camera
    whose keyframes are 10 s apart sends packets that decode only from the next one)."""
    first_frame_timeout_s: float = Field(30.0, gt=0)
    """Reconnect when a connection's video packets come but no frame decodes for this long
    (no keyframe ever: a broken stream)."""
    low_latency: bool = True
    """A small demuxer delay and reorder window on network streams (``flags=low_delay``,
    ``max_delay``)."""
    reconnect: ReconnectConfig = Field(default_factory=ReconnectConfig)
    """Backoff for live sources: ``initial_s``, ``max_s``, ``max_attempts`` (0 = forever),
    ``jitter``."""
    width: int | None = Field(None, gt=0)
    """Webcam capture width (with ``height``)."""
    height: int | None = Field(None, gt=0)
    """Webcam capture height."""
    fps: float | None = Field(None, gt=0)
    """Webcam frame rate; for a folder of images, the pts step between them (default 1)."""
    pixel_format: str | None = None
    """Webcam pixel format as v4l2 names it (``mjpeg``, ``yuyv422``, ``h264``)."""
    auto_rotate: bool = True
    """Turn frames upright as the file's rotation metadata says (phone videos); boxes and the
    annotated video are then in the upright picture's pixels."""
    decode_threads: int = Field(0, ge=0)
    """FFmpeg decoder threads; 0 = automatic: FFmpeg's choice (one per core) for a single
    source; with several, cores / sources but at least 4 (each thread holds a frame)."""
    hwaccel: str | None = None
    """Decode on a GPU. ``nvdec``: NVIDIA's video decoders, pictures left in GPU memory for a
    torch preprocess node (``pip install 'vapipe[nvdec]'``; H.264 and HEVC, 8-bit 4:2:0);
    ``rocdecode``: AMD's, through ROCm's rocPyDecode (not yet run on AMD hardware); ``auto``:
    the first of those that works, else software, with a log line saying why. A stream the
    hardware does not take (codec, size, colours, rotation) decodes in software alone. Or an
    FFmpeg device type (``cuda``, ``vaapi``, ``qsv``, ``amf``, ``d3d11va``, ``videotoolbox``;
    ``run-pipeline doctor`` lists this build's), whose frames come back to host memory:
    experimental, slower than software decoding on a 16-core host (docs/performance.md).
    ``vaapi`` beside a model on MIGraphX is refused: their two LLVMs abort in one process."""
    hwaccel_device: str | None = None
    """Which device for ``hwaccel``: a GPU index (``"1"``; ``nvdec`` and ``rocdecode`` take only
    an index) or a render node (``/dev/dri/renderD128``); default: the first."""

    options: dict[str, str] = Field(default_factory=dict)
    """Extra FFmpeg demuxer options, passed to ``av.open``."""

    def native_stacks(self) -> frozenset[str]:
        """``vaapi`` when decoding through VA-API (Mesa's driver, with Mesa's LLVM)."""
        return frozenset({"vaapi"}) if self.hwaccel == "vaapi" else frozenset()

    @field_validator("hwaccel")
    @classmethod
    def _known_device_type(cls, value: str | None) -> str | None:
        if value is None or value in DEVICE_DECODERS:
            return value
        from av.codec.hwaccel import hwdevices_available

        known = hwdevices_available()
        if value not in known:
            raise ValueError(
                f"'{value}' is not {', '.join(DEVICE_DECODERS)} or a device type of this FFmpeg "
                f"build; it has: {', '.join(known) or 'none'}"
            )
        return value

    @model_validator(mode="after")
    def _gpu_index(self) -> SourceConfig:
        device = self.hwaccel_device
        if self.hwaccel in DEVICE_DECODERS and device is not None and not device.isdigit():
            raise ValueError(
                f'hwaccel_device: {self.hwaccel} takes a GPU index ("0", "1"...), got {device!r}'
            )
        return self
