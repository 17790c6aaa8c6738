"""ByteTrack (Zhang et al., 2022) for one source: confident detections are matched to tracks
first, then the low-score ones keep existing tracks alive through occlusion and blur.

Tracks are held as arrays (one row per track), so a frame costs a few batched numpy calls and
one Hungarian assignment per stage (scipy's ``linear_sum_assignment``), not a Python loop over
tracks. A track gets its id once confirmed; ids count from 1 per source.

One object, one track: a track's class is a vote (each matched detection adds its score to its
class, older votes weighing less), so a car the detector calls a truck now and then stays one
car; and a box reported twice with two classes (class-aware NMS keeps both) is merged into the
better one before matching, its score going to the vote.

One track, one object: overlap alone would hand a lost track to whatever enters where it was
going, so a match also needs the detection's shape (width/height) near that of the track's
last seen box, and a confident detection of another class must overlap the track's last seen box; a
track lost at the picture's edge expires after ``border_lost_s``, not ``lost_s``. A detection
lying inside an object a track holds (a sleeve, a bonnet) or holding two such objects (two
walkers in one box) is part of them: it neither starts a track nor confirms a tentative one.

Detected less often (``infer.interval``), an object may move further than its own width
between two detections: what plain overlap left unmatched is matched again on boxes widened
in proportion to the frames skipped (``gap_buffer``).

A track identified now may have been in view, less surely, for a while: its path is traced
back through the boxes no identified track held (``backtrace_s``, backtrace.py), and where it
began is handed to the analytics in ``origins``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.stages.boxes import intersection_over_first, iou_matrix
from vapipe.stages.track import kalman
from vapipe.stages.track.backtrace import Backtrace
from vapipe.stages.track.boxes import aspect, duplicates_of, onward, widened, without
from vapipe.stages.track.classes import TRACKED, ClassGroups, ClassRules
from vapipe.stages.track.config import TrackConfig
from vapipe.stages.track.edges import EdgeRules

LOST = 1
MAX_BUFFER = 1.0
"""The most ``gap_buffer`` widens a box by, on each side, as a fraction of its size."""


class ByteTracker(ClassRules, EdgeRules):
    """The tracks of one source. ``update`` takes a frame's detections and returns them with
    ``track_id`` set: the id of the confirmed track each belongs to, or -1."""

    def __init__(self, params: TrackConfig) -> None:
        self.params = params
        self.next_id = 1
        self.frames = 0
        self.skipped = 0
        """Frames coasted since the last detected one (the detector skipped them)."""
        self.ids = np.zeros(0, np.int64)  # 0 until confirmed
        self.class_id = np.zeros(0, np.int32)  # the vote's winner
        self.votes = np.zeros((0, 1))  # track x class: summed detection scores, decaying
        self.last_box = np.zeros((0, 4))  # the last detection each track was matched to
        self.last_score = np.zeros(0)  # and that detection's score
        self.names: Sequence[str] = ()  # the detector's class names, for coasted frames
        self.last_time: float | None = None
        self.frame_size: tuple[int, int] | None = None
        """(width, height) of the source's pictures, where the track stage knows it."""
        self.state = np.zeros(0, np.int8)
        self.hits = np.zeros(0, np.int32)
        self.last_seen = np.zeros(0, np.float64)
        self.mean = np.zeros((0, 8))
        self.cov = np.zeros((0, 8, 8))
        self.backtrace = Backtrace(params.backtrace_s)
        self.groups = ClassGroups(params.confusable)
        self.origins: dict[int, np.ndarray] = {}
        """Track id -> the earliest box of its traced-back path, for the tracks that got their
        id on the last detected frame (``backtrace_s``)."""

    def update(
        self, dets: Detections, time_s: float, image: np.ndarray | None = None
    ) -> Detections:
        """See ``Tracker.update``; motion and overlap only, so ``image`` is not used."""
        p = self.params
        self.frames += 1
        self.names = dets.names
        first_new_id = self.next_id
        self._advance(time_s)
        own = self._same_group(dets) if p.class_aware else None
        predicted = kalman.boxes_of(self.mean)
        primary = duplicates_of(dets, p.merge_iou, self._expected(dets, own, predicted))
        kept = primary < 0
        same = self._same_object(dets, own, predicted)
        # Tracks x detections. After skipped frames, what overlap left unmatched is matched
        # again on widened boxes (a cascade, as C-BIoU's: in a crowd, the plain overlaps pair
        # the near ones first).
        overlaps = [self._ranked(np.where(same, iou_matrix(predicted, dets.xyxy), 0.0))]
        buffer = min(MAX_BUFFER, p.gap_buffer * self.skipped)
        self.skipped = 0
        if buffer > 0:
            grown = iou_matrix(widened(predicted, buffer), widened(dets.xyxy, buffer))
            overlaps.append(np.where(same, grown, 0.0))
        high = np.flatnonzero(kept & (dets.score >= p.high_score))
        low = np.flatnonzero(kept & (dets.score >= p.low_score) & (dets.score < p.high_score))
        confirmed = np.flatnonzero(self.ids > 0)
        unconfirmed = np.flatnonzero(self.ids == 0)
        matched_tracks: list[np.ndarray] = []
        matched_dets: list[np.ndarray] = []

        # 1: confirmed tracks (tracked or lost) against the confident detections.
        tracks, found = self._associate(confirmed, high, dets, overlaps, p.match_iou, fuse=True)
        matched_tracks.append(tracks)
        matched_dets.append(found)
        rest_tracks = without(confirmed, tracks)
        rest_high = without(high, found)

        # 2: tracks still on screen against the low-score detections (occlusion, blur).
        on_screen = rest_tracks[self.state[rest_tracks] == TRACKED]
        tracks, found = self._associate(on_screen, low, dets, overlaps, p.low_match_iou)
        matched_tracks.append(tracks)
        matched_dets.append(found)
        self.state[without(on_screen, tracks)] = LOST

        # 3: tentative tracks against what is left of the confident detections, less the
        # fragments of objects already matched: a part of a tracked object confirms nothing.
        taken = np.concatenate(matched_dets)
        rest_high = rest_high[~self._fragments(dets, rest_high, taken)]
        tracks, found = self._associate(unconfirmed, rest_high, dets, overlaps, 0.3, fuse=True)
        matched_tracks.append(tracks)
        matched_dets.append(found)
        rest_high = without(rest_high, found)
        dropped = without(unconfirmed, tracks)

        rows = np.concatenate(matched_tracks)
        det_rows = np.concatenate(matched_dets)
        self._correct(rows, det_rows, dets, time_s)
        self._vote(rows, det_rows, dets, primary)
        track_id, class_id = self._output(rows, det_rows, dets)

        keep = np.ones(len(self), bool)
        keep[dropped] = False
        patience = np.where(self._left(), min(p.border_lost_s, p.lost_s), p.lost_s)
        keep &= ~((self.state == LOST) & (time_s - self.last_seen > patience))
        self._select(keep)
        born = rest_high[dets.score[rest_high] >= p.new_track_score]
        born = born[~self._fragments(dets, born, det_rows)]  # nor inside a box step 3 took
        track_id[born] = self._start(dets, born, time_s)
        self._trace_back(dets, track_id, first_new_id, kept, time_s)
        return dets.replace(track_id=track_id, class_id=class_id)

    def _trace_back(
        self,
        dets: Detections,
        track_id: np.ndarray,
        first_new_id: int,
        kept: np.ndarray,
        time_s: float,
    ) -> None:
        """The origins of the tracks identified on this frame; then this frame's boxes that no
        identified track holds (merged duplicates and parts of held objects aside) join the
        paths later tracks are traced back along."""
        self.origins = {}
        if self.params.backtrace_s <= 0:
            return
        for k in np.flatnonzero(track_id >= first_new_id).tolist():
            origin = self.backtrace.origin(dets.xyxy[k].astype(np.float64), time_s)
            if origin is not None:
                self.origins[int(track_id[k])] = origin
        free = np.flatnonzero(kept & (track_id < 0))
        free = free[~self._fragments(dets, free, np.flatnonzero(track_id >= 0))]
        self.backtrace.add(dets.xyxy[free], time_s)

    def coast(self, time_s: float, still: bool = False) -> Detections:
        """A frame the detector skipped (``infer.interval``): every track moves on as its
        motion model predicts, nothing is matched, started or ended; the confirmed tracks in
        view are returned at their predicted boxes, with their voted class and the score of
        their last detection. ``still`` (a motion node saw nothing move): they stay put."""
        self._advance(time_s, move=not still)
        self.skipped += 1
        self.origins = {}
        if still:  # nothing moved, so what was in view still is: its lost_s starts later
            self.last_seen[self.state == TRACKED] = time_s
        rows = np.flatnonzero((self.ids > 0) & (self.state == TRACKED))
        return Detections(
            xyxy=kalman.boxes_of(self.mean[rows]).astype(np.float32),
            score=self.last_score[rows].astype(np.float32),
            class_id=self.class_id[rows].astype(np.int32),
            names=self.names,
            track_id=self.ids[rows].astype(np.int64),
        )

    def _advance(self, time_s: float, move: bool = True) -> None:
        """To ``time_s``: older class votes weigh less, and the tracks move one frame on."""
        if self.last_time is not None and time_s > self.last_time:
            self.votes *= 0.5 ** ((time_s - self.last_time) / self.params.class_half_life_s)
        self.last_time = time_s
        if move:
            self.mean, self.cov = kalman.predict(self.mean, self.cov)

    def _associate(
        self,
        tracks: np.ndarray,
        candidates: np.ndarray,
        dets: Detections,
        overlaps: list[np.ndarray],
        min_iou: float,
        fuse: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(track rows, detection indices) matched one to one, maximising overlap: on each
        table of ``overlaps`` in turn (plain, then widened boxes'), what is left; last, on the
        plain table, any pair through the gate that both sides of were left over."""
        from scipy.optimize import linear_sum_assignment  # 0.7 s of start-up: when needed

        found_tracks, found_dets = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        # Each table whole, then, on the plain overlaps, what that left with only the pairs
        # through the gate ranked. Ranked whole, two pairs under the gate can outweigh one
        # over it, which is then left (a walker at IoU 0.55 to its track got a new id). Ranked
        # only through the gate from the start (ByteTrack's cost limit), the pairs just under
        # it no longer steer the assignment: count error 18 / 11 -> 19 / 12 on the accuracy
        # bench; this pass after each table: 36 -> 35 of 37 lines for rect + interval 3; this
        # pass last: unchanged on every setting.
        for table, gated in [*((table, False) for table in overlaps), (overlaps[0], True)]:
            overlap = table[np.ix_(tracks, candidates)]
            through = overlap >= min_iou
            if not through.any():  # nothing left to match (or no tracks, or no detections)
                continue
            # ByteTrack's score fusion ranks the pairs (a sure detection wins a tie in
            # overlap), but the gate is the overlap itself: fused, a 0.3 detection needed IoU
            # 0.67 to continue its track, and a car entering the picture lost its id.
            ranked = overlap * dets.score[candidates][None, :] if fuse else overlap
            rows, cols = linear_sum_assignment(-np.where(through, ranked, 0) if gated else -ranked)
            took = through[rows, cols]
            took_tracks, took_dets = tracks[rows[took]], candidates[cols[took]]
            found_tracks.append(took_tracks)
            found_dets.append(took_dets)
            tracks, candidates = without(tracks, took_tracks), without(candidates, took_dets)
        return np.concatenate(found_tracks), np.concatenate(found_dets)

    def _same_object(
        self, dets: Detections, own: np.ndarray | None, predicted: np.ndarray
    ) -> np.ndarray:
        """Track x detection: whether the pair may be one object at all, overlap aside. With
        ``own`` (``class_aware``: of the track's class group), by the group rules. Its
        shape must be near that of the track's last seen box; a confident detection of another
        class must overlap the track's last seen box (a class change in place is the detector
        hesitating; elsewhere, it is another object); a track that left the picture is
        continued only further along its way (``boxes.onward``)."""
        if len(self) == 0 or len(dets) == 0:
            return np.ones((len(self), len(dets)), bool)
        # Against the last seen box, not the filter's estimate: its aspect ratio barely moves
        # (little process noise), while an object entering the picture widens frame by frame.
        change = aspect(dets.xyxy)[None, :] / aspect(self.last_box)[:, None]
        shaped = np.maximum(change, 1 / change) <= self.params.max_aspect_change
        other_class = self.class_id[:, None] != dets.class_id[None, :]
        confident = (dets.score >= self.params.high_score)[None, :]
        overlap = iou_matrix(self.last_box, dets.xyxy)
        same = shaped & ~(other_class & confident & (overlap <= 0))
        if own is not None:
            same &= self._of_group(dets, own, overlap)
        return same & onward(self.last_box, predicted, dets.xyxy, self._gone())

    def _fragments(self, dets: Detections, born: np.ndarray, taken: np.ndarray) -> np.ndarray:
        """Per detection in ``born``: whether it is part of objects tracks took this frame, of
        the same or a confusable class: lying ``fragment_overlap`` inside (of its own area)
        one's box (a sleeve, a head, a wheel), or holding two or more, each ``group_overlap``
        inside it (of their own area: two walkers in one box). Either rule is off at 1."""
        if len(born) == 0 or len(taken) == 0:
            return np.zeros(len(born), bool)
        groups = {name: index for index, group in enumerate(self.params.confusable)
                  for name in group}  # fmt: skip
        kinds = [groups.get(dets.class_name(c), f"class {c}") for c in dets.class_id.tolist()]
        alike = np.array([[kinds[b] == kinds[t] for t in taken.tolist()] for b in born.tolist()])
        part = intersection_over_first(dets.xyxy[born], dets.xyxy[taken])
        holds = intersection_over_first(dets.xyxy[taken], dets.xyxy[born]).T
        p = self.params
        fragment = ((part >= p.fragment_overlap) & alike).any(axis=1) & (p.fragment_overlap < 1)
        group = (((holds >= p.group_overlap) & alike).sum(axis=1) >= 2) & (p.group_overlap < 1)
        return fragment | group

    def _ranked(self, overlap: np.ndarray) -> np.ndarray:
        """Track x detection: how alike each pair is, what matching maximises; by motion
        alone, the overlap (``appearance.py`` adds looks)."""
        return overlap

    def _correct(
        self, rows: np.ndarray, det_rows: np.ndarray, dets: Detections, time_s: float
    ) -> None:
        """Tracks ``rows`` found again at detections ``det_rows``."""
        if len(rows) == 0:
            return
        boxes, scores = dets.xyxy[det_rows], dets.score[det_rows]
        self.last_box[rows] = boxes
        self.last_score[rows] = scores
        mean, cov = kalman.update(self.mean[rows], self.cov[rows], boxes)
        self.mean[rows], self.cov[rows] = mean, cov
        self.state[rows] = TRACKED
        self.hits[rows] += 1
        self.last_seen[rows] = time_s
        sure = (self.hits[rows] >= self.params.confirm_frames) | (
            scores >= self.params.confirm_score
        )
        for row in rows[(self.ids[rows] == 0) & sure]:
            self.ids[row] = self._new_id()

    def _vote(
        self, rows: np.ndarray, det_rows: np.ndarray, dets: Detections, primary: np.ndarray
    ) -> None:
        """Each matched detection, and every duplicate merged into it, votes for its class."""
        if not len(rows):
            return
        track_of = np.full(len(dets), -1, np.int64)
        track_of[det_rows] = rows
        voters = np.flatnonzero(primary >= 0)
        voters = voters[track_of[primary[voters]] >= 0]
        det_index = np.concatenate((det_rows, voters))
        track_rows = np.concatenate((rows, track_of[primary[voters]]))
        if self.params.class_aware:
            det_index, track_rows = self._own_group(det_index, track_rows, len(rows), dets)
        self._grow_votes(int(dets.class_id.max()))  # rows matched: there are detections
        np.add.at(self.votes, (track_rows, dets.class_id[det_index]), dets.score[det_index])
        self.class_id[rows] = self.votes[rows].argmax(axis=1)

    def _grow_votes(self, class_id: int) -> None:
        if class_id >= self.votes.shape[1]:
            grown = np.zeros((len(self.votes), class_id + 1))
            grown[:, : self.votes.shape[1]] = self.votes
            self.votes = grown

    def _output(
        self, rows: np.ndarray, det_rows: np.ndarray, dets: Detections
    ) -> tuple[np.ndarray, np.ndarray]:
        """For ``dets``: the id of the confirmed track each belongs to (-1 for the others),
        and the class, the track's voted one on tracked detections."""
        track_id = np.full(len(dets), -1, np.int64)
        class_id = dets.class_id.copy()
        confirmed = self.ids[rows].astype(bool)  # an id is 0 until the track is confirmed
        track_id[det_rows[confirmed]] = self.ids[rows][confirmed]
        class_id[det_rows[confirmed]] = self.class_id[rows][confirmed]
        return track_id, class_id

    def _start(self, found: Detections, born: np.ndarray, time_s: float) -> np.ndarray:
        """New tracks for detections ``born``; returns their ids (-1 while not confirmed)."""
        if not len(born):
            return np.zeros(0, np.int64)
        dets = found[born]
        mean, cov = kalman.initiate(dets.xyxy)
        count = len(dets)
        first_frame = self.frames == 1  # as ByteTrack: what the first frame shows is real
        sure = (
            first_frame
            | (self.params.confirm_frames <= 1)
            | (dets.score >= self.params.confirm_score)
        )
        ids = np.array(
            [self._new_id() if confirmed else 0 for confirmed in sure.tolist()], np.int64
        )
        self.ids = np.concatenate((self.ids, ids))
        self.class_id = np.concatenate((self.class_id, dets.class_id.astype(np.int32)))
        self._grow_votes(int(dets.class_id.max()))
        votes = np.zeros((count, self.votes.shape[1]))
        votes[np.arange(count), dets.class_id] = dets.score
        self.votes = np.concatenate((self.votes, votes))
        self.state = np.concatenate((self.state, np.full(count, TRACKED, np.int8)))
        self.hits = np.concatenate((self.hits, np.ones(count, np.int32)))
        self.last_seen = np.concatenate((self.last_seen, np.full(count, time_s)))
        self.mean = np.concatenate((self.mean, mean))
        self.cov = np.concatenate((self.cov, cov))
        self.last_box = np.concatenate((self.last_box, dets.xyxy.astype(np.float64)))
        self.last_score = np.concatenate((self.last_score, dets.score.astype(np.float64)))
        return np.where(ids.astype(bool), ids, -1)

    def _select(self, keep: np.ndarray) -> None:
        self.ids, self.class_id, self.state = self.ids[keep], self.class_id[keep], self.state[keep]
        self.votes = self.votes[keep]
        self.hits, self.last_seen = self.hits[keep], self.last_seen[keep]
        self.mean, self.cov = self.mean[keep], self.cov[keep]
        self.last_box, self.last_score = self.last_box[keep], self.last_score[keep]

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1
