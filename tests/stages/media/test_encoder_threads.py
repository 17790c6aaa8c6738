"""Encoders share the machine's cores among the run's sources instead of each taking all of
them (x264 alone starts 1.5 threads per core)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.helpers import probe_video
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.media import encoder
from vapipe.stages.media.encoder import Encoding, VideoFile, encoder_share
from vapipe.stages.sinks.video import VideoConfig, VideoSink


@pytest.fixture
def sixteen_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoder.os, "sched_getaffinity", lambda _pid: set(range(16)))


def test_sources_share_the_cores(sixteen_cores: None) -> None:
    assert [encoder_share(n) for n in (1, 2, 4, 5, 16, 40)] == [0, 8, 4, 3, 1, 1]


def test_the_thread_count_reaches_the_encoder(tmp_path: Path) -> None:
    video = VideoFile(
        tmp_path / "a.mp4", 64, 48, Fraction(25), Encoding("libx264", "ultrafast", 30, None,
                                                           False, 1.0, threads=3)
    )  # fmt: skip
    assert video.stream.codec_context.thread_count == 3
    for seq in range(5):
        video.write(np.full((48, 64, 3), seq * 40, np.uint8), seq / 25)
    video.finish()
    assert probe_video(tmp_path / "a.mp4")["frames"] == 5


def recording(tmp_path: Path, sources_in_run: int, threads: int | None = None) -> int:
    """The thread count the sink's encoder for one source got, in a run of that many sources."""
    config = VideoConfig(path=str(tmp_path / "{source_id}.mp4"), preset="ultrafast",
                         threads=threads)  # fmt: skip
    sink = VideoSink("video", config)
    sink.open(StageContext("video", sources_in_run=sources_in_run, source_ids=["cam"]))
    info = StreamInfo("cam", "cam.mp4", 64, 48, Fraction(25))
    sink.process(Frame("cam", 0, 0.0, 0.0, np.zeros((48, 64, 3), np.uint8), info))
    recorder = sink._recorders["cam"]
    count = recorder.current.stream.codec_context.thread_count
    sink.close()
    return count


def test_the_sink_gives_each_file_its_share(tmp_path: Path, sixteen_cores: None) -> None:
    assert recording(tmp_path, sources_in_run=4) == 4
    assert recording(tmp_path, sources_in_run=4, threads=2) == 2  # as configured
    # One source, or threads = 0: the encoder's own choice (FFmpeg's 0 = automatic).
    assert recording(tmp_path, sources_in_run=1) == 0
    assert recording(tmp_path, sources_in_run=4, threads=0) == 0
