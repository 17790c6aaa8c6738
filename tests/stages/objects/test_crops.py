"""Crops: the box's part and margin, fitted to the model's input in one warp, and boxes
found in the crop mapped back to the frame."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vapipe.stages.crops.warp import (
    PAD,
    CropRule,
    Normalise,
    crop_box,
    cut,
    points_to_frame,
    to_frame,
    to_input,
    touches_edge,
    warp_matrix,
    window_of,
)


def test_region_margin_and_square_give_the_rectangle_to_crop() -> None:
    box = np.array([100, 50, 140, 150], np.float32)
    assert crop_box(box, CropRule()).tolist() == [100, 50, 140, 150]
    assert crop_box(box, CropRule(region=(0, 0, 1, 0.5))).tolist() == [100, 50, 140, 100]
    assert crop_box(box, CropRule(margin=0.1)).tolist() == pytest.approx([96, 40, 144, 160])
    assert crop_box(box, CropRule(fit="square")).tolist() == [70, 50, 170, 150]


def test_a_stretched_crop_is_opencv_s_resize_of_the_same_pixels() -> None:
    image = np.random.default_rng(0).integers(0, 255, (120, 160, 3), np.uint8)
    rect = np.array([20, 10, 84, 74], np.float64)  # 64 x 64 -> 32 x 32
    got = cut(image, warp_matrix(rect, (32, 32), "stretch"), (32, 32))
    expected = cv2.resize(image[10:74, 20:84], (32, 32), interpolation=cv2.INTER_LINEAR)
    assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1


def test_a_letterboxed_crop_keeps_the_aspect_and_pads_grey() -> None:
    image = np.full((100, 100, 3), 200, np.uint8)
    rect = np.array([10, 10, 30, 50], np.float64)  # 20 x 40 -> 16 x 32 in 32 x 32
    matrix = warp_matrix(rect, (32, 32), "letterbox")
    assert window_of(rect, matrix, (32, 32)) == (8, 0, 24, 32)
    got = cut(image, matrix, (32, 32), window_of(rect, matrix, (32, 32)))
    assert (got[:, :7] == PAD).all() and (got[:, -7:] == PAD).all()
    assert (got[:, 9:23] == 200).all()


def test_outside_the_frame_is_grey() -> None:
    image = np.full((50, 50, 3), 10, np.uint8)
    got = cut(
        image, warp_matrix(np.array([-50, 0, 50, 50], np.float64), (20, 10), "stretch"), (20, 10)
    )
    assert (got[:, :9] == PAD).all() and (got[:, 11:] == 10).all()


@pytest.mark.parametrize("fit", ["letterbox", "square", "stretch"])
def test_boxes_found_in_the_crop_map_back_to_the_frame(fit: str) -> None:
    rect = crop_box(np.array([37.5, 20.25, 91.0, 140.0]), CropRule(margin=0.2, fit=fit))  # type: ignore[arg-type]
    matrix = warp_matrix(rect, (64, 48), fit)  # type: ignore[arg-type]
    frame_boxes = np.array([[40.0, 30.0, 80.0, 100.0], [50.5, 60.25, 60.0, 70.0]])
    scale = np.array([matrix[0, 0], matrix[1, 1]] * 2)
    corner = np.array([matrix[0, 2], matrix[1, 2]] * 2) - 0.5 * scale + 0.5
    in_input = frame_boxes * scale + corner
    assert to_input(frame_boxes, matrix) == pytest.approx(in_input)
    assert to_frame(in_input, matrix) == pytest.approx(frame_boxes.astype(np.float32), abs=1e-3)
    points = in_input[:, :2]
    assert points_to_frame(points, matrix) == pytest.approx(frame_boxes[:, :2], abs=1e-3)


def test_the_frame_edge() -> None:
    assert touches_edge(np.array([0.5, 10, 20, 20]), 100, 50)
    assert touches_edge(np.array([10, 10, 99.5, 20]), 100, 50)
    assert touches_edge(np.array([10, 10, 20, 49.2]), 100, 50)
    assert not touches_edge(np.array([2, 2, 97, 47]), 100, 50)


def test_normalise_orders_scales_and_standardises() -> None:
    crops = np.zeros((1, 1, 1, 3), np.uint8)
    crops[..., 0], crops[..., 1], crops[..., 2] = 10, 20, 30  # B, G, R
    rgb = Normalise("rgb", 0.5, (1.0, 2.0, 3.0), (2.0, 2.0, 4.0)).apply(crops)
    assert rgb[0, 0, 0].tolist() == [(15 - 1) / 2, (10 - 2) / 2, (5 - 3) / 4]
    bgr = Normalise("bgr", 1.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)).apply(crops)
    assert bgr[0, 0, 0].tolist() == [10, 20, 30] and bgr.dtype == np.float32


# 450 rows: each chroma plane has an odd number of rows (225), so it does not start on a row
# of the (height * 3 / 2, width) array (people.mp4 is 800 x 450).
@pytest.mark.parametrize(("height", "width"), [(360, 640), (450, 800)])
def test_a_crop_of_the_decoded_planes_is_the_crop_of_the_whole_picture(
    height: int, width: int
) -> None:
    from vapipe.stages.crops.warp import cut_i420

    rng = np.random.default_rng(1)
    yuv = rng.integers(0, 255, (height * 3 // 2, width), np.uint8)
    whole = cv2.cvtColor(yuv, cv2.COLOR_YUV2BGR_I420)
    fits = ("letterbox", "square", "stretch")
    for index in range(200):
        x1, y1 = rng.uniform(-40, width - 10), rng.uniform(-40, height - 10)
        box = np.array([x1, y1, x1 + rng.uniform(3, 300), y1 + rng.uniform(3, 300)])
        fit = fits[index % 3]
        rect = crop_box(box, CropRule(margin=0.1, fit=fit))  # type: ignore[arg-type]
        size = (int(rng.integers(16, 200)), int(rng.integers(16, 200)))
        matrix = warp_matrix(rect, size, fit)  # type: ignore[arg-type]
        window = window_of(rect, matrix, size) if fit == "letterbox" else None
        expected = cut(whole, matrix, size, window)
        assert (cut_i420(yuv, matrix, size, window) == expected).all(), (box, fit, size)
    outside = warp_matrix(np.array([900.0, 500, 960, 560]), (32, 32), "stretch")
    assert (cut_i420(yuv, outside, (32, 32)) == PAD).all()
