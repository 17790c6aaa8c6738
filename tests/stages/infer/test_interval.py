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


def test_interval_and_interval_s_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="interval or interval_s, not both"):
        InferConfig(model="m.onnx", interval=2, interval_s=0.5)
    assert InferConfig(model="m.onnx", interval=2).interval == 2
    with pytest.raises(ValueError):
        InferConfig(model="m.onnx", interval=-1)
