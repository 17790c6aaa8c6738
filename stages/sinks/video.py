"""Annotated video: boxes, labels, track trails, zones, lines and counts drawn, encoded with
PyAV (H.264, yuv420p) at the source frame rate, one file per source. The file is finalised on
end-of-stream, on error and on Ctrl-C."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
from pydantic import Field

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.stages.detections import Detections
from vapipe.stages.sinks.draw import draw_analytics, draw_detections, draw_trails
from vapipe.stages.sinks.paths import output_path

log = logging.getLogger(__name__)


class VideoConfig(StageConfig):
    """The output file, the encoder and what is drawn."""

    path: str = "out/annotated.mp4"
    """Output file; ``{source_id}`` gives one file per source (needed with several sources)."""
    codec: str = "libx264"
    """FFmpeg encoder name (``libx264``, ``h264_nvenc``, ``h264_vaapi``, ``libopenh264``...)."""
    preset: str | None = "veryfast"
    """Encoder speed/size trade-off, where the encoder has presets."""
    crf: int | None = Field(23, ge=0, le=51)
    """Constant quality for x264/x265; lower is better and larger."""
    bitrate: int | None = Field(None, ge=1)
    """Target bits per second, instead of crf."""
    labels: bool = True
    """Draw class name and score above each box."""
    thickness: int = Field(2, ge=1)
    """Box line width in pixels."""
    font_scale: float = Field(0.5, gt=0)
    """Label text size (OpenCV font scale)."""
    trail_frames: int = Field(20, ge=0, le=1000)
    """Tracked objects: how many past positions their trail shows (0: no trails)."""


class Trails:
    """The last few anchor points (bottom centre) of each track of one source."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.points: dict[int, deque[tuple[int, int]]] = {}
        self.idle: dict[int, int] = {}

    def update(self, dets: Detections) -> dict[int, list[tuple[int, int]]]:
        seen = set()
        if dets.track_id is not None:
            for box, track_id in zip(dets.xyxy, dets.track_id.tolist(), strict=True):
                if track_id < 0:
                    continue
                trail = self.points.setdefault(track_id, deque(maxlen=self.length))
                trail.append((round(float(box[0] + box[2]) / 2), round(float(box[3]))))
                seen.add(track_id)
        for track_id in list(self.points):  # a track gone for a whole trail's length is dropped
            self.idle[track_id] = 0 if track_id in seen else self.idle.get(track_id, 0) + 1
            if self.idle[track_id] > self.length:
                del self.points[track_id], self.idle[track_id]
        return {track_id: list(points) for track_id, points in self.points.items()}


@dataclass
class _Output:
    container: Any
    stream: Any
    rate: Fraction
    trails: Trails
    last_pts: int = -1
    frames: int = 0


@register("video")
class VideoSink(Stage):
    """Draws detections on each frame and encodes an H.264 video per source."""

    Config = VideoConfig
    config: VideoConfig

    def open(self, context: StageContext) -> None:
        self._outputs: dict[str, _Output] = {}
        self.written: dict[str, int] = {}

    def process(self, frame: Frame) -> tuple[Frame]:
        output = self._outputs.get(frame.source_id)
        if output is None:
            output = self._open_output(frame)
        cfg = self.config
        picture = draw_detections(
            frame.image,
            frame.detections,
            thickness=cfg.thickness,
            font_scale=cfg.font_scale,
            labels=cfg.labels,
        )
        if cfg.trail_frames and frame.detections is not None:
            draw_trails(picture, output.trails.update(frame.detections))
        if frame.analytics is not None:
            draw_analytics(picture, frame.analytics)
        height, width = output.stream.height, output.stream.width
        video_frame = av.VideoFrame.from_ndarray(picture[:height, :width], format="bgr24")
        # Keep the source's timing; never go backwards (the muxer would refuse).
        pts = max(round(frame.pts * output.rate), output.last_pts + 1)
        video_frame.pts = pts
        video_frame.time_base = 1 / output.rate
        output.last_pts = pts
        for packet in output.stream.encode(video_frame):
            output.container.mux(packet)
        output.frames += 1
        self.written[frame.source_id] = output.frames
        return (frame,)

    def _open_output(self, frame: Frame) -> _Output:
        cfg = self.config
        if "{source_id}" not in cfg.path and self._outputs:
            raise PipelineError(f"several sources write to {cfg.path}: put {{source_id}} in path")
        path = output_path(cfg.path, frame.source_id)
        rate = frame.stream.rate or Fraction(25)
        container = av.open(str(path), mode="w")
        try:
            stream = container.add_stream(cfg.codec, rate=rate)
        except (av.error.FFmpegError, ValueError) as exc:
            container.close()
            raise PipelineError(f"encoder '{cfg.codec}' is not available: {exc}") from None
        height, width = frame.image.shape[:2]
        # 4:2:0 needs even dimensions.
        stream.width, stream.height = width - width % 2, height - height % 2
        stream.pix_fmt = "yuv420p"
        stream.time_base = 1 / rate
        options = {}
        if cfg.preset and cfg.codec in ("libx264", "libx265"):
            options["preset"] = cfg.preset
        if cfg.bitrate:
            stream.bit_rate = cfg.bitrate
        elif cfg.crf is not None and cfg.codec in ("libx264", "libx265"):
            options["crf"] = str(cfg.crf)
        stream.options = options
        output = _Output(container, stream, Fraction(rate), Trails(cfg.trail_frames))
        self._outputs[frame.source_id] = output
        log.info(
            "%s: writing %s (%s %dx%d @ %.3f fps)",
            self.name,
            path,
            cfg.codec,
            stream.width,
            stream.height,
            float(rate),
        )
        return output

    def close(self) -> None:
        """Drain the encoder and write the MP4 trailer for every open output."""
        errors = []
        for source_id, output in self._outputs.items():
            try:
                for packet in output.stream.encode(None):
                    output.container.mux(packet)
            except av.error.FFmpegError as exc:
                errors.append(f"{source_id}: {exc}")
            finally:
                output.container.close()
        self._outputs.clear()
        if errors:
            raise PipelineError("finishing video failed: " + "; ".join(errors))

    def stats(self) -> dict[str, Any]:
        return {"frames_written": dict(getattr(self, "written", {}))}
