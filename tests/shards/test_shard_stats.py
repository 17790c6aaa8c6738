"""The stats of a sharded run as ``--stats`` prints them: each shard's own beside the parent's
entry for it, per stage and link the sum over shards in the graph's order, and the parent's
sinks (which run in the parent) with theirs."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.shards.test_shards import CONFIG
from vapipe.pipeline.config import parse
from vapipe.pipeline.graph import build
from vapipe.pipeline.stage import Stage
from vapipe.shards.stats import add_stage, merge_stats


class Sink:
    """The parent's events sink, as far as the stats are concerned."""

    type_name = "events"

    def __init__(self, **stats: Any) -> None:
        self._stats = stats

    def stats(self) -> dict[str, Any]:
        return self._stats


def child(frames: int, start: float, end: float, ready_s: float | None = None) -> dict[str, Any]:
    process = {} if ready_s is None else {"ready_s": ready_s}
    stage = {"frames": frames, "calls": frames // 4, "fps": None, "mean_ms": 2.0,
             "p95_ms": 3.0, "active_s": [start, end]}  # fmt: skip
    return {
        "wall_s": end - start + 1,
        "process": process,
        "startup": {"first_output_s": 1.5},
        # nms listed before pre: the merged table follows the graph, not the shards' order
        "stages": {"nms": {**stage, "type": "nms"}, "pre": {**stage, "type": "preprocess"}},
        "queues": {"pre->det": {"dst": "det", "high_water": frames // 10, "dropped": 1}},
    }


def merged(children: list[dict[str, Any]], name: str = "", **sink: Any) -> dict[str, Any]:
    text = CONFIG if not name else CONFIG + f'[pipeline]\nname = "{name}"\n'
    graph = build(parse(text, "configs/four_cams.toml"))
    shards = [{"shard": index, "sources": [f"cam{index}"]} for index in range(len(children))]
    sinks = cast(dict[str, Stage], {"events": Sink(**sink)})
    return merge_stats(graph, shards, children, sinks, 12.34567, True)


def test_each_shard_keeps_its_own_beside_the_parents_entry() -> None:
    children = [child(100, 0.0, 10.0, ready_s=4.0), child(300, 2.0, 12.0)]
    stats = merged(children)
    assert [s["shard"] for s in stats["shards"]] == [0, 1]
    assert stats["shards"][1]["sources"] == ["cam1"]
    assert [s["wall_s"] for s in stats["shards"]] == [11.0, 11.0]
    assert stats["shards"][0]["process"] == {"ready_s": 4.0}
    assert stats["shards"][1]["startup"] == {"first_output_s": 1.5}
    assert stats["shards"][0]["stages"]["pre"]["frames"] == 100
    graph = build(parse(CONFIG, "c.toml"))
    with pytest.raises(ValueError):  # a child for every shard, never one short
        merge_stats(graph, [{"shard": 0}, {"shard": 1}], children[:1], {}, 1.0, True)


def test_stages_and_links_add_up_over_shards_in_the_graphs_order() -> None:
    stats = merged([child(100, 0.0, 10.0), child(300, 2.0, 12.0)])
    assert list(stats["stages"]) == ["pre", "nms", "events"]
    pre = stats["stages"]["pre"]
    assert (pre["frames"], pre["calls"], pre["active_s"]) == (400, 100, [0.0, 12.0])
    assert pre["fps"] == pytest.approx(400 / 12, abs=0.01)
    assert stats["queues"]["pre->det"] == {
        "dst": "det", "high_water": 30, "dropped": 2, "dropped_by_source": {},
    }  # fmt: skip


def test_the_parents_sink_is_listed_with_its_own_stats() -> None:
    stats = merged([child(100, 0.0, 10.0)], frames=100, calls=100, mean_ms=0.5)
    events = stats["stages"]["events"]
    assert events == {"type": "events", "frames": 100, "calls": 100, "fps": None,
                      "mean_ms": 0.5, "p95_ms": None}  # fmt: skip
    quiet = merged([child(100, 0.0, 10.0)])["stages"]["events"]
    assert (quiet["frames"], quiet["calls"]) == (0, 0)  # a sink that wrote nothing says 0


def test_the_run_is_named_rounded_and_ready_when_its_slowest_shard_was() -> None:
    stats = merged([child(100, 0.0, 10.0, ready_s=4.0), child(100, 0.0, 10.0, ready_s=9.5)])
    assert stats["pipeline"] == "four_cams.toml" and stats["config"] == "configs/four_cams.toml"
    assert stats["wall_s"] == 12.346 and stats["started"] is True
    assert stats["ready_s"] == 9.5
    assert merged([child(1, 0, 1)], name="lobby")["pipeline"] == "lobby"
    # A shard that never said when it was ready counts as ready at once.
    assert merged([child(1, 0, 1, ready_s=-2.0), child(1, 0, 1)])["ready_s"] == 0.0
    assert merged([child(1, 0, 1, ready_s=0.5), child(1, 0, 1)])["ready_s"] == 0.5


def test_latency_percentiles_are_kept_per_source_and_none_is_no_entry() -> None:
    total: dict[str, Any] = {}
    add_stage(total, {"type": "events", "frames": 0, "latency": {}})
    assert "latency" not in total
    add_stage(total, {"type": "events", "frames": 5, "latency": {"a": {"p95_ms": 40.0}}})
    add_stage(total, {"type": "events", "frames": 5, "latency": {"b": {"p95_ms": 50.0}}})
    assert total["latency"] == {"a": {"p95_ms": 40.0}, "b": {"p95_ms": 50.0}}
    first: dict[str, Any] = {}
    add_stage(first, {"type": "events", "frames": 5, "latency": {"a": {"p95_ms": 1.0}}})
    assert first["latency"] == {"a": {"p95_ms": 1.0}}


def test_missing_counts_add_as_zero_and_a_missing_mean_takes_the_other() -> None:
    total: dict[str, Any] = {}
    add_stage(total, {"type": "infer", "frames": 10, "calls": None, "mean_ms": None})
    add_stage(total, {"type": "infer", "frames": 10, "calls": 2, "mean_ms": 4.0})
    assert total["calls"] == 2 and total["mean_ms"] == 4.0
    add_stage(total, {"type": "infer", "frames": 10, "calls": None, "mean_ms": None})
    assert total["calls"] == 2 and total["mean_ms"] == 4.0
    weighted: dict[str, Any] = {}
    add_stage(weighted, {"type": "infer", "frames": 1, "mean_ms": 1.0})
    add_stage(weighted, {"type": "infer", "frames": 2, "mean_ms": 2.0})
    assert weighted["mean_ms"] == 1.667  # (1 + 4) / 3, to the microsecond


def test_opening_time_is_the_slowest_shards() -> None:
    total: dict[str, Any] = {}
    for open_s in (0.4, 1.2, 0.9):
        add_stage(total, {"type": "source", "frames": 10, "open_s": open_s})
    assert total["open_s"] == 1.2
