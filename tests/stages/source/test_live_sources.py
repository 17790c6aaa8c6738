"""Live-source plumbing without a network: input options, webcams, backoff, masking."""

from __future__ import annotations

import logging
import random
from fractions import Fraction

import numpy as np
import pytest

from vapipe.pipeline.frame import StreamInfo
from vapipe.pipeline.logs import MaskingFormatter
from vapipe.pipeline.urls import mask_credentials
from vapipe.stages.source.backoff import Backoff, ReconnectConfig
from vapipe.stages.source.inputs import input_spec, webcam_device
from vapipe.stages.source.stage import SourceConfig, VideoSource


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rtsp://admin:secret@10.0.0.5:554/s1", "rtsp://***@10.0.0.5:554/s1"),
        ("rtsp://admin:p@ss@cam.local/live", "rtsp://***@cam.local/live"),  # '@' in password
        ("rtsp://admin:a/b@cam.local/live", "rtsp://***@cam.local/live"),  # '/' in password
        ("rtsp://admin:p%40ss%2Fw@cam/x?y=1", "rtsp://***@cam/x?y=1"),  # encoded
        ("open 'rtsp://u:p@h/x' failed", "open 'rtsp://***@h/x' failed"),  # inside text
        ("rtsp://cam.local/live", "rtsp://cam.local/live"),  # nothing to mask
        ("a http://u:p@h/1 and rtsp://v:q@k/2", "a http://***@h/1 and rtsp://***@k/2"),
    ],
)
def test_mask_credentials(text: str, expected: str) -> None:
    assert mask_credentials(text) == expected


def test_log_lines_are_masked_including_ffmpeg_loggers() -> None:
    record = logging.LogRecord(
        "libav.rtsp",
        logging.ERROR,
        __file__,
        1,
        "method DESCRIBE failed for %s",
        ("rtsp://admin:pw@cam/x",),
        None,
    )
    assert MaskingFormatter("%(name)s: %(message)s").format(record) == (
        "libav.rtsp: method DESCRIBE failed for rtsp://***@cam/x"
    )


def test_webcam_options_map_to_v4l2() -> None:
    assert webcam_device("webcam:2") == "/dev/video2"
    assert webcam_device("/dev/video0") == "/dev/video0"
    assert webcam_device("video.mp4") is None
    spec = input_spec(
        "webcam:0",
        width=1280,
        height=720,
        fps=30,
        pixel_format="mjpeg",
        open_timeout_s=3,
        read_timeout_s=2,
    )
    assert (spec.file, spec.format, spec.kind) == ("/dev/video0", "v4l2", "webcam")
    assert spec.options == {"video_size": "1280x720", "framerate": "30", "input_format": "mjpeg"}
    assert spec.open_kwargs() == {"options": spec.options, "format": "v4l2", "timeout": (3, 2)}


def test_rtsp_options() -> None:
    spec = input_spec("rtsp://cam/x", transport="udp", open_timeout_s=4, read_timeout_s=3)
    assert spec.kind == "network" and spec.timeout == (4, 3)
    assert spec.options["rtsp_transport"] == "udp" and spec.options["flags"] == "low_delay"
    assert "fflags" not in spec.options, "nobuffer drops the keyframe read while probing"
    assert input_spec("clip.mp4").open_kwargs() == {"options": {}}


def test_missing_webcam_is_a_config_error(tmp_path) -> None:
    from vapipe.pipeline.errors import ConfigError
    from vapipe.pipeline.stage import StageContext

    source = VideoSource("cam", SourceConfig(uri="webcam:9"))
    with pytest.raises(ConfigError, match=r"webcam not found: /dev/video9"):
        source.open(StageContext("cam"))


def test_opening_a_live_source_leaves_pyav_logging_off() -> None:
    """PyAV's log callback takes the GIL from FFmpeg's decoder threads: with it on, closing a
    frame-threaded decoder deadlocked (a CI run hung after --max-frames on RTSP)."""
    import av

    from vapipe.pipeline.stage import StageContext

    av.logging.set_level(None)
    VideoSource("cam", SourceConfig(uri="rtsp://127.0.0.1:1/x")).open(StageContext("cam"))
    assert av.logging.get_level() is None


