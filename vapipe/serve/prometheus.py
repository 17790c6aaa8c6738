"""``/metrics``: the running service in Prometheus' text format, read at each scrape from the
runner's own counters (nothing is counted twice). Names start ``vapipe_`` (docs/api.md)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from vapipe.pipeline.metrics import BUCKETS_S, Histogram
from vapipe.pipeline.node import Node
from vapipe.pipeline.stage import Counting

STATES = ("opening", "running", "reconnecting", "down", "stopping")
SHARD_STAGE = ["node", "shard", "stage"]
PREVIEW_COUNTS = {
    "renders": "Previews drawn (each frame once per width, whoever views it).",
    "cpu_s": "CPU seconds drawing previews took (held within [serve] preview_cpu_share).",
    "reused": "Previews answered with a picture already drawn of the same frame.",
    "held_back": "Previews answered with the last picture: the previews' CPU share was spent.",
}
THIS_NODE = socket.gethostname()
"""A shard's ``node`` label when it runs on this machine."""


def _buckets(counts: list[int]) -> list[tuple[str, float]]:
    cumulative, total = [], 0
    for bound, count in zip([*map(str, BUCKETS_S), "+Inf"], counts, strict=True):
        total += count
        cumulative.append((bound, float(total)))
    return cumulative


def _histogram(histogram: Histogram) -> tuple[list[int], float]:
    return list(histogram.counts), histogram.total_s


def snapshot(nodes: dict[str, Node]) -> dict[str, Any]:
    """What /metrics shows of one process's stages and links, as plain data (a shard sends
    it to the parent)."""
    stages = {}
    for name, node in nodes.items():
        if name.startswith("_"):  # the service's own tap (serve/streams.py TAP): not a stage
            continue
        metrics = node.metrics
        stages[name] = {
            "items": metrics.items,
            "processing": _histogram(metrics.processing),
            "latency": {s: _histogram(h) for s, h in list(metrics.latency.items())},
            "links": [
                (link.name, len(link), link.stats.dropped)
                for link in (node.inbox.links if node.inbox is not None else ())
            ],
            "counters": node.stage.counters() if isinstance(node.stage, Counting) else {},
        }
    return {"stages": stages, "gpu_memory_bytes": gpu_memory()}


class ServiceCollector(Collector):
    def __init__(self, service: Any) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service
        frames = CounterMetricFamily(
            "vapipe_stage_frames", "Frames (items) a stage has processed.", labels=SHARD_STAGE
        )
        processing = HistogramMetricFamily(
            "vapipe_stage_processing_seconds", "Processing time per item.", labels=SHARD_STAGE
        )
        latency = HistogramMetricFamily(
            "vapipe_latency_seconds",
            "Capture-to-sink time of frames, per source, at the graph's last stages.",
            labels=[*SHARD_STAGE, "source"],
        )
        depth = GaugeMetricFamily(
            "vapipe_queue_depth", "Items waiting in a link.", labels=["node", "shard", "link"]
        )
        drops = CounterMetricFamily(
            "vapipe_queue_dropped", "Items a leaky link dropped.", labels=["node", "shard", "link"]
        )
        counted = CounterMetricFamily(
            "vapipe_stage_counted",
            "What a stage counted beyond frames (a model on objects: crops, model_calls, "
            "too_small, at_edge, deferred, failed, results).",
            labels=[*SHARD_STAGE, "counter"],
        )
        gpu = GaugeMetricFamily(
            "vapipe_gpu_memory_bytes",
            "GPU memory a process holds (torch).",
            labels=["node", "shard"],
        )
        previews = {
            key: CounterMetricFamily(f"vapipe_preview_{key}", text, labels=["node", "shard"])
            for key, text in PREVIEW_COUNTS.items()
        }
        for shard, taken in service.metric_snapshots():
            at = [taken.get("node") or THIS_NODE, shard]  # a cluster's node, else this machine
            for name, stage in taken["stages"].items():
                frames.add_metric([*at, name], stage["items"])
                counts, total_s = stage["processing"]
                processing.add_metric([*at, name], _buckets(counts), total_s)
                for source, (counts, total_s) in stage["latency"].items():
                    latency.add_metric([*at, name, source], _buckets(counts), total_s)
                for counter, value in stage.get("counters", {}).items():
                    counted.add_metric([*at, name, counter], value)
                for link, waiting, dropped in stage["links"]:
                    depth.add_metric([*at, link], waiting)
                    drops.add_metric([*at, link], dropped)
            if taken["gpu_memory_bytes"] is not None:
                gpu.add_metric(at, taken["gpu_memory_bytes"])
            for key, value in (taken.get("previews") or {}).items():
                previews[key].add_metric(at, value)
        yield from (frames, processing, latency, depth, drops, counted, gpu, *previews.values())

        streams = service.streams()
        yield GaugeMetricFamily("vapipe_streams", "Streams the service runs.", value=len(streams))
        state = GaugeMetricFamily(
            "vapipe_stream_state", "1 for the stream's state, 0 for the others.",
            labels=["stream", "state"],
        )  # fmt: skip
        by_stream = {
            "vapipe_stream_frames": ("Frames of the stream that reached the sinks.", "frames"),
            "vapipe_stream_reconnects": ("Times the stream was reopened.", "reconnects"),
            "vapipe_stream_dropped": ("Frames of the stream dropped by leaky links.", "dropped"),
        }
        counters = {
            name: CounterMetricFamily(name, text, labels=["stream"])
            for name, (text, _) in by_stream.items()
        }
        fps = GaugeMetricFamily("vapipe_stream_fps", "Frames per second now.", labels=["stream"])
        for stream in streams:
            for value in STATES:
                state.add_metric([stream["id"], value], 1.0 if stream["state"] == value else 0.0)
            for name, (_, key) in by_stream.items():
                counters[name].add_metric([stream["id"]], stream[key])
            fps.add_metric([stream["id"]], stream["fps"])
        yield from (state, fps, *counters.values())
        yield CounterMetricFamily(
            "vapipe_live_events_dropped",
            "Events live-event clients lost by reading too slowly.",
            value=service.hub.dropped_total,
        )


def gpu_memory() -> float | None:
    """Where torch is in use on a CUDA/ROCm device: its allocated bytes; else unknown."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return float(torch.cuda.memory_allocated())
