"""``infer.interval`` and ``interval_s``: which frames the detector sees."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.infer.interval import DetectionSchedule
from vapipe.stages.infer.stage import InferConfig


def frame(source: str, seq: int, pts: float | None = None) -> Frame:
    info = StreamInfo(source, "x", 8, 8, None)
    return Frame(source, seq, seq / 25 if pts is None else pts, 0.0, np.zeros((8, 8, 3)), info)


def test_each_source_detects_one_frame_in_n_staggered() -> None:
    schedule = DetectionSchedule(3, None)
    due = {s: [seq for seq in range(12) if schedule.due(frame(s, seq))] for s in "abc"}
    assert due == {"a": [0, 3, 6, 9], "b": [2, 5, 8, 11], "c": [1, 4, 7, 10]}
    # A batch of the three sources' frame n holds one frame to detect, whatever n is.
    for seq in range(12, 18):
        assert sum(schedule.due(frame(s, seq)) for s in "abc") == 1
    assert (schedule.detected, schedule.skipped) == (18, 36)


@pytest.mark.parametrize("interval", [0, 1])
def test_zero_and_one_detect_every_frame(interval: int) -> None:
    schedule = DetectionSchedule(interval, None)
    assert all(schedule.due(frame(s, seq)) for s in "ab" for seq in range(5))


def test_interval_s_detects_once_per_so_much_stream_time() -> None:
    schedule = DetectionSchedule(0, 0.5)
    times = [0.0, 0.2, 0.4, 0.5, 0.9, 1.0, 1.2, 1.49, 1.5]
    assert [schedule.due(frame("a", i, t)) for i, t in enumerate(times)] == [
        True, False, False, True, False, True, False, False, True,
    ]  # fmt: skip
    assert schedule.due(frame("b", 0, 7.0))  # each source on its own clock
    assert schedule.due(frame("a", 20, 0.1))  # a stream that starts again: detected at once


def test_a_removed_source_is_forgotten() -> None:
    schedule = DetectionSchedule(2, None)
    assert schedule.due(frame("a", 0)) and not schedule.due(frame("b", 0))
    schedule.forget("a")
    schedule.forget("b")
    assert schedule.due(frame("b", 0))  # it starts over, first in the stagger


@pytest.mark.parametrize(
    ("interval", "interval_s", "active"),
    [(0, None, False), (1, None, False), (2, None, True), (0, 0.2, True)],
)
def test_the_schedule_is_active_only_when_it_skips_something(
    interval: int, interval_s: float | None, active: bool
) -> None:
    assert DetectionSchedule(interval, interval_s).active is active


def test_the_stagger_gives_each_of_n_sources_its_own_phase() -> None:
    schedule = DetectionSchedule(4, None)
    due = {s: [seq for seq in range(8) if schedule.due(frame(s, seq))] for s in "abcde"}
    # The k-th source detects where (seq + k) % 4 == 0; the fifth starts the cycle again.
    assert due == {"a": [0, 4], "b": [3, 7], "c": [2, 6], "d": [1, 5], "e": [0, 4]}


def test_interval_s_counts_from_the_last_detection_to_the_microsecond() -> None:
    schedule = DetectionSchedule(0, 0.2)
    assert schedule.due(frame("a", 0, 0.0))
    assert not schedule.due(frame("a", 1, 0.0))  # the same time again: not a new stream
    assert not schedule.due(frame("a", 2, 0.2 - 3e-6))
    assert schedule.due(frame("a", 3, 0.2 - 1e-6))  # rounding of pts forgiven


def test_interval_and_interval_s_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="interval or interval_s, not both"):
        InferConfig(model="m.onnx", interval=2, interval_s=0.5)
    assert InferConfig(model="m.onnx", interval=2).interval == 2
    with pytest.raises(ValueError):
        InferConfig(model="m.onnx", interval=-1)


def _pre_and_det(interval_s: float | None = None, interval: int = 0, **pre: object) -> tuple:
    from tests.conftest import asset
    from vapipe.pipeline.stage import StageContext
    from vapipe.stages.infer.stage import InferStage
    from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage

    config = InferConfig.model_validate({
        "model": str(asset("models", "yolox_nano.onnx")), "interval": interval,
        "interval_s": interval_s, "max_batch": 4,
        "backend": {"type": "onnxruntime", "providers": "cpu"},
    })  # fmt: skip
    det = InferStage("det", config)
    det.open(StageContext("det"))
    stage = PreprocessStage("pre", PreprocessConfig.model_validate(pre))
    stage.bind(det.model)
    stage.open(StageContext("pre"))
    return stage, det


def picture_frame(source: str, seq: int) -> Frame:
    image = np.full((90, 160, 3), 90, np.uint8)
    return Frame(source, seq, seq / 25, 0.0, image, StreamInfo(source, "x", 160, 90, 25.0))


@pytest.mark.parametrize(("interval", "interval_s"), [(3, None), (0, 0.1)])
def test_frames_the_detector_skips_get_no_tensor_and_are_asked_once(
    interval: int, interval_s: float | None
) -> None:
    _skips_without_tensors("numpy", interval, interval_s)


@pytest.mark.opencl
def test_opencl_preprocessing_skips_them_too_and_keeps_the_order() -> None:
    _skips_without_tensors("opencl", 3, None)


def _skips_without_tensors(backend: str, interval: int, interval_s: float | None) -> None:
    pre, det = _pre_and_det(interval=interval, interval_s=interval_s, backend=backend)
    assert pre.schedule is det.schedule
    frames = [picture_frame(s, seq) for seq in range(9) for s in "ab"]
    passed: list[Frame] = []
    for start in range(0, len(frames), 4):
        passed += pre.process_batch(frames[start : start + 4])
    passed += pre.flush()
    assert passed == frames
    for start in range(0, len(passed), 4):
        det.process_batch(passed[start : start + 4])
    detected = [f for f in frames if not f.predicted]
    # interval 3: frames 0, 3, 6 of one source and 2, 5, 8 of the other; interval_s 0.1 at
    # 25 fps: every 3rd frame of each (0.12 s apart) as well.
    assert len(detected) == 6 and {f.source_id for f in detected} == {"a", "b"}
    assert all(f.tensor is not None and f.detections is not None for f in detected)
    assert all(f.tensor is None and f.detections is None for f in frames if f.predicted)
    assert (det.schedule.detected, det.schedule.skipped) == (6, 12)  # once per frame
    assert not any(f.scheduled for f in frames)  # the mark is taken off by the infer node


def test_without_an_interval_every_frame_gets_a_tensor_but_a_still_one() -> None:
    pre, det = _pre_and_det()
    assert pre.schedule is None
    frames = [picture_frame("a", seq) for seq in range(4)]
    frames[2].predicted = True  # as a motion node flags a still frame
    det.process_batch(pre.process_batch(frames))
    assert [f.tensor is not None for f in frames] == [True, True, False, True]
    assert [f.detections is not None for f in frames] == [True, True, False, True]
