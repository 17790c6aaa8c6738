"""Clips of the frames (``clips.annotated = true``, or behind a redact node): the frames of the last
``pre_s`` seconds are held (references, not copies), and a clip's frames are drawn as the
video sink draws them and encoded on the writer thread, only when an event asks for them."""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from pathlib import Path

from vapipe.pipeline.frame import Frame
from vapipe.stages.media.draw import annotate
from vapipe.stages.media.encoder import Encoding, VideoFile

KEYFRAME_S = 1.0
"""A keyframe a second: a browser seeks to the event without decoding far."""


class FrameRing:
    """One source's frames of the last ``keep_s`` seconds, in order."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self.frames: deque[Frame] = deque()

    def add(self, frame: Frame) -> None:
        self.frames.append(frame)
        while self.frames[0].pts < frame.pts - self.keep_s:
            self.frames.popleft()

    def since(self, start: float) -> list[Frame]:
        return [frame for frame in self.frames if frame.pts >= start]


def encoding(crf: int) -> Encoding:
    """x264, fragmented throughout."""
    return Encoding("libx264", "veryfast", crf, None, True, KEYFRAME_S, threads=1)


def write_drawn(path: Path, frames: list[Frame], crf: int, draw: bool = True) -> None:
    """The frames (annotated, with ``draw``) as an MP4 at their own times."""
    path.parent.mkdir(parents=True, exist_ok=True)
    first = frames[0]
    height, width = first.shape[:2]
    rate = first.stream.rate or Fraction(25)
    video = VideoFile(path, width, height, Fraction(rate), encoding(crf))
    try:
        for frame in frames:
            video.write(annotate(frame) if draw else frame.image, frame.pts - first.pts)
    finally:
        video.finish()
