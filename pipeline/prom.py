"""``/metrics``: the running service in Prometheus' text format, read at each scrape from the
runner's own counters (nothing is counted twice). Names start ``vapipe_`` (docs/api.md)."""

from __future__ import annotations

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

STATES = ("opening", "running", "reconnecting", "down", "stopping")


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    cumulative, total = [], 0
    for bound, count in zip([*map(str, BUCKETS_S), "+Inf"], histogram.counts, strict=True):
        total += count
        cumulative.append((bound, float(total)))
    return cumulative


class ServiceCollector(Collector):
    def __init__(self, service: Any) -> None:
        self.service = service

    def collect(self) -> Iterator[Metric]:
        service = self.service
        nodes = service.runner.nodes()
        frames = CounterMetricFamily(
            "vapipe_stage_frames", "Frames (items) a stage has processed.", labels=["stage"]
        )
        processing = HistogramMetricFamily(
            "vapipe_stage_processing_seconds", "Processing time per item.", labels=["stage"]
        )
        latency = HistogramMetricFamily(
            "vapipe_latency_seconds",
            "Capture-to-sink time of frames, per source, at the graph's last stages.",
            labels=["stage", "source"],
        )
        depth = GaugeMetricFamily("vapipe_queue_depth", "Items waiting in a link.", labels=["link"])
        drops = CounterMetricFamily(
            "vapipe_queue_dropped", "Items a leaky link dropped.", labels=["link"]
        )
        for name, node in nodes.items():
            metrics = node.metrics
            frames.add_metric([name], metrics.items)
            processing.add_metric([name], _buckets(metrics.processing), metrics.processing.total_s)
            for source, histogram in list(metrics.latency.items()):
                latency.add_metric([name, source], _buckets(histogram), histogram.total_s)
            if node.inbox is not None:
                for link in node.inbox.links:
                    depth.add_metric([link.name], len(link))
                    drops.add_metric([link.name], link.stats.dropped)
        yield from (frames, processing, latency, depth, drops)

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
        gpu = _gpu_memory()
        if gpu is not None:
            yield GaugeMetricFamily(
                "vapipe_gpu_memory_bytes", "GPU memory the process holds (torch).", value=gpu
            )


def _gpu_memory() -> float | None:
    """Where torch is in use on a CUDA/ROCm device: its allocated bytes; else unknown."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return float(torch.cuda.memory_allocated())
