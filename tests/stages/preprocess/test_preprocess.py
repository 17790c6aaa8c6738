"""The numpy preprocessing path against the reference letterbox code of each model family."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.stage import StageContext
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage


def make_stage(**config: object) -> PreprocessStage:
    stage = PreprocessStage("pre", PreprocessConfig(**config))
    stage.open(StageContext("pre"))
    return stage


def yolox_reference(image: np.ndarray, size: int) -> np.ndarray:
    """As YOLOX's ValTransform: top-left, pad 114, BGR, 0-255."""
    padded = np.ones((size, size, 3), np.uint8) * 114
    ratio = min(size / image.shape[0], size / image.shape[1])
    resized = cv2.resize(
        image,
        (int(image.shape[1] * ratio), int(image.shape[0] * ratio)),
        interpolation=cv2.INTER_LINEAR,
    )
    padded[: resized.shape[0], : resized.shape[1]] = resized
    return padded.transpose(2, 0, 1).astype(np.float32)


def ultralytics_reference(image: np.ndarray, size: int) -> np.ndarray:
    """As Ultralytics' LetterBox(auto=False, center=True): centred, pad 114, RGB, 0-1."""
    height, width = image.shape[:2]
    ratio = min(size / height, size / width)
    new_w, new_h = round(width * ratio), round(height * ratio)
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    if (width, height) != (new_w, new_h):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    image = cv2.copyMakeBorder(
        image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114)
    )
    return image[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0


@pytest.mark.parametrize("shape", [(450, 800), (480, 720), (360, 640), (640, 480), (101, 203)])
def test_matches_reference_implementations(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(shape))
    image = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
    yolox = make_stage(input_size=[416, 416], placement="top-left", color="bgr", scale=1.0)
    tensor, box = yolox.tensor(image)
    np.testing.assert_array_equal(tensor, yolox_reference(image, 416))
    assert (box.pad_x, box.pad_y) == (0, 0)
    ultra = make_stage(input_size=[640, 640], placement="center", color="rgb", scale=1 / 255)
    tensor, box = ultra.tensor(image)
    np.testing.assert_allclose(tensor, ultralytics_reference(image, 640), atol=1e-6)


def test_mean_std_and_dtype_from_config() -> None:
    image = np.full((10, 10, 3), (0, 128, 255), np.uint8)  # BGR
    stage = make_stage(
        input_size=[10, 10],
        placement="center",
        color="rgb",
        scale=1 / 255,
        mean=[0.5, 0.5, 0.5],
        std=[0.5, 0.25, 0.5],
    )
    tensor, _ = stage.tensor(image)
    assert tensor.dtype == np.float32 and tensor.shape == (3, 10, 10)
    expected = [(1.0 - 0.5) / 0.5, (128 / 255 - 0.5) / 0.25, (0.0 - 0.5) / 0.5]  # R, G, B
    np.testing.assert_allclose(tensor[:, 5, 5], expected, atol=1e-6)


def test_without_infer_node_conventions_are_required() -> None:
    stage = PreprocessStage("pre", PreprocessConfig(input_size=[64, 64]))
    with pytest.raises(ConfigError, match="no infer node downstream"):
        stage.open(StageContext("pre"))
