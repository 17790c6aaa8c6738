"""Looks as well as motion (``track.appearance``): on synthetic boxes and vectors, two people
crossing keep their ids where overlap alone swaps them (by rank, and by the gate), someone
walking in where another walked out is a new track, a pair without vectors is matched by
motion alone, and a track's look is the running mean of its vectors. Then the node itself:
what it embeds, that it keeps the pixels, and the real re-id model on people.mp4."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ASSETS
from tests.e2e.helpers import cli
from tests.stages.track.test_bytetrack import box_at
from tests.stages.track.test_species import PERSON, seen
from vapipe.pipeline.detections import Detections
from vapipe.stages.crops.warp import Normalise
from vapipe.stages.track.appearance import AppearanceTracker, Embedder, unit
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import AppearanceConfig, TrackConfig
from vapipe.stages.track.stage import TrackStage

A, B = np.eye(4, dtype=np.float32)[:2]
"""Two people who look nothing alike (cosine similarity 0)."""


def config(**looks: float) -> TrackConfig:
    return TrackConfig(appearance=AppearanceConfig(**looks))


def run(tracker: ByteTracker, frames: list[tuple[Detections, np.ndarray | None]]) -> list:
    """Track ids per frame; each frame's vectors go to an appearance tracker first."""
    out = []
    for index, (dets, vectors) in enumerate(frames):
        if isinstance(tracker, AppearanceTracker):
            tracker.found = vectors
        tracked = tracker.update(dets, index / 25)
        assert tracked.track_id is not None
        out.append(tracked.track_id.tolist())
    return out


def crossing(first: float, second: float) -> list[tuple[Detections, np.ndarray | None]]:
    """Person A standing at x = 100 and person B at x = 120 (overlapping) for ten frames;
    then they step past each other: B's look at x = ``first``, A's at x = ``second``. By
    overlap with where each stood, A is nearer the box of B's look."""
    still = [(seen([box_at(100, 100), box_at(120, 100)], [PERSON] * 2), np.stack([A, B]))] * 10
    stepped = seen([box_at(first, 100), box_at(second, 100)], [PERSON] * 2)
    return [*still, (stepped, np.stack([B, A]))]


def test_looks_rank_near_candidates_where_overlap_alone_swaps_two_people() -> None:
    # IoU with A's box: 0.67 (B's look), 0.54 (A's look); with B's box 0.54 and 0.67.
    frames = crossing(108, 112)
    assert run(ByteTracker(TrackConfig()), frames)[-1] == [1, 2], "motion alone: swapped"
    assert run(AppearanceTracker(config(reject=-1)), frames)[-1] == [2, 1]
    # Both looks now only partly like before (cosine 0.78): they rank above ``match`` 0.7,
    # not above 0.9, where overlap decides again.
    other = np.eye(4, dtype=np.float32)[2:]
    changed = unit(np.stack([B, A]) + 0.8 * other)
    partly = [*frames[:-1], (frames[-1][0], changed)]
    assert run(AppearanceTracker(config(reject=-1, match=0.7)), partly)[-1] == [2, 1]
    assert run(AppearanceTracker(config(reject=-1, match=0.9)), partly)[-1] == [1, 2]


def test_looks_count_only_for_pairs_that_overlap_proximity() -> None:
    # A's look at x = 116 overlaps A's box 0.43: under proximity 0.5, looks do not rank it.
    frames = crossing(108, 116)
    assert run(AppearanceTracker(config(reject=-1)), frames)[-1] == [1, 2]
    assert run(AppearanceTracker(config(reject=-1, proximity=0.4)), frames)[-1] == [2, 1]


def test_the_gate_refuses_a_pair_that_looks_unlike_whatever_its_overlap() -> None:
    frames = crossing(108, 116)  # too far for the rank: the gate alone sets them right
    assert run(AppearanceTracker(config(reject=0.5)), frames)[-1] == [2, 1]


