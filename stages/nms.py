"""Confidence filter, non-maximum suppression and mapping boxes back to frame pixels."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import ParallelConfig, Stage
from vapipe.stages.detections import Detections
from vapipe.stages.infer.heads import Candidates


class NmsConfig(ParallelConfig):
    conf: float = Field(0.25, ge=0, le=1)
    """Minimum score kept."""
    iou: float = Field(0.45, ge=0, le=1)
    """Boxes overlapping a better one by more than this are suppressed."""
    max_det: int = Field(300, ge=1)
    """At most this many detections per frame, best first."""
    max_candidates: int = Field(30000, ge=1)
    """At most this many boxes enter NMS (the best by score), bounding its cost."""
    class_agnostic: bool = False
    """Suppress across classes (default: only boxes of the same class suppress each other)."""
    classes: list[int] | None = None
    """Keep only these class ids."""


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one xyxy box with each of ``boxes``."""
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


def nms(
    boxes: np.ndarray,
    scores: np.ndarray,
    iou: float,
    class_ids: np.ndarray | None = None,
    max_det: int | None = None,
) -> np.ndarray:
    """Greedy NMS; returns kept indices, best score first. With ``class_ids`` only boxes of
    the same class suppress each other (boxes are shifted apart per class, as torchvision's
    batched_nms does)."""
    if len(boxes) == 0:
        return np.zeros(0, np.int64)
    work = boxes.astype(np.float64)
    if class_ids is not None:
        span = float(work.max() - work.min()) + 1.0
        work = work + (class_ids.astype(np.float64) * span)[:, None]
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    limit = max_det or len(order)
    while order.size and len(keep) < limit:
        best = order[0]
        keep.append(int(best))
        if order.size == 1:
            break
        rest = order[1:]
        order = rest[box_iou(work[best], work[rest]) <= iou]
    return np.asarray(keep, np.int64)


@register("nms")
class NmsStage(Stage):
    Config = NmsConfig
    config: NmsConfig

    def process(self, frame: Frame) -> tuple[Frame]:
        candidates: Candidates | None = frame.meta.pop("candidates", None)
        if candidates is None:
            raise PipelineError("frame has no candidates: link an infer node before this nms node")
        frame.detections = self.select(
            candidates, frame.meta.get("class_names", ()), frame.letterbox
        )
        return (frame,)

    def select(self, found: Candidates, names: tuple[str, ...], letterbox: object) -> Detections:
        cfg = self.config
        mask = found.scores >= cfg.conf
        if cfg.classes is not None:
            mask &= np.isin(found.class_ids, cfg.classes)
        index = np.flatnonzero(mask)
        if index.size > cfg.max_candidates:
            index = index[np.argsort(-found.scores[index], kind="stable")[: cfg.max_candidates]]
        boxes, scores, class_ids = found.boxes[index], found.scores[index], found.class_ids[index]
        if found.suppressed:
            keep = np.argsort(-scores, kind="stable")[: cfg.max_det]
        else:
            keep = nms(
                boxes, scores, cfg.iou, None if cfg.class_agnostic else class_ids, cfg.max_det
            )
        boxes = boxes[keep]
        if letterbox is not None:
            boxes = letterbox.to_frame(boxes)  # type: ignore[attr-defined]
        return Detections(
            boxes.astype(np.float32),
            scores[keep].astype(np.float32),
            class_ids[keep].astype(np.int32),
            names,
        )
