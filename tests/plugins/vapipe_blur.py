"""Blur chosen classes (faces, people, plates) before the video sink: a stage plugin."""

from __future__ import annotations

import cv2
from pydantic import Field

from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig


class BlurConfig(StageConfig):
    """Which detections to blur, and how strongly."""

    classes: list[str] = ["person"]
    """Class names whose boxes are blurred."""
    kernel: int = Field(31, ge=3)
    """Blur kernel size in pixels (odd)."""


@register("blur")
class BlurStage(Stage):
    """Blurs the boxes of the chosen classes in the frame's image, in place."""

    Config = BlurConfig
    config: BlurConfig

    def process(self, frame: Frame) -> tuple[Frame]:
        dets = frame.detections
        if dets is None:
            return (frame,)
        size = self.config.kernel | 1
        for index in range(len(dets)):
            if dets.class_name(int(dets.class_id[index])) not in self.config.classes:
                continue
            x1, y1, x2, y2 = (int(v) for v in dets.xyxy[index])
            region = frame.image[y1:y2, x1:x2]
            if region.size:
                region[:] = cv2.GaussianBlur(region, (size, size), 0)
        return (frame,)