@pytest.mark.parametrize(
    ("uri", "extra", "live"),
    [
        ("rtsp://cam/x", {}, True),
        ("webcam:0", {}, True),
        ("clip.mp4", {}, False),
        ("clip.mp4", {"realtime": True}, True),
        ("rtsp://cam/x", {"live": False}, False),
    ],
)
def test_liveness(uri: str, extra: dict, live: bool) -> None:
    assert VideoSource.is_live(SourceConfig(uri=uri, **extra)) is live


def test_backoff_doubles_with_jitter_never_above_the_cap() -> None:
    backoff = Backoff(
        ReconnectConfig(initial_s=1, max_s=8, jitter=0.25, max_attempts=6), random.Random(1)
    )
    waits = []
    for _ in range(6):
        backoff.failed()
        waits.append(backoff.next_wait())
    for wait, base in zip(waits, [1, 2, 4, 8, 8, 8], strict=True):
        assert 0.75 * base <= wait <= min(1.25 * base, 8), (wait, base)
    assert backoff.exhausted()
    backoff.reset()
    assert not backoff.exhausted() and backoff.next_wait() <= 1.25
    assert not Backoff(ReconnectConfig(max_attempts=0)).exhausted()


@pytest.mark.parametrize("attempts", [1, 2, 5])
def test_max_attempts_means_that_many_failed_attempts(attempts: int) -> None:
    backoff = Backoff(ReconnectConfig(max_attempts=attempts))
    tried = 0
    while True:
        tried += 1  # an attempt to open, failing
        backoff.failed()
        if backoff.exhausted():
            break
    assert tried == attempts


def test_jitter_never_pushes_a_wait_past_max_s() -> None:
    backoff = Backoff(ReconnectConfig(initial_s=4, max_s=5, jitter=1.0), random.Random(0))
    waits = []
    for _ in range(200):
        backoff.failed()
        waits.append(backoff.next_wait())
    assert max(waits) <= 5.0 and max(waits) > 4.9


def connected_camera(stall_timeout_s: float) -> VideoSource:
    """A camera source as _connect leaves it: frames come only from a stream that opened."""
    source = VideoSource("cam", SourceConfig(uri="rtsp://cam/x", stall_timeout_s=stall_timeout_s))
    source._seq, source.live = 0, True
    source.source_id, source.display_uri = "cam", "rtsp://cam/x"
    source.stream_info = StreamInfo("cam", "rtsp://cam/x", 2, 2, None, None, True)
    source.spec = input_spec("rtsp://cam/x")
    return source


def test_stall_watchdog_catches_video_stopping_while_other_packets_flow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time
    from types import SimpleNamespace

    from vapipe.stages.source import stage as stage_module
    from vapipe.stages.source.stage import StreamStalled

    # The source's clock, moved by the packets themselves: nothing here depends on how fast
    # this machine runs the test.
    clock = [1000.0]
    monkeypatch.setattr(
        stage_module, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time)
    )
    video, audio = SimpleNamespace(index=0), SimpleNamespace(index=1)

    class AudioOnly:
        """Audio packets every 20 ms, 200 of them (4 s), and no video."""

        sent = 0

        def demux(self):
            for _ in range(200):
                clock[0] += 0.02
                self.sent += 1
                yield SimpleNamespace(stream=audio)

    source = connected_camera(stall_timeout_s=0.3)
    audio_only = AudioOnly()
    with pytest.raises(StreamStalled, match=r"no frame for 0\.3"):
        next(source._session_frames(audio_only, video, paced=False))
    # Caught by the watchdog at the first packet past 0.3 s, not at the end of the packets.
    assert audio_only.sent == 16

    class Pictures:
        """A camera that never stops: one frame per packet."""

        def demux(self):
            for index in range(10):
                picture = SimpleNamespace(
                    pts=index,
                    time_base=Fraction(1, 25),
                    format=SimpleNamespace(name="rgb24"),  # not 4:2:0: converted to BGR
                    to_ndarray=lambda format: np.zeros((2, 2, 3), np.uint8),
                )
                yield SimpleNamespace(stream=video, pts=None, time_base=None,
                                      decode=lambda p=picture: [p])  # fmt: skip

    frames = source._session_frames(Pictures(), video, paced=False)
    first = next(frames)
    clock[0] += 0.5  # downstream is slow: the source waits at its yield, longer than 0.3 s
    second = next(frames)
    assert (first.seq, second.seq) == (0, 1), "backpressure was taken for a stalled camera"
    assert second.pts - first.pts == pytest.approx(0.04)


