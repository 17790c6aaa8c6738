"""The clips node with the traffic clip's real packets (keyframes at frames 0 and 250, 23.976
fps): the ring keeps whole GOPs of the last seconds, a clip starts at the keyframe before its
pre-roll, overlapping events share a clip, a clip is closed at max_clip_s, and one whose
packets are all in is written without waiting for the end."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

from tests.conftest import asset
from tests.stages.sinks.event_view import written
from tests.stages.source.test_packets import Tap
from vapipe.pipeline.frame import EncodedPacket, Frame, Message, StreamInfo
from vapipe.stages.sinks.clips import ClipsConfig, ClipsSink, Ring
from vapipe.stages.source.packets import PacketFeed, encoded_stream

T0 = 1_796_000_000.0


@pytest.fixture(scope="module")
def packets() -> list[EncodedPacket]:
    """The clip's packets as the source hands them (frame pts = container pts + 100 s)."""
    tap = Tap()
    feed = PacketFeed("cam", [tap])  # type: ignore[list-item] - duck-typed tap
    with av.open(str(asset("media", "traffic.mp4"))) as container:
        feed.new_session(container.streams.video[0])
        for index, packet in enumerate(container.demux(video=0)):
            feed.add(packet, None if index < 3 else 100.0)  # the first three wait for a frame
    assert len(tap.got) == 480
    return tap.got


def frame(seq: int, events: list[dict[str, Any]]) -> Frame:
    info = StreamInfo("cam", "x", 640, 360, None)
    item = Frame("cam", seq, 100 + seq / 23.976, T0 + seq / 23.976, None, info)  # type: ignore[arg-type] - no pixels read
    item.events.extend(events)
    return item


def crossing(track: int) -> dict[str, Any]:
    return {"event": "line_cross", "track_id": track, "line": "road", "direction": "in"}


def sink(tmp_path: Path, **config: object) -> ClipsSink:
    node = ClipsSink("clips", ClipsConfig.model_validate({"dir": str(tmp_path), **config}))
    node.open(None)  # type: ignore[arg-type]
    return node


def frame_times(path: Path) -> list[float]:
    with av.open(str(path)) as container:
        return [f.time for f in container.decode(video=0)]


def test_packets_carry_the_frames_times(packets: list[EncodedPacket]) -> None:
    assert [p.keyframe for p in packets].count(True) == 2
    assert packets[0].keyframe and packets[250].keyframe
    times = sorted(p.time for p in packets)
    assert times[0] == pytest.approx(100.0)
    assert np.allclose(np.diff(times), 1 / 23.976, atol=1e-3)


def test_the_ring_keeps_whole_gops_of_the_last_seconds(packets: list[EncodedPacket]) -> None:
    ring = Ring(keep_s=5.0)
    for packet in packets[:300]:  # up to frame 300 (12.5 s): the first GOP is still needed
        ring.add(packet)
    assert len(ring.gops) == 2
    assert ring.since(105.0)[0] is packets[0]  # from the keyframe before
    assert ring.since(111.0)[0] is packets[250]
    for packet in packets[300:]:  # frame 479 (20 s): 15 s > 10.4 s, so GOP 1 goes
        ring.add(packet)
    assert len(ring.gops) == 1 and ring.since(101.0)[0] is packets[250]


def test_a_ring_starts_at_a_keyframe_and_a_new_session_starts_over(
    packets: list[EncodedPacket],
) -> None:
    ring = Ring(keep_s=100.0)
    for packet in packets[5:260]:
        ring.add(packet)
    assert ring.gops[0][0] is packets[250]  # nothing before the first keyframe decodes
    with av.open(str(asset("media", "traffic.mp4"))) as container:
        other = encoded_stream(container.streams.video[0], 2)
    assert other is not None
    first = packets[0]
    ring.add(EncodedPacket(first.data, first.pts, first.dts, True, 200.0, other))
    assert len(ring.gops) == 1 and ring.gops[0][0].stream is other


def test_one_clip_for_overlapping_events_from_the_keyframe_before(
    tmp_path: Path, packets: list[EncodedPacket]
) -> None:
    node = sink(tmp_path, pre_s=1.0, post_s=2.0)
    for packet in packets[:300]:
        node.take_packet("cam", packet)
    first, second = frame(280, [crossing(1)]), frame(300, [crossing(2)])
    node.process(first)
    node.process(second)  # within the first's post_s: the same clip, made longer
    for packet in packets[300:]:
        node.take_packet("cam", packet)  # 300 + 4 s of frames pass its end: written now
    assert node.writer is not None
    node.close()
    a, b = written(first, 0), written(second, 0)
    assert a["clip"] == b["clip"]
    times = frame_times(tmp_path / a["clip"])
    # from keyframe 250 (the one before 1 s ahead of frame 280) to 2 s after frame 300
    assert len(times) == pytest.approx(300 - 250 + 2 * 23.976, abs=1.5)
    assert a["clip_at_s"] == pytest.approx(30 / 23.976, abs=1e-3)
    assert b["clip_at_s"] == pytest.approx(50 / 23.976, abs=1e-3)
    assert node.stats()["written"] == 1


