"""The benchmark's clips and their truth: traffic.mp4 with its hand-checked labels, and the
generated scenes of synth.py."""

from __future__ import annotations

import csv
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.accuracy import random_scenes, synth
from bench.accuracy.detect import cache_dir, detect
from bench.accuracy.scenes import SCENES
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
    split: str = "tuning"
    """"tuning": settings may be chosen on it; "held-out": only scored."""
    scene: synth.Scene | None = None
    """The generated scene (None for real footage)."""

    @property
    def labelled(self) -> bool:
        """Its true crossings carry the object's class: counts are scored per direction and
        class."""
        return self.scene is not None and self.scene.labelled

    def detections(self, model: str) -> list:
        """The detector's boxes (cached), with the scene's fragments added."""
        found = detect(self.path, model, self.classes)
        return synth.add_fragments(self.scene, found) if self.scene is not None else found

    def truth(self) -> list[dict]:
        """The true crossings, the class joined to the direction when labelled."""
        if not self.labelled:
            return self.crossings
        return [{**c, "direction": f"{c['direction']} {c['label']}"} for c in self.crossings]


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


PEOPLE_LINE = {"name": "aisle", "start": [200, 200], "end": [200, 450],
               "in_label": "leftward", "out_label": "rightward"}  # fmt: skip
"""A vertical line at x = 200 on people.mp4, from y = 200 down: the box centres of people in
the middle and the foreground, not of the far crowd (see README: The truth)."""


def people() -> Clip:
    """people.mp4 (held out: nothing was tuned on it): the crossings of PEOPLE_LINE by the
    box centres of the people (labels/people_crossings.csv), no boxes per frame."""
    rows = list(csv.DictReader((LABELS / "people_crossings.csv").open()))
    crossings = [{"frame": int(r["frame"]), "direction": r["direction"]} for r in rows]
    optional = {i for i, r in enumerate(rows) if r["optional"] == "yes"}
    return Clip(
        "people", media() / "people.mp4", 24000 / 1001, 460, (800, 450),
        {"lines": [PEOPLE_LINE], "anchor": "center", "zones": []}, crossings, optional,
        classes=[0], split="held-out",
    )  # fmt: skip


def generated() -> list[Clip]:
    """The written scenes (scenes.py)."""
    clips = []
    for scene in SCENES:
        dog = any(m.crop == "dog" for m in scene.movers)
        clips.append(scene_clip(scene, [0, 2, 5, 7, 16] if dog else [0, 2, 5, 7]))
    return clips


def random_generated() -> list[Clip]:
    """The scenes drawn from seeds (random_scenes.py)."""
    return [scene_clip(scene, random_scenes.CLASSES) for scene in random_scenes.random_scenes()]


def scene_clip(scene: synth.Scene, classes: list[int]) -> Clip:
    """A generated scene rendered (cached) as a clip with its truth."""
    folder = cache_dir() / "scenes"
    folder.mkdir(exist_ok=True)
    path = synth.render(scene, media(), folder)
    dwell = {"dwell_s": scene.zone_dwell_s} if scene.zone_dwell_s else {}
    return Clip(
        scene.name, path, synth.FPS, scene.frames, scene.size,
        {"lines": [scene.line], "zones": [{**scene.zone, **dwell}]},
        [{"frame": c["frame"], "direction": c["direction"], "label": c["label"]}
         for c in scene.truth["crossings"]],
        boxes=[list(frame) for frame in scene.truth["boxes"]],
        visits=scene.truth["visits"],
        dwell_frames=scene.zone_dwell_s * synth.FPS if scene.zone_dwell_s else None,
        classes=classes, split=scene.split, scene=scene,
    )  # fmt: skip
