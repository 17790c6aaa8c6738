"""The video file keeps the colours it was given: the BGR picture is converted to the
encoder's 4:2:0 with BT.601 limited range, as players and our own sources read it back."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from vapipe.stages.media.encoder import Encoding, VideoFile

# Blue, green, red, white, black, a skin tone, a sky blue, grey (BGR), in 32x32 blocks.
COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0),
           (80, 130, 200), (230, 180, 90), (128, 128, 128)]  # fmt: skip


def test_encoded_blocks_decode_to_the_colours_written(tmp_path: Path) -> None:
    picture = np.zeros((64, 128, 3), np.uint8)
    for index, colour in enumerate(COLOURS):
        row, column = divmod(index, 4)
        picture[row * 32 : row * 32 + 32, column * 32 : column * 32 + 32] = colour
    encoding = Encoding("libx264", "veryfast", 1, None, False, 1.0)
    video = VideoFile(tmp_path / "colours.mp4", 128, 64, Fraction(25), encoding)
    for index in range(5):
        video.write(picture, index / 25)
    video.finish()
    with av.open(str(tmp_path / "colours.mp4")) as container:
        frames = [f.to_ndarray(format="yuv420p") for f in container.decode(video=0)]
    assert len(frames) == 5
    decoded = cv2.cvtColor(frames[-1], cv2.COLOR_YUV2BGR_I420).astype(int)
    for index, colour in enumerate(COLOURS):
        row, column = divmod(index, 4)
        centre = decoded[row * 32 + 8 : row * 32 + 24, column * 32 + 8 : column * 32 + 24]
        error = np.abs(centre - np.array(colour)).max()
        assert error <= 6, (colour, centre.mean(axis=(0, 1)).round())
