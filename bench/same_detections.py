"""Whether a faster way of running the model gives the same detections as float32 (issue 61's
case (d)): the 1080p clip through one stream, once per variant, each frame's detections matched
to float32's (same class, IoU >= 0.9, score within 0.03).

    python bench/same_detections.py --site /tmp/b-site --variants fp32,fp16 \\
        --out bench/results/same_detections.json

A variant is a backend table (``fp32``: the torch backend as it runs by default; ``fp16``: the
same with ``fp16 = true``) or ``nvdec`` (float32, pictures decoded on NVDEC).

``--precisions fp16,autocast,tf32`` instead runs the model itself (onnx2torch, SiLU fused, as
the torch backend converts it) on every frame of the clip letterboxed, in float32 and in each
precision, and matches the detections the project's own head decode and NMS keep (conf 0.25,
IoU 0.45): whether a precision keeps the detections, before a backend is asked to use it (the
backend's own load check compares raw outputs on random input, which says nothing of boxes).
A benchmark: it reports, it asserts nothing.
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


def precision_agreement(model: Path, clip: Path, precisions: list[str]) -> dict[str, Any]:
    """Each precision's detections against float32's on every frame of ``clip`` (GPU)."""
    import av
    import cv2
    import onnx2torch
    import torch

    from vapipe.stages.infer.backends.fx_rewrites import fuse_silu
    from vapipe.stages.infer.heads import Family, decode
    from vapipe.stages.nms import nms

    device = torch.device("cuda")
    frames = []
    with av.open(str(clip)) as container:
        for picture in container.decode(video=0):
            image = picture.to_ndarray(format="bgr24")
            ratio = min(416 / image.shape[1], 416 / image.shape[0])
            w, h = int(image.shape[1] * ratio + 0.5), int(image.shape[0] * ratio + 0.5)
            canvas = np.full((416, 416, 3), 114, np.uint8)  # YOLOX: top-left, pad 114
            canvas[:h, :w] = cv2.resize(image, (w, h))
            frames.append(canvas.transpose(2, 0, 1).astype(np.float32))
    batch = torch.from_numpy(np.stack(frames)).to(device)

    def outputs(half: bool = False, autocast: bool = False) -> np.ndarray:
        module = onnx2torch.convert(str(model)).eval().to(device)
        fuse_silu(module)
        module = module.half() if half else module
        chunks = []
        with torch.inference_mode(), torch.autocast("cuda", torch.float16, enabled=autocast):
            for start in range(0, len(batch), 32):
                given = batch[start : start + 32]
                chunks.append(module(given.half() if half else given).float().cpu().numpy())
        return np.concatenate(chunks)

    def kept(raw: np.ndarray) -> dict[int, list]:
        found = {}
        for seq, rows in enumerate(raw):
            dets = decode(Family.YOLOX, rows[None], 416, 416, None)[0]
            dets = dets[np.flatnonzero(dets.score >= 0.25)]
            dets = dets[nms(dets.xyxy, dets.score, 0.45, dets.class_id)]
            found[seq] = [
                {"class_id": int(c), "xyxy": b.tolist(), "score": float(s)}
                for b, s, c in zip(dets.xyxy, dets.score, dets.class_id, strict=True)
            ]
        return found

    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    reference = kept(outputs())
    report: dict[str, Any] = {"frames": len(frames), "gpu": torch.cuda.get_device_name()}
    for name in precisions:
        if name == "tf32":
            torch.backends.cudnn.allow_tf32 = True
            got = kept(outputs())
            torch.backends.cudnn.allow_tf32 = False
        else:
            got = kept(outputs(half=name == "fp16", autocast=name == "autocast"))
        report[name] = compare(reference, got)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", help="the build's site folder (PYTHONPATH of its runs)")
    parser.add_argument("--clip", type=Path, help="a 1080p clip (default: made as streams_bench)")
    parser.add_argument("--variants", default="fp32,fp16")
    parser.add_argument("--precisions", help="fp16,autocast,tf32: the model alone (GPU)")
    parser.add_argument("--model", type=Path, help="for --precisions: yolox_nano.onnx")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vapipe-same-detections"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    clip = args.clip or streams_bench.make_clip(args.work / "clip1080.mp4")
    if args.precisions:
        report = {
            "clip": "people.mp4 scaled to 1920x1080",
            "rule": f"same class, IoU >= {IOU}, score within {SCORE}",
            "precisions_against_float32": precision_agreement(
                args.model, clip, args.precisions.split(",")
            ),
        }
        print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))
        return
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
