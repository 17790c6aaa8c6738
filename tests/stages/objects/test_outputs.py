"""What the outputs of a model on a crop mean: class scores, face boxes (against OpenCV's own
YuNet decoder), unit vectors."""

from __future__ import annotations

import tempfile
from pathlib import Path

import av
import cv2
import numpy as np
import onnxruntime as ort
import pytest

from tests.conftest import ASSETS
from vapipe.pipeline.errors import ConfigError
from vapipe.stages.boxes import box_iou
from vapipe.stages.infer.heads import Family
from vapipe.stages.objects.model import output_names, prepare
from vapipe.stages.objects.outputs import (
    decode_ultraface,
    decode_yunet,
    head_of,
    scores,
    select,
    unit,
)

YUNET = ASSETS / "models" / "yunet_n_dynamic.onnx"
ULTRAFACE = ASSETS / "models" / "version-RFB-320.onnx"


@pytest.fixture(scope="module")
def pedestrian() -> np.ndarray:
    """A pedestrian near the camera in people.mp4 (frame 201), with others behind."""
    with av.open(str(ASSETS / "media" / "people.mp4")) as container:
        for seq, frame in enumerate(container.decode(video=0)):
            if seq == 201:
                return frame.to_ndarray(format="bgr24")[139:445, 477:798]
    raise AssertionError("people.mp4 is shorter than 202 frames")


@pytest.fixture(scope="module")
def faces_picture(pedestrian: np.ndarray) -> np.ndarray:
    """Its upper half: one clear face and two partly turned ones."""
    return cv2.resize(pedestrian[:161], (192, 96))


def joined_rows(model: Path, head: str, picture: np.ndarray, tensor: np.ndarray) -> np.ndarray:
    size = [picture.shape[1], picture.shape[0]]
    prepared = prepare(str(model), head, size, tempfile.mkdtemp())
    options = ort.SessionOptions()
    options.log_severity_level = 3  # UltraFace's initializers listed as inputs: a warning each
    session = ort.InferenceSession(prepared.path, options, providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["vapipe_joined"]
    return session.run(None, {session.get_inputs()[0].name: tensor})[0][0]


def test_yunet_boxes_scores_and_landmarks_equal_opencv_s_face_detector(
    faces_picture: np.ndarray,
) -> None:
    height, width = faces_picture.shape[:2]
    detector = cv2.FaceDetectorYN.create(str(YUNET), "", (width, height), 0.5, 0.3, 5000)
    _, expected = detector.detect(faces_picture)
    assert expected is not None and len(expected) >= 2
    tensor = faces_picture.astype(np.float32).transpose(2, 0, 1)[None]
    found = select(decode_yunet(joined_rows(YUNET, "yunet", faces_picture, tensor), width, height),
                   0.5, 0.3, 100)  # fmt: skip
    assert len(found.score) == len(expected)
    xyxy = expected[:, :4].copy()
    xyxy[:, 2:] += xyxy[:, :2]
    assert found.xyxy == pytest.approx(xyxy, abs=0.01)
    assert found.score == pytest.approx(expected[:, 14], abs=1e-4)
    assert found.landmarks is not None
    assert found.landmarks.reshape(len(expected), 10) == pytest.approx(expected[:, 4:14], abs=0.01)


def test_ultraface_finds_the_face_yunet_finds(pedestrian: np.ndarray) -> None:
    picture = cv2.resize(pedestrian, (320, 240))
    rgb = (picture[..., ::-1].astype(np.float32) - 127.0) / 128.0
    rows = joined_rows(ULTRAFACE, "ultraface", picture, rgb.transpose(2, 0, 1)[None].copy())
    found = select(decode_ultraface(rows, 320, 240), 0.9, 0.3, 5)
    taller = cv2.resize(pedestrian, (320, 256))  # YuNet: multiples of 32
    tensor = taller.astype(np.float32).transpose(2, 0, 1)[None]
    reference = select(decode_yunet(joined_rows(YUNET, "yunet", taller, tensor), 320, 256),
                       0.5, 0.3, 1)  # fmt: skip
    assert len(found.score) >= 1 and len(reference.score) == 1
    same_place = reference.xyxy[0] * np.array([1, 240 / 256] * 2)
    assert box_iou(found.xyxy[0], same_place[None])[0] > 0.5


def test_the_face_heads_show_in_the_output_names() -> None:
    assert head_of(output_names(str(YUNET)), None) == "yunet"
    assert head_of(output_names(str(ULTRAFACE)), None) == "ultraface"
    assert head_of(["output0"], None) is None
    assert head_of(["output0"], Family.YOLOV8) == "yolov8"


def test_a_model_without_the_head_s_outputs_is_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="lacks the yunet outputs") as caught:
        prepare(str(ULTRAFACE), "yunet", None, str(tmp_path))
    assert caught.value.key == "head"
    with pytest.raises(ConfigError, match="input_size") as caught:
        prepare(str(YUNET), None, None, str(tmp_path))
    assert caught.value.key == "input_size"


def test_scores_apply_softmax_or_sigmoid_or_keep_probabilities() -> None:
    logits = np.array([[2.0, 0.0, -1.0]], np.float32)
    soft = scores(logits, "auto")
    assert soft.sum() == pytest.approx(1.0) and soft.argmax() == 0
    assert soft[0, 0] == pytest.approx(np.exp(2) / (np.exp(2) + 1 + np.exp(-1)), rel=1e-5)
    probabilities = np.array([[0.7, 0.2, 0.1]], np.float32)
    assert scores(probabilities, "auto") == pytest.approx(probabilities)
    assert scores(logits, "sigmoid")[0, 1] == pytest.approx(0.5)
    assert scores(logits, "none") == pytest.approx(logits)


def test_unit_vectors_have_length_one_and_zero_stays_zero() -> None:
    vectors = unit(np.array([[3.0, 4.0], [0.0, 0.0]], np.float32))
    assert vectors == pytest.approx(np.array([[0.6, 0.8], [0.0, 0.0]]))
