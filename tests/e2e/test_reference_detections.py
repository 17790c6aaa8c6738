"""Each model family's detections against a reference computed without our preprocessing,
decoding or NMS: the letterbox, colour order and scaling of YOLOX's and Ultralytics' own
demos, onnxruntime called directly, OpenCV's class-aware NMS. A swapped colour order, a
wrong scale or an off-by-one pad moves scores by far more than the tolerance here."""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np
import onnxruntime as ort
import pytest

from tests.conftest import asset
from tests.e2e.helpers import FILE_CONFIG, cli, read_events

CONF, IOU = 0.3, 0.45
SCORE_TOLERANCE = 2e-3
BOX_TOLERANCE_PX = 0.5


def yolox_reference(session: ort.InferenceSession, image: np.ndarray) -> list[tuple]:
    """YOLOX's demo: top-left letterbox, truncated size, pad 114, BGR, 0-255, grid decode."""
    height, width = image.shape[:2]
    ratio = min(416 / height, 416 / width)
    resized = cv2.resize(image, (int(width * ratio), int(height * ratio)))
    padded = np.full((416, 416, 3), 114, np.uint8)
    padded[: resized.shape[0], : resized.shape[1]] = resized
    tensor = padded.transpose(2, 0, 1)[None].astype(np.float32)
    out = session.run(None, {session.get_inputs()[0].name: tensor})[0][0]
    grids, strides = [], []
    for stride in (8, 16, 32):
        ys, xs = np.meshgrid(np.arange(416 // stride), np.arange(416 // stride), indexing="ij")
        grids.append(np.stack((xs, ys), -1).reshape(-1, 2))
        strides.append(np.full((grids[-1].shape[0], 1), stride))
    grid, stride = np.concatenate(grids), np.concatenate(strides)
    centre = (out[:, :2] + grid) * stride
    size = np.exp(out[:, 2:4]) * stride
    scores = out[:, 4:5] * out[:, 5:]
    boxes = np.concatenate((centre - size / 2, centre + size / 2), 1) / ratio
    return suppress(boxes, scores, width, height)


def ultralytics_reference(session: ort.InferenceSession, image: np.ndarray) -> list[tuple]:
    """Ultralytics' LetterBox: centred, rounded size, pad split round(d -/+ 0.1), RGB, 0-1."""
    height, width = image.shape[:2]
    ratio = min(640 / height, 640 / width)
    new_w, new_h = round(width * ratio), round(height * ratio)
    dw, dh = (640 - new_w) / 2, (640 - new_h) / 2
    resized = cv2.resize(image, (new_w, new_h)) if (new_w, new_h) != (width, height) else image
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    padded = cv2.copyMakeBorder(
        resized, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114)
    )
    tensor = (padded[:, :, ::-1].transpose(2, 0, 1)[None] / 255.0).astype(np.float32)
    out = session.run(None, {session.get_inputs()[0].name: tensor})[0][0].T
    centre, size = out[:, :2], out[:, 2:4]
    boxes = np.concatenate((centre - size / 2, centre + size / 2), 1)
    boxes = (boxes - [left, top, left, top]) / ratio
    return suppress(boxes, out[:, 4:], width, height)


def suppress(boxes: np.ndarray, scores: np.ndarray, width: int, height: int) -> list[tuple]:
    class_ids = scores.argmax(1)
    best = scores.max(1)
    xywh = np.concatenate((boxes[:, :2], boxes[:, 2:] - boxes[:, :2]), 1)
    keep = cv2.dnn.NMSBoxesBatched(xywh.tolist(), best.tolist(), class_ids.tolist(), CONF, IOU)
    found = []
    for index in np.asarray(keep, int).reshape(-1):
        x1, y1, x2, y2 = boxes[index]
        clipped = (
            min(max(x1, 0), width), min(max(y1, 0), height),
            min(max(x2, 0), width), min(max(y2, 0), height),
        )  # fmt: skip
        found.append((int(class_ids[index]), float(best[index]), clipped))
    return found


def frames_of(path: Path, count: int) -> list[np.ndarray]:
    """The clip's first frames as BGR, in the colour definition vapipe uses on every path:
    the decoded I420 planes through OpenCV's BT.601 conversion (not swscale's, whose integer
    rounding differs by a level or two and moves scores past the tolerance)."""
    with av.open(str(path)) as container:
        images = []
        for frame in container.decode(video=0):
            if frame.format.name == "yuv420p":
                images.append(cv2.cvtColor(frame.to_ndarray(), cv2.COLOR_YUV2BGR_I420))
            else:  # dog.jpg: a full-range JPEG, converted by swscale as the source does
                images.append(frame.to_ndarray(format="bgr24"))
            if len(images) == count:
                break
        return images


def assert_match(reference: list[tuple], events: list[dict], where: str) -> None:
    """Every clear reference detection (score well above conf) is in the pipeline's output
    with the same class, the same score within 2e-3 and the same box within half a pixel,
    and the pipeline has no clear detection the reference lacks."""
    clear = [r for r in reference if r[1] >= CONF + 0.02]
    got = [d for d in events if d["score"] >= CONF + 0.02]
    assert clear, f"{where}: the reference found nothing to compare"
    assert len(got) == len(clear), f"{where}: {len(got)} detections, reference {len(clear)}"
    for class_id, score, box in clear:
        matches = [
            d
            for d in events
            if d["class_id"] == class_id
            and abs(d["score"] - score) <= SCORE_TOLERANCE
            and np.abs(np.array(d["xyxy"]) - box).max() <= BOX_TOLERANCE_PX
        ]
        assert matches, (
            f"{where}: reference class {class_id} score {score:.4f} box "
            f"{np.round(box, 2).tolist()} not found in {events}"
        )


@pytest.mark.parametrize(
    ("model", "file", "reference"),
    [
        ("yolox-nano", "yolox_nano.onnx", yolox_reference),
        ("yolov8n", "yolov8n.onnx", ultralytics_reference),
    ],
)
@pytest.mark.parametrize(("media", "frames"), [("dog", 1), ("people", 4), ("traffic", 4)])
def test_detections_match_an_independent_reference(
    tmp_path: Path, model: str, file: str, reference: object, media: str, frames: int
) -> None:
    clip = asset("media", "dog.jpg" if media == "dog" else f"{media}.mp4")
    result = cli(
        str(FILE_CONFIG),
        "--set", f"cam.uri=sample:{media}",
        "--set", f"det.model={model}",
        "--set", f"nms.conf={CONF}",
        "--set", f"nms.iou={IOU}",
        "--set", "video.path=out/v.mp4",
        "--max-frames", str(frames),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = [e for e in read_events(tmp_path / "out" / "events.jsonl") if e["event"] == "frame"]
    assert len(events) == frames
    session = ort.InferenceSession(str(asset("models", file)), providers=["CPUExecutionProvider"])
    for index, image in enumerate(frames_of(clip, frames)):
        expected = reference(session, image)  # type: ignore[operator]
        assert_match(expected, events[index]["detections"], f"{model} {media} frame {index}")
