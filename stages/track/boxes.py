"""Box arithmetic for the tracker: the same box named twice, widened boxes, shapes (the
overlaps themselves are stages/boxes.py's)."""

from __future__ import annotations

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.boxes import iou_matrix


def duplicates_of(dets: Detections, merge_iou: float, rank: np.ndarray | None = None) -> np.ndarray:
    """For each detection, the index of a better one of another class that covers the same
    box (IoU at least ``merge_iou``): the same object named twice. Better: the higher
    ``rank`` (``ClassRules._expected``), then the higher score. -1 for the others."""
    primary = np.full(len(dets), -1, np.int64)
    if merge_iou >= 1 or len(dets) < 2:
        return primary
    overlap = iou_matrix(dets.xyxy, dets.xyxy)
    other_class = dets.class_id[:, None] != dets.class_id[None, :]
    ahead = np.zeros(len(dets)) if rank is None else rank.astype(float)
    for index in np.lexsort((-dets.score, -ahead)).tolist():
        if primary[index] >= 0:
            continue
        # Best first: whatever is left overlapping this one ranks no higher than it, and
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


MIN_MOVE = 0.5
"""How far (a fraction of its last box's width or height, along that axis) a lost track's
prediction must have moved for it to have a way to keep to: a walker missed for a frame, its
box swinging with its legs, has none yet."""
ONWARD = 0.25
"""How far along its predicted way (a fraction of it) a box must be to continue a track that
left: a box clipped by the edge moves half as fast as its object."""


def onward(
    last_box: np.ndarray, predicted: np.ndarray, boxes: np.ndarray, gone: np.ndarray
) -> np.ndarray:
    """Track x box: False where a track that left the picture (``gone``) would be continued by
    a box not at least ``ONWARD`` as far along its way as its prediction went since it was last
    seen (measured from its last box's centre, along the prediction's direction): what comes
    back in where an object left is another object, whatever its first box overlaps. A track
    whose prediction moved less than ``MIN_MOVE`` of its size, or one still in the picture,
    takes any box."""
    allowed = np.ones((len(last_box), len(boxes)), bool)
    last = (last_box[:, :2] + last_box[:, 2:]) / 2
    expected = (predicted[:, :2] + predicted[:, 2:]) / 2 - last
    reach = np.einsum("ij,ij->i", expected, expected)
    size = np.maximum(last_box[:, 2:] - last_box[:, :2], 1.0)
    away = (np.abs(expected) >= MIN_MOVE * size).any(axis=1)
    rows = np.flatnonzero(gone & away)
    if len(rows) == 0 or len(boxes) == 0:
        return allowed
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    moved = centres[None, :, :] - last[rows][:, None, :]
    along = (moved * expected[rows][:, None, :]).sum(axis=2)
    allowed[rows] = along >= ONWARD * reach[rows][:, None]
    return allowed
