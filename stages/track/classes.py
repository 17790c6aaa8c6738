"""Which classes may be one object: the groups of classes a detector mixes up (``confusable``:
a car it calls a truck now and then, a cat it calls a dog). Classes in no group are each a
group of their own, so a person is only ever a person."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.boxes import iou_matrix
from vapipe.stages.track.config import TrackConfig

TRACKED = 0
"""bytetrack's state of a track seen on its last frame."""


class ClassGroups:
    """``of(class_ids)``: each class id's group number, for one detector's class names."""

    def __init__(self, groups: Sequence[Sequence[str]]) -> None:
        self.number = {name: index for index, group in enumerate(groups) for name in group}
        self._names: Sequence[str] = ()
        """The names the table was made for (a detector's names: one tuple, seen again)."""
        self._table = np.zeros(0, np.int64)

    def of(self, class_ids: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """Group numbers of ``class_ids`` (the detector's ``names`` index them); a class in
        no group, or past the names, is a group of its own."""
        if names is not self._names and tuple(names) != self._names:
            self._names = tuple(names)
            past = len(self.number)  # numbers past the groups' for the classes in none
            self._table = np.array(
                [self.number.get(name, past + index) for index, name in enumerate(names)],
                np.int64,
            )
        ids = np.asarray(class_ids, np.int64)
        alone = len(self.number) + ids  # a class the names do not cover: a group of its own
        if not len(self._table):
            return alone
        known = (ids >= 0) & (ids < len(self._table))
        return np.where(known, self._table[np.clip(ids, 0, len(self._table) - 1)], alone)


class ClassRules:
    """What class groups decide for ``ByteTracker`` (``class_aware``): which detections may
    continue a track, which name of a box named twice is kept, and whose votes count."""

    params: TrackConfig
    groups: ClassGroups
    names: Sequence[str]
    class_id: np.ndarray
    ids: np.ndarray
    state: np.ndarray
    hits: np.ndarray
    votes: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def _same_group(self, dets: Detections) -> np.ndarray:
        """Track x detection: whether the detection's class is of the track's group."""
        kinds = self.groups.of(dets.class_id, dets.names)
        return self.groups.of(self.class_id, dets.names)[:, None] == kinds[None, :]

    def _of_group(self, dets: Detections, own: np.ndarray, overlap: np.ndarray) -> np.ndarray:
        """Track x detection: of the track's group; or of another, for a track seen the frame
        before, when the detector is unsure of it on the track's box (``overlap`` with its last
        box 0.5 or more: a dog called a person 0.4 for a frame), or when the track was seen
        only once (it has no species yet: a sure other group overlapping it by ``match_iou``
        takes it over, unless it was shown: a track confirmed at once, by its score, keeps
        its group, and the other is a new track)."""
        unsure = (dets.score < self.params.class_change_score)[None, :]
        seen_last = (self.state == TRACKED)[:, None]
        unshown = (self.hits == 1) & (self.ids == 0)
        once = unshown[:, None] & (overlap >= self.params.match_iou)
        return own | (seen_last & ((unsure & (overlap >= 0.5)) | once))

    def _expected(
        self, dets: Detections, own: np.ndarray | None, predicted: np.ndarray
    ) -> np.ndarray | None:
        """Per detection, with class groups, which name of a box named twice by two groups is
        kept: 2 for a sure one (``class_change_score``), then 1 for one of the group of a
        confirmed track that is there (its prediction overlapping by ``match_iou``: a dog's
        box also called a person, 0.36 against 0.21, is the dog's), then 0; ties by score."""
        if own is None or len(self) == 0 or len(dets) == 0:
            return None
        near = iou_matrix(predicted, dets.xyxy) >= self.params.match_iou
        expected = ((self.ids > 0)[:, None] & own & near).any(axis=0)
        return np.where(dets.score >= self.params.class_change_score, 2, expected.astype(int))

    def _own_group(
        self, det_index: np.ndarray, track_rows: np.ndarray, matched: int, dets: Detections
    ) -> tuple[np.ndarray, np.ndarray]:
        """The (detection, track) votes of the track's own group: a name of another group is
        no vote for it. A sure detection of another group matched to a track (the first
        ``matched`` pairs; only one seen once can be) takes it over: its votes start anew."""
        kinds = self.groups.of(dets.class_id[det_index], dets.names)
        track_kinds = self.groups.of(self.class_id[track_rows], dets.names)
        sure = dets.score[det_index] >= self.params.class_change_score
        takeover = (np.arange(len(det_index)) < matched) & (kinds != track_kinds) & sure
        taken = track_rows[takeover]
        self.votes[taken] = 0.0
        for row, kind in zip(taken.tolist(), kinds[takeover].tolist(), strict=True):
            track_kinds[track_rows == row] = kind
        own = kinds == track_kinds
        return det_index[own], track_rows[own]
