"""Whether a faster way of running the model gives the same detections as float32 (issue 61's
case (d)): the 1080p clip through one stream, once per variant, each frame's detections matched
to float32's (same class, IoU >= 0.9, score within 0.03).

    python bench/same_detections.py --site /tmp/b-site --variants fp32,fp16 \\
        --out bench/results/same_detections.json

A variant is a backend table (``fp32``: the torch backend as it runs by default; ``fp16``: the
same with ``fp16 = true``) or ``nvdec`` (float32, pictures decoded on NVDEC). A benchmark: it
reports, it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness, streams_bench  # noqa: E402

IOU, SCORE = 0.9, 0.03
"""A detection matches float32's when the class is the same, the boxes overlap at IoU >= 0.9
and the scores differ by 0.03 at most (issue 61's threshold)."""

VARIANTS = {
    "fp32": ('type = "torch"\ndevice = "cuda"', None),
    "fp16": ('type = "torch"\ndevice = "cuda"\nfp16 = true', None),
    "nvdec": ('type = "torch"\ndevice = "cuda"', "nvdec"),
}


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` (N x 4) with every box of ``b`` (M x 4): N x M."""
    top_left = np.maximum(a[:, None, :2], b[None, :, :2])
    bottom_right = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    area_a = np.prod(a[:, 2:] - a[:, :2], axis=1)
    area_b = np.prod(b[:, 2:] - b[:, :2], axis=1)
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def match_frame(ref: list[dict], got: list[dict]) -> tuple[int, float]:
    """(detections of ``ref`` matched in ``got``, the largest score gap among IoU matches):
    per class, pairs taken greedily by IoU, each detection used once."""
    matched, worst = 0, 0.0
    for cls in {d["class_id"] for d in ref}:
        a = [d for d in ref if d["class_id"] == cls]
        b = [d for d in got if d["class_id"] == cls]
        if not b:
            continue
        overlap = iou(np.array([d["xyxy"] for d in a]), np.array([d["xyxy"] for d in b]))
        while overlap.size and overlap.max() >= IOU:
            i, j = np.unravel_index(int(overlap.argmax()), overlap.shape)
            gap = abs(a[i]["score"] - b[j]["score"])
            worst = max(worst, gap)
            matched += gap <= SCORE
            overlap[i, :] = -1
            overlap[:, j] = -1
    return matched, worst


def compare(ref: dict[int, list], got: dict[int, list]) -> dict[str, Any]:
    """Over every frame: the share of detections of either run matched in the other."""
    matched = total = 0
    worst = 0.0
    for seq in set(ref) | set(got):
        a, b = ref.get(seq, []), got.get(seq, [])
        hits, gap = match_frame(a, b)
        matched += hits
        total += max(len(a), len(b))
        worst = max(worst, gap)
    return {
        "matched_fraction": round(matched / total, 5) if total else None,
        "detections_reference": sum(len(v) for v in ref.values()),
        "detections": sum(len(v) for v in got.values()),
        "largest_score_gap": round(worst, 4),
        "frames": len(ref),
    }


def detections(site: str | None, clip: Path, work: Path, variant: str) -> dict[int, list]:
    backend, hwaccel = VARIANTS[variant]
    folder = Path(tempfile.mkdtemp(dir=work, prefix=variant + "-"))
    config = streams_bench.write_config(
        folder, clip, 1, "1", True, queue_size=8, backend_extra=backend, torch_pre=True,
        hwaccel=hwaccel,
    )  # fmt: skip
    env = {"PYTHONPATH": site} if site else None
    result = streams_bench.run_pipeline(folder, config, extra_env=env)
    if "error" in result:
        raise RuntimeError(result["error"][-600:])
    lines = (folder / "out/events.jsonl").read_text().splitlines()
    frames = [json.loads(line) for line in lines]
    return {e["seq"]: e["detections"] for e in frames if "detections" in e}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", help="the build's site folder (PYTHONPATH of its runs)")
    parser.add_argument("--clip", type=Path, help="a 1080p clip (default: made as streams_bench)")
    parser.add_argument("--variants", default="fp32,fp16")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vapipe-same-detections"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    clip = args.clip or streams_bench.make_clip(args.work / "clip1080.mp4")
    names = args.variants.split(",")
    runs = {name: detections(args.site, clip, args.work, name) for name in names}
    report = {
        "clip": "people.mp4 scaled to 1920x1080",
        "rule": f"same class, IoU >= {IOU}, score within {SCORE}",
        "against_" + names[0]: {n: compare(runs[names[0]], runs[n]) for n in names[1:]},
    }
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
