"""The clips node's edges, with packets of made-up times (a keyframe every 2 s, one packet
every 0.5 s): a packet or frame exactly at a clip's end, events exactly a span apart, the
ring's trim, messages that are not a removal, a late event, a full writer."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.stages.sinks.config_bounds import assert_bounds
from tests.stages.sinks.event_view import written
from vapipe.pipeline.frame import EncodedPacket, EncodedStream, Frame, Message, StreamInfo
from vapipe.stages.media.files import Writer
from vapipe.stages.sinks.clips import Clip, ClipsConfig, ClipsSink, Ring, fill

STREAM = EncodedStream(1, None, None, Fraction(1, 1000))


def packet(time: float, stream: EncodedStream = STREAM) -> EncodedPacket:
    ms = round(time * 1000)
    return EncodedPacket(b"x", ms, ms, ms % 2000 == 0, time, stream)


def frame(pts: float, events: list[dict[str, Any]] | None = None) -> Frame:
    info = StreamInfo("cam", "x", 64, 64, None)
    item = Frame("cam", round(pts * 2), pts, 1_796_000_000.0 + pts, None, info)  # type: ignore[arg-type] - no pixels read
    item.events.extend(events or [])
    return item


def crossing() -> dict[str, Any]:
    return {"event": "line_cross", "track_id": 1, "line": "road"}


OPENED: list[ClipsSink] = []


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    """Every node's writer stopped with its test: a writer left running outlives pytest's log
    capture."""
    yield
    while OPENED:
        OPENED.pop().close()


def sink(tmp_path: Path, **config: object) -> ClipsSink:
    cfg = {"dir": str(tmp_path), "pre_s": 1.0, "post_s": 1.0, **config}
    node = ClipsSink("clips", ClipsConfig.model_validate(cfg))
    node.open(None)  # type: ignore[arg-type]
    # These packets are made up (no stream to copy them into): the clips are handed over,
    # not written.
    node.writer.close()
    node.writer = Writer("clips-writer", node.config.queue, lambda clip: None)
    OPENED.append(node)
    return node


def feed(node: ClipsSink, start: float, stop: float) -> None:
    time = start
    while time <= stop:
        node.take_packet("cam", packet(time))
        time += 0.5


def open_clips(node: ClipsSink) -> list[Clip]:
    return node._open.get("cam", [])


def test_defaults_and_bounds() -> None:
    cfg = ClipsConfig()
    assert (cfg.pre_s, cfg.post_s, cfg.max_clip_s, cfg.crf, cfg.annotated) == (5, 5, 60, 23, False)
    for key, good, bad in (
        ("pre_s", [0, 120], [-0.1, 120.5]), ("post_s", [0, 120], [-0.1, 120.5]),
        ("max_clip_s", [0.5, 3600], [0, 3600.5]), ("crf", [0, 51], [-1, 52]),
    ):  # fmt: skip
        assert_bounds(ClipsConfig, key, good, bad)


def test_a_packet_and_a_frame_exactly_at_the_end_belong_to_the_clip(tmp_path: Path) -> None:
    node = sink(tmp_path)
    feed(node, 0.0, 2.0)
    node.process(frame(2.0, [crossing()]))  # the clip is 1.0 to 3.0
    feed(node, 2.5, 3.0)
    clip = open_clips(node)[0]
    assert [p.time for p in clip.packets] == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert not clip.done
    node.process(frame(3.0))  # at its end: an event now could still join
    assert open_clips(node) == [clip]
    node.take_packet("cam", packet(3.5))
    assert clip.done and clip.packets[-1].time == 3.0
    node.process(frame(3.5))
    assert open_clips(node) == []


def test_an_event_whose_span_starts_at_the_clips_end_joins_it(tmp_path: Path) -> None:
    node = sink(tmp_path, max_clip_s=4.0)
    feed(node, 0.0, 4.0)
    first, second = frame(2.0, [crossing()]), frame(4.0, [crossing()])
    node.process(first)
    node.process(second)  # 3.0 to 5.0: starts where the first ends; 1.0 to 5.0 is 4 s
    assert written(first, 0)["clip"] == written(second, 0)["clip"]
    assert len(open_clips(node)) == 1 and open_clips(node)[0].end == 5.0


def test_a_clip_longer_than_max_clip_s_is_not_joined(tmp_path: Path) -> None:
    node = sink(tmp_path, max_clip_s=4.0)
    feed(node, 0.0, 5.0)
    events = [frame(t, [crossing()]) for t in (2.0, 3.0, 4.5)]
    for item in events:
        node.process(item)
    paths = [written(item, 0)["clip"] for item in events]
    # 1.0-4.0 joined; 3.5-5.5 overlaps but would make 4.5 s
    assert paths[0] == paths[1] != paths[2]


def test_the_ring_is_pre_s_and_the_latency_allowance(tmp_path: Path) -> None:
    node = sink(tmp_path, pre_s=1.5)
    feed(node, 0.0, 0.0)
    assert node._rings["cam"].keep_s == 11.5


def test_the_ring_drops_a_gop_once_the_next_starts_at_the_cutoff() -> None:
    ring = Ring(keep_s=2.0)
    for time in (0.0, 1.0, 2.0, 3.0):
        ring.add(packet(time))
    assert [gop[0].time for gop in ring.gops] == [0.0, 2.0]
    ring.add(packet(4.0))  # cutoff 2.0: the GOP at 2.0 covers it
    assert [gop[0].time for gop in ring.gops] == [2.0, 4.0]


def test_fill_stops_at_the_first_packet_past_the_end() -> None:
    ring = Ring(keep_s=100.0)
    for time in (0.0, 1.0, 3.0, 2.5):  # decode order: a later packet shows earlier
        ring.add(packet(time))
    clip = Clip("c.mp4", 0.0, 2.6, STREAM)
    fill(clip, ring)
    assert [p.time for p in clip.packets] == [0.0, 1.0] and clip.done


def test_a_removal_ends_a_sources_clips_and_its_ring(tmp_path: Path) -> None:
    node = sink(tmp_path)
    feed(node, 0.0, 2.0)
    node.process(frame(2.0, [crossing()]))
    node.handle_message(Message("cam", "source_up", 0.0))
    node.handle_message(Message("other", "source_down", 0.0))  # another camera's
    assert len(open_clips(node)) == 1 and "cam" in node._rings
    node.handle_message(Message("cam", "source_removed", 0.0))
    assert open_clips(node) == [] and "cam" not in node._rings


def test_a_camera_that_goes_down_ends_its_clips_and_keeps_its_ring(tmp_path: Path) -> None:
    """Its next session's packets never join them; one that never comes back must not hold
    its last event's clip unwritten."""
    node = sink(tmp_path)
    handed: list[Clip] = []
    node.writer.close()
    node.writer = Writer("clips-writer", 4, handed.append)
    feed(node, 0.0, 2.0)
    node.process(frame(2.0, [crossing()]))
    clip = open_clips(node)[0]
    node.handle_message(Message("cam", "source_down", 0.0))
    node.writer.close()
    assert handed == [clip] and [p.time for p in clip.packets][-1] == 2.0
    assert open_clips(node) == [] and "cam" in node._rings


