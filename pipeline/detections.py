"""Detections of one frame as parallel numpy arrays, checked once on construction.

The same container carries a model's candidates (in model-input pixels, before NMS) and the
final detections (in frame pixels, after NMS and tracking): select with ``dets[mask]`` or
``dets[indices]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vapipe.pipeline.object_results import ObjectResult, as_events


@dataclass(frozen=True)
class Detections:
    xyxy: np.ndarray
    """float32, N x 4: model-input pixels from the infer node, frame pixels after NMS."""
    score: np.ndarray
    """float32, N."""
    class_id: np.ndarray
    """int32, N."""
    names: Sequence[str] = ()
    """Class names indexed by class id: the model's own tuple, shared, never copied."""
    track_id: np.ndarray | None = None
    """int64, N, once a tracker has run."""
    suppressed: bool = False
    """True when non-maximum suppression has already happened (end-to-end heads do it in
    the model); NMS then only filters by score."""
    attributes: np.ndarray | None = None
    """object, N: per detection, what models run on the object found (a dict per detection:
    node name -> its result, a typed ``pipeline.object_results.ObjectResult``), once a node
    has set any. Selected with the detections, so each dict stays with its box; written into
    the events as JSON by the sinks."""

    def __post_init__(self) -> None:
        count = len(self.score)
        if self.score.shape != (count,):
            raise ValueError(f"score: expected shape ({count},), got {self.score.shape}")
        if self.xyxy.shape != (count, 4):
            raise ValueError(f"xyxy: expected shape ({count}, 4), got {self.xyxy.shape}")
        if self.class_id.shape != (count,):
            raise ValueError(f"class_id: expected shape ({count},), got {self.class_id.shape}")
        if self.track_id is not None and self.track_id.shape != (count,):
            raise ValueError(f"track_id: expected shape ({count},), got {self.track_id.shape}")
        if self.attributes is not None and self.attributes.shape != (count,):
            raise ValueError(f"attributes: expected shape ({count},), got {self.attributes.shape}")

    @classmethod
    def empty(cls, names: Sequence[str] = ()) -> Detections:
        return cls(
            np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32), names
        )

    def __len__(self) -> int:
        return len(self.score)

    def __getitem__(self, index: np.ndarray | slice) -> Detections:
        """Boolean mask or index array: ``dets[keep]``."""
        return dataclasses.replace(
            self,
            xyxy=self.xyxy[index],
            score=self.score[index],
            class_id=self.class_id[index],
            track_id=None if self.track_id is None else self.track_id[index],
            attributes=None if self.attributes is None else self.attributes[index],
        )

    def with_attributes(self, index: int, node: str, value: ObjectResult) -> Detections:
        """A copy where detection ``index`` carries ``value`` under ``node`` (the others keep
        theirs): what a model run on that object found."""
        return self.with_attributes_of(node, {index: value})

    def with_attributes_of(self, node: str, values: Mapping[int, ObjectResult]) -> Detections:
        """A copy where each detection ``index`` of ``values`` carries its value under
        ``node``; the others, and every other node's results, are kept."""
        if not values:
            return self
        for value in values.values():
            if not isinstance(value, ObjectResult):
                raise TypeError(
                    f"{node}: an object's result is an ObjectResult (pipeline/object_results.py), "
                    f"not {type(value).__name__}"
                )
        attributes = np.empty(len(self), dtype=object)
        for k in range(len(self)):
            held = self.attributes[k] if self.attributes is not None else None
            attributes[k] = dict(held) if held else {}
        for index, value in values.items():
            attributes[index][node] = value
        return self.replace(attributes=attributes)

    def tracked(self) -> np.ndarray:
        """Which detections carry a track id (a tracker marks the others -1)."""
        if self.track_id is None:
            return np.zeros(len(self), dtype=bool)
        return self.track_id >= 0

    def replace(self, **changes: Any) -> Detections:
        """A copy with some fields changed (checked again): ``dets.replace(xyxy=mapped)``."""
        return dataclasses.replace(self, **changes)

    def class_name(self, class_id: int) -> str:
        return self.names[class_id] if 0 <= class_id < len(self.names) else str(class_id)

    def to_records(self) -> list[dict[str, object]]:
        """JSON-ready dicts, one per detection: boxes to 2 decimals, scores to 4."""
        # Python numbers taken out in one ``tolist`` per array, rounded a whole array at a
        # time: the same values as ``round(v, 2)`` number by number (see ``rounded``).
        boxes = rounded(self.xyxy, 2)
        scores = rounded(self.score, 4)
        class_ids = self.class_id.tolist()
        tracks = self.track_id.tolist() if self.track_id is not None else None
        attributes = self.attributes
        records = []
        for index, class_id in enumerate(class_ids):
            record: dict[str, object] = {
                "xyxy": boxes[index],
                "score": scores[index],
                "class_id": class_id,
                "class_name": self.class_name(class_id),
            }
            if tracks is not None:
                record["track_id"] = tracks[index]
            if attributes is not None and attributes[index]:
                record["attributes"] = as_events(attributes[index])
            records.append(record)
        return records


def rounded(values: np.ndarray, digits: int) -> list[Any]:
    """``values`` as Python floats (nested lists) rounded to ``digits`` decimals, each equal
    to Python's ``round(float(v), digits)``. For float32 (what detections hold) numpy's
    ``round`` gives exactly that: ``v * 10**digits`` is exact in float64 (24 + 14 bits at most),
    so its half-to-even ``rint`` and the division round as Python's decimal rounding does.
    Other types are rounded number by number."""
    if values.dtype == np.float32 and digits <= 4:
        return np.round(values.astype(np.float64), digits).tolist()
    return _round_each(values.tolist(), digits)


def _round_each(values: Any, digits: int) -> Any:
    if isinstance(values, list):
        return [_round_each(value, digits) for value in values]
    return round(values, digits)
