"""Decoder threads: FFmpeg's own choice for one stream, the cores shared out among many."""

from __future__ import annotations

import os

import pytest

from vapipe.pipeline.assets import resolve_media
from vapipe.pipeline.stage import StageContext
from vapipe.stages.source import stage as source_stage
from vapipe.stages.source.stage import SourceConfig, VideoSource, decoder_share


@pytest.mark.parametrize(
    ("cores", "sources", "threads"),
    [(16, 1, 0), (16, 2, 8), (16, 16, 4), (16, 40, 4), (2, 3, 2), (64, 4, 16), (1, 2, 1)],
)
def test_decoder_share(monkeypatch, cores: int, sources: int, threads: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cores)))
    assert source_stage.decoder_share(sources) == threads


@pytest.mark.parametrize(("sources", "configured"), [(1, 0), (64, 0), (64, 3)])
def test_the_decoder_opens_with_the_share(sources: int, configured: int) -> None:
    uri = resolve_media("sample:people")
    stage = VideoSource("cam", SourceConfig(uri=uri, decode_threads=configured))
    stage.open(StageContext("cam", sources_in_run=sources))
    try:
        _container, video = stage._session
        expected = configured or decoder_share(sources)
        assert video.codec_context.thread_count == expected
        assert stage.stats()["decode_threads"] == (expected or "auto")
        frame = next(iter(stage.frames()))  # and it decodes
        assert frame.image.shape == (video.codec_context.height, video.codec_context.width, 3)
    finally:
        stage.close()
