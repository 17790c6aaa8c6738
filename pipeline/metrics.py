"""Per-stage counters and timings, queue high-water marks, and the end-of-run summary."""

from __future__ import annotations

import bisect
import threading
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.pipeline.queues import LinkQueue

SAMPLES_KEPT = 100_000
"""Per-item timings kept per stage (the newest); enough for stable percentiles on long runs."""


BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Histogram bounds (seconds) for processing time and latency, as Prometheus reads them."""


@dataclass
class Histogram:
    """Counts per bucket of ``BUCKETS_S`` (the last: above them all) and the sum."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_S) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float, times: int = 1) -> None:
        self.counts[bisect.bisect_left(BUCKETS_S, seconds)] += times
        self.total_s += seconds * times


def _append_bounded(samples: array, values: list[float]) -> None:
    samples.extend(values)
    if len(samples) > 2 * SAMPLES_KEPT:
        del samples[: len(samples) - SAMPLES_KEPT]


def _percentiles_ms(samples: array) -> dict[str, float]:
    values = np.frombuffer(samples, dtype=np.float64)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {
        "p50_ms": round(p50 * 1e3, 2),
        "p95_ms": round(p95 * 1e3, 2),
        "p99_ms": round(p99 * 1e3, 2),
        "max_ms": round(float(values.max()) * 1e3, 2),
    }