def test_a_long_gop_camera_is_waited_for_until_its_first_keyframe() -> None:
    from vapipe.stages.source.stall import StreamStalled, stalled_for

    # 8 s after connecting, video packets still coming (the keyframe is 10 s away): waiting.
    stalled_for(1008.0, False, 1000.0, 1007.96, 1000.0, 5.0, 30.0)
    # Before the first frame, audio alone does not keep it: video stopped 5.2 s ago.
    with pytest.raises(StreamStalled, match=r"^no frame for 5\.2 s \(no video packets\)$"):
        stalled_for(1008.0, False, 1000.0, 1002.8, 1000.0, 5.0, 30.0)
    # Video packets for 30 s that never decode: a broken stream, reconnected.
    with pytest.raises(StreamStalled, match=r"no frame decoded in 30\.5 s .*first_frame_timeout_s"):
        stalled_for(1030.5, False, 1000.0, 1030.4, 1000.0, 5.0, 30.0)
    stalled_for(1029.9, False, 1000.0, 1029.8, 1000.0, 5.0, 30.0)
    # Once frames came, frames are what count: packets without pictures are a stall.
    with pytest.raises(StreamStalled, match=r"^no frame for 5\.1 s$"):
        stalled_for(1020.0, True, 1014.9, 1019.99, 1000.0, 5.0, 30.0)
    stalled_for(1020.0, True, 1015.1, 1010.0, 1000.0, 5.0, 30.0)


def test_video_packets_before_the_keyframe_keep_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time
    from types import SimpleNamespace

    from vapipe.stages.source import stage as stage_module

    clock = [1000.0]
    monkeypatch.setattr(
        stage_module, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time)
    )
    video = SimpleNamespace(index=0)
    picture = SimpleNamespace(
        pts=0, time_base=Fraction(1, 25), format=SimpleNamespace(name="rgb24"),
        to_ndarray=lambda format: np.zeros((2, 2, 3), np.uint8),
    )  # fmt: skip

    class LongGop:
        """8 s of video packets that decode to nothing (joined mid-GOP), then a keyframe."""

        def demux(self):
            for _ in range(200):
                clock[0] += 0.04
                yield SimpleNamespace(stream=video, pts=None, time_base=None, decode=lambda: [])
            yield SimpleNamespace(stream=video, pts=None, time_base=None,
                                  decode=lambda: [picture])  # fmt: skip

    source = connected_camera(stall_timeout_s=5)
    first = next(source._session_frames(LongGop(), video, paced=False))
    assert first.seq == 0 and clock[0] == pytest.approx(1008.0)


def test_the_stall_rule_at_its_bounds_and_on_a_clock_near_zero() -> None:
    from vapipe.stages.source.stall import StreamStalled, stalled_for

    # Exactly at a limit is not past it.
    stalled_for(10.0, True, 5.0, 0.0, 0.0, 5.0, 30.0)
    stalled_for(10.0, False, 0.0, 5.0, 0.0, 5.0, 30.0)
    stalled_for(30.0, False, 0.0, 29.0, 0.0, 5.0, 30.0)
    # A monotonic clock may start anywhere: spans are differences, whatever the values.
    with pytest.raises(StreamStalled, match=r"^no frame for 5\.2 s$"):
        stalled_for(8.0, True, 2.8, 8.0, 0.0, 5.0, 30.0)
    with pytest.raises(StreamStalled, match=r"^no frame for 5\.2 s \(no video packets\)$"):
        stalled_for(8.0, False, 0.0, 2.8, 0.0, 5.0, 30.0)
    with pytest.raises(StreamStalled, match=r"^no frame decoded in 30\.5 s "):
        stalled_for(50.5, False, 0.0, 50.0, 20.0, 5.0, 30.0)
