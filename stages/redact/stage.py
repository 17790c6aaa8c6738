"""The ``redact`` node: hides objects, the boxes a ``detect_inside`` node found in them and
fixed areas, on a copy of each frame's picture. Nodes before it (and nodes on other branches
beside it) keep the original; the frame it passes on carries only the redacted pixels, and
the graph refuses a node that writes pictures without a redact node on its way."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vapipe.pipeline.device_picture import DeviceNV12
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.object_results import BoxesInside
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageContext
from vapipe.stages.media.redaction import clip_box, grown, hide_box, hide_polygon
from vapipe.stages.media.redaction_nv12 import Nv12Redactor
from vapipe.stages.objects.detect_inside import DetectInsideStage
from vapipe.stages.redact.config import RedactConfig


@dataclass
class SourceState:
    """One source's areas in pixels (made at its first frame) and its objects' last boxes."""

    areas: list[np.ndarray]
    held: dict[int, tuple[float, list[np.ndarray]]] = field(default_factory=dict)
    """Track id -> (pts last seen, the boxes hidden for it then)."""


@register("redact")
class RedactStage(Stage):
    """Hides what the config names on every frame it passes on (a copy: the original stays
    with the nodes before it)."""

    Config = RedactConfig
    config: RedactConfig
    redacts = True
    binds = "upstream"

    def __init__(self, name: str, config: RedactConfig) -> None:
        super().__init__(name, config)
        self.inside: DetectInsideStage | None = None
        self.frames = self.regions = self.whole_objects = self.held_regions = 0
        self.on_device = 0
        self.nv12: Nv12Redactor | None = None

    @classmethod
    def reads_results_of(cls, config: RedactConfig) -> tuple[str, ...]:
        return (config.inside,) if config.inside else ()

    @classmethod
    def check_for_sources(cls, config: RedactConfig, source_ids: Sequence[str]) -> None:
        for index, area in enumerate(config.areas):
            if area.source is not None and area.source not in source_ids:
                raise ConfigError(
                    f"source '{area.source}' is not in this run ({', '.join(source_ids)})",
                    key=f"areas[{index}].source",
                )

    def binds_to(self) -> str | None:
        return self.config.inside

    def bind(self, shared: object | None) -> None:
        if self.config.inside is None:
            return
        if not isinstance(shared, DetectInsideStage):
            raise ConfigError(f"'{self.config.inside}' is not a detect_inside node", key="inside")
        self.inside = shared

    def open(self, context: StageContext) -> None:
        self.sources: dict[str, SourceState] = {}
        self.wanted = frozenset(self.config.classes)
        self.looked_in = (
            None
            if self.inside is None or self.inside.config.on_classes is None
            else frozenset(self.inside.config.on_classes)
        )
        red, green, blue = self.config.color
        self.color = (blue, green, red)

    def handle_message(self, message: Message) -> tuple[Message]:
        if message.kind == "source_removed":
            self.sources.pop(message.source_id, None)
        return (message,)

    def process(self, frame: Frame) -> tuple[Frame]:
        state = self.sources.get(frame.source_id)
        if state is None:
            state = self.sources[frame.source_id] = SourceState(self._areas(frame))
        boxes = self._boxes(frame, state)
        self.frames += 1
        if not boxes and not state.areas:
            return (frame,)
        picture = None if frame.image_made() else frame.i420()
        if isinstance(picture, DeviceNV12):  # still in GPU memory: hidden there
            if self.nv12 is None:
                self.nv12 = Nv12Redactor(self.config.method, self.config.cells, self.color)
            self.on_device += 1
            self.regions += len(boxes)
            return (redacted(frame, self.nv12.redact(picture, boxes, state.areas)),)
        image = frame.image.copy()
        method, cells = self.config.method, self.config.cells
        for box in boxes:
            self.regions += hide_box(image, box, method, cells, self.color)
        for polygon in state.areas:
            hide_polygon(image, polygon, method, cells, self.color)
        return (redacted(frame, image),)

    def _areas(self, frame: Frame) -> list[np.ndarray]:
        """The areas of this frame's source in pixels; one lying wholly outside the frame is
        a config error (a typo in pixels, or pixels given for fractions)."""
        height, width = frame.shape[:2]
        areas = []
        for index, area in enumerate(self.config.areas):
            if area.source not in (None, frame.source_id):
                continue
            normalized = self.config.normalized if area.normalized is None else area.normalized
            scale = np.array([width, height], np.float32) if normalized else np.ones(2, np.float32)
            points = np.asarray(area.polygon, np.float32) * scale
            corners = np.array([*points.min(axis=0), *points.max(axis=0)], np.float32)
            if clip_box(corners, width, height) is None:
                raise ConfigError(
                    f"the polygon lies outside source '{frame.source_id}''s {width}x{height} "
                    "frame" + ("" if normalized else " (fractions? set normalized = true)"),
                    node=self.name,
                    key=f"areas[{index}]",
                )
            areas.append(points)
        return areas

    def _boxes(self, frame: Frame, state: SourceState) -> list[np.ndarray]:
        """The boxes to hide on this frame: objects of ``classes`` whole, the boxes found
        inside objects (or, where missing, the objects whole), and the boxes of tracks not
        on this frame but seen within ``hold_s``."""
        dets = frame.detections
        boxes: list[np.ndarray] = []
        grow = self.config.grow
        seen: set[int] = set()
        if dets is not None and len(dets):
            track_ids = dets.track_id
            for index in range(len(dets)):
                mine = self._of_object(dets, index)
                boxes.extend(grown(box, grow) for box in mine)
                if track_ids is not None and track_ids[index] >= 0 and mine:
                    track = int(track_ids[index])
                    seen.add(track)
                    state.held[track] = (frame.pts, mine)
        hold_s = self.config.hold_s
        for track, (pts, kept) in list(state.held.items()):
            if track in seen:
                continue
            if frame.pts - pts > hold_s or frame.pts < pts:
                del state.held[track]
                continue
            self.held_regions += len(kept)
            boxes.extend(grown(box, grow) for box in kept)
        return boxes

    def _of_object(self, dets: Any, index: int) -> list[np.ndarray]:
        """What is hidden of object ``index``: its whole box, the boxes found inside it, or
        nothing."""
        name = dets.class_name(int(dets.class_id[index]))
        box = dets.xyxy[index]
        if name in self.wanted:
            self.whole_objects += 1
            return [box]
        if self.inside is None or (self.looked_in is not None and name not in self.looked_in):
            return []
        held = dets.attributes[index] if dets.attributes is not None else None
        found = held.get(self.inside.name) if held else None
        if isinstance(found, BoxesInside) and found.boxes:
            return [inner.xyxy for inner in found.boxes]
        if self.config.missing == "object":
            self.whole_objects += 1
            return [box]
        return []

    def stats(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "regions": self.regions,
            "whole_objects": self.whole_objects,
            "held": self.held_regions,
            "on_device": self.on_device,
        }


def redacted(frame: Frame, picture: np.ndarray | DeviceNV12) -> Frame:
    """A copy of ``frame`` whose picture is ``picture`` (a host image, or NV12 still on its
    device): the same metadata (shared, as a frame on two branches shares it), none of the
    original's pixels (its image, I420 array and decoded planes all dropped)."""
    out = copy.copy(frame)
    for held in ("_image", "_yuv", "_planes"):
        out.__dict__.pop(held, None)
    out.__dict__["_planes" if isinstance(picture, DeviceNV12) else "_image"] = picture
    return out
