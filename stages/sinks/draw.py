"""Boxes and labels drawn on a copy of the frame."""

from __future__ import annotations

import colorsys

import cv2
import numpy as np

from vapipe.stages.detections import Detections


def class_color(class_id: int) -> tuple[int, int, int]:
    """A stable, well-spread BGR colour per class (golden-ratio hue steps)."""
    hue = (class_id * 0.618033988749895) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.85, 0.95)
    return int(b * 255), int(g * 255), int(r * 255)


def draw_detections(
    image: np.ndarray,
    detections: Detections | None,
    *,
    thickness: int = 2,
    font_scale: float = 0.5,
    labels: bool = True,
) -> np.ndarray:
    canvas = image.copy()
    if detections is None:
        return canvas
    for index in range(len(detections)):
        x1, y1, x2, y2 = (round(float(v)) for v in detections.xyxy[index])
        class_id = int(detections.class_id[index])
        color = class_color(class_id)
        cv2.rectangle(canvas, (x1, y1), (x2, y2), color, thickness, cv2.LINE_AA)
        if not labels:
            continue
        text = f"{detections.class_name(class_id)} {detections.score[index]:.2f}"
        if detections.track_id is not None:
            text = f"#{int(detections.track_id[index])} {text}"
        (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, font_scale, 1)
        top = max(y1 - th - base - 2, 0)
        cv2.rectangle(canvas, (x1, top), (x1 + tw + 4, top + th + base + 2), color, cv2.FILLED)
        cv2.putText(
            canvas,
            text,
            (x1 + 2, top + th + 1),
            cv2.FONT_HERSHEY_SIMPLEX,
            font_scale,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
    return canvas
