"""Annotated video: boxes, labels, track trails, zones, lines and counts drawn, encoded with
PyAV (H.264, yuv420p) at the source frame rate, one file per source. The file is finalised on
end-of-stream, on error and on Ctrl-C."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
from pydantic import Field, model_validator

from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.outputs import Names
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageConfig, StageContext
from vapipe.stages.media.draw import Trails, annotate
from vapipe.stages.media.encoder import (
    Encoding,
    Recorder,
    choose_codec,
    encoder_share,
    open_error,
    partial_name,
    temporary_names,
)
from vapipe.stages.media.paths import check_writable, names_for, output_path, paths_for
from vapipe.stages.sinks.path_sink import PathSink
from vapipe.stages.source.images import IMAGE_SUFFIXES

log = logging.getLogger(__name__)


class VideoConfig(StageConfig):
    """The output file, the encoder and what is drawn."""

    path: str = "out/annotated.mp4"
    """Output file; ``{source_id}`` gives one file per source (needed with several sources).
    An image extension (``.jpg``, ``.png``...) writes annotated pictures instead: one per frame
    with ``{seq}`` in the path, else the latest frame."""
    codec: str = "libx264"
    """FFmpeg encoder name (``libx264``, ``h264_nvenc``, ``h264_amf``, ``libopenh264``...), or
    ``auto``: the first hardware H.264 encoder that opens here (NVENC, then AMF), else libx264;
    the log says which and why."""
    preset: str | None = "veryfast"
    """Encoder speed/size trade-off, where the encoder has presets."""
    threads: int | None = Field(None, ge=0)
    """Encoder threads per file. Unset: the run's cores shared by its sources (cores /
    sources, at least 1; with one source, the encoder's own choice), since encoders that each
    take every core slow each other; 0: the encoder's own choice whatever the run."""
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
    fragmented: bool | None = None
    """Every video is written as fragmented MP4 under ``NAME.partial.mp4``, flushed fragment by
    fragment, so a killed run (power cut, SIGKILL) leaves a playable file missing at most the
    last ``keyframe_s``. Unset: remuxed (no re-encoding) into a plain MP4 with its index up
    front at the clean end; ``true``: kept fragmented; ``false``: plain MP4 throughout (a
    killed run then leaves nothing playable)."""
    keyframe_s: float = Field(2.0, gt=0, le=60)
    """Seconds between keyframes (and so between fragments)."""
    segment_s: float | None = Field(None, gt=0)
    """Start a new file every this many seconds of stream time (``name-00001.mp4``, ...), so
    a camera can record for weeks. A later run numbers on after the files already there."""
    max_segments: int | None = Field(None, ge=1)
    """With ``segment_s``: keep the newest this many files (an earlier run's included),
    deleting older ones."""

    @model_validator(mode="after")
    def _segments_only_with_segment_s(self) -> VideoConfig:
        if self.max_segments is not None and self.segment_s is None:
            log.warning("max_segments does nothing without segment_s: one file is written")
        return self


