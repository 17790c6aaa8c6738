"""NMS against a brute-force reference, and the nms stage's filtering and mapping back."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.model_input import letterbox_for
from vapipe.stages.nms import NmsConfig, NmsStage, nms, nms_numpy, nms_opencv


def brute_force_nms(
    boxes: np.ndarray, scores: np.ndarray, iou: float, class_ids: np.ndarray | None
) -> list[int]:
    """Plain loops over pairs: the definition, with no vectorising."""
    order = sorted(range(len(boxes)), key=lambda i: (-scores[i], i))
    suppressed = [False] * len(boxes)
    keep = []
    for position, i in enumerate(order):
        if suppressed[i]:
            continue
        keep.append(i)
        for j in order[position + 1 :]:
            if class_ids is not None and class_ids[i] != class_ids[j]:
                continue
            ax1, ay1, ax2, ay2 = boxes[i]
            bx1, by1, bx2, by2 = boxes[j]
            inter = max(0.0, min(ax2, bx2) - max(ax1, bx1)) * max(
                0.0, min(ay2, by2) - max(ay1, by1)
            )
            union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
            if union > 0 and inter / union > iou:
                suppressed[j] = True
    return keep


def random_boxes(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    centres = rng.uniform(0, 200, (count, 2))
    sizes = rng.uniform(5, 60, (count, 2))
    boxes = np.concatenate((centres - sizes / 2, centres + sizes / 2), axis=1).astype(np.float32)
    return boxes, rng.random(count).astype(np.float32), rng.integers(0, 3, count)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("iou", [0.3, 0.5, 0.7])
@pytest.mark.parametrize("class_aware", [True, False])
def test_nms_matches_brute_force(seed: int, iou: float, class_aware: bool) -> None:
    boxes, scores, class_ids = random_boxes(np.random.default_rng(seed), 150)
    ids = class_ids if class_aware else None
    kept = nms(boxes, scores, iou, ids)
    assert kept.tolist() == brute_force_nms(boxes, scores, iou, ids)


def test_class_aware_keeps_overlapping_boxes_of_other_classes() -> None:
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    assert nms(boxes, scores, 0.5, np.array([0, 1])).tolist() == [0, 1]
    assert nms(boxes, scores, 0.5, np.array([0, 0])).tolist() == [0]
    assert nms(boxes, scores, 0.5, None).tolist() == [0]


def test_nms_stage_filters_and_maps_back_to_frame_pixels() -> None:
    stage = NmsStage("nms", NmsConfig(conf=0.5, iou=0.5, max_det=2))
    # A 200x100 frame in a 100x100 YOLOX input: scale 0.5, top-left, no padding offset.
    box = letterbox_for(200, 100, 100, 100, "top-left")
    found = Detections(
        xyxy=np.array(
            [[10, 10, 20, 20], [11, 11, 21, 21], [50, 20, 60, 40], [0, 0, 5, 5], [70, 10, 90, 30]],
            np.float32,
        ),
        score=np.array([0.9, 0.8, 0.7, 0.4, 0.6], np.float32),
        class_id=np.array([0, 0, 2, 0, 1], np.int32),
        names=("a", "b", "c"),
    )
    dets = stage.select(found, box)
    assert dets.score.tolist() == pytest.approx([0.9, 0.7]), "conf, NMS or max_det is off"
    assert dets.xyxy.tolist() == [[20, 20, 40, 40], [100, 40, 120, 80]]
    assert [r["class_name"] for r in dets.to_records()] == ["a", "c"]


def test_centered_letterbox_maps_back_and_clips() -> None:
    box = letterbox_for(800, 450, 640, 640, "center")
    assert (box.resized_w, box.resized_h, box.pad_x, box.pad_y) == (640, 360, 0, 140)
    mapped = box.to_frame(np.array([[0, 140, 320, 320], [-10, 100, 700, 700]], np.float32))
    assert mapped.tolist() == [[0, 0, 400, 225], [0, 0, 800, 450]]


@pytest.mark.parametrize("class_ids", [None, np.array([3, 3])])
def test_overlap_exactly_at_the_threshold_is_kept(class_ids: np.ndarray | None) -> None:
    # IoU of these two boxes is exactly 1/2 in binary floating point: only overlaps
    # strictly above the threshold suppress (the common definition: torchvision, OpenCV).
    boxes = np.array([[0, 0, 2, 1], [0, 0, 1, 1]], np.float32)
    scores = np.array([0.9, 0.8], np.float32)
    assert nms(boxes, scores, 0.5, class_ids).tolist() == [0, 1]
    assert nms(boxes, scores, 0.4999, class_ids).tolist() == [0]


def test_score_exactly_at_conf_is_kept() -> None:
    stage = NmsStage("nms", NmsConfig(conf=0.5))
    found = Detections(
        xyxy=np.array([[0, 0, 10, 10], [20, 20, 30, 30]], np.float32),
        score=np.array([0.5, np.nextafter(np.float32(0.5), np.float32(0))], np.float32),
        class_id=np.array([0, 0], np.int32),
    )
    assert stage.select(found, None).score.tolist() == [0.5]


def test_opencv_and_the_numpy_loop_keep_the_same_at_the_boundary() -> None:
    # IoU exactly 0.5 (areas 100 and 50, all of the smaller inside): kept at iou = 0.5,
    # suppressed just below; equal scores keep input order.
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5], [20, 20, 30, 30], [20, 20, 30, 30]], float)
    scores = np.array([0.9, 0.8, 0.7, 0.7])
    for iou in (0.5, 0.4999):
        for ids in (None, np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])):
            expected = brute_force_nms(boxes, scores, iou, ids)
            assert nms_opencv(boxes, scores, iou, ids).tolist() == expected, (iou, ids)
            assert nms_numpy(boxes, scores, iou, ids).tolist() == expected, (iou, ids)
    assert nms(boxes, scores, 0.5).tolist() == [0, 1, 2]
    # What OpenCV cannot take goes to the numpy loop, with the same answer as brute force.
    flat = np.array([[0, 0, 10, 0], [0, 0, 10, 10]], float)
    assert nms(flat, np.array([0.9, 0.8]), 0.5).tolist() == [0, 1]
    assert nms(boxes[:2], np.array([0.0, 0.8]), 0.5).tolist() == [1, 0]


@pytest.fixture(scope="module")
def candidates() -> list[tuple[str, Detections]]:
    """Raw head candidates (before NMS) of a few frames of each sample clip, both families."""
    from vapipe.quantize.calibration import open_model, take_frames

    found = []
    for model in ("yolox-nano", "yolov8n"):
        infer = open_model(model)
        try:
            for clip in ("people", "traffic", "horses"):
                for frame in take_frames(f"sample:{clip}", infer, 3, every=7).frames:
                    [done] = infer.process_batch([frame])
                    assert done.detections is not None
                    found.append((f"{model} {clip} {frame.seq}", done.detections))
        finally:
            infer.close()
    return found


@pytest.mark.parametrize("conf", [0.01, 0.25])
@pytest.mark.parametrize("iou", [0.45, 0.7])
def test_opencv_keeps_what_the_numpy_loop_keeps_on_the_sample_clips(
    candidates: list[tuple[str, Detections]], conf: float, iou: float
) -> None:
    compared = 0
    for where, found in candidates:
        chosen = found[np.flatnonzero(found.score >= conf)]
        for ids in (chosen.class_id, None):
            fast = nms_opencv(chosen.xyxy, chosen.score, iou, ids).tolist()
            assert fast == nms_numpy(chosen.xyxy, chosen.score, iou, ids).tolist(), where
            compared += len(chosen.score)
    assert compared > 1000, "too few boxes to compare"


# -- the class filter's check -------------------------------------------------------------

NAMES = ("person", "bicycle", "car")


def _frame(source: str, seq: int, classes: list[int], scores: list[float]) -> Frame:
    boxes = np.array([[10 * i, 0, 10 * i + 8, 8] for i in range(len(classes))], np.float32)
    found = Detections(
        boxes.reshape(-1, 4), np.array(scores, np.float32), np.array(classes, np.int32), NAMES
    )
    stream = StreamInfo(source, "test:", 64, 64, None)
    return Frame(
        source, seq, seq / 25, 0.0, np.zeros((64, 64, 3), np.uint8), stream, detections=found
    )


def _run(stage: NmsStage, frames: list[Frame]) -> int:
    return sum(len(stage.process(frame)[0].detections or ()) for frame in frames)


def test_a_filter_that_keeps_nothing_the_model_sees_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = NmsStage("vehicles", NmsConfig(conf=0.3, classes=[2]))
    frames = [
        _frame("cam", i, [0, 1] if i % 2 else [0], [0.9, 0.8][: 1 + i % 2]) for i in range(49)
    ]
    assert _run(stage, frames) == 0
    assert not caplog.records and stage.stats()["class_filter_empty"] == []  # 49: not yet
    assert _run(stage, [_frame("cam", i, [0], [0.9]) for i in range(49, 120)]) == 0
    (record,) = [r for r in caplog.records if "kept nothing" in r.message]
    assert record.levelname == "WARNING"
    assert record.message == (
        "vehicles: classes = [2] kept nothing of source 'cam' in its first 50 frames, where the "
        "model saw person (in 50), bicycle (in 24): are these the class ids for this footage "
        "and model?"
    )
    assert stage.stats()["class_filter_empty"] == ["cam"]


def test_a_filter_that_keeps_something_or_a_quiet_scene_is_not_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kept_once = NmsStage("nms", NmsConfig(conf=0.3, classes=[2]))
    frames = [_frame("a", i, [2 if i == 49 else 0], [0.9]) for i in range(60)]
    assert _run(kept_once, frames) == 1
    quiet = NmsStage("nms", NmsConfig(conf=0.3, classes=[2]))  # 4 frames see anything
    assert (
        _run(
            quiet, [_frame("b", i, [0] if i < 4 else [], [0.9] if i < 4 else []) for i in range(60)]
        )
        == 0
    )
    faint = NmsStage("nms", NmsConfig(conf=0.3, classes=[2]))  # below conf: not seen
    assert _run(faint, [_frame("c", i, [0], [0.29]) for i in range(60)]) == 0
    assert not [r for r in caplog.records if "kept nothing" in r.message]
    assert kept_once.stats()["class_filter_empty"] == quiet.stats()["class_filter_empty"] == []
    assert "class_filter_empty" not in NmsStage("nms", NmsConfig()).stats()


def test_five_busy_frames_are_enough_and_each_source_is_judged_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stage = NmsStage("nms", NmsConfig(conf=0.3, classes=[2]))
    frames = [_frame("busy", i, [0] if i < 5 else [], [0.9] if i < 5 else []) for i in range(50)]
    frames += [_frame("cars", i, [2], [0.9]) for i in range(50)]
    assert _run(stage, frames) == 50
    assert stage.stats()["class_filter_empty"] == ["busy"]
    assert len([r for r in caplog.records if "kept nothing" in r.message]) == 1


def test_the_warning_names_the_three_classes_seen_most_and_counts_a_score_at_conf(
    caplog: pytest.LogCaptureFixture,
) -> None:
    names = ("person", "bicycle", "car", "dog", "cat")
    stage = NmsStage("nms", NmsConfig(conf=0.5, classes=[2]))
    for seq in range(50):
        classes = [0, 1, 3, 4][: 4 - seq % 4]
        found = Detections(
            np.array([[10 * i, 0, 10 * i + 8, 8] for i in range(len(classes))], np.float32),
            np.array([0.5] + [0.9] * (len(classes) - 1), np.float32),
            np.array(classes, np.int32),
            names,
        )
        stream = StreamInfo("cam", "test:", 64, 64, None)
        stage.process(Frame("cam", seq, seq / 25, 0.0, np.zeros((64, 64, 3), np.uint8), stream,
                            detections=found))  # fmt: skip
    (record,) = [r for r in caplog.records if "kept nothing" in r.message]
    assert "model saw person (in 50), bicycle (in 38), dog (in 26): are" in record.message


def test_without_a_class_filter_nothing_is_checked() -> None:
    stage = NmsStage("nms", NmsConfig(conf=0.3))
    kept = _run(stage, [_frame("cam", i, [0], [0.9]) for i in range(60)])
    assert kept == 60 and stage.stats() == {"non_finite": 0}


def test_the_node_takes_the_frames_waiting_each_worker_a_share() -> None:
    assert NmsStage("nms", NmsConfig()).max_batch == 64
    assert NmsStage("nms", NmsConfig(workers=4)).max_batch == 16
    assert NmsStage("nms", NmsConfig(workers=64)).max_batch == 1
    assert NmsStage.batch_timeout_s == 0  # never waits for more than is there
    stage = NmsStage("nms", NmsConfig(conf=0.5))
    info = StreamInfo("cam", "x", 200, 100, None)
    frames = [Frame("cam", seq, seq / 10, 0.0, None, info) for seq in range(3)]  # type: ignore[arg-type] - no pixels read
    frames[0].detections = Detections(
        np.array([[10, 10, 20, 20], [0, 0, 5, 5]], np.float32),
        np.array([0.9, 0.4], np.float32),
        np.zeros(2, np.int32),
    )
    frames[0].letterbox = letterbox_for(200, 100, 100, 100, "top-left")
    frames[1].predicted = True  # skipped by infer.interval: passed on as it is
    frames[2].detections = Detections.empty()
    assert stage.process_batch(frames) == frames
    assert frames[0].detections is not None and frames[0].detections.xyxy.tolist() == [
        [20, 20, 40, 40]
    ]
    assert frames[1].detections is None and frames[2].detections is not None
    frames[1].predicted = False
    with pytest.raises(Exception, match="no detections: link an infer node"):
        stage.process_batch([frames[1]])
