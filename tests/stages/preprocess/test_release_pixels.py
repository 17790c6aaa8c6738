"""Pixels are let go after preprocessing when nothing downstream reads them."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.graph import Edge, Graph
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.stage import Stage, StageConfig, StageContext
from vapipe.pipeline.wiring import context_for
from vapipe.stages.nms import NmsConfig, NmsStage
from vapipe.stages.preprocess.stage import PreprocessConfig, PreprocessStage
from vapipe.stages.sinks.events import EventsConfig, EventsSink
from vapipe.stages.sinks.video import VideoConfig, VideoSink
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.stage import TrackStage


def chain_context(first: Stage, after: list[Stage]) -> StageContext:
    """``context_for`` the first of a chain of stages (a graph of their links alone)."""
    stages = {stage.name: stage for stage in [first, *after]}
    names = list(stages)
    edges = [Edge(a, b, 4, Leaky.NO) for a, b in itertools.pairwise(names)]
    graph = Graph(spec=None, order=names, edges=edges)  # type: ignore[arg-type]
    return context_for(graph, stages, first.name)


CONVENTIONS = {"input_size": [64, 64], "placement": "top-left", "color": "bgr", "scale": 1.0}


def run_preprocess(downstream: list, backend: str = "numpy") -> tuple[Frame, np.ndarray]:
    """The preprocess node opened with the context the graph gives it when ``downstream``
    follows it in a chain."""
    stage = PreprocessStage("pre", PreprocessConfig(backend=backend, **CONVENTIONS))
    stage.open(chain_context(stage, downstream))
    image = np.random.default_rng(0).integers(0, 255, (90, 160, 3), np.uint8)
    info = StreamInfo("cam", "clip.mp4", 160, 90, Fraction(25))
    frame = Frame("cam", 0, 0.0, 0.0, image.copy(), info)
    (out,) = stage.process_batch([frame]) + stage.flush()
    stage.close()
    return out, image


def test_events_only_graphs_drop_the_pixels_and_keep_the_shape(tmp_path) -> None:
    downstream = [
        NmsStage("nms", NmsConfig()),
        TrackStage("track", TrackConfig()),
        EventsSink("events", EventsConfig(path=str(tmp_path / "e.jsonl"))),
    ]
    frame, image = run_preprocess(downstream)
    assert frame.image.shape == image.shape and frame.image.dtype == np.uint8
    assert frame.image.strides == (0, 0, 0) and not frame.image.any()  # no memory behind it
    assert frame.tensor is not None and frame.tensor.any()  # made from the real pixels


@pytest.mark.parametrize(
    "reader",
    [
        lambda tmp: VideoSink("video", VideoConfig(path=str(tmp / "v.mp4"))),
        lambda tmp: Stage("plugin", StageConfig()),  # a plugin: reads pixels unless it says not
    ],
)
def test_a_stage_that_reads_pixels_downstream_keeps_them(tmp_path, reader) -> None:
    downstream = [NmsStage("nms", NmsConfig()), reader(tmp_path)]
    frame, image = run_preprocess(downstream)
    assert np.array_equal(frame.image, image)
