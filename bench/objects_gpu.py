"""A model on every person on the GPU machine: 16 x 1080p files (people.mp4 scaled) in 8
shards through detect + track + an ``embed`` node (Intel's person re-identification model,
torch on CUDA) against the same graph without the embed node, alternating in one call;
steady frames/s (event lines per second between 20% and 80% of the run's lines, as the
headline measures), the embed node's counts, and the ratio.

    python bench/objects_gpu.py --runs 2 --seconds 10 --out bench/results/objects_gpu.json

Run on the GPU machine with the build installed (bench/README.md says how).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.streams_bench import make_clip, run_pipeline, write_config  # noqa: E402

TRACKED = '"pre ! det ! nms ! track ! events"'
EMBEDDED = '"pre ! det ! nms ! track ! reid ! events"'
NODES = """
[nodes.track]
type = "track"
"""
REID = """
[nodes.reid]
type = "embed"
model = "person-reid"
on_classes = ["person"]
fit = "stretch"
max_batch = 16               # frames per call; their crops go to the model together
min_attempts = 1             # a vector with no gallery to vote on: one look holds
grow = 2.0                   # look again when the person is twice as big
backend = { type = "torch", device = "cuda" }
crops = "numpy"              # cut by OpenCV on the CPU; embed_opencl: by one OpenCL kernel
"""


def config(folder: Path, clip: Path, streams: int, shards: str, variant: str) -> Path:
    """``detect_only``; ``embed``; ``embed_idle``: the embed node on a class nobody is (what
    the node costs a frame without any crop: the frames keep their pixels for it)."""
    path = write_config(folder, clip, streams, shards, None, loop=True)
    text = path.read_text()
    assert '"pre ! det ! nms ! events"' in text, "streams_bench's graph changed: update this"
    embed = variant != "detect_only"
    text = text.replace('"pre ! det ! nms ! events"', EMBEDDED if embed else TRACKED)
    reid = REID.replace('"person"', '"nobody"') if variant == "embed_idle" else REID
    if variant == "embed_batched":  # MobileFaceNet (a smaller model), on the whole person
        reid = reid.replace('model = "person-reid"', 'model = "mobilefacenet"')
    if variant == "embed_crop_by_crop":  # the re-id model one crop per call, as before
        reid = reid.replace("max_batch = 16", "max_batch = 1 ")
    if variant == "embed_opencl":  # crops cut by one OpenCL kernel on the GPU
        reid = reid.replace('crops = "numpy"', 'crops = "opencl"')
    if variant == "embed_fp16":
        reid = reid.replace('device = "cuda" }', 'device = "cuda", fp16 = true }')
    path.write_text(text + NODES + (reid if embed else ""))
    return path


def measure(work: Path, clip: Path, name: str, streams: int, shards: str, frames: int) -> Any:
    folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
    result = run_pipeline(folder, config(folder, clip, streams, shards, name), max_frames=frames)
    if "error" in result:
        return result
    keys = ("steady_fps", "steady_cpu_busy_pct", "frames_per_wall_s", "frames")
    measured = {key: result.get(key) for key in keys}
    if name != "detect_only":
        import json

        stats = json.loads((folder / "stats.json").read_text())
        shards_stats = stats.get("shards") or [stats]
        for key in ("crops", "model_calls", "results", "at_edge", "too_small"):
            measured[key] = sum(s["stages"]["reid"].get(key, 0) for s in shards_stats)
        measured["most_calls_per_object"] = max(
            s["stages"]["reid"].get("most_calls_per_object", 0) for s in shards_stats
        )
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--shards", default="8")
    parser.add_argument("--seconds", type=float, default=10.0, help="of video per stream")
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "objects_gpu.json")
    parser.add_argument(
        "--variants",
        default="detect_only,embed",
        help="also: embed_idle, embed_batched, embed_crop_by_crop, embed_fp16, embed_opencl",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        clip = make_clip(work / "clip1080.mp4", args.seconds)
        frames = round(args.seconds * 24000 / 1001) * 3  # per source: its file 3 times
        runs = harness.alternate(
            {
                name: (lambda name=name: measure(
                    work, clip, name, args.streams, args.shards, frames))
                for name in args.variants.split(",")
            },
            args.runs,
        )  # fmt: skip
    steady = {
        name: harness.summary(values) if (values := [r["steady_fps"] for r in results
                                                     if r.get("steady_fps")]) else {}
        for name, results in runs.items()
    }  # fmt: skip
    ratios = {
        name: [
            e["steady_fps"] / d["steady_fps"]
            for d, e in zip(runs["detect_only"], results, strict=True)
            if d.get("steady_fps") and e.get("steady_fps")
        ]
        for name, results in runs.items()
        if name != "detect_only"
    }
    result = {
        "streams": args.streams,
        "shards": args.shards,
        "clip": f"people.mp4 scaled to 1920x1080, {args.seconds:g} s, looped",
        "runs": runs,
        "steady_fps": steady,
        "ratio": {name: harness.summary(r, digits=3) if r else None for name, r in ratios.items()},
    }
    harness.record(args.out, result)
    print(harness.table(
        ["graph", "steady frames/s", "ratio to detect + track"],
        [[name, steady[name].get("median"), result["ratio"].get(name, 1.0)] for name in runs],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
