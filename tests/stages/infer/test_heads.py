"""Decoders against hand-computed outputs, and family detection from shapes and metadata."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.stages.infer.heads import Family, decode, detect_family, grid_cells
from vapipe.stages.infer.names import COCO_NAMES, class_names


def test_yolox_grid_decode_by_hand() -> None:
    width = height = 64  # grids 8x8 (stride 8), 4x4 (16), 2x2 (32): 84 anchors
    anchors = grid_cells(width, height)
    assert anchors == 84
    raw = np.zeros((1, anchors, 5 + 2), np.float32)
    raw[..., 4] = 0.01  # background objectness
    # Anchor 9 is stride-8 cell (x=1, y=1); anchor 64 + 5 is stride-16 cell (x=1, y=1).
    raw[0, 9] = [0.5, 0.25, np.log(2.0), 0.0, 0.8, 0.1, 0.9]
    raw[0, 69] = [0.0, 0.0, 0.0, np.log(3.0), 0.5, 0.6, 0.2]
    (found,) = decode(Family.YOLOX, raw, width, height)
    # centre = (offset + cell) * stride; size = exp(raw) * stride
    # anchor 9: centre (12, 10), size (16, 8) -> (4, 6, 20, 14), score 0.8 * 0.9, class 1
    np.testing.assert_allclose(found.xyxy[9], [4, 6, 20, 14], atol=1e-5)
    assert found.class_id[9] == 1 and found.score[9] == pytest.approx(0.72)
    # anchor 69: centre (16, 16), size (16, 48) -> (8, -8, 24, 40), score 0.5 * 0.6, class 0
    np.testing.assert_allclose(found.xyxy[69], [8, -8, 24, 40], atol=1e-5)
    assert found.class_id[69] == 0 and found.score[69] == pytest.approx(0.3)
    assert not found.suppressed


def test_yolov8_decode_by_hand() -> None:
    raw = np.zeros((2, 4 + 3, 5), np.float32)  # batch 2, 3 classes, 5 anchors
    raw[1, :4, 2] = [100, 50, 20, 10]  # cx, cy, w, h
    raw[1, 4:, 2] = [0.1, 0.2, 0.95]
    first, second = decode(Family.YOLOV8, raw, 640, 640)
    assert first.score.max() == 0
    np.testing.assert_allclose(second.xyxy[2], [90, 45, 110, 55])
    assert second.class_id[2] == 2 and second.score[2] == pytest.approx(0.95)


def test_yolov5_and_end2end_decode_by_hand() -> None:
    raw = np.zeros((1, 3, 5 + 2), np.float32)
    raw[0, 1] = [10, 20, 4, 8, 0.5, 0.2, 0.8]
    (found,) = decode(Family.YOLOV5, raw, 32, 32)
    np.testing.assert_allclose(found.xyxy[1], [8, 16, 12, 24])
    assert found.class_id[1] == 1 and found.score[1] == pytest.approx(0.4)
    e2e = np.array([[[1, 2, 3, 4, 0.9, 7], [0, 0, 0, 0, 0.0, 0]]], np.float32)
    (found,) = decode(Family.END2END, e2e, 640, 640)
    assert found.suppressed and found.class_id.tolist() == [7, 0]
    np.testing.assert_allclose(found.xyxy[0], [1, 2, 3, 4])


@pytest.mark.parametrize(
    ("shape", "metadata", "size", "expected"),
    [
        ((1, 3549, 85), {}, 416, Family.YOLOX),
        ((1, 3 * 3549, 85), {}, 416, Family.YOLOV5),
        ((1, 84, 8400), {"author": "Ultralytics"}, 640, Family.YOLOV8),
        ((1, 84, 8400), {}, 640, Family.YOLOV8),
        ((1, 300, 6), {}, 640, Family.END2END),
        ((1, 84, 8400), {"end2end": "True"}, 640, Family.END2END),
        ((1, 1000, 85), {}, 416, None),
        (("batch", 84, "anchors"), {}, 640, None),
    ],
)
def test_detect_family(shape: tuple, metadata: dict, size: int, expected: Family | None) -> None:
    assert detect_family(shape, metadata, size, size) is expected


def test_class_names_sources(tmp_path) -> None:
    assert class_names({"names": "{0: 'cat', 1: 'dog'}"}, None) == ("cat", "dog")
    assert class_names({}, None) == COCO_NAMES
    names_file = tmp_path / "names.txt"
    names_file.write_text("alpha\n\nbeta\n")
    assert class_names({"names": "{0: 'cat'}"}, str(names_file)) == ("alpha", "beta")
