"""The rules of a node on tracked objects, at the node (stages/objects/stage.py), on a small
classifier built here (light or dark crops): which objects of a frame it tries (tracked, of
its classes, big enough, away from the frame's edge, not on a guessed frame, under the rate
cap), how many attempts a round takes and when a result holds, when a round starts again (a
box grown, ``reinfer_s``), and that one model call takes a whole batch's crops."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.object_models import brightness_classifier
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.object_results import Label
from vapipe.stages.objects.classify import ClassifyStage
from vapipe.stages.objects.config import ClassifyConfig

INFO = StreamInfo("cam", "x.mp4", 160, 120, Fraction(25))
LIGHT, DARK = 230, 20
INSIDE = [20.0, 20.0, 60.0, 60.0]  # well inside the 160 x 120 frame, 40 px wide


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return brightness_classifier(tmp_path_factory.mktemp("m") / "brightness.onnx")


def node(model: Path, **keys: Any) -> ClassifyStage:
    keys = {"attempts": 3, "min_attempts": 2, "retry_s": 0.0, "grow": None, **keys}
    stage = ClassifyStage("kind", ClassifyConfig(model=str(model), crops="numpy", **keys))
    stage.loaded_model()
    return stage


def frame(
    seq: int,
    boxes: list[list[float]],
    grey: int = LIGHT,
    tracks: list[int] | None = None,
    classes: list[int] | None = None,
    predicted: bool = False,
) -> Frame:
    count = len(boxes)
    dets = Detections(
        np.array(boxes, np.float32).reshape(count, 4), np.full(count, 0.9, np.float32),
        np.array(classes or [0] * count, np.int32), ("car", "person"),
        np.array(tracks or list(range(1, count + 1)), np.int64),
    )  # fmt: skip
    image = np.full((120, 160, 3), grey, np.uint8)
    return Frame("cam", seq, seq / 25, 0.0, image, INFO, detections=dets, predicted=predicted)


def label_of(item: Frame, index: int = 0) -> Label | None:
    held = item.detections.attributes if item.detections is not None else None
    value = held[index].get("kind") if held is not None else None
    assert value is None or isinstance(value, Label)
    return value


def test_a_round_takes_min_attempts_and_holds_then_no_more_calls(model: Path) -> None:
    stage = node(model)
    done = [stage.process_batch([frame(seq, [INSIDE])])[0] for seq in range(6)]
    assert [label_of(f) is not None for f in done] == [False, True, True, True, True, True]
    held = label_of(done[-1])
    assert held is not None and held.label == "light" and held.score > 0.5
    assert stage.counts["crops"] == 2 and stage.counts["results"] == 1
    assert stage.counts["model_calls"] == 2  # a call per batch with crops in it


def test_one_call_takes_the_crops_of_a_whole_batch(model: Path) -> None:
    stage = node(model, max_batch=8)
    frames = [frame(seq, [INSIDE, [80, 20, 120, 60]]) for seq in range(2)]
    stage.process_batch(frames)
    assert stage.counts["crops"] == 4 and stage.counts["model_calls"] == 1


def test_objects_too_small_at_the_edge_of_other_classes_or_untracked_are_not_tried(
    model: Path,
) -> None:
    stage = node(model, on_classes=["car"], min_size=16)
    boxes = [INSIDE, [70, 20, 80, 30], [0, 30, 40, 70], [90, 20, 130, 60], [20, 70, 60, 110]]
    stage.process_batch([frame(0, boxes, tracks=[1, 2, 3, 4, -1], classes=[0, 0, 0, 1, 0])])
    assert stage.counts["crops"] == 1  # only the first
    assert stage.counts["too_small"] == 1 and stage.counts["at_edge"] == 1
    edge_ok = node(model, skip_at_edge=False)
    edge_ok.process_batch([frame(0, [[0, 30, 40, 70]])])
    assert edge_ok.counts["crops"] == 1 and edge_ok.counts["at_edge"] == 0


def test_a_guessed_frame_gets_no_attempt_but_keeps_the_held_result(model: Path) -> None:
    stage = node(model, min_attempts=1, attempts=1)
    stage.process_batch([frame(0, [INSIDE])])
    guessed = stage.process_batch([frame(1, [INSIDE], predicted=True)])[0]
    assert stage.counts["crops"] == 1
    held = label_of(guessed)
    assert held is not None and held.label == "light"


def test_the_rate_cap_defers_what_is_over_it(model: Path) -> None:
    stage = node(model, max_crops_per_s=1.0, min_attempts=1, attempts=1)
    stage.process_batch([frame(0, [INSIDE, [80, 20, 120, 60], [20, 62, 60, 102]])])
    assert stage.counts["crops"] == 1 and stage.counts["deferred"] == 2


def test_a_grown_box_or_reinfer_s_starts_a_round_and_a_new_look_can_change_the_label(
    model: Path,
) -> None:
    stage = node(model, min_attempts=1, attempts=1, grow=1.5)
    stage.process_batch([frame(0, [INSIDE], LIGHT)])
    same = stage.process_batch([frame(1, [INSIDE], DARK)])[0]
    held = label_of(same)
    assert stage.counts["crops"] == 1 and held is not None and held.label == "light"
    bigger = stage.process_batch([frame(2, [[10, 10, 70, 70]], DARK)])[0]  # 2.25 x the area
    held = label_of(bigger)
    assert stage.counts["crops"] == 2 and held is not None and held.label == "dark"
    timed = node(model, min_attempts=1, attempts=1, reinfer_s=1.0)
    timed.process_batch([frame(0, [INSIDE], LIGHT)])
    timed.process_batch([frame(10, [INSIDE], DARK)])  # 0.4 s later: the round has ended
    assert timed.counts["crops"] == 1
    again = timed.process_batch([frame(25, [INSIDE], DARK)])[0]  # 1.0 s after it began
    held = label_of(again)
    assert timed.counts["crops"] == 2 and held is not None and held.label == "dark"


def test_attempts_that_do_not_agree_hold_nothing_and_the_round_ends(model: Path) -> None:
    stage = node(model, attempts=2, min_attempts=2, agree=1.0)
    stage.process_batch([frame(0, [INSIDE], LIGHT)])
    done = stage.process_batch([frame(1, [INSIDE], DARK)])[0]
    assert label_of(done) is None and stage.counts["results"] == 0
    stage.process_batch([frame(2, [INSIDE], LIGHT)])
    assert stage.counts["crops"] == 2  # out of attempts: no third call this round
