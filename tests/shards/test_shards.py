"""How sources are split into shards, what a shard's config holds, how stats add up."""

from __future__ import annotations

import pytest

from vapipe.pipeline.config import parse
from vapipe.pipeline.errors import ConfigError
from vapipe.shards.plan import partition, shard_count
from vapipe.shards.stats import add_queue, add_stage
from vapipe.shards.worker import subset
from vapipe.stages.media.paths import restart_path

CONFIG = """\
links = ["a ! pre", "b ! pre", "c ! pre ! det ! nms ! video", "nms ! events"]

[nodes.a]
type = "source"
uri = "a.mp4"
[nodes.b]
type = "source"
uri = "b.mp4"
[nodes.c]
type = "source"
uri = "c.mp4"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "m.onnx"
[nodes.nms]
type = "nms"
[nodes.video]
type = "video"
path = "out/{source_id}.mp4"
[nodes.events]
type = "events"
path = "out/events.jsonl"

[queues."b ! pre"]
size = 2
[queues."pre ! det"]
size = 3
"""


@pytest.mark.parametrize(
    ("setting", "sources", "cpus", "expected"),
    [
        (1, 16, 16, 1),
        (4, 16, 2, 4),  # asked for: given, whatever the cores
        (8, 3, 16, 3),  # never more shards than sources
        ("auto", 16, 16, 8),  # one per 2 cores
        ("auto", 16, 2, 1),
        ("auto", 2, 64, 2),
    ],
)
def test_shard_count(setting: int | str, sources: int, cpus: int, expected: int) -> None:
    assert shard_count(setting, sources, cpus) == expected


@pytest.mark.parametrize(
    ("hwaccel", "expected"),
    [(None, 8), ("nvdec", 4), ("rocdecode", 4), ("auto", 4), ("cuda", 8), ("mixed", 8)],
)
def test_auto_shards_are_fewer_where_every_source_decodes_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, hwaccel: str | None, expected: int
) -> None:
    """Per 4 cores, not 2, where no core decodes (measured on NVDEC: 4 shards beat 8); an
    FFmpeg hwaccel (frames back to the host) or one source in software keeps 2."""
    from vapipe.pipeline.graph import build
    from vapipe.shards.choice import runner_for
    from vapipe.shards.supervisor import ShardRunner

    monkeypatch.setattr("os.cpu_count", lambda: 16)
    monkeypatch.setattr("vapipe.shards.plan.os.cpu_count", lambda: 16)
    sources = ""
    for index in range(16):
        line = f'hwaccel = "{hwaccel}"\n' if hwaccel not in (None, "mixed") else ""
        if hwaccel == "mixed" and index:
            line = 'hwaccel = "nvdec"\n'
        sources += f'[nodes.cam{index}]\ntype = "source"\nuri = "a{index}.mp4"\n{line}\n'
    links = ", ".join(f'"cam{index} ! events"' for index in range(16))
    text = (
        f'links = [{links}]\n[pipeline]\nshards = "auto"\n\n{sources}'
        '[nodes.events]\ntype = "events"\npath = "out/e.jsonl"\n'
    )
    spec = parse(text, "shards.toml")
    runner = runner_for(spec, build(spec))
    assert isinstance(runner, ShardRunner) and len(runner._slots) == expected


def test_partition_is_round_robin_and_covers_every_source_once() -> None:
    sources = [f"cam{i}" for i in range(7)]
    groups = partition(sources, 3)
    assert groups == [("cam0", "cam3", "cam6"), ("cam1", "cam4"), ("cam2", "cam5")]
    assert sorted(s for group in groups for s in group) == sorted(sources)


def test_a_shard_config_keeps_its_sources_and_everything_downstream() -> None:
    spec = parse(CONFIG, "x.toml")
    mine = subset(spec, ("c",))
    assert set(mine.nodes) == {"c", "pre", "det", "nms", "video", "events"}
    assert mine.links == ["c ! pre ! det ! nms ! video", "nms ! events"]
    assert set(mine.queues) == {"pre ! det"}  # b's queue went with b
    other = subset(spec, ("a", "b"))
    assert other.links == ["a ! pre", "b ! pre", "pre ! det ! nms ! video", "nms ! events"]


def test_a_restarted_shard_writes_new_files_but_events_stay_with_the_parent() -> None:
    spec = parse(CONFIG, "x.toml")
    restarted = subset(spec, ("a",), restart=2)
    assert restarted.nodes["video"].config.path == "out/{source_id}.restart2.mp4"
    assert restarted.nodes["events"].config.path == "out/events.jsonl"
    assert (
        restart_path("out/frames/{source_id}-{seq}.jpg", 1)
        == "out/frames/{source_id}-{seq}.restart1.jpg"
    )
    assert restart_path("out/noext", 1) == "out/noext.restart1"


