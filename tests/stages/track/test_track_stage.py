"""The track node itself: registered as ``track``, it reads no pixels, tells each tracker its
frames' size, drops a removed stream's tracker (and only on that message), and counts the
tracks per source in its stats."""

from __future__ import annotations

import dataclasses
import time

import pytest

from tests.stages.track.test_bytetrack import box_at, dets, frame
from vapipe.pipeline import registry
from vapipe.pipeline.frame import Message
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.stage import Abilities, TrackStage


def opened() -> TrackStage:
    stage = TrackStage("track", TrackConfig())
    stage.open(None)  # type: ignore[arg-type]
    return stage


def test_it_is_the_track_type_and_reads_no_pixels() -> None:
    registry.load()
    assert registry.lookup("track") is TrackStage
    assert TrackStage.reads_pixels is False  # so preprocessing may let the pixels go


def test_each_tracker_is_told_its_frames_size_and_counts_its_tracks() -> None:
    stage = opened()
    stage.process(frame("cam", 0, dets([box_at(100, 100)])))
    tracker = stage.trackers["cam"]
    assert tracker.frame_size == (640, 480)  # type: ignore[attr-defined]
    for seq in range(1, 4):
        stage.process(frame("cam", seq, dets([box_at(100 + 4 * seq, 100)])))
    assert stage.stats() == {"tracks": {"cam": 1}}  # one confirmed track: next id 2


def test_a_removed_stream_takes_its_tracks_with_it_and_nothing_else_does() -> None:
    stage = opened()
    for source in ("a", "b"):
        stage.process(frame(source, 0, dets([box_at(10, 10)])))
    kept = stage.trackers["b"]
    for kind in ("source_down", "source_up", "source_removes", "source_removedx"):
        message = Message("a", kind, time.time())
        assert stage.handle_message(message) == (message,)
        assert set(stage.trackers) == {"a", "b"}, kind
    removed = Message("a", "source_removed", time.time())
    assert stage.handle_message(removed) == (removed,)
    assert set(stage.trackers) == {"b"} and stage.trackers["b"] is kept


def test_what_a_tracker_can_do_is_read_once_and_kept() -> None:
    stage = opened()
    stage.process(frame("cam", 0, dets([box_at(10, 10)])))
    abilities = Abilities.of(stage.trackers["cam"])
    tracker = stage.trackers["cam"]
    assert abilities == Abilities(tracker, tracker, tracker)  # type: ignore[arg-type]
    plain = Abilities.of(object())  # type: ignore[arg-type]
    assert plain == Abilities(None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        abilities.coast = None  # type: ignore[misc]
