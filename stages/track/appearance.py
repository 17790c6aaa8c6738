"""Looks as well as motion (``[nodes.track.appearance]``): a re-identification model embeds
the confident detections of its classes, each track keeps the running mean of its vectors,
and matching weighs both, as BoT-SORT (Aharon et al., 2022) does:

- a pair that overlaps at least ``proximity`` and looks alike (cosine similarity at least
  ``match``) ranks as ``max(overlap, (1 + similarity) / 2)``: in a crowd, where several
  walkers overlap a track's prediction, the one that looks like it wins;
- a pair that looks unlike (similarity under ``reject``) is not one object, whatever its
  overlap: a person walking in where another walked out starts a track of their own.

Where either side has no vector yet (another class, a box too small, a track born from a
low-score detection), the pair is matched by motion alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame
from vapipe.stages.crops.cutter import Crop, Cropper, run_in_chunks
from vapipe.stages.crops.warp import CropRule
from vapipe.stages.objects.config import ObjectModelConfig
from vapipe.stages.objects.model import ObjectModel
from vapipe.stages.objects.outputs import unit
from vapipe.stages.track.bytetrack import ByteTracker
from vapipe.stages.track.config import AppearanceConfig, TrackConfig


class Embedder:
    """The model of one track node, and the vectors of a frame's detections."""

    def __init__(self, node: str, config: AppearanceConfig, min_score: float) -> None:
        self.config = config
        self.min_score = min_score
        """Detections under this score are not embedded (the tracker's ``high_score``)."""
        model_config = ObjectModelConfig(
            model=config.model, fit=config.fit, max_batch=config.max_batch,
            backend=config.backend, min_size=config.min_size,
        )  # fmt: skip
        self.node = f"{node}.appearance"
        self.model = ObjectModel(self.node, model_config)
        self.rule = CropRule(fit=config.fit)
        self._cropper: Cropper | None = None
        self.crops = 0
        """Crops embedded so far."""

    def load(self) -> Embedder:
        self.model.load()
        self.cropper  # noqa: B018 - made now: its OpenCL device is chosen (and logged) here
        return self

    @property
    def cropper(self) -> Cropper:
        """The object nodes' crop library: one OpenCL kernel for a frame's crops where a
        device builds it (``crops``), else numpy."""
        if self._cropper is None:
            self._cropper = Cropper(self.node, self.model, self.rule, self.config.crops)
        return self._cropper

    def wanted(self, dets: Detections) -> np.ndarray:
        """Indices of the detections to embed: confident, of ``classes``, large enough."""
        if not len(dets):
            return np.zeros(0, np.int64)
        classes = set(self.config.classes)
        of_class = np.array([dets.class_name(c) in classes for c in dets.class_id.tolist()])
        sides = np.minimum(dets.xyxy[:, 2] - dets.xyxy[:, 0], dets.xyxy[:, 3] - dets.xyxy[:, 1])
        keep = of_class & (dets.score >= self.min_score) & (sides >= self.config.min_size)
        return np.flatnonzero(keep)

    def vectors(self, frame: Frame) -> np.ndarray:
        """Detections x the model's output size, unit length; NaN rows: not embedded."""
        dets = frame.detections
        assert dets is not None
        chosen = self.wanted(dets)
        if not len(chosen):
            return np.full((len(dets), 0), np.nan, np.float32)
        crops = [Crop(frame, *self.cropper.warp(box)) for box in dets.xyxy[chosen]]
        kept, batch = self.cropper.inputs(crops)
        if not kept:
            return np.full((len(dets), 0), np.nan, np.float32)
        # each crop's output flattened to one row
        looks = unit(run_in_chunks(self.model.run_input, batch, self.config.max_batch))
        self.crops += len(kept)
        found = np.full((len(dets), looks.shape[1]), np.nan, np.float32)
        found[chosen[kept]] = looks
        return found

    def close(self) -> dict[str, Any]:
        return self.model.close()


class AppearanceTracker(ByteTracker):
    """ByteTrack with looks: set ``found`` (the stage's ``Embedder.vectors`` of the frame's
    detections) before each ``update``."""

    def __init__(self, params: TrackConfig) -> None:
        super().__init__(params)
        assert params.appearance is not None
        self.looks = params.appearance
        self.found: np.ndarray | None = None
        """This frame's detection vectors, set before ``update`` (NaN rows: none)."""
        self.vectors = np.zeros((0, 0), np.float32)
        """Track x vector: each track's look, NaN while it has none."""
        self._found = np.zeros((0, 0), np.float32)
        self._similar = np.zeros((0, 0))

    def update(
        self, dets: Detections, time_s: float, image: np.ndarray | None = None
    ) -> Detections:
        found, self.found = self.found, None
        width = self.vectors.shape[1]
        if found is None or len(found) != len(dets) or not found.shape[1]:
            found = np.full((len(dets), width), np.nan, np.float32)  # no vector this frame
        elif width != found.shape[1]:
            if width:
                raise ValueError(
                    f"appearance vectors of {found.shape[1]} values after {width}: one model "
                    "per track node"
                )
            self.vectors = np.full((len(self.ids), found.shape[1]), np.nan, np.float32)
        self._found = found
        # NaN where either side has no vector: every comparison with it is false.
        if found.shape[1]:
            self._similar = self.vectors @ found.T
        else:
            self._similar = np.full((len(self.ids), len(dets)), np.nan)
        return super().update(dets, time_s, image)

    def _same_object(
        self, dets: Detections, own: np.ndarray | None, predicted: np.ndarray
    ) -> np.ndarray:
        same = super()._same_object(dets, own, predicted)
        if not same.size:
            return same
        return same & ~(self._similar < self.looks.reject)

    def _ranked(self, overlap: np.ndarray) -> np.ndarray:
        if not overlap.size:
            return overlap
        alike = (overlap >= self.looks.proximity) & (self._similar >= self.looks.match)
        return np.where(alike, np.maximum(overlap, (1 + self._similar) / 2), overlap)

    def _correct(
        self, rows: np.ndarray, det_rows: np.ndarray, dets: Detections, time_s: float
    ) -> None:
        super()._correct(rows, det_rows, dets, time_s)
        if not self.vectors.shape[1]:
            return
        new = self._found[det_rows]
        seen = ~np.isnan(new[:, 0])
        rows, new = rows[seen], new[seen]
        if not len(rows):  # no matched detection was embedded: every look stays as it was
            return
        old = self.vectors[rows]
        first = np.isnan(old[:, 0])
        blend = self.looks.smoothing * np.where(first[:, None], 0.0, old)
        mixed = np.where(first[:, None], new, blend + (1 - self.looks.smoothing) * new)
        self.vectors[rows] = unit(mixed)

    def _start(self, found: Detections, born: np.ndarray, time_s: float) -> np.ndarray:
        ids = super()._start(found, born, time_s)
        if len(born):
            self.vectors = np.concatenate((self.vectors, self._found[born]))
        return ids

    def _select(self, keep: np.ndarray) -> None:
        super()._select(keep)
        self.vectors = self.vectors[keep]