@register("video")
class VideoSink(PathSink):
    """Draws detections on each frame and encodes an H.264 video per source."""

    Config = VideoConfig
    config: VideoConfig

    def __init__(self, name: str, config: StageConfig) -> None:
        super().__init__(name, config)
        self.written: dict[str, int] = {}

    @classmethod
    def check_for_sources(cls, config: VideoConfig, source_ids: Sequence[str]) -> None:
        """One video file cannot hold several sources: said before the run, not at the second
        source's first frame (a service's added stream gets it at its POST)."""
        pictures = Path(config.path).suffix.lower() in IMAGE_SUFFIXES
        if len(set(source_ids)) > 1 and "{source_id}" not in config.path and not pictures:
            raise ConfigError(
                f"{len(set(source_ids))} sources would write to {config.path}: "
                "put {source_id} in path (e.g. out/{source_id}.mp4)",
                key="path",
            )

    @classmethod
    def writes_pictures(cls, config: VideoConfig) -> bool:
        return True

    @classmethod
    def files_written(cls, config: VideoConfig, source_ids: Sequence[str]) -> list[str | Names]:
        """The files, their ``.partial`` names while written, every segment and picture."""
        if Path(config.path).suffix.lower() in IMAGE_SUFFIXES:
            pictures = names_for(config.path, source_ids)
            return [*pictures, *(str(partial_name(Path(n.prefix))) for n in pictures if not n.many)]
        written: list[str | Names] = []
        for path in map(Path, paths_for(config.path, source_ids)):
            if config.segment_s:  # NAME-00001.mp4 and on, and their temporary names
                written.append(Names(str(path.with_name(f"{path.stem}-")), path.suffix, many=True))
            else:
                written += [str(path), *map(str, temporary_names(path))]
        return written

    def open(self, context: StageContext) -> None:
        self._recorders: dict[str, Recorder] = {}
        self._trails: dict[str, Trails] = {}
        self.written = {}
        # An image extension: annotated pictures instead of a video.
        self._pictures = Path(self.config.path).suffix.lower() in IMAGE_SUFFIXES
        for names in self.files_written(self.config, context.source_ids or ["source"]):
            check_writable(Path(names if isinstance(names, str) else names.prefix))
        self._encoder_opens()
        threads = self.config.threads
        self._threads = encoder_share(context.sources_in_run) if threads is None else threads

    def _encoder_opens(self) -> None:
        """The encoder is chosen (``auto``) and opened once now, on a small picture: one that
        this FFmpeg lacks or that cannot start here (``h264_nvenc`` without its GPU) is a
        config error before the run, not a failure at its first frame."""
        self.codec = self.config.codec
        if self._pictures:
            return
        self.codec, why = choose_codec(self.config.codec)
        if self.config.codec == "auto":
            log.info("%s: encoder %s (%s)", self.name, self.codec, why)
        error = open_error(self.codec)
        if error is not None:
            hint = "; 'run-pipeline doctor' lists the hardware ones found here"
            raise ConfigError(f"encoder '{self.codec}' {error}{hint}", key="codec")

    def process(self, frame: Frame) -> tuple[Frame]:
        if self._pictures:
            self._write_image(self._draw(frame), frame)
            return (frame,)
        recorder = self._recorders.get(frame.source_id)
        if recorder is None:
            recorder = self._start(frame)
        recorder.write(self._draw(frame), frame.pts)
        self.written[frame.source_id] = recorder.frames
        return (frame,)

    def _draw(self, frame: Frame) -> np.ndarray:
        cfg = self.config
        trails = None
        if cfg.trail_frames:
            trails = self._trails.setdefault(frame.source_id, Trails(cfg.trail_frames))
        return annotate(
            frame,
            thickness=cfg.thickness,
            font_scale=cfg.font_scale,
            labels=cfg.labels,
            trails=trails,
        )

    def _write_image(self, picture: np.ndarray, frame: Frame) -> None:
        """An annotated picture (JPEG, PNG... by the path's extension), replaced whole: one
        file per frame with ``{seq}`` in the path, else the latest frame (a snapshot)."""
        path = output_path(self.config.path, frame.source_id, frame.seq)
        partial = partial_name(path)
        if not cv2.imwrite(str(partial), picture):
            raise ConfigError(f"cannot write the image {path}", key="path")
        os.replace(partial, path)
        self.written[frame.source_id] = self.written.get(frame.source_id, 0) + 1

    def _start(self, frame: Frame) -> Recorder:
        cfg = self.config
        if "{source_id}" not in cfg.path and self._recorders:
            raise PipelineError(f"several sources write to {cfg.path}: put {{source_id}} in path")
        path = output_path(cfg.path, frame.source_id)
        rate = frame.stream.rate or Fraction(25)
        encoding = Encoding(
            self.codec,
            cfg.preset,
            cfg.crf,
            cfg.bitrate,
            cfg.fragmented,
            cfg.keyframe_s,
            self._threads,
        )
        height, width = frame.image.shape[:2]
        recorder = Recorder(
            path, (width, height), Fraction(rate), encoding, cfg.segment_s, cfg.max_segments
        )
        self._recorders[frame.source_id] = recorder
        self._trails[frame.source_id] = Trails(cfg.trail_frames)
        log.info(
            "%s: writing %s (%s %dx%d @ %.3f fps%s%s%s)",
            self.name,
            path,
            self.codec,
            width - width % 2,
            height - height % 2,
            float(rate),
            {None: "", True: ", fragmented", False: ", not crash-safe"}[cfg.fragmented],
            f", {cfg.segment_s:g} s segments" if cfg.segment_s else "",
            f", {self._threads} encoder threads" if self._threads else "",
        )
        return recorder

    def handle_message(self, message: Message) -> tuple[Message]:
        """A stream removed from a service: its file is finished now, under its final name."""
        if message.kind == "source_removed":
            recorder = self._recorders.pop(message.source_id, None)
            self._trails.pop(message.source_id, None)
            if recorder is not None:
                recorder.finish()
        return (message,)

    def close(self) -> None:
        """Finish every file (encoder tail, trailer) and give it its final name."""
        errors = []
        for source_id, recorder in self._recorders.items():
            try:
                recorder.finish()
            except (av.error.FFmpegError, OSError) as exc:
                errors.append(f"{source_id}: {exc}")
        self._recorders.clear()
        if errors:
            raise PipelineError("finishing video failed: " + "; ".join(errors))

    def stats(self) -> dict[str, Any]:
        return {"frames_written": dict(self.written)}