def test_shards_can_be_set_from_the_command_line() -> None:
    spec = parse(CONFIG, "x.toml", ["pipeline.shards=3", "pipeline.devices=['0', '1']"])
    assert spec.settings.shards == 3 and spec.settings.devices == ["0", "1"]
    assert parse(CONFIG, "x.toml", ["pipeline.shards=auto"]).settings.shards == "auto"
    named = r"^--set pipeline.shards=0: key .pipeline.shards.: expected"
    with pytest.raises(ConfigError, match=named):
        parse(CONFIG, "x.toml", ["pipeline.shards=0"])


def shard_det(frames: int, start: float, end: float) -> dict:
    return {"type": "infer", "frames": frames, "calls": 1, "fps": round(frames / (end - start), 2),
            "mean_ms": 1.0, "p95_ms": 1.0, "active_s": [start, end]}  # fmt: skip


def test_shards_at_work_side_by_side_add_their_rates() -> None:
    total: dict = {}
    for _ in range(3):
        add_stage(total, shard_det(500, 100.0, 110.0))
    assert total["fps"] == 150.0 and total["active_s"] == [100.0, 110.0]


def test_shards_at_work_one_after_another_do_not_add_their_rates() -> None:
    # Each ran 10 s at 50 frames/s, the second from 5 s after the first: 1,000 frames in
    # 15 s, not 100 frames/s (what summing the rates said, and what a warm cache, whose
    # shards all start together, seemed to fall short of).
    total: dict = {}
    add_stage(total, shard_det(500, 100.0, 110.0))
    add_stage(total, shard_det(500, 105.0, 115.0))
    assert total["fps"] == pytest.approx(66.67) and total["active_s"] == [100.0, 115.0]
    add_stage(total, {"type": "infer", "frames": 0, "calls": 0, "fps": None, "active_s": None})
    assert total["fps"] == pytest.approx(66.67), "a shard with no frames changed the span"
    add_stage(total, shard_det(100, 90.0, 100.0))
    assert total["fps"] == pytest.approx(1100 / 25) and total["active_s"] == [90.0, 115.0]


def idle_det() -> dict:
    return {"type": "infer", "frames": 0, "calls": 0, "fps": None, "active_s": None}


def test_a_shard_that_did_nothing_neither_spans_nor_rates() -> None:
    total: dict = {}
    add_stage(total, idle_det())
    add_stage(total, idle_det())
    assert total["fps"] is None and total["active_s"] is None, "no work has no rate"
    add_stage(total, shard_det(100, 10.0, 10.5))  # half a second of work after two idle ones
    assert total["fps"] == 200.0 and total["active_s"] == [10.0, 10.5]
    add_stage(total, shard_det(100, 2.0, 12.0))  # early in the clock: a span is end - start
    assert total["fps"] == 20.0 and total["active_s"] == [2.0, 12.0]


def test_a_span_of_no_length_has_no_rate() -> None:
    total: dict = {}
    for _ in range(2):
        add_stage(total, {**shard_det(1, 5.0, 6.0), "active_s": [5.0, 5.0]})
    assert total["fps"] is None and total["active_s"] == [5.0, 5.0]


def test_a_shard_without_a_span_makes_the_rates_add_up_as_before() -> None:
    # A child of an older build, with frames and no active_s: the sum, as if side by side.
    total: dict = {}
    add_stage(total, {**shard_det(500, 0.0, 10.0), "fps": 50.123})
    add_stage(total, {"type": "infer", "frames": 300, "calls": 3, "fps": 70.0011})
    assert total["fps"] == 120.12 and total["active_s"] is None
    add_stage(total, shard_det(100, 0.0, 1.0))
    assert total["fps"] == 220.12, "a dated shard after an undated one is summed too"


