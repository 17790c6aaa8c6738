"""The benchmark's clips and their truth: traffic.mp4 with its hand-checked labels, and the
generated scenes of synth.py."""

from __future__ import annotations

import csv
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.accuracy import synth
from bench.accuracy.detect import cache_dir
from bench.accuracy.score import Box

REPO = Path(__file__).resolve().parents[2]
LABELS = Path(__file__).resolve().parent / "labels"


def media() -> Path:
    return Path(os.environ.get("VAPIPE_ASSETS", REPO.parent / "shared")) / "media"


@dataclass
class Clip:
    name: str
    path: Path
    fps: float
    frames: int
    size: tuple[int, int]
    analytics: dict
    """The analytics node's lines and zones (the config's own for traffic.mp4)."""
    crossings: list[dict]
    optional: set[int] = field(default_factory=set)
    boxes: list[list[Box]] | None = None
    visits: list[dict] = field(default_factory=list)
    dwell_frames: float | None = None
    classes: list[int] | None = None
    """COCO classes the detector keeps (the config's ``nms.classes``)."""


def traffic() -> Clip:
    config = tomllib.loads((REPO / "configs" / "analytics.toml").read_text())["nodes"]
    analytics = {k: config["analytics"][k] for k in ("lines", "zones")}
    rows = list(csv.DictReader((LABELS / "traffic_crossings.csv").open()))
    crossings = [{"frame": int(r["frame"]), "direction": r["direction"]} for r in rows]
    optional = {i for i, r in enumerate(rows) if r["optional"] == "yes"}
    frames, fps = 480, 24000 / 1001
    boxes: list[list[Box]] = [[] for _ in range(frames)]
    for r in csv.DictReader((LABELS / "traffic_boxes.csv").open()):
        box = (int(r["object"]), *(float(r[k]) for k in ("x1", "y1", "x2", "y2")))
        boxes[int(r["frame"])].append(box)  # type: ignore[arg-type]
    zone = analytics["zones"][0]
    return Clip(
        "traffic", media() / "traffic.mp4", fps, frames, (640, 360), analytics, crossings,
        optional, boxes, synth.zone_visits(boxes, zone["polygon"]), zone.get("dwell_s", 0) * fps,
        config["nms"].get("classes"),
    )  # fmt: skip


def generated() -> list[Clip]:
    folder = cache_dir() / "scenes"
    folder.mkdir(exist_ok=True)
    clips = []
    for scene in synth.SCENES:
        path = synth.render(scene, media(), folder)
        zone = {**synth.ZONE, **({"dwell_s": scene.zone_dwell_s} if scene.zone_dwell_s else {})}
        labels = {"in": "in", "out": "out"}
        clips.append(
            Clip(
                scene.name, path, synth.FPS, scene.frames, (synth.WIDTH, synth.HEIGHT),
                {"lines": [synth.LINE], "zones": [zone]},
                [{"frame": c["frame"], "direction": labels[c["direction"]]}
                 for c in scene.truth["crossings"]],
                boxes=[list(frame) for frame in scene.truth["boxes"]],
                visits=scene.truth["visits"],
                dwell_frames=scene.zone_dwell_s * synth.FPS if scene.zone_dwell_s else None,
                classes=[0, 2, 5, 7],
            )
        )  # fmt: skip
    return clips
