"""Annotated clips: the frame ring's span, and the encoded clip: from zero, a keyframe a
second (25 frames where the stream has no rate), fragmented, several in one folder."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.media.drawn_clips import FrameRing, encoding, write_drawn
from vapipe.stages.media.encoder import Encoding


def frame(pts: float, rate: Fraction | None = Fraction(10)) -> Frame:
    image = np.full((64, 96, 3), 100, np.uint8)
    x = round(pts * 10) % 80
    image[20:30, x : x + 10] = 200  # a block moving slowly: no scene cuts
    info = StreamInfo("cam", "x", 96, 64, rate)
    return Frame("cam", round(pts * 25), pts, 0.0, image, info)


def test_the_ring_keeps_the_last_keep_s_seconds_inclusive() -> None:
    ring = FrameRing(keep_s=1.0)
    for pts in (10.0, 10.5, 11.0, 11.5, 12.0):
        ring.add(frame(pts))
    assert [f.pts for f in ring.frames] == [11.0, 11.5, 12.0]
    assert [f.pts for f in ring.since(11.5)] == [11.5, 12.0]


def test_the_encoding_is_fragmented_x264_with_a_keyframe_a_second() -> None:
    assert encoding(30) == Encoding("libx264", "veryfast", 30, None, True, 1.0, threads=1)


def test_a_drawn_clip_starts_at_zero_with_a_keyframe_a_second(tmp_path: Path) -> None:
    frames = [frame(10.0 + i / 25, rate=None) for i in range(75)]  # 3 s; no rate: 25 fps
    target = tmp_path / "day" / "a.mp4"
    write_drawn(target, frames, 23)
    write_drawn(tmp_path / "day" / "b.mp4", frames[:10], 23)  # the folder exists by now
    with av.open(str(target)) as container:
        decoded = list(container.decode(video=0))
    assert len(decoded) == 75
    assert decoded[0].time < 0.1  # from zero (but for the encoder's reorder delay)
    assert decoded[-1].time - decoded[0].time == pytest.approx(74 / 25, abs=1e-3)
    assert [i for i, f in enumerate(decoded) if f.key_frame] == [0, 25, 50]
    assert b"moof" in target.read_bytes()  # fragmented: playable had the run died
    assert (tmp_path / "day" / "b.mp4").is_file()
