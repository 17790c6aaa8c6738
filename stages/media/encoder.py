"""Video files as the video sink writes them: encoded with PyAV under a temporary name
(``name.partial.mp4``) that becomes the final name only once the file is complete. While it is
written the file is fragmented MP4 flushed fragment by fragment, so a killed process leaves a
playable file; at the clean end it is remuxed (no re-encoding) into a plain MP4 with its index
up front, unless fragmented output was asked for. Optionally cut into segments of
``segment_s`` seconds, numbered on from the files already there, the oldest deleted beyond a
limit. A ``.partial`` file left by a killed run is never overwritten."""

from __future__ import annotations

import logging
import math
import os
import re
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from vapipe.pipeline.cpus import usable_cores
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
    fragmented: bool | None
    """True: fragmented MP4 to the end; None: fragmented while written, plain at the end;
    False: plain throughout (a killed run leaves nothing playable)."""
    keyframe_s: float
    """Seconds between keyframes: in a fragmented file, what a crash can lose at most."""
    threads: int = 0
    """Encoder threads; 0: the encoder's own choice (x264: 1.5 per core)."""


def encoder_share(sources: int) -> int:
    """Encoder threads for one of ``sources`` streams recorded on this machine at once (0: the
    encoder's own choice, for a single stream). x264 left to itself starts 1.5 threads per core
    in every encoder, and encoders that each take every core slow each other: measured on 16
    cores with 4 x 1080p at once (bench/encoder_bench.py), 42.5 frames/s each with 4 threads
    against 31 with x264's choice."""
    if sources <= 1:
        return 0
    return max(1, usable_cores() // sources)


HARDWARE_H264 = ("h264_nvenc", "h264_amf")
"""What ``codec = "auto"`` tries, in order, before libx264: the hardware H.264 encoders that
take the sink's yuv420p pictures from host memory. VAAPI and QSV want frames in their own
device memory (or NV12), which this sink does not make: name them to use them, if they open."""


def open_error(codec: str) -> str | None:
    """None if an encoder of ``codec`` opens here on a small yuv420p picture, else why not
    (words that follow "encoder 'NAME' ")."""
    from av.video.codeccontext import VideoCodecContext

    try:
        context = av.CodecContext.create(codec, "w")
    except (av.error.FFmpegError, ValueError) as exc:
        return f"is not in this FFmpeg ({exc})"
    if not isinstance(context, VideoCodecContext):
        return f"is not a video encoder ({context.type})"
    context.width, context.height, context.pix_fmt = 256, 144, "yuv420p"
    context.time_base, context.framerate = Fraction(1, 25), Fraction(25)
    try:
        context.open()
    except Exception as exc:  # any reason: the caller reports it, or tries the next
        return f"cannot be opened here: {getattr(exc, 'strerror', None) or exc}"
    return None


def choose_codec(wanted: str) -> tuple[str, str]:
    """(encoder, why) for the sink's ``codec``: itself, or for ``auto`` the first of
    HARDWARE_H264 that opens here, else libx264."""
    if wanted != "auto":
        return wanted, "configured"
    tried = []
    for codec in HARDWARE_H264:
        error = open_error(codec)
        if error is None:
            return codec, "auto: a hardware encoder that opens here"
        tried.append(f"{codec}: {error.splitlines()[0][:80]}")
    return "libx264", "auto: no hardware H.264 encoder opens here (" + "; ".join(tried) + ")"


def codec_options(encoding: Encoding) -> dict[str, object]:
    """The encoder's own names for ``preset`` and ``crf``: x264/x265 take them as they are;
    NVENC's constant quality is ``cq``, AMF's is a constant QP; x264's preset names mean
    nothing to either, so they keep their own default speed."""
    codec, options = encoding.codec, dict[str, object]()
    if codec in ("libx264", "libx265"):
        if encoding.preset:
            options["preset"] = encoding.preset
        if encoding.crf is not None and not encoding.bitrate:
            options["crf"] = str(encoding.crf)
    elif encoding.crf is not None and not encoding.bitrate:
        if codec.endswith("_nvenc"):
            options.update(rc="vbr", cq=str(encoding.crf))
        elif codec.endswith("_amf"):
            options.update(rc="cqp", qp_i=str(encoding.crf), qp_p=str(encoding.crf))
    return options


def partial_name(path: Path) -> Path:
    """``out/cam.mp4`` -> ``out/cam.partial.mp4`` (the extension still names the format)."""
    return path.with_name(f"{path.stem}.partial{path.suffix}")


def remux_name(path: Path) -> Path:
    """Where the plain MP4 is written from the fragmented one, before it takes the name."""
    return path.with_name(f"{path.stem}.partial-plain{path.suffix}")


def temporary_names(path: Path) -> list[Path]:
    """Every name a file has on its way to ``path``."""
    return [partial_name(path), remux_name(path)]


def remux(source: Path, target: Path, first_pts_s: float) -> None:
    """The video of ``source`` copied packet for packet into a plain MP4, index up front,
    its first frame at ``first_pts_s`` again: the fragmented muxer delays every frame so that
    no decode time is negative (B-frames), where a plain MP4 keeps them in an edit list."""
    with (
        av.open(str(source)) as reader,
        av.open(str(target), "w", options={"movflags": "+faststart"}) as writer,
    ):
        video = reader.streams.video[0]
        stream = writer.add_stream_from_template(video)
        shift = (video.start_time or 0) - round(first_pts_s / (video.time_base or 1))
        for packet in reader.demux(video):
            if packet.dts is None or packet.pts is None:  # the demuxer's end-of-stream marker
                continue
            packet.pts, packet.dts = packet.pts - shift, packet.dts - shift
            packet.stream = stream
            writer.mux(packet)


def keep_interrupted(path: Path, final: Path | None = None) -> None:
    """A ``.partial`` file already there is the recording of a run that was killed: it is
    moved to ``final`` (default ``NAME.interrupted-TIME.mp4``), never overwritten."""
    partial = partial_name(path)
    if not partial.exists():
        return
    if final is None or final.exists():
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(partial.stat().st_mtime))
        final = path.with_name(f"{path.stem}.interrupted-{stamp}{path.suffix}")
        number = 1
        while final.exists():
            number += 1
            final = path.with_name(f"{path.stem}.interrupted-{stamp}-{number}{path.suffix}")
    os.replace(partial, final)
    log.warning("%s was left by an interrupted run; kept as %s", partial, final)


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
        self.first_pts_s = 0.0
        self.plain_at_end = encoding.fragmented is None
        options = {} if encoding.fragmented is False else FRAGMENTED
        try:
            self.container = av.open(str(self.partial), mode="w", container_options=options)
        except (av.error.FFmpegError, ValueError) as exc:
            raise ConfigError(f"cannot write {path}: {exc}", key="path") from None
        try:
            stream = self.container.add_stream(encoding.codec, rate=rate)
        except (av.error.FFmpegError, ValueError) as exc:
            self._abandon()
            raise ConfigError(
                f"encoder '{encoding.codec}' is not available: {exc}", key="codec"
            ) from None
        if not isinstance(stream, av.VideoStream):
            self._abandon()
            raise ConfigError(
                f"encoder '{encoding.codec}' is not a video encoder ({stream.type})", key="codec"
            )
        self.stream = stream
        # 4:2:0 needs even sizes: drop an odd last row or column; pad a 1-pixel picture.
        stream.width, stream.height = max(2, width - width % 2), max(2, height - height % 2)
        stream.pix_fmt = "yuv420p"
        self.time_base = time_base_for(rate)
        stream.time_base = stream.codec_context.time_base = self.time_base
        stream.codec_context.gop_size = max(1, round(float(rate) * encoding.keyframe_s))
        if encoding.bitrate:
            stream.bit_rate = encoding.bitrate
        stream.options = {k: str(v) for k, v in codec_options(encoding).items()}
        if encoding.threads:
            stream.codec_context.thread_count = encoding.threads

    def write(self, image: np.ndarray, pts_s: float) -> None:
        height, width = self.stream.height, self.stream.width
        image = image[:height, :width]
        if image.shape[:2] != (height, width):
            image = np.pad(
                image, ((0, height - image.shape[0]), (0, width - image.shape[1]), (0, 0))
            )
        # OpenCV's BT.601 conversion (what the sources use the other way), not swscale's
        # inside the encoder: within one level of it, and 27% more frames/s per 1080p x264
        # encoder, 28% with 16 at once (bench/results/encoder.md).
        planes = cv2.cvtColor(np.ascontiguousarray(image), cv2.COLOR_BGR2YUV_I420)
        frame = av.VideoFrame.from_ndarray(planes.astype(np.uint8, copy=False), format="yuv420p")
        # The frame's own time; never backwards (the muxer would refuse).
        pts = max(round(pts_s / self.time_base), self.last_pts + 1)
        frame.pts, frame.time_base = pts, self.time_base
        if not self.frames:
            self.first_pts_s = float(pts * self.time_base)
        self.last_pts = pts
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.frames += 1

    def finish(self) -> None:
        """Drain the encoder, write the trailer, then give the file its final name (remuxed
        to a plain MP4 first where asked; should that fail, the fragmented file is kept)."""
        try:
            for packet in self.stream.encode(None):
                self.container.mux(packet)
        finally:
            self.container.close()
        if not self.frames:
            self.partial.unlink(missing_ok=True)
            return
        if self.plain_at_end:
            plain = remux_name(self.path)
            try:
                remux(self.partial, plain, self.first_pts_s)
            except (av.error.FFmpegError, OSError, ValueError) as exc:
                plain.unlink(missing_ok=True)
                log.warning("%s: kept fragmented, remuxing failed: %s", self.path, exc)
            else:
                os.replace(plain, self.path)
                self.partial.unlink()
                return
        os.replace(self.partial, self.path)

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
        self.started_at: float | None = None
        # Segments number on from the newest already there (an earlier run's are kept, and
        # count towards max_segments).
        self.finished = self._segments_there() if segment_s else []
        self.index = max((self._index_of(p) for p in self.finished), default=0)
        self.frames = 0
        self.current = self._next_file()

    def _segment(self, index: int) -> Path:
        return self.base.with_name(f"{self.base.stem}-{index:05d}{self.base.suffix}")

    def _index_of(self, path: Path) -> int:
        return int(path.name[len(self.base.stem) + 1 :].split(".")[0])

    def _segments_there(self) -> list[Path]:
        """This recording's segments in the folder, oldest first; a killed run's unfinished
        one takes its final name."""
        pattern = re.compile(
            re.escape(self.base.stem) + r"-(\d{5,})(\.partial)?" + re.escape(self.base.suffix)
        )
        found: dict[int, Path] = {}
        for entry in self.base.parent.iterdir() if self.base.parent.is_dir() else ():
            match = pattern.fullmatch(entry.name)
            if match is None:
                continue
            index = int(match.group(1))
            if match.group(2):
                keep_interrupted(self._segment(index), self._segment(index))
            found[index] = self._segment(index)
        return [found[index] for index in sorted(found)]

    def _next_file(self) -> VideoFile:
        path = self.base
        if self.segment_s:
            self.index += 1
            path = self._segment(self.index)
        else:
            keep_interrupted(path)
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
