"""Scores against the truth: count error per line and direction, zone visits and dwell, and
tracking metrics (HOTA, IDF1, MOTA, ID switches) from TrackEval, the MOTChallenge reference
implementation (``pip install --no-deps trackeval``: its metrics need only numpy and scipy,
and its full dependencies would put the GUI build of OpenCV over opencv-python-headless)."""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from typing import Any

import numpy as np

from vapipe.stages.boxes import iou_matrix

Box = tuple[int, float, float, float, float]
"""(object or track id, x1, y1, x2, y2)."""
MATCH_FRAMES = 24
"""A counted crossing matches a true one of the same direction within a second (24 fps)."""


def crossings(
    events: list[dict], truth: list[dict], optional: set[int] = frozenset()
) -> dict[str, Any]:
    """Counted against true crossings, per direction.

    ``truth``: ``{"frame", "direction"}`` each; those at indices in ``optional`` (a car still
    on the line when the clip ends) may be counted or not. Returns per direction the true
    count, the count, its error (0 when within the optional range), and, matching each counted
    crossing to an unmatched true one of its direction within MATCH_FRAMES, the hits, the
    overcounts (counted, nothing there) and the misses."""
    counted = [e for e in events if e["event"] == "line_cross"]
    directions = sorted({t["direction"] for t in truth} | {e["direction"] for e in counted})
    result: dict[str, Any] = {}
    for direction in directions:
        mine = sorted(e["seq"] for e in counted if e["direction"] == direction)
        wanted = [(t["frame"], i in optional) for i, t in enumerate(truth)
                  if t["direction"] == direction]  # fmt: skip
        must = sum(1 for _, maybe in wanted if not maybe)
        error = max(0, must - len(mine), len(mine) - len(wanted))
        free = sorted(wanted)
        hits = 0
        for seq in mine:
            near = [k for k, (frame, _) in enumerate(free) if abs(frame - seq) <= MATCH_FRAMES]
            if near:  # the earliest: counts lag their true frames, nearest would skip one
                free.pop(near[0])
                hits += 1
        missed = sum(1 for _, maybe in free if not maybe)
        result[direction] = {
            "truth": must if must == len(wanted) else f"{must}-{len(wanted)}",
            "counted": len(mine), "error": error, "hits": hits,
            "overcount": len(mine) - hits, "missed": missed,
        }  # fmt: skip
    return result


def zones(events: list[dict], visits: list[dict], frames: int, dwell_frames: float | None):
    """Zone entries and dwell events against the true visits."""
    enters = sum(1 for e in events if e["event"] == "zone_enter")
    dwells = sum(1 for e in events if e["event"] == "zone_dwell")
    true_dwell = None
    if dwell_frames is not None:
        true_dwell = sum(
            1 for v in visits if ((v["exit"] if v["exit"] is not None else frames) - v["enter"])
            >= dwell_frames
        )  # fmt: skip
    return {"enter": {"truth": len(visits), "counted": enters},
            "dwell": {"truth": true_dwell, "counted": dwells}}  # fmt: skip


def tracking(truth: list[list[Box]], tracks: list[list[Box]]) -> dict[str, float]:
    """HOTA, IDF1, MOTA, ID switches and objects per true object, frame by frame boxes."""
    with contextlib.redirect_stdout(io.StringIO()):  # it prints what optional parts it lacks
        from trackeval.metrics import CLEAR, HOTA, Identity

    gt_ids = sorted({row[0] for frame in truth for row in frame})
    tr_ids = sorted({row[0] for frame in tracks for row in frame})
    gt_index = {v: i for i, v in enumerate(gt_ids)}
    tr_index = {v: i for i, v in enumerate(tr_ids)}
    data: dict[str, Any] = {
        "num_timesteps": len(truth), "num_gt_ids": len(gt_ids), "num_tracker_ids": len(tr_ids),
        "num_gt_dets": sum(map(len, truth)), "num_tracker_dets": sum(map(len, tracks)),
        "gt_ids": [], "tracker_ids": [], "similarity_scores": [],
    }  # fmt: skip
    for gt_frame, tr_frame in zip(truth, tracks, strict=True):
        data["gt_ids"].append(np.array([gt_index[r[0]] for r in gt_frame], int))
        data["tracker_ids"].append(np.array([tr_index[r[0]] for r in tr_frame], int))
        data["similarity_scores"].append(
            iou(np.array([r[1:] for r in gt_frame]), np.array([r[1:] for r in tr_frame]))
        )
    with contextlib.redirect_stdout(io.StringIO()):  # TrackEval prints its configs
        hota = HOTA().eval_sequence(data)
        clear = CLEAR().eval_sequence(data)
        ident = Identity().eval_sequence(data)
    return {
        "HOTA": round(float(np.mean(hota["HOTA"])) * 100, 1),
        "IDF1": round(float(ident["IDF1"]) * 100, 1),
        "MOTA": round(float(clear["MOTA"]) * 100, 1),
        "IDSW": int(clear["IDSW"]),
        "tracks_per_object": round(_tracks_per_object(truth, tracks), 2),
    }


def _tracks_per_object(truth: list[list[Box]], tracks: list[list[Box]]) -> float:
    """Distinct track ids that covered each true object (IoU >= 0.5), averaged: 1 is one
    track per object; higher, the object was split (or swapped)."""
    seen: dict[int, set[int]] = {}
    for gt_frame, tr_frame in zip(truth, tracks, strict=True):
        if not gt_frame or not tr_frame:
            continue
        overlap = iou(np.array([r[1:] for r in gt_frame]), np.array([r[1:] for r in tr_frame]))
        for g, t in zip(*np.nonzero(overlap >= 0.5), strict=True):
            seen.setdefault(gt_frame[g][0], set()).add(tr_frame[t][0])
    objects = {row[0] for frame in truth for row in frame}
    return sum(len(seen.get(o, ())) for o in objects) / max(len(objects), 1)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    return iou_matrix(a, b)


def class_counts(events: list[dict]) -> dict[str, int]:
    return dict(Counter(e["class_name"] for e in events if e["event"] == "line_cross"))