def walks_in(look: np.ndarray) -> list[tuple[Detections, np.ndarray | None]]:
    """A stands at x = 200 for ten frames, is hidden for three, then someone of ``look``
    stands where A stood."""
    box = box_at(200, 100, 60, 120)
    there = [(seen([box], [PERSON]), A[None])] * 10
    hidden = [(Detections.empty(seen([], []).names), None)] * 3
    return there + hidden + [(seen([box], [PERSON]), look[None])] * 2


def test_someone_else_where_a_person_stood_is_a_new_track_the_same_person_is_not() -> None:
    assert run(ByteTracker(TrackConfig()), walks_in(B))[-1] == [1], "motion alone: one id"
    assert run(AppearanceTracker(config()), walks_in(B))[-1] == [2]
    assert run(AppearanceTracker(config()), walks_in(A))[-1] == [1]
    assert run(AppearanceTracker(config(reject=-1)), walks_in(B))[-1] == [1]


def test_without_vectors_it_tracks_as_motion_alone_does() -> None:
    frames = crossing(108, 112)
    blind = [(dets, None) for dets, _ in frames]
    assert run(AppearanceTracker(config()), blind) == run(ByteTracker(TrackConfig()), frames)
    # Vectors on one side only (a track born without one): motion decides.
    half = [(d, None if k < 10 else v) for k, (d, v) in enumerate(frames)]
    assert run(AppearanceTracker(config(reject=-1)), half)[-1] == [1, 2]


def test_a_tracks_look_is_the_running_mean_of_its_vectors() -> None:
    tracker = AppearanceTracker(config(smoothing=0.8))
    box = box_at(200, 100, 60, 120)
    first, then = unit(np.array([[1.0, 0, 0, 0]])), unit(np.array([[0.6, 0.8, 0, 0]]))
    run(tracker, [(seen([box], [PERSON]), first.astype(np.float32)),
                  (seen([box], [PERSON]), then.astype(np.float32))])  # fmt: skip
    expected = unit(0.8 * first + 0.2 * then)
    np.testing.assert_allclose(tracker.vectors, expected, atol=1e-6)
    # A frame without a vector leaves the look as it was.
    run(tracker, [(seen([box], [PERSON]), None)])
    np.testing.assert_allclose(tracker.vectors, expected, atol=1e-6)


def test_tracks_dropped_and_born_keep_their_looks_row_by_row() -> None:
    tracker = AppearanceTracker(config())
    left, right = box_at(100, 100), box_at(400, 100)
    run(tracker, [(seen([left, right], [PERSON] * 2), np.stack([A, B]))])
    np.testing.assert_array_equal(tracker.vectors, np.stack([A, B]))
    tracker.update(seen([right], [PERSON]), 5.0)  # A is gone past lost_s
    np.testing.assert_array_equal(tracker.vectors, B[None])


def test_vectors_of_another_size_are_refused() -> None:
    tracker = AppearanceTracker(config())
    run(tracker, [(seen([box_at(100, 100)], [PERSON]), A[None])])
    tracker.found = np.ones((1, 8), np.float32)
    with pytest.raises(ValueError, match="8 values after 4"):
        tracker.update(seen([box_at(100, 100)], [PERSON]), 1.0)


SIZES = [(30, 60), (30, 60), (19, 60), (30, 60), (20, 20)]
"""Width and height of boxes placed away from the picture's corner (x 100, y 50)."""


def test_the_embedder_takes_confident_boxes_of_its_classes_large_enough() -> None:
    embedder = Embedder("track", AppearanceConfig(min_size=20), min_score=0.5)
    dets = Detections(
        np.array([box_at(100, 50, *size) for size in SIZES], np.float32),
        np.array([0.9, 0.4, 0.9, 0.9, 0.5], np.float32),
        np.array([0, 0, 0, 1, 0], np.int32),
        ("person", "dog"),
    )
    assert embedder.wanted(dets).tolist() == [0, 4]
    assert embedder.wanted(Detections.empty(("person",))).tolist() == []


