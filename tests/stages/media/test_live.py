"""Live streams: a viewer starts at a keyframe and, when it falls behind, loses its own
pictures up to the next keyframe (never anyone else's); a stream encodes only while watched,
at most ``fps`` pictures a second, a keyframe as soon as a viewer joins; what it sends is a
fragmented MP4 any decoder plays, at the size asked, with the codec string MSE needs."""

from __future__ import annotations

import io
import threading
import time
from fractions import Fraction

import av
import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.media.live import LiveSettings, LiveStream, Viewer
from vapipe.stages.media.live_encode import (
    H264,
    FragmentedMp4,
    codec_string,
    output_size,
    parameter_sets,
)


def picture(index: int, height: int = 120, width: int = 160) -> np.ndarray:
    image = np.full((height, width, 3), 60, np.uint8)
    x = (index * 4) % (width - 20)
    image[40:80, x : x + 20] = (20, 200, 240)  # a block that moves
    return image


def frame(index: int, capture: float) -> Frame:
    info = StreamInfo("cam", "x", 160, 120, Fraction(25))
    return Frame("cam", index, index / 25, capture, picture(index), info)


def test_a_viewer_starts_at_a_keyframe() -> None:
    viewer = Viewer(limit=5)
    viewer.put(b"p0", False)  # joined mid-way: not decodable, not sent
    viewer.put(b"k1", True)
    viewer.put(b"p1", False)
    assert [viewer.get(0), viewer.get(0), viewer.get(0)] == [b"k1", b"p1", None]
    assert viewer.dropped == 1 and viewer.sent == 2


def test_a_viewer_behind_skips_to_the_next_keyframe_and_goes_on() -> None:
    viewer = Viewer(limit=3)
    viewer.put(b"k", True)
    for n in range(3):
        viewer.put(b"p%d" % n, False)  # the third does not fit: all it held goes
    viewer.put(b"p3", False)  # still waiting for a keyframe
    assert viewer.get(0) is None
    viewer.put(b"k2", True)
    viewer.put(b"q", False)
    assert [viewer.get(0), viewer.get(0)] == [b"k2", b"q"]
    assert viewer.dropped == 5  # k, p0, p1 held + p2 + p3


def test_get_waits_for_an_item_and_a_closed_viewer_ends() -> None:
    viewer = Viewer(limit=3)
    viewer.put(b"k", True)
    threading.Timer(0.05, viewer.close).start()
    assert viewer.get(5) == b"k"
    started = time.monotonic()
    assert viewer.get(5) is None  # closed: no wait for the timeout
    assert viewer.closed and time.monotonic() - started < 4


def test_output_size_is_even_and_at_most_the_width_asked() -> None:
    assert output_size(1920, 1080, 1280) == (1280, 720)
    assert output_size(800, 450, 1280) == (800, 450)
    assert output_size(801, 451, 4000) == (800, 450)


def test_the_encoder_gives_keyframes_when_asked_and_the_mp4_plays() -> None:
    encoder = H264(160, 120, 25, 1.0, 500_000, 1)
    mp4 = FragmentedMp4(160, 120)
    fragments: list[tuple[bytes, bool]] = []
    keys = []
    for index in range(40):
        units = encoder.encode(picture(index, 240, 320), index * 3600, keyframe=index == 10)
        keys += [index for unit in units if unit.keyframe]
        for unit in units:
            fragments += mp4.add(unit)
    assert keys == [0, 10, 35]  # the first, the one asked for, then a second after that
    assert [index for index, (_, key) in enumerate(fragments) if key] == [0, 10, 35]
    assert mp4.codec.startswith('video/mp4; codecs="avc1.42')  # baseline, as MSE wants it
    # a viewer joining at a keyframe decodes from there
    joined = mp4.init + b"".join(data for data, _ in fragments[10:])
    with av.open(io.BytesIO(joined)) as container:
        decoded = [f.to_ndarray(format="bgr24") for f in container.decode(video=0)]
    assert len(decoded) == 29 and decoded[0].shape == (120, 160, 3)
    # the picture is the one encoded (scaled to 160x120): the block where it was
    expected = picture(10, 120, 160).astype(int)
    assert np.abs(decoded[0].astype(int) - expected).mean() < 8


