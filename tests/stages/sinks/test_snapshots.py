"""The snapshots node: a picture of the frame and of the object per analytics event, the best
detection of the last second, written off the pipeline's thread, paths in the events."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import cv2
import numpy as np
import pydantic
import pytest

from tests.stages.sinks.config_bounds import assert_bounds
from tests.stages.sinks.event_view import written
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.media.files import Writer
from vapipe.stages.sinks.snapshots import (
    BestBoxes,
    SnapshotsConfig,
    SnapshotsSink,
    box_of,
    crop_picture,
    crop_window,
    overlap,
)

NAMES = ("person", "bicycle", "car")


def frame(seq: int, boxes: list[tuple[int, float, list[float]]], fps: float = 10) -> Frame:
    """``boxes``: (track id, score, xyxy); each drawn as a white block on grey."""
    image = np.full((360, 640, 3), 90, np.uint8)
    for _, _, (x1, y1, x2, y2) in boxes:
        image[int(y1) : int(y2), int(x1) : int(x2)] = 255
    dets = Detections(
        np.array([b for *_, b in boxes], np.float32).reshape(-1, 4),
        np.array([s for _, s, _ in boxes], np.float32),
        np.full(len(boxes), 2, np.int64),
        NAMES,
        np.array([t for t, _, _ in boxes], np.int64),
    )
    info = StreamInfo("cam", "x", 640, 360, None)
    return Frame("cam", seq, seq / fps, 1_796_000_000.0 + seq / fps, image, info, detections=dets)


def crossing(track_id: int | None = 7) -> dict[str, object]:
    return {"event": "line_cross", "track_id": track_id, "line": "road", "direction": "in"}


def sink(tmp_path: Path, **config: object) -> SnapshotsSink:
    node = SnapshotsSink("snaps", SnapshotsConfig.model_validate({"dir": str(tmp_path), **config}))
    node.open(None)  # type: ignore[arg-type]
    return node


def test_the_crop_window_pads_the_box_and_grows_to_the_minimum_inside_the_frame() -> None:
    assert crop_window((100, 100, 300, 200), 640, 360, 160, 0.1) == (80, 70, 320, 230)
    assert crop_window((100, 100, 300, 300), 640, 360, 160, 0.1) == (80, 80, 320, 320)
    # a small box grows about its centre to 160 a side
    assert crop_window((300, 150, 320, 170), 640, 360, 160, 0.0) == (230, 80, 390, 240)
    # at the frame's edge it is moved inside, not cut
    assert crop_window((0, 0, 20, 20), 640, 360, 160, 0.0) == (0, 0, 160, 160)
    assert crop_window((620, 340, 640, 360), 640, 360, 160, 0.0) == (480, 200, 640, 360)
    # never larger than the frame
    assert crop_window((0, 0, 600, 100), 200, 100, 160, 0.5) == (0, 0, 200, 100)


def test_a_crop_the_frame_cannot_fill_is_scaled_up_to_the_minimum() -> None:
    image = np.zeros((120, 200, 3), np.uint8)
    crop = crop_picture(image, (10, 10, 30, 30), 160, 0.0)
    assert min(crop.shape[:2]) == 160
    assert crop.shape[:2] == (160, 213)  # 160 x 120 of the frame, scaled by 4/3
    roomy = crop_picture(np.zeros((360, 640, 3), np.uint8), (10, 10, 30, 30), 160, 0.0)
    assert roomy.shape[:2] == (160, 160)


def test_the_best_box_is_the_best_score_within_the_window() -> None:
    best = BestBoxes(1.0)
    scores = [0.5, 0.9, 0.6, 0.7]
    for seq, score in enumerate(scores):
        best.update(frame(seq, [(7, score, [10 + seq, 10, 50, 50])]))
    seen = best.best(7)
    assert seen is not None and (seen.score, seen.frame.seq) == (pytest.approx(0.9), 1)
    # a later equal score takes over (the newer picture of as good a box)
    best.update(frame(4, [(7, 0.9, [20, 10, 50, 50])]))
    assert best.best(7).frame.seq == 4  # type: ignore[union-attr]
    # 1 s later the old best has left the window: the best of what is left
    best.update(frame(15, [(7, 0.3, [20, 10, 50, 50])]))
    assert best.best(7).frame.seq == 15  # type: ignore[union-attr]
    assert best.best(8) is None


def test_the_best_box_shows_the_object_where_the_event_was() -> None:
    best = BestBoxes(1.0)
    best.update(frame(0, [(7, 0.95, [0, 100, 80, 150])]))  # best, but far from the event
    best.update(frame(5, [(7, 0.6, [150, 100, 230, 150])]))
    best.update(frame(8, [(7, 0.5, [180, 100, 260, 150])]))
    assert best.best(7, (200, 100, 280, 150)).frame.seq == 5  # type: ignore[union-attr]
    assert best.best(7).frame.seq == 0  # type: ignore[union-attr]
    assert best.best(7, (230, 100, 300, 150)).frame.seq == 8  # type: ignore[union-attr] - 5 only touches
    assert best.best(7, (400, 100, 480, 150)) is None


def test_a_track_gone_for_the_window_is_forgotten_with_its_frames() -> None:
    best = BestBoxes(0.5)
    best.update(frame(0, [(7, 0.9, [10, 10, 50, 50]), (-1, 0.9, [60, 10, 90, 50])]))
    assert set(best.tracks) == {7}  # an untracked box is no one's picture
    best.update(frame(5, []))
    assert best.tracks == {7: best.tracks[7]}  # 0.5 s: still in the window
    best.update(frame(6, []))
    assert best.tracks == {}


def test_an_event_gets_a_picture_of_the_frame_and_one_of_its_object(tmp_path: Path) -> None:
    node = sink(tmp_path)
    first = frame(0, [(7, 0.95, [100, 100, 180, 150])])
    node.process(first)
    event = frame(3, [(7, 0.6, [130, 100, 210, 150])])
    event.events.append(crossing())
    node.process(event)
    node.close()
    record = written(event, 0)
    # the best of the last second is the first frame's box, not the event's
    assert record["snapshot_seq"] == 0
    assert record["snapshot_box"] == [100, 100, 180, 150]
    assert str(record["snapshot"]).startswith("snapshots/cam/2026-11-30/")
    picture = cv2.imread(str(tmp_path / str(record["snapshot"])))
    crop = cv2.imread(str(tmp_path / str(record["snapshot_crop"])))
    assert picture.shape == (360, 640, 3)
    # annotated: the box is drawn in a colour, where the frame was grey or white
    assert np.abs(picture.astype(int) - first.image.astype(int)).max() > 60
    window = crop_window((100, 100, 180, 150), 640, 360, 160, 0.15)
    assert crop.shape[:2] == (window[3] - window[1], window[2] - window[0])
    assert min(crop.shape[:2]) >= 160
    # the object is in the middle of its crop: white there, grey at the corners
    middle = crop[crop.shape[0] // 2, crop.shape[1] // 2]
    assert middle.min() > 200 and crop[2, 2].max() < 140
    assert node.stats() == {"written": 1, "dropped": 0, "failed": 0, "deleted": 0}


def test_guessed_boxes_are_never_the_picture(tmp_path: Path) -> None:
    node = sink(tmp_path)
    node.process(frame(0, [(7, 0.5, [100, 100, 180, 150])]))
    guessed = frame(1, [(7, 0.99, [300, 100, 380, 150])])
    guessed.predicted = True
    guessed.events.append(crossing())
    node.process(guessed)
    node.close()
    assert written(guessed, 0)["snapshot_seq"] == 0


def test_only_the_configured_event_types_get_pictures(tmp_path: Path) -> None:
    node = sink(tmp_path, event_types=["zone_enter"], crop=False)
    event = frame(0, [(7, 0.9, [100, 100, 180, 150])])
    event.events += [crossing(), {"event": "zone_enter", "track_id": 7, "zone": "z"}]
    node.process(event)
    node.close()
    assert "snapshot" not in written(event, 0)
    assert "snapshot" in written(event, 1) and "snapshot_crop" not in written(event, 1)
    assert len([p for p in tmp_path.rglob("*.jpg")]) == 1
    assert (node.stats()["written"], node.stats()["failed"]) == (1, 0)


def test_an_event_without_an_object_gets_the_frame_only(tmp_path: Path) -> None:
    node = sink(tmp_path, event_types=["zone_crowded"])
    event = frame(0, [(7, 0.9, [100, 100, 180, 150])])
    event.events.append({"event": "zone_crowded", "track_id": None, "zone": "z"})
    node.process(event)
    node.close()
    assert "snapshot" in written(event, 0) and "snapshot_crop" not in written(event, 0)


def test_a_full_queue_drops_the_picture_and_its_path(tmp_path: Path) -> None:
    node = sink(tmp_path, queue=1)
    release = threading.Event()
    started = threading.Event()
    write = node._write

    def slow(shot):  # type: ignore[no-untyped-def]
        started.set()
        release.wait()
        write(shot)

    node.writer.close()
    node.writer = Writer("snaps-writer", 1, slow)
    frames = []
    for seq in range(3):
        item = frame(seq, [(7, 0.9, [100, 100, 180, 150])])
        item.events.append(crossing())
        node.process(item)
        frames.append(item)
        if seq == 0:
            assert started.wait(10)
    release.set()
    node.close()
    # one being written, one waiting, the third refused: no path to a file that never comes
    assert ["snapshot" in written(f, 0) for f in frames] == [True, True, False]
    assert node.stats()["dropped"] == 1
    assert node.stats()["written"] == 2


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("event_types", ["line_crossing"], "'line_crossing' is not an analytics event"),
        ("path", "../elsewhere/{source_id}", "must be a folder inside dir"),
        ("path", "/abs/{source_id}", "must be a folder inside dir"),
        ("path", "{camera}", "only {source_id} and {date} are known"),
    ],
)
def test_bad_keys_are_refused_in_one_line(key: str, value: object, said: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=re.escape(said)):
        SnapshotsConfig.model_validate({key: value})


def test_crop_window_edges() -> None:
    # a box of no size still gets a window of its padding around a pixel
    assert crop_window((100, 100, 100, 100), 640, 360, 1, 0.5) == (99, 99, 101, 101)
    # centred exactly on an odd-sized box (no rounding of the centre first)
    assert crop_window((101, 101, 150, 150), 640, 360, 10, 0.0) == (101, 101, 150, 150)


def test_a_narrow_frame_scales_the_crop_by_its_short_side() -> None:
    tall = np.zeros((400, 100, 3), np.uint8)
    assert crop_picture(tall, (40, 190, 60, 210), 160, 0.0).shape[:2] == (256, 160)


def test_overlap_needs_area_on_both_axes() -> None:
    assert overlap((0, 0, 10, 10), (5, 5, 15, 15))
    assert not overlap((0, 0, 10, 10), (0, 10, 10, 20))  # touching below
    assert not overlap((0, 0, 10, 10), (10, 0, 20, 10))  # touching at the side
    assert not overlap((0, 0, 10, 10), (20, 0, 30, 10))
    assert not overlap((20, 0, 30, 10), (0, 0, 10, 10))
    assert not overlap((0, 20, 10, 30), (0, 0, 10, 10))


def test_box_of_finds_the_tracks_own_box() -> None:
    item = frame(
        0, [(3, 0.9, [1, 1, 5, 5]), (7, 0.8, [10, 10, 20, 20]), (7, 0.7, [30, 30, 40, 40])]
    )
    assert box_of(item, 7) == (10, 10, 20, 20)  # the first of a repeated id
    assert box_of(item, 3) == (1, 1, 5, 5)
    assert box_of(item, 9) is None
    untracked = frame(0, [(3, 0.9, [1, 1, 5, 5])])
    untracked.detections = untracked.detections.replace(track_id=None)  # type: ignore[union-attr]
    assert box_of(untracked, 3) is None
    untracked.detections = None
    assert box_of(untracked, 3) is None


def test_untracked_frames_and_track_zero_in_the_best_boxes() -> None:
    best = BestBoxes(1.0)
    plain = frame(0, [(3, 0.9, [1, 1, 5, 5])])
    plain.detections = plain.detections.replace(track_id=None)  # type: ignore[union-attr]
    best.update(plain)
    nothing = frame(1, [])
    nothing.detections = None
    best.update(nothing)
    assert best.tracks == {}
    best.update(frame(2, [(0, 0.5, [1, 1, 5, 5])]))  # 0 is an id; -1 is "untracked"
    assert set(best.tracks) == {0}


def test_the_box_in_the_event_is_rounded_to_hundredths(tmp_path: Path) -> None:
    node = sink(tmp_path)
    event = frame(0, [(7, 0.9, [100.123, 100.456, 180.789, 150.001])])
    event.events.append(crossing())
    node.process(event)
    node.close()
    assert written(event, 0)["snapshot_box"] == [100.12, 100.46, 180.79, 150.0]


def test_snapshots_is_a_registered_type() -> None:
    from vapipe.pipeline.registry import lookup

    assert lookup("snapshots") is SnapshotsSink


@pytest.mark.parametrize(
    ("key", "default", "good", "bad"),
    [("crop_min_px", 160, [16, 4096], [15, 4097]), ("crop_pad", 0.15, [0, 2], [-0.01, 2.01]),
     ("best_of_s", 1.0, [0, 30], [-0.01, 30.01]), ("quality", 85, [10, 100], [9, 101])],
)  # fmt: skip
def test_snapshot_keys_defaults_and_bounds(
    key: str, default: float, good: list[float], bad: list[float]
) -> None:
    assert getattr(SnapshotsConfig(), key) == default
    assert_bounds(SnapshotsConfig, key, good, bad)
