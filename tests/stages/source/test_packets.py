"""The source's packet feed: sessions counted, empty packets and streams without taps left
alone, the packets before a session's first frame held (the last MAX_PENDING) until its
offset is known."""

from __future__ import annotations

from pathlib import Path

import av

from tests.conftest import asset
from vapipe.pipeline.frame import EncodedPacket
from vapipe.stages.source.packets import MAX_PENDING, PacketFeed


class Tap:
    takes_packets = True

    def __init__(self) -> None:
        self.got: list[EncodedPacket] = []

    def take_packet(self, source_id: str, packet: EncodedPacket) -> None:
        self.got.append(packet)


class Packet:
    """What the feed reads of a PyAV packet."""

    def __init__(self, pts: int | None, size: int = 3, dts: int | None = None) -> None:
        self.pts, self.dts, self.size, self.is_keyframe = pts, dts, size, pts == 0

    def __bytes__(self) -> bytes:
        return b"x" * self.size


def video_stream():  # type: ignore[no-untyped-def]
    container = av.open(str(asset("media", "traffic.mp4")))
    return container, container.streams.video[0]


def test_sessions_count_from_one_and_empty_packets_are_skipped() -> None:
    tap = Tap()
    feed = PacketFeed("cam", [tap])  # type: ignore[list-item] - duck-typed tap
    container, video = video_stream()
    with container:
        feed.new_session(video)
        assert feed.stream is not None and feed.stream.session == 1
        feed.add(Packet(0, size=0), 0.0)
        feed.add(Packet(None, size=1), 0.0)  # neither pts nor dts: no time to give it
        feed.add(Packet(10, size=1, dts=5), 0.0)
        feed.add(Packet(None, size=2, dts=20), 0.0)  # no pts: its dts stands in
        assert [(p.data, p.pts, p.dts) for p in tap.got] == [(b"x", 10, 5), (b"xx", 20, 20)]
        feed.new_session(video)
        assert feed.stream.session == 2


def test_without_taps_nothing_is_kept() -> None:
    feed = PacketFeed("cam", [])  # no stage after the source takes packets
    assert feed.taps == []
    container, video = video_stream()
    with container:
        feed.new_session(video)
    feed.add(Packet(0), None)
    assert feed.stream is None and feed._pending == []


def test_packets_wait_for_the_offset_and_only_the_last_are_held(tmp_path: Path) -> None:
    tap = Tap()
    feed = PacketFeed("cam", [tap])  # type: ignore[list-item] - duck-typed tap
    container, video = video_stream()
    with container:
        feed.new_session(video)
    for pts in range(MAX_PENDING + 5):
        feed.add(Packet(pts), None)
    feed.flush(None)  # still no offset: still held
    assert tap.got == [] and len(feed._pending) == MAX_PENDING
    assert feed._pending[0][1] == 5
    feed.flush(2.0)
    assert len(tap.got) == MAX_PENDING and feed._pending == []
    assert feed.stream is not None
    base = float(feed.stream.time_base)
    assert tap.got[0].time == 5 * base + 2.0
