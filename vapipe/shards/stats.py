"""The stats of a sharded run: each shard's own, and per stage and link the sum over shards."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from vapipe.pipeline.graph import Graph
from vapipe.pipeline.stage import Stage


def merge_stats(
    graph: Graph,
    shards: list[dict[str, Any]],
    children: list[dict[str, Any]],
    sinks: Mapping[str, Stage],
    wall_s: float,
    started: bool,
) -> dict[str, Any]:
    """The run's stats from each shard's (``children``, beside the parent's own entry for
    that shard in ``shards``), and per stage the sum over shards: frames add up, fps is all the
    frames over the time any shard was at work (shards that become ready one after another do
    not run side by side, so their rates do not add up), mean time is weighted by frames, p95
    is the worst shard's."""
    stages: dict[str, dict[str, Any]] = {}
    queues: dict[str, Any] = {}
    shards = [
        {
            **shard,
            "wall_s": child.get("wall_s"),
            "process": child.get("process", {}),
            "startup": child.get("startup", {}),
            "stages": child.get("stages", {}),
            **({"python_cpus": child["python_cpus"]} if "python_cpus" in child else {}),
        }
        for shard, child in zip(shards, children, strict=True)
    ]
    for child in children:
        for name, entry in child.get("stages", {}).items():
            add_stage(stages.setdefault(name, {}), entry)
        for name, queue in child.get("queues", {}).items():
            add_queue(queues.setdefault(name, {}), queue)
    for name, sink in sinks.items():
        stages.setdefault(name, {"type": sink.type_name, "frames": 0, "calls": 0, "fps": None,
                                 "mean_ms": None, "p95_ms": None})  # fmt: skip
        stages[name].update(sink.stats())
    order = {name: index for index, name in enumerate(graph.order)}
    stages = dict(sorted(stages.items(), key=lambda item: order.get(item[0], len(order))))
    spec = graph.spec
    return {
        "pipeline": spec.settings.name or os.path.basename(spec.file),
        "config": spec.file,
        "wall_s": round(wall_s, 3),
        "ready_s": max((s["process"].get("ready_s", 0.0) for s in shards), default=None),
        "stages": stages,
        "queues": queues,
        "shards": shards,
        "started": started,
    }


def add_stage(total: dict[str, Any], entry: dict[str, Any]) -> None:
    if not total:
        total.update(entry)
        total["latency"] = dict(entry.get("latency", {}))
        if not total["latency"]:
            del total["latency"]
        return
    frames_before, frames = total.get("frames") or 0, entry.get("frames") or 0
    total["frames"] = frames_before + frames
    total["calls"] = (total.get("calls") or 0) + (entry.get("calls") or 0)
    spans = [v for v in (total.get("active_s"), entry.get("active_s")) if v]
    fps = [v for v in (total.get("fps"), entry.get("fps")) if v is not None]
    # A side with no frames did no work; one with frames and no span predates active_s.
    dated = (total.get("active_s") or not frames_before) and (entry.get("active_s") or not frames)
    if dated:  # frames over the time any shard was at work
        total["active_s"] = [min(s[0] for s in spans), max(s[1] for s in spans)] if spans else None
        span = total["active_s"][1] - total["active_s"][0] if spans else 0.0
        total["fps"] = round(total["frames"] / span, 2) if span > 0 else None
    else:  # a shard that does not say when it worked: as if side by side
        total["active_s"] = None
        total["fps"] = round(sum(fps), 2) if fps else None
    if total.get("mean_ms") is not None and entry.get("mean_ms") is not None and total["frames"]:
        total["mean_ms"] = round(
            (total["mean_ms"] * frames_before + entry["mean_ms"] * frames) / total["frames"], 3
        )
    else:
        total["mean_ms"] = total.get("mean_ms") or entry.get("mean_ms")
    p95 = [v for v in (total.get("p95_ms"), entry.get("p95_ms")) if v is not None]
    total["p95_ms"] = max(p95) if p95 else None
    opening = [v for v in (total.get("open_s"), entry.get("open_s")) if v is not None]
    if opening:  # shards open side by side: the slowest is what the run waited for
        total["open_s"] = max(opening)
    if entry.get("latency"):
        total.setdefault("latency", {}).update(entry["latency"])
    # A stage's notes hold for the run where every shard says them (one that made no crop in
    # one shard and some in another did its work).
    notes = {k: v for k, v in (total.get("notes") or {}).items() if k in (entry.get("notes") or {})}
    if notes:
        total["notes"] = notes
    else:
        total.pop("notes", None)


def add_queue(total: dict[str, Any], queue: dict[str, Any]) -> None:
    """A link as every shard has it: drops add up, the high-water mark is the highest."""
    if not total:
        total.update(queue, dropped_by_source=dict(queue.get("dropped_by_source", {})))
        return
    total["high_water"] = max(total["high_water"], queue["high_water"])
    total["dropped"] += queue["dropped"]
    for source, count in queue.get("dropped_by_source", {}).items():
        total["dropped_by_source"][source] = total["dropped_by_source"].get(source, 0) + count
