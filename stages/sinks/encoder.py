"""Video files as the video sink writes them: encoded with PyAV under a temporary name
(``name.partial.mp4``) that becomes the final name only once the file is complete; optionally
fragmented MP4 flushed fragment by fragment, so a killed process leaves a playable file; and
optionally cut into segments of ``segment_s`` seconds, the oldest deleted beyond a limit."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from vapipe.pipeline.errors import ConfigError

log = logging.getLogger(__name__)


def time_base_for(rate: Fraction) -> Fraction:
    """Ticks fine enough for variable frame rates and pts jumps (at least 90 kHz) that still
    hold the nominal frame interval exactly (1/360000 s for 24000/1001 fps)."""
    return Fraction(1, math.lcm(90000, rate.numerator))


FRAGMENTED = {
    # A fragment at each keyframe, the index up front, and every packet flushed to the file:
    # what was muxed is on disk when the process dies.
    "movflags": "frag_keyframe+empty_moov+default_base_moof",
    "flush_packets": "1",
}


@dataclass(frozen=True)
class Encoding:
    codec: str
    preset: str | None
    crf: int | None
    bitrate: int | None
    fragmented: bool
    keyframe_s: float
    """Seconds between keyframes: in a fragmented file, what a crash can lose at most."""


def partial_name(path: Path) -> Path:
    """``out/cam.mp4`` -> ``out/cam.partial.mp4`` (the extension still names the format)."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


class VideoFile:
    """One output file: frames in, encoded at their own timestamps; ``finish`` completes it
    and gives it its final name."""

    def __init__(
        self, path: Path, width: int, height: int, rate: Fraction, encoding: Encoding
    ) -> None:
        self.path = path
        self.partial = partial_name(path)
        self.frames = 0
        self.last_pts = -1
        options = FRAGMENTED if encoding.fragmented else {}
        try:
            self.container = av.open(str(self.partial), mode="w", container_options=options)
        except (av.error.FFmpegError, ValueError) as exc:
            raise ConfigError(f"cannot write {path}: {exc}", key="path") from None
        try:
            self.stream = self.container.add_stream(encoding.codec, rate=rate)
        except (av.error.FFmpegError, ValueError) as exc:
            self._abandon()
            raise ConfigError(
                f"encoder '{encoding.codec}' is not available: {exc}", key="codec"
            ) from None
        stream = self.stream
        # 4:2:0 needs even sizes: drop an odd last row or column; pad a 1-pixel picture.
        stream.width, stream.height = max(2, width - width % 2), max(2, height - height % 2)
        stream.pix_fmt = "yuv420p"
        self.time_base = time_base_for(rate)
        stream.time_base = stream.codec_context.time_base = self.time_base
        stream.codec_context.gop_size = max(1, round(float(rate) * encoding.keyframe_s))
        options = {}
        if encoding.preset and encoding.codec in ("libx264", "libx265"):
            options["preset"] = encoding.preset
        if encoding.bitrate:
            stream.bit_rate = encoding.bitrate
        elif encoding.crf is not None and encoding.codec in ("libx264", "libx265"):
            options["crf"] = str(encoding.crf)
        stream.options = options

    def write(self, image: np.ndarray, pts_s: float) -> None:
        height, width = self.stream.height, self.stream.width
        image = image[:height, :width]
        if image.shape[:2] != (height, width):
            image = np.pad(
                image, ((0, height - image.shape[0]), (0, width - image.shape[1]), (0, 0))
            )
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        # The frame's own time; never backwards (the muxer would refuse).
        pts = max(round(pts_s / self.time_base), self.last_pts + 1)
        frame.pts, frame.time_base = pts, self.time_base
        self.last_pts = pts
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.frames += 1

    def finish(self) -> None:
        """Drain the encoder, write the trailer, then rename to the final name."""
        try:
            for packet in self.stream.encode(None):
                self.container.mux(packet)
        finally:
            self.container.close()
        if self.frames:
            os.replace(self.partial, self.path)
        else:
            self.partial.unlink(missing_ok=True)

    def _abandon(self) -> None:
        self.container.close()
        self.partial.unlink(missing_ok=True)


class Recorder:
    """The files of one source: one, or a new one every ``segment_s`` seconds of stream time
    (``name-00001.mp4``, ...), keeping the newest ``max_segments``."""

    def __init__(
        self,
        path: Path,
        size: tuple[int, int],
        rate: Fraction,
        encoding: Encoding,
        segment_s: float | None,
        max_segments: int | None,
    ) -> None:
        self.base, self.size, self.rate, self.encoding = path, size, rate, encoding
        self.segment_s, self.max_segments = segment_s, max_segments
        self.index = 0
        self.started_at: float | None = None
        self.finished: list[Path] = []
        self.frames = 0
        self.current = self._next_file()

    def _next_file(self) -> VideoFile:
        path = self.base
        if self.segment_s:
            self.index += 1
            path = self.base.with_name(f"{self.base.stem}-{self.index:05d}{self.base.suffix}")
        return VideoFile(path, *self.size, self.rate, self.encoding)

    def write(self, image: np.ndarray, pts_s: float) -> None:
        if self.started_at is None:
            self.started_at = pts_s
        elif self.segment_s and pts_s - self.started_at >= self.segment_s:
            self._rotate()
            self.started_at = pts_s
        self.current.write(image, pts_s - (self.started_at if self.segment_s else 0.0))
        self.frames += 1

    def _rotate(self) -> None:
        self.current.finish()
        self.finished.append(self.current.path)
        if self.max_segments is not None:
            while len(self.finished) > self.max_segments - 1:
                oldest = self.finished.pop(0)
                oldest.unlink(missing_ok=True)
                log.debug("removed old segment %s", oldest)
        self.current = self._next_file()

    def finish(self) -> None:
        self.current.finish()

    def describe(self) -> dict[str, Any]:
        return {"path": str(self.current.path), "segments": self.index or 1}
