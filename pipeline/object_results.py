"""What models run on tracked objects found, as typed values: each object node's result
sits under the node's name in ``Detections.attributes`` (a label, boxes found inside the
object, a vector and the name it matched). Readers ask a value what they need (``tag`` for a
box's caption and the counts per label; ``BoxesInside.best`` for a node that runs on those
boxes); it becomes JSON only at the sinks (``as_event``), in the events' schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class ObjectResult:
    """The base of every object node's result."""

    @property
    def tag(self) -> str | None:
        """The word a box's caption shows and line counts group by (a label, a name); None
        for a result that has none (boxes inside the object)."""
        return None

    @property
    def caption(self) -> str | None:
        """What a drawn box's label shows of it: its ``tag`` unless a kind says otherwise (a
        plate is shown but not counted by)."""
        return self.tag

    def as_event(self, vector: bool = True) -> dict[str, Any]:
        """The result as the events carry it (``vector``: with the embedding's vector, where
        the node writes it; analytics events leave it out)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Label(ObjectResult):
    """A classifier's label for the object, and its score (``classify``)."""

    label: str
    score: float

    @property
    def tag(self) -> str | None:
        return self.label

    def as_event(self, vector: bool = True) -> dict[str, Any]:
        return {"label": self.label, "score": round(self.score, 4)}


@dataclass(frozen=True)
class FoundBox:
    """One box found inside an object, in frame pixels."""

    xyxy: np.ndarray
    """float32, 4."""
    score: float
    label: str
    landmarks: np.ndarray | None = None
    """K x 2 points (a face's eyes, nose, mouth corners), frame pixels, where the model gives
    them."""

    def as_event(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "xyxy": [round(float(v), 2) for v in self.xyxy],
            "score": round(float(self.score), 4),
            "label": self.label,
        }
        if self.landmarks is not None:
            entry["landmarks"] = [
                [round(float(x), 1), round(float(y), 1)] for x, y in self.landmarks
            ]
        return entry


@dataclass(frozen=True)
class BoxesInside(ObjectResult):
    """The boxes a detector found inside the object, best first (``detect_inside``)."""

    boxes: tuple[FoundBox, ...]

    @property
    def best(self) -> FoundBox | None:
        """The best box (the one a node ``on`` these boxes runs on), None when none."""
        return self.boxes[0] if self.boxes else None

    def as_event(self, vector: bool = True) -> dict[str, Any]:
        return {"boxes": [found.as_event() for found in self.boxes]}


@dataclass(frozen=True)
class Embedding(ObjectResult):
    """The object's vector (unit length), and with a gallery, the name it is most like and
    how alike (``embed``)."""

    vector: np.ndarray = field(repr=False)
    name: str | None = None
    """The gallery's name it matched (or its word for no match); None without a gallery."""
    similarity: float | None = None
    written: bool = False
    """The node writes the vector itself into the events (its ``vector`` key)."""

    @property
    def tag(self) -> str | None:
        return self.name

    def as_event(self, vector: bool = True) -> dict[str, Any]:
        value: dict[str, Any] = {}
        if self.name is not None:
            value = {"name": self.name, "similarity": round(float(self.similarity or 0.0), 4)}
        if self.written or self.name is None:
            value["dims"] = int(self.vector.shape[0])
        if self.written and vector:
            value["vector"] = [round(float(v), 5) for v in self.vector]
        return value


@dataclass(frozen=True)
class Plate(ObjectResult):
    """The plate read on the object (``plates``): its text (upper case, no separators), the
    voted reads' mean score, the known plate's name where it is one, and where the plate is
    (frame pixels). Not a ``tag``: line counts per plate would be a count per vehicle."""

    text: str
    score: float
    xyxy: np.ndarray | None = None
    name: str | None = None
    known: str | None = None
    """The known plate it was matched to (differs from ``text`` by a misread character)."""

    @property
    def caption(self) -> str | None:
        return f"{self.text} {self.name}" if self.name else self.text

    def as_event(self, vector: bool = True) -> dict[str, Any]:
        value: dict[str, Any] = {"plate": self.text, "score": round(float(self.score), 4)}
        if self.name is not None:
            value["name"] = self.name
            value["known_plate"] = self.known
        if self.xyxy is not None:
            value["xyxy"] = [round(float(v), 2) for v in self.xyxy]
        return value


def as_events(results: dict[str, ObjectResult], vector: bool = True) -> dict[str, Any]:
    """Each node's result under its name, as the events carry them."""
    return {node: value.as_event(vector) for node, value in results.items()}
