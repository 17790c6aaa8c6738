"""Box arithmetic for the tracker: the same box named twice, widened boxes, shapes (the
overlaps themselves are stages/boxes.py's)."""

from __future__ import annotations

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.boxes import iou_matrix


def duplicates_of(dets: Detections, merge_iou: float) -> np.ndarray:
    """For each detection, the index of a better-scored one of another class that covers the
    same box (IoU at least ``merge_iou``): the same object named twice. -1 for the others."""
    primary = np.full(len(dets), -1, np.int64)
    if merge_iou >= 1 or len(dets) < 2:
        return primary
    overlap = iou_matrix(dets.xyxy, dets.xyxy)
    other_class = dets.class_id[:, None] != dets.class_id[None, :]
    for index in np.argsort(-dets.score, kind="stable").tolist():
        if primary[index] >= 0:
            continue
        # Best first: whatever is left overlapping this one scores no higher than it, and
        # other_class excludes the detection itself.
        same = np.flatnonzero(other_class[index] & (overlap[index] >= merge_iou) & (primary < 0))
        primary[same] = index
    return primary


def widened(boxes: np.ndarray, buffer: float) -> np.ndarray:
    """xyxy boxes grown by ``buffer`` times their width and height on each side."""
    size = boxes[:, 2:4] - boxes[:, 0:2]
    return np.concatenate((boxes[:, 0:2] - buffer * size, boxes[:, 2:4] + buffer * size), axis=1)


def aspect(boxes: np.ndarray) -> np.ndarray:
    """Width / height of each box, kept away from 0 and infinity."""
    width = np.maximum(boxes[:, 2] - boxes[:, 0], 1e-3)
    return width / np.maximum(boxes[:, 3] - boxes[:, 1], 1e-3)


def without(items: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """``items`` minus ``removed``, order kept (small arrays: a set beats np.setdiff1d)."""
    if len(removed) == 0:
        return items
    gone = set(removed.tolist())
    return np.array([item for item in items.tolist() if item not in gone], np.int64)
