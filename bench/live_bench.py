"""A live RTSP stream through configs/rtsp.toml for a minute: latency, queue depths, memory.

    python bench/live_bench.py --seconds 60

Serves a clip (people.mp4 remuxed four times, 77 s at 23.976 fps) with the local GStreamer
RTSP server (tests/rtsp_server.py, Debian's python3-gi), then runs two scenarios in-process:

- ``normal``: configs/rtsp.toml as shipped (YOLOX-Nano on the CPU, video and events sinks);
- ``slow_sink``: the same plus a sink that takes 100 ms per frame (fan-out from nms).

Every second it samples each link's queue depth and the process's resident memory. Reported:
capture-to-event latency percentiles (from the events sink), frames dropped per link, and the
mean queue depth and memory over the first and the last 10 s (flat = no growth).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline import config, graph  # noqa: E402
from vapipe.pipeline.assets import resolve_media  # noqa: E402
from vapipe.pipeline.registry import register  # noqa: E402
from vapipe.pipeline.runner import Runner  # noqa: E402
from vapipe.pipeline.stage import Stage  # noqa: E402


@register("bench-slow-sink")
class SlowSink(Stage):
    """Takes 100 ms per frame, like a sink writing to a slow disk or network."""

    def process(self, item: Any) -> tuple[Any]:
        time.sleep(0.1)
        return (item,)


def long_clip(source: str, copies: int, target: Path) -> Path:
    """Remux ``copies`` of a clip back to back (no re-encoding)."""
    with av.open(source) as src, av.open(str(target), "w") as out:
        video = src.streams.video[0]
        stream = out.add_stream_from_template(video)
        span = 0
        for _ in range(copies):
            src.seek(0)
            last = 0
            for packet in src.demux(video):
                if packet.dts is None:
                    continue
                packet.pts += span
                packet.dts += span
                last = max(last, packet.pts + (packet.duration or 0))
                packet.stream = stream
                out.mux(packet)
            span = last
    return target


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


SLOW_EXTRA = """
[nodes.slow]
type = "bench-slow-sink"
"""


def scenario(name: str, url: str, seconds: float, out_dir: Path) -> dict[str, Any]:
    text = (REPO / "configs/rtsp.toml").read_text()
    if name == "slow_sink":
        text = (
            text.replace(
                'links = ["cam ! pre ! det ! nms ! video", "nms ! events"]',
                'links = ["cam ! pre ! det ! nms ! video", "nms ! events", "nms ! slow"]',
            )
            + SLOW_EXTRA
        )
    spec = config.parse(
        text,
        f"rtsp.toml ({name})",
        [
            f"cam.uri={url}",
            f"video.path={out_dir}/{name}.mp4",
            f"events.path={out_dir}/{name}.jsonl",
        ],
    )
    runner = Runner(graph.build(spec))
    result: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: result.update(outcome=runner.run(handle_signals=False)), daemon=True
    )
    started = time.monotonic()
    thread.start()
    samples = []
    while time.monotonic() - started < seconds:
        time.sleep(1.0)
        samples.append(
            {
                "t": round(time.monotonic() - started, 1),
                "rss_mib": round(rss_mib(), 1),
                "depths": runner.queue_depths(),
            }
        )
    runner.request_stop("benchmark time is up")
    thread.join(60)
    stats = result["outcome"].stats
    first = [s for s in samples if s["t"] <= 10]
    last = [s for s in samples if s["t"] > seconds - 10]
    links = list(samples[-1]["depths"])
    return {
        "scenario": name,
        "seconds": seconds,
        "frames_in": stats["stages"]["cam"]["frames"],
        "frames_to_events": stats["stages"]["events"]["frames"],
        "latency_ms": stats["stages"]["events"].get("latency", {}).get("cam"),
        "dropped": {k: q["dropped"] for k, q in stats["queues"].items() if q["dropped"]},
        "queue_depth_mean_first_10s": {
            k: round(statistics.mean(s["depths"][k] for s in first), 2) for k in links
        },
        "queue_depth_mean_last_10s": {
            k: round(statistics.mean(s["depths"][k] for s in last), 2) for k in links
        },
        "rss_mib_first_10s": round(statistics.mean(s["rss_mib"] for s in first), 1),
        "rss_mib_last_10s": round(statistics.mean(s["rss_mib"] for s in last), 1),
        "rss_mib_every_5s": [s["rss_mib"] for s in samples[4::5]],
        "exit_code": result["outcome"].exit_code,
        "reconnects": stats["stages"]["cam"].get("reconnects"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--output", default=str(REPO / "bench/results/live.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clip = long_clip(resolve_media("sample:people"), 4, Path(tmp) / "long.mp4")
        report = {
            "command": "python bench/live_bench.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "scenarios": [],
        }
        for name in ("normal", "slow_sink"):
            server = subprocess.Popen(
                ["/usr/bin/python3", str(REPO / "tests/rtsp_server.py"), "0", str(clip)],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                ready = server.stdout.readline().split()  # type: ignore[union-attr]
                if not ready or ready[0] != "ready":
                    raise SystemExit("the RTSP server did not start")
                port = int(ready[1])
                row = scenario(name, f"rtsp://127.0.0.1:{port}/stream", args.seconds, Path(tmp))
            finally:
                server.kill()
                server.wait()
            report["scenarios"].append(row)
            print(json.dumps(row, indent=1), file=sys.stderr)
    harness.record(Path(args.output), report)


if __name__ == "__main__":
    main()