def test_stage_stats_add_up_over_shards() -> None:
    total: dict = {}
    add_stage(total, {"type": "infer", "frames": 100, "calls": 10, "fps": 50.0,
                       "mean_ms": 2.0, "p95_ms": 3.0, "provider": "CPU"})  # fmt: skip
    add_stage(total, {"type": "infer", "frames": 300, "calls": 30, "fps": 70.0,
                       "mean_ms": 4.0, "p95_ms": 9.0, "provider": "CPU"})  # fmt: skip
    assert total["frames"] == 400 and total["calls"] == 40
    assert total["fps"] == 120.0  # side by side
    assert total["mean_ms"] == pytest.approx(3.5)  # weighted by frames
    assert total["p95_ms"] == 9.0 and total["provider"] == "CPU"
    queue: dict = {}
    add_queue(queue, {"dst": "det", "high_water": 2, "dropped": 1,
                       "dropped_by_source": {"a": 1}})  # fmt: skip
    add_queue(queue, {"dst": "det", "high_water": 5, "dropped": 2,
                       "dropped_by_source": {"a": 1, "b": 1}})  # fmt: skip
    assert queue["high_water"] == 5 and queue["dropped"] == 3
    assert queue["dropped_by_source"] == {"a": 2, "b": 1}


class _Collecting:
    """Stands in for the parent's event sink."""

    def __init__(self) -> None:
        self.records: list[dict] = []

    def accept(self, record: dict) -> None:
        self.records.append(record)


def test_the_parent_drops_frames_delivered_before_a_restart_and_says_source_up_first() -> None:
    import threading

    from vapipe.pipeline.graph import build
    from vapipe.shards.supervisor import ShardRunner, Slot

    runner = ShardRunner(build(parse(CONFIG, "s.toml")), 2)
    sink = _Collecting()
    runner._sinks, runner._sink_locks = {"events": sink}, {"events": threading.Lock()}  # type: ignore[dict-item]
    runner._map_sources()

    def frame(seq: int) -> None:
        at = (seq / 25, 1000.0 + seq)  # (pts, capture time)
        runner._deliver_frame("events", "a", seq, at, [{"event": "frame", "seq": seq}])

    for seq in range(3):
        frame(seq)
    runner._sources_down(Slot(0, ("a",), None), "shard 0 (a) died")
    for seq in (1, 2, 3, 4):  # the restarted shard read the file again from frame 1
        frame(seq)
    kinds = [(r["event"], r["seq"]) for r in sink.records]
    assert kinds == [
        ("frame", 0), ("frame", 1), ("frame", 2),
        ("source_down", 2), ("source_up", 2), ("frame", 3), ("frame", 4),
    ], kinds  # fmt: skip
    assert sink.records[3]["reason"] == "shard 0 (a) died"
    # A shard restarted now goes on after frame 4, timed from when that frame was captured
    # (its time in the pipeline is part of the outage a camera's timeline must span).
    assert runner.ledger.resume(["a"]) == {"a": (5, 4 / 25, 1004.0)}


def test_shards_take_the_devices_in_turn() -> None:
    from vapipe.pipeline.graph import build
    from vapipe.shards.supervisor import ShardRunner

    spec = parse(CONFIG, "x.toml", ["pipeline.devices=['0', '1']"])
    runner = ShardRunner(build(spec), 3)
    assert [(s.sources, s.device) for s in runner._slots] == [
        (("a",), "0"), (("b",), "1"), (("c",), "0"),
    ]  # fmt: skip
    assert [s.device for s in ShardRunner(build(parse(CONFIG, "x.toml")), 2)._slots] == [
        None, None,
    ]  # fmt: skip


def test_the_forkserver_preloads_what_the_graph_runs() -> None:
    import importlib.util

    from vapipe.pipeline.graph import build
    from vapipe.shards.forkserver import preloaded

    modules = preloaded(build(parse(CONFIG, "x.toml", ["det.backend='onnxruntime'"])))
    assert {"vapipe.stages.infer.stage", "vapipe.stages.sinks.video", "onnxruntime"} <= set(modules)
    assert "torch" not in modules
    if importlib.util.find_spec("torch") is not None:
        assert "torch" in preloaded(build(parse(CONFIG, "x.toml", ["det.backend='torch'"])))


def test_cluster_settings_are_set_from_the_command_line_table_by_table() -> None:
    overrides = [
        "pipeline.cluster=ray",
        "pipeline.shard_resources.num_gpus=0.25",
        "pipeline.shard_resources.resources={ camera_net = 1 }",
    ]
    spec = parse(CONFIG, "x.toml", overrides)
    wanted = spec.settings.shard_resources
    assert spec.settings.cluster == "ray"
    assert (wanted.num_cpus, wanted.num_gpus, wanted.resources) == (1.0, 0.25, {"camera_net": 1})
    with pytest.raises(ConfigError, match="cluster"):
        parse(CONFIG, "x.toml", ["pipeline.cluster=slurm"])
    with pytest.raises(ConfigError, match=r"\[pipeline.cluster\] is not a table"):
        parse(CONFIG, "x.toml", ["pipeline.cluster=ray", "pipeline.cluster.x=1"])