def test_the_node_with_looks_keeps_the_pixels_and_asks_for_its_model() -> None:
    looked = TrackStage("track", config())
    assert looked.reads_pixels is True and TrackStage.reads_pixels is False
    assert TrackStage("track", TrackConfig()).reads_pixels is False
    assert TrackStage.assets_needed(config()) == [("models", "person-reid")]
    assert TrackStage.assets_needed(config(model="my/own.onnx")) == []  # type: ignore[arg-type]
    assert TrackStage.assets_needed(TrackConfig()) == []
    assert isinstance(looked.new_tracker(), AppearanceTracker)
    assert type(TrackStage("track", TrackConfig()).new_tracker()) is ByteTracker


def test_the_re_id_model_tracks_the_people_of_the_sample_clip(tmp_path: Path) -> None:
    config_file = tmp_path / "looks.toml"
    config_file.write_text(f"""
links = ["cam ! pre ! det ! nms ! track ! events"]
[nodes.cam]
type = "source"
uri = "{ASSETS / "media" / "people.mp4"}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
conf = 0.2
classes = [0]
[nodes.track]
type = "track"
[nodes.track.appearance]
model = "person-reid"
[nodes.events]
type = "events"
path = "events.jsonl"

""")
    result = cli(str(config_file), "--max-frames", "30", "--stats", "stats.json",
                 "--no-progress", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    track = json.loads((tmp_path / "stats.json").read_text())["stages"]["track"]
    assert track["tracks"]["cam"] >= 5  # the clip shows a dozen people from its first frame
    assert track["appearance_crops"] >= 5 * 30
    frames = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    ids = [d["track_id"] for f in frames for d in f.get("detections", [])]
    assert ids and min(ids) >= 1


def test_unit_scales_rows_to_length_one_and_leaves_zero_rows() -> None:
    rows = unit(np.array([[0.3, 0.4], [3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.6, 0.8], [0.0, 0.0]])


class MeanColour:
    """A stand-in re-id model: each crop's mean B, G, R as its vector; calls counted."""

    size = (8, 16)
    normalise = Normalise("bgr", 1.0, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    channels_last = True

    def __init__(self) -> None:
        self.calls: list[int] = []

    def tensor(self, crops: np.ndarray) -> np.ndarray:
        return crops.astype(np.float32)

    def run_input(self, batch: np.ndarray) -> np.ndarray:
        self.calls.append(len(batch))
        return batch.reshape(len(batch), -1, 3).mean(axis=1)


def test_vectors_are_the_model_s_on_each_wanted_box_in_calls_of_max_batch() -> None:
    from vapipe.pipeline.frame import Frame, StreamInfo

    image = np.zeros((120, 200, 3), np.uint8)
    image[10:60, 20:50] = (200, 10, 10)  # a blue person
    image[10:60, 120:150] = (10, 10, 200)  # a red one
    boxes = [box_at(20, 10, 30, 50), box_at(120, 10, 30, 50), box_at(120, 70, 30, 40)]
    dets = Detections(np.array(boxes, np.float32), np.array([0.9, 0.9, 0.1], np.float32),
                      np.zeros(3, np.int32), ("person",))  # fmt: skip
    frame = Frame("cam", 0, 0.0, 0.0, image, StreamInfo("cam", "x", 200, 120, 25.0))
    frame.detections = dets
    for fit in ("stretch", "letterbox"):
        embedder = Embedder("track", AppearanceConfig(max_batch=1, fit=fit), min_score=0.5)
        model = embedder.model = MeanColour()  # type: ignore[assignment]
        found = embedder.vectors(frame)
        assert model.calls == [1, 1] and embedder.crops == 2  # two wanted boxes, one a call
        assert found.shape == (3, 3) and np.isnan(found[2]).all()  # the unsure box: none
        blue, red = unit(np.array([[200, 10, 10], [10, 10, 200]], np.float64))
        tolerance = 0.02 if fit == "stretch" else 0.3  # a letterbox pads with grey
        np.testing.assert_allclose(found[0], blue, atol=tolerance)
        np.testing.assert_allclose(found[1], red, atol=tolerance)
        if fit == "letterbox":  # the padding is in the crop: less saturated than stretched
            assert found[0][0] < blue[0] - 0.01
    frame.detections = dets[np.array([2])]
    assert Embedder("track", AppearanceConfig(), 0.5).vectors(frame).shape == (1, 0)
