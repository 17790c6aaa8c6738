"""What tracking and analytics cost: per frame at 10, 50 and 200 objects, and
configs/analytics.toml against configs/file.toml on the same clip.

    python bench/analytics_bench.py --runs 5

Part 1 feeds the track and analytics stages synthetic frames (objects on straight paths with
jitter, crossing two lines and passing two zones; 300 frames per run) and times each frame's
``process`` calls. Part 2 runs both configs on traffic.mp4 (480 frames), alternating, and
compares fps = frames / wall time (model loading included). Writes
bench/results/analytics.json and prints markdown tables.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline import config, graph  # noqa: E402
from vapipe.pipeline.detections import Detections  # noqa: E402
from vapipe.pipeline.frame import Frame, StreamInfo  # noqa: E402
from vapipe.pipeline.runner import Runner  # noqa: E402
from vapipe.stages.analytics.config import AnalyticsConfig  # noqa: E402
from vapipe.stages.analytics.stage import AnalyticsStage  # noqa: E402
from vapipe.stages.track.config import TrackConfig  # noqa: E402
from vapipe.stages.track.stage import TrackStage  # noqa: E402

WIDTH, HEIGHT, FRAMES = 1920, 1080, 300
GEOMETRY = AnalyticsConfig.model_validate(
    {
        "lines": [
            {"name": "a", "start": [960, 0], "end": [960, 1080]},
            {"name": "b", "start": [0, 540], "end": [1920, 540]},
        ],
        "zones": [
            {"name": "left", "polygon": [[100, 100], [800, 100], [800, 900], [100, 900]],
             "dwell_s": 2.0, "max_objects": 10},
            {"name": "right", "polygon": [[1100, 200], [1800, 150], [1850, 950], [1150, 1000]]},
        ],
    }
)  # fmt: skip


def synthetic_frames(objects: int, seed: int) -> list[Detections]:
    """``objects`` boxes moving on straight lines (bouncing off the edges), jittered."""
    rng = np.random.default_rng(seed)
    position = rng.uniform([0, 0], [WIDTH - 80, HEIGHT - 160], (objects, 2))
    velocity = rng.uniform(-12, 12, (objects, 2))
    size = rng.uniform([30, 60], [80, 160], (objects, 2))
    frames = []
    for _ in range(FRAMES):
        position += velocity
        bounce = (position < 0) | (position > [WIDTH - 80, HEIGHT - 160])
        velocity[bounce] *= -1
        jitter = rng.normal(0, 1.5, (objects, 2))
        top_left = position + jitter
        xyxy = np.concatenate((top_left, top_left + size), axis=1).astype(np.float32)
        score = rng.uniform(0.3, 0.95, objects).astype(np.float32)
        frames.append(Detections(xyxy, score, np.zeros(objects, np.int32), ("person",)))
    return frames


def time_per_frame(objects: int, seed: int) -> dict[str, float]:
    track = TrackStage("track", TrackConfig())
    analytics = AnalyticsStage("analytics", GEOMETRY)
    track.open(None)  # type: ignore[arg-type]
    analytics.open(None)  # type: ignore[arg-type]
    image = np.zeros((1, 1, 3), np.uint8)  # analytics reads the frame size from here
    info = StreamInfo("cam", "synthetic", WIDTH, HEIGHT, None)
    image = np.lib.stride_tricks.as_strided(image, (HEIGHT, WIDTH, 3), (0, 0, 1))
    samples = []
    for seq, dets in enumerate(synthetic_frames(objects, seed)):
        frame = Frame("cam", seq, seq / 25, 0.0, image, info, detections=dets)
        started = time.perf_counter()
        track.process(frame)
        analytics.process(frame)
        samples.append(time.perf_counter() - started)
    steady = samples[10:]  # after the first tracks are confirmed
    return {
        "median_ms": harness.median(steady) * 1e3,
        "p95_ms": float(np.percentile(steady, 95)) * 1e3,
        "tracks": track.trackers["cam"].next_id - 1,
    }


def run_config(path: Path, overrides: list[str], out: Path) -> float:
    overrides = [
        *overrides,
        "cam.uri=sample:traffic",
        f"video.path={out}/v.mp4",
        f"events.path={out}/e.jsonl",
    ]
    started = time.perf_counter()
    result = Runner(graph.build(config.load(path, overrides))).run(handle_signals=False)
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"{path.name} failed: {result.error}")
    return result.stats["stages"]["events"]["frames"] / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(REPO / "bench/results/analytics.json"))
    args = parser.parse_args()
    report: dict = {
        "benchmark": "track + analytics cost per frame; analytics.toml vs file.toml",
        "command": f"python bench/analytics_bench.py --runs {args.runs}",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "per_frame": {},
    }
    for objects in (10, 50, 200):
        runs = [time_per_frame(objects, seed) for seed in range(args.runs)]
        report["per_frame"][str(objects)] = {
            "median_ms": round(harness.median(r["median_ms"] for r in runs), 3),
            "p95_ms": round(harness.median(r["p95_ms"] for r in runs), 3),
            "runs_median_ms": [round(r["median_ms"], 3) for r in runs],
        }
        print(f"{objects} objects: {report['per_frame'][str(objects)]}", file=sys.stderr)
    fps: dict[str, list[float]] = {"file": [], "analytics": []}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for name in ("file", "analytics"):
                fps[name].append(run_config(REPO / "configs" / f"{name}.toml", [], Path(tmp)))
            print(
                f"run {run + 1}: {fps['file'][-1]:.1f} vs {fps['analytics'][-1]:.1f}",
                file=sys.stderr,
            )
    medians = {name: harness.median(values) for name, values in fps.items()}
    report["pipelines"] = {
        "clip": "traffic.mp4 (480 frames, 640x360)",
        "file_fps": [round(v, 2) for v in fps["file"]],
        "analytics_fps": [round(v, 2) for v in fps["analytics"]],
        "file_median_fps": round(medians["file"], 2),
        "analytics_median_fps": round(medians["analytics"], 2),
        "ratio": round(medians["analytics"] / medians["file"], 3),
    }
    harness.record(Path(args.output), report)
    print("| objects | median ms/frame | p95 ms/frame |\n| --- | --- | --- |")
    for objects, row in report["per_frame"].items():
        print(f"| {objects} | {row['median_ms']:.3f} | {row['p95_ms']:.3f} |")
    pipes = report["pipelines"]
    print(f"\nfile.toml {pipes['file_median_fps']} fps, analytics.toml "
          f"{pipes['analytics_median_fps']} fps: ratio {pipes['ratio']}")  # fmt: skip


if __name__ == "__main__":
    main()