def test_events_apart_get_clips_of_their_own_and_a_clip_ends_at_max_clip_s(
    tmp_path: Path, packets: list[EncodedPacket]
) -> None:
    node = sink(tmp_path, pre_s=1.0, post_s=1.0, max_clip_s=4.0)
    for packet in packets:
        node.take_packet("cam", packet)  # the whole clip already demuxed (a slow pipeline)
    events = [frame(seq, [crossing(seq)]) for seq in (260, 290, 330, 400)]
    for item in events:
        node.process(item)
    node.flush()
    node.close()
    paths = [written(item, 0)["clip"] for item in events]
    # 260 and 290 overlap (3.3 s together); 330 would make it 4.9 s > 4: a new one
    assert paths[0] == paths[1] and len(set(paths)) == 3
    assert node.stats()["written"] == 3
    spans = {p: frame_times(tmp_path / p) for p in set(paths)}
    last = spans[paths[3]]
    # from keyframe 250 to 1 s after frame 400
    assert last[-1] - last[0] == pytest.approx((400 - 250) / 23.976 + 1, abs=0.1)


def test_a_file_that_ends_closes_its_clips_and_removal_forgets_the_source(
    tmp_path: Path, packets: list[EncodedPacket]
) -> None:
    node = sink(tmp_path, pre_s=1.0, post_s=5.0)
    for packet in packets:
        node.take_packet("cam", packet)
    last = frame(470, [crossing(3)])
    node.process(last)
    node.handle_message(Message("cam", "source_removed", T0))
    assert node._rings == {}
    gone = frame(475, [crossing(4)])
    node.process(gone)  # no packets left for it: no clip, and no path to one
    node.close()
    assert "clip" in written(last, 0) and "clip" not in written(gone, 0)
    assert (tmp_path / written(last, 0)["clip"]).is_file()
    assert node.stats()["written"] == 1 and node.without_packets == 1


def test_only_its_event_types_get_clips(tmp_path: Path, packets: list[EncodedPacket]) -> None:
    node = sink(tmp_path, event_types=["zone_enter"])
    for packet in packets[:50]:
        node.take_packet("cam", packet)
    item = frame(40, [crossing(1), {"event": "zone_enter", "track_id": 1, "zone": "z"}])
    node.process(item)
    node.close()
    assert "clip" not in written(item, 0) and "clip" in written(item, 1)


def drawn_frame(seq: int, events: list[dict[str, Any]] | None = None) -> Frame:
    """10 fps, a car-sized white block moving right, tracked as #5."""
    from vapipe.pipeline.detections import Detections

    image = np.full((120, 160, 3), 60, np.uint8)
    x = 10 + 4 * seq
    image[40:80, x : x + 30] = 255
    dets = Detections(np.array([[x, 40, x + 30, 80]], np.float32), np.array([0.9], np.float32),
                      np.array([2]), ("person", "bicycle", "car"), np.array([5]))  # fmt: skip
    info = StreamInfo("cam", "x", 160, 120, Fraction(10))
    item = Frame("cam", seq, seq / 10, T0 + seq / 10, image, info, detections=dets)
    item.events.extend(events or [])
    return item


def test_annotated_clips_draw_and_encode_the_frames_around_the_event(tmp_path: Path) -> None:
    node = sink(tmp_path, annotated=True, pre_s=0.5, post_s=0.5)
    assert node.reads_pixels and not node.takes_packets  # its frames keep their pixels
    assert ClipsSink("c", ClipsConfig()).takes_packets
    frames = [drawn_frame(seq, [crossing(5)] if seq in (10, 12) else None) for seq in range(30)]
    for item in frames:
        node.process(item)
    node.close()
    first, second = written(frames[10], 0), written(frames[12], 0)
    assert first["clip"] == second["clip"]  # 12 falls in 10's span: one clip, made longer
    assert (first["clip_at_s"], second["clip_at_s"]) == (0.5, 0.7)
    with av.open(str(tmp_path / first["clip"])) as container:
        decoded = [(f.time, f.to_ndarray(format="bgr24")) for f in container.decode(video=0)]
    # frames 5 to 17: 0.5 s before the first event to 0.5 s after the second
    assert len(decoded) == 13
    assert decoded[-1][0] - decoded[0][0] == pytest.approx(1.2, abs=1e-3)
    # drawn: the box's outline in the track's colour where the frame had plain grey
    at_event = decoded[5][1]
    x = 10 + 4 * 10
    edge = at_event[60, x - 1].astype(int)
    assert np.abs(edge - 60).max() > 40, edge
    assert np.abs(decoded[5][1][100, 150].astype(int) - 60).max() < 12  # untouched grey
    assert node.stats()["written"] == 1
