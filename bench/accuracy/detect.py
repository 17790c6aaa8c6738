"""Detections of a clip through the real pipeline (source, preprocess, infer, NMS), once per
clip and model, cached: the tracker and counting settings are then swept over the same boxes.

Boxes are kept from a low score (0.05) so that every tracker setting sees what it needs; each
tracker applies its own thresholds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.infer.names import COCO_NAMES

MIN_SCORE = 0.05
RECT = "+rect"
VEHICLES = [2, 5, 7]  # COCO car, bus, truck
CONFIG = """\
links = ["cam ! pre ! det ! nms ! events"]
[nodes.cam]
type = "source"
uri = "{uri}"
[nodes.pre]
type = "preprocess"
backend = "numpy"
[nodes.det]
type = "infer"
model = "{model}"
workers = 2
rect = {rect}
backend = {{ type = "onnxruntime", providers = "cpu", threads = 1 }}
[nodes.nms]
type = "nms"
conf = {conf}
iou = 0.45
{classes}
[nodes.events]
type = "events"
path = "{events}"
"""


def cache_dir() -> Path:
    folder = Path(tempfile.gettempdir()) / "vapipe-accuracy"
    folder.mkdir(exist_ok=True)
    return folder


def detect(clip: Path, model: str, classes: list[int] | None) -> list[Detections]:
    """Per frame, the clip's detections at score >= MIN_SCORE (cached by content and model
    on disk, and in this process: a search scores the same boxes thousands of times).
    ``model`` may end in ``+rect``: the model at rect inputs (``infer.rect``)."""
    return _detections_of(clip, model, tuple(classes) if classes else None)


@functools.cache
def _detections_of(clip: Path, model: str, kept: tuple[int, ...] | None) -> list[Detections]:
    classes = list(kept) if kept else None
    digest = hashlib.sha256(clip.read_bytes()).hexdigest()[:16]
    key = f"{clip.stem}-{digest}-{model}-{MIN_SCORE}-{classes}".replace(" ", "")
    cached = cache_dir() / f"{key}.json"
    if not cached.exists():
        with tempfile.TemporaryDirectory() as work:
            config = Path(work) / "detect.toml"
            events = Path(work) / "events.jsonl"
            config.write_text(
                CONFIG.format(
                    uri=clip, model=model.removesuffix(RECT), conf=MIN_SCORE, events=events,
                    rect=str(model.endswith(RECT)).lower(),
                    classes=f"classes = {classes}" if classes else "",
                )
            )  # fmt: skip
            command = [sys.executable, "-m", "vapipe", str(config), "--no-progress"]
            subprocess.run(command, check=True, capture_output=True, text=True)
            frames = [
                e["detections"]
                for e in map(json.loads, events.read_text().splitlines())
                if e.get("event") == "frame"
            ]
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(frames))
            tmp.replace(cached)
    return [_detections(frame) for frame in json.loads(cached.read_text())]


def _detections(records: list[dict]) -> Detections:
    return Detections(
        np.array([r["xyxy"] for r in records], np.float32).reshape(len(records), 4),
        np.array([r["score"] for r in records], np.float32),
        np.array([r["class_id"] for r in records], np.int32),
        COCO_NAMES,  # both sample models are COCO's 80 classes
    )
