"""``Letterbox.to_frame``: boxes in model-input pixels back to frame pixels, x by the
horizontal pad and y by the vertical one, divided by the scale, clipped to the frame's own
width and height; float32 out, the input left as it was."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.pipeline.geometry import Letterbox

# A 400 x 100 frame in a model input with pads 7 (x) and 30 (y), scale 0.5.
BOX = Letterbox(scale=0.5, pad_x=7, pad_y=30, resized_w=200, resized_h=50, frame_w=400, frame_h=100)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ([17, 40, 27, 50], [20, 20, 40, 40]),  # inside: (v - pad) / scale
        ([0, 0, 7, 30], [0, 0, 0, 0]),  # left of and above the picture: clipped to 0
        ([100, 70, 300, 300], [186, 80, 400, 100]),  # past the right and bottom: frame size
        ([210, 75, 211, 80], [400, 90, 400, 100]),  # x clipped at the width, y not at it
    ],
)
def test_boxes_map_back_axis_by_axis(given: list[float], expected: list[float]) -> None:
    assert BOX.to_frame(np.array([given], np.float32)).tolist() == [expected]


def test_float32_out_input_untouched_and_empty_kept() -> None:
    boxes = np.array([[17, 40, 27, 50], [9, 31, 11, 33]], np.float64)
    before = boxes.copy()
    out = BOX.to_frame(boxes)
    assert out.dtype == np.float32 and out.shape == (2, 4)
    assert np.array_equal(boxes, before)
    assert out.tolist()[1] == [4, 2, 8, 6]
    assert BOX.to_frame(np.zeros((0, 4), np.float32)).shape == (0, 4)


def test_the_same_float32_arithmetic_as_column_by_column() -> None:
    rng = np.random.default_rng(7)
    box = Letterbox(0.2166667, 3, 91, 416, 234, 1920, 1080)
    boxes = rng.uniform(-50, 500, (64, 4)).astype(np.float32)
    reference = boxes.copy()
    reference[:, [0, 2]] = np.clip((reference[:, [0, 2]] - 3) / np.float32(0.2166667), 0, 1920)
    reference[:, [1, 3]] = np.clip((reference[:, [1, 3]] - 91) / np.float32(0.2166667), 0, 1080)
    assert np.array_equal(box.to_frame(boxes), reference)