def test_parameter_sets_and_codec_string_come_from_the_sps() -> None:
    encoder = H264(160, 120, 25, 1.0, 500_000, 1)
    (unit,) = encoder.encode(picture(0), 0, keyframe=True)
    sets = parameter_sets(unit.data)
    nal_types = [part[0] & 0x1F for part in sets.split(b"\x00\x00\x00\x01") if part]
    assert nal_types == [7, 8]
    sps = sets.split(b"\x00\x00\x00\x01")[1]
    assert codec_string(sets) == f'video/mp4; codecs="avc1.{sps[1]:02X}{sps[2]:02X}{sps[3]:02X}"'
    assert codec_string(b"") == 'video/mp4; codecs="avc1.42E01F"'


def test_nothing_is_encoded_while_nobody_watches_and_a_viewer_gets_the_newest() -> None:
    stream = LiveStream("cam", LiveSettings(fps=100))
    try:
        for index in range(10):
            stream.offer(frame(index, 1000 + index / 25))
        assert stream.encoded == 0 and stream.mp4 is None
        viewer = stream.watch_mp4()
        # A picture's fragment is written when the next picture comes (the muxer needs its
        # time): a later frame is offered, the first one the viewer gets is still frame 9.
        first, index = None, 10
        while first is None:
            stream.offer(frame(index, 1000 + index / 25))
            index += 1
            first = viewer.get(0.5)
        header = stream.header(5)
        assert header is not None
        with av.open(io.BytesIO(header + first)) as container:
            shown = next(f.to_ndarray(format="bgr24") for f in container.decode(video=0))
        # the newest frame offered, not the first: nothing was queued while nobody watched
        newest, oldest = picture(9).astype(int), picture(0).astype(int)
        assert np.abs(shown - newest).mean() < np.abs(shown - oldest).mean() / 2
        stream.leave(viewer)
    finally:
        stream.close()


def test_a_watched_stream_sends_a_playable_mp4_from_a_keyframe() -> None:
    units: list[tuple[bytes, bool]] = []
    stream = LiveStream(
        "cam",
        LiveSettings(fps=100, width=96),
        on_unit=lambda _, data, key: units.append((data, key)),
    )
    try:
        viewer = stream.watch_mp4()
        received: list[bytes] = []
        index = 0
        while len(received) < 8:
            stream.offer(frame(index, 1000 + index / 25))
            index += 1
            data = viewer.get(0.5)
            if data is not None:
                received.append(data)
        header = stream.header(5)
        assert header is not None and stream.epoch == 1000.0
        assert units[0][1]  # RTSP's feed starts at the keyframe too
        with av.open(io.BytesIO(header + b"".join(received))) as container:
            pictures = list(container.decode(video=0))
        assert len(pictures) == 8 and (pictures[0].width, pictures[0].height) == (96, 72)
        # media time is the capture clock from the first picture: latency = now - epoch - t
        assert pictures[-1].time == pytest.approx(0, abs=10)
        stats = stream.stats()
        assert stats["encoded"] >= 9 and stats["viewers"] == 1
        stream.leave(viewer)
        assert stream.stats()["viewers"] == 0 and viewer.closed
    finally:
        stream.close()


def test_at_most_fps_pictures_a_second_are_encoded() -> None:
    stream = LiveStream("cam", LiveSettings(fps=5))
    try:
        viewer = stream.watch_mp4()
        started = time.monotonic()
        index = 0
        while time.monotonic() - started < 1.0:
            stream.offer(frame(index, 1000 + index / 25))
            index += 1
            time.sleep(0.005)
        encoded = stream.encoded
        assert index > 50  # offered far faster than 5 a second
        assert 1 <= encoded <= 7  # at most ~5 in the second (+1: the first is at once)
        assert stream.stats()["skipped"] >= index - encoded - 2
        stream.leave(viewer)
    finally:
        stream.close()


def test_a_viewer_that_takes_nothing_is_let_go() -> None:
    stream = LiveStream("cam", LiveSettings(fps=100, stalled_s=0.2))
    try:
        gone = stream.watch_mp4()  # never reads: a client that went away unannounced
        reading = stream.watch_mp4()
        index = 0
        while not gone.closed:
            stream.offer(frame(index, 1000 + index / 25))
            index += 1
            reading.get(0.05)
        assert stream.stats()["viewers"] == 1 and stream.stats()["viewers_let_go"] == 1
        assert not reading.closed
    finally:
        stream.close()
