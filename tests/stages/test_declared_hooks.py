"""What the runtime and the application ask of a stage, each stage answering for itself
(pipeline/stage.py's hooks): the models its config names, the modules a shard preloads for
it, the native stacks it loads, where its frames come from and whether a GPU decodes them,
the files it serves and keeps, and its config in a restarted shard."""

from __future__ import annotations

import pytest

from vapipe.pipeline.prepare import models_named, native_stacks
from vapipe.pipeline.stage import Stage, StageConfig
from vapipe.stages.infer.backends.onnx_runtime import OnnxRuntimeConfig
from vapipe.stages.infer.backends.pytorch import TorchConfig
from vapipe.stages.infer.config import InferConfig
from vapipe.stages.sinks.clips import ClipsConfig, ClipsSink
from vapipe.stages.sinks.events import EventsConfig, EventsSink
from vapipe.stages.sinks.history import HistoryConfig, HistorySink
from vapipe.stages.sinks.snapshots import SnapshotsConfig, SnapshotsSink
from vapipe.stages.sinks.video import VideoConfig, VideoSink
from vapipe.stages.source.config import SourceConfig
from vapipe.stages.source.stage import VideoSource
from vapipe.stages.track.config import TrackConfig


def test_every_model_a_config_and_its_tables_name_with_its_key() -> None:
    track = TrackConfig.model_validate({"appearance": {"model": "reid.onnx"}})
    assert models_named(track) == [("appearance.model", "reid.onnx")]
    assert models_named(TrackConfig()) == []
    assert models_named(InferConfig(model="yolox-nano")) == [("model", "yolox-nano")]
    assert StageConfig().models() == {}


def test_a_shard_preloads_what_each_backend_table_declares() -> None:
    assert OnnxRuntimeConfig().preloads() == ("onnxruntime",)
    assert TorchConfig().preloads() == ("onnxruntime", "torch")
    infer = InferConfig.model_validate({"model": "m.onnx", "backend": "torch"})
    found = [m for _, table in infer.tables() for m in table.preloads()]
    assert found == ["onnxruntime", "torch"]
    assert [prefix for prefix, _ in infer.tables()] == ["", "backend."]


def test_native_stacks_come_from_the_tables_that_load_them() -> None:
    migraphx = InferConfig.model_validate(
        {"model": "m.onnx", "backend": {"providers": ["migraphx"]}}
    )
    assert native_stacks(migraphx) == {"migraphx"}
    assert (
        native_stacks(InferConfig.model_validate({"model": "m.onnx", "backend": "torch"})) == set()
    )
    assert native_stacks(SourceConfig(uri="a.mp4", hwaccel=None)) == set()


@pytest.mark.parametrize(
    ("hwaccel", "on_gpu"), [("nvdec", True), ("auto", True), ("rocdecode", True), (None, False)]
)
def test_a_source_says_where_it_reads_and_whether_a_gpu_decodes(
    hwaccel: str | None, on_gpu: bool
) -> None:
    config = SourceConfig(uri="rtsp://u:p@cam/1", hwaccel=hwaccel, open_timeout_s=7.5)
    assert VideoSource.uri_of(config) == "rtsp://u:p@cam/1"
    assert VideoSource.open_timeout_s(config) == 7.5
    assert VideoSource.decodes_on_gpu(config) is on_gpu


def test_the_files_a_node_serves_and_keeps() -> None:
    assert HistorySink.history_file(HistoryConfig(path="h/events.db")) == "h/events.db"
    assert SnapshotsSink.media_folder(SnapshotsConfig(dir="m1")) == "m1"
    assert ClipsSink.media_folder(ClipsConfig(dir="m2")) == "m2"
    assert VideoSink.media_folder(VideoConfig()) is None
    assert Stage.history_file(VideoConfig()) is None


def test_a_restarted_shard_writes_its_own_files_but_not_its_records() -> None:
    video = VideoSink.for_restart(VideoConfig(path="out/{source_id}.mp4"), 2)
    assert video.path == "out/{source_id}.restart2.mp4"
    to_stdout = VideoConfig(path="-")
    assert VideoSink.for_restart(to_stdout, 1) is to_stdout
    events = EventsConfig(path="out/events.jsonl")
    assert EventsSink.for_restart(events, 1) is events  # the parent holds the one events sink
    history = HistoryConfig()
    assert HistorySink.for_restart(history, 3) is history