@dataclass
class StageMetrics:
    """Filled by the runner around each ``process`` call of one stage."""

    name: str
    type_name: str
    items: int = 0
    calls: int = 0
    errors: int = 0
    first_at: float | None = None
    last_at: float | None = None
    _per_item_s: array = field(default_factory=lambda: array("d"))
    _latency_s: dict[str, array] = field(default_factory=dict)
    processing: Histogram = field(default_factory=Histogram)
    """Seconds per item, since the start (``/metrics``)."""
    latency: dict[str, Histogram] = field(default_factory=dict)
    """Capture-to-here seconds per source, at the graph's last stages."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, items: int, seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self.first_at is None:
                self.first_at = now - seconds
            self.last_at = now
            self.items += items
            self.calls += 1
            if items:
                _append_bounded(self._per_item_s, [seconds / items] * items)
                self.processing.observe(seconds / items, items)

    def record_latency(self, items: list) -> None:
        """Capture-to-here latency of frames reaching a sink, per source."""
        now = time.time()
        with self._lock:
            for item in items:
                captured = getattr(item, "capture_time", None)
                if captured is not None:
                    samples = self._latency_s.setdefault(item.source_id, array("d"))
                    _append_bounded(samples, [now - captured])
                    self.latency.setdefault(item.source_id, Histogram()).observe(now - captured)

    def forget(self, source_id: str) -> None:
        """A source that left a running service: its series leave ``/metrics`` (a service
        that adds and removes streams for months must not grow with them)."""
        with self._lock:
            self.latency.pop(source_id, None)
            self._latency_s.pop(source_id, None)

    def summary(self) -> dict[str, Any]:
        with self._lock:
            times = np.frombuffer(self._per_item_s, dtype=np.float64) if self._per_item_s else None
            first, last = self.first_at, self.last_at
            span = last - first if first is not None and last is not None else 0.0
            summary: dict[str, Any] = {
                "type": self.type_name,
                "frames": self.items,
                "calls": self.calls,
                "fps": round(self.items / span, 2) if span > 0 else None,
                # Wall-clock first and last moments of work: a parent adding up shards takes
                # frames over the union of these, not the sum of rates (shards that start
                # one after another do not run side by side).
                "active_s": [round(_wall(first), 3), round(_wall(last), 3)]
                if first is not None and last is not None and span > 0
                else None,
                "mean_ms": round(float(times.mean()) * 1e3, 3) if times is not None else None,
                "p95_ms": round(float(np.percentile(times, 95)) * 1e3, 3)
                if times is not None
                else None,
            }
            if self._latency_s:
                summary["latency"] = {
                    source: _percentiles_ms(samples) for source, samples in self._latency_s.items()
                }
            return summary


def format_table(stats: dict[str, Any]) -> str:
    """The summary printed at the end of a run."""
    rows = [("stage", "type", "frames", "fps", "mean ms", "p95 ms", "in-queue max", "dropped")]
    # The streams first (a service's, removed ones included), then the stages; a service's
    # own nodes (named with a leading '_') are not the user's.
    shown = sorted(
        ((name, stage) for name, stage in stats["stages"].items() if not name.startswith("_")),
        key=lambda item: item[1].get("type") != "source",
    )
    into: dict[str, list[dict[str, Any]]] = {}
    for queue in stats["queues"].values():
        into.setdefault(queue["dst"], []).append(queue)
    for name, stage in shown:
        inputs = into.get(name, [])
        high = max((q["high_water"] for q in inputs), default=None)
        dropped = sum(q["dropped"] for q in inputs)
        rows.append(
            (
                f"{name} (removed)"
                if stage.get("removed") and not name.endswith(" (removed)")
                else name,
                stage["type"],
                str(stage["frames"]),
                _fmt(stage["fps"]),
                _fmt(stage["mean_ms"]),
                _fmt(stage["p95_ms"]),
                "-" if high is None else f"{high}/{max(q['size'] for q in inputs)}",
                str(dropped) if inputs else "-",
            )
        )
    widths = [max(len(row[col]) for row in rows) for col in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    extras = [
        f"{name}: {key} = {value}"
        for name, stage in stats["stages"].items()
        for key, value in stage.items()
        if key in ("provider", "providers_assigned")
    ]
    # What a stage says of its run (``notes`` in its stats: one line each, e.g. that it never
    # did its work, and why).
    extras += [
        f"{name}: {text}"
        for name, stage in stats["stages"].items()
        if not name.startswith("_")
        for text in (stage.get("notes") or {}).values()
    ]
    footer = f"wall {stats['wall_s']:.2f} s, exit {stats['exit_code']}"
    return "\n".join([*lines, *extras, *explain_drops(stats), footer])


def explain_drops(stats: dict[str, Any]) -> list[str]:
    """Why frames are missing, when some are: which link dropped how many of which source,
    and what to change."""
    lines = []
    for name, queue in stats["queues"].items():
        if not queue["dropped"]:
            continue
        sources = ", ".join(f"{s} {n}" for s, n in sorted(queue["dropped_by_source"].items()))
        lines.append(
            f"dropped {queue['dropped']} frames on '{name}' ({sources}): the link is leaky = "
            f"\"{queue['leaky']}\" (a live source's default) and '{queue['dst']}' fell behind; "
            f'set [queues."{name}"] leaky = "no" to lose none (latency then grows)'
        )
    return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def frames_done(
    sinks: list[Any], sources: list[Any], max_frames: int | None
) -> tuple[int, int | None]:
    """(frames out of the last stages, frames expected or None): ``sinks`` the nodes with no
    successor, ``sources`` the source stages (``total_frames()``: None for a camera)."""
    done = min((n.metrics.items for n in sinks), default=0)
    totals = []
    for source in sources:
        total = source.total_frames()
        if total is None and max_frames is None:
            return done, None
        totals.append(min(t for t in (total, max_frames) if t is not None))
    return done, sum(totals) if totals else None


def queue_summary(link: LinkQueue, consumer: str) -> dict[str, Any]:
    """One link queue's settings and counters, as the stats file reports them."""
    return {
        "src": link.name.split(" ! ")[0],
        "dst": consumer,
        "size": link.size,
        "leaky": link.leaky.value,
        "high_water": link.stats.high_water,
        "dropped": link.stats.dropped,
        "dropped_by_source": dict(link.stats.dropped_by_source or {}),
    }


def _wall(monotonic_s: float) -> float:
    """A ``time.monotonic()`` reading as epoch seconds, comparable between processes."""
    return time.time() - (time.monotonic() - monotonic_s)