def test_an_event_older_than_the_ring_is_at_its_start(tmp_path: Path) -> None:
    node = sink(tmp_path)
    feed(node, 6.0, 8.0)
    late = frame(5.5, [crossing()])  # 4.5 to 6.5, and the ring begins at 6.0
    node.process(late)
    assert written(late, 0)["clip_at_s"] == 0.0
    other = sink(tmp_path)
    feed(other, 6.0, 8.0)
    gone = frame(4.0, [crossing()])  # nothing of 3.0 to 5.0 is left: no clip
    other.process(gone)
    assert "clip" not in written(gone, 0) and other.without_packets == 1


def test_a_clip_the_writer_cannot_take_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = sink(tmp_path, queue=1)
    gate, taken = threading.Event(), threading.Event()

    def held(clip: Clip) -> None:
        taken.set()
        gate.wait()

    node.writer.close()
    node.writer = Writer("clips-writer", 1, held)
    with caplog.at_level(logging.WARNING):
        for time in (2.0, 10.0, 20.0):
            feed(node, time - 2, time + 5)
            node.process(frame(time, [crossing()]))
            node.process(frame(time + 5))  # past its end: handed to the writer
            assert taken.wait(10)  # the first is being written; the second waits
    said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(said) == 1 and "clips-writer" not in said[0] and ".mp4" in said[0]
    gate.set()
    node.close()


def test_clips_is_a_registered_type() -> None:
    from vapipe.pipeline.registry import lookup

    assert lookup("clips") is ClipsSink
