"""What the track stage needs of a tracker, so that another one (appearance-based re-ID, a
different motion model) can replace ByteTrack without touching the pipeline."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from vapipe.pipeline.detections import Detections


class Tracker(Protocol):
    """The tracks of one source. The track stage makes one per source and calls ``update``
    with every frame of that source, in order."""

    next_id: int
    """The id the next confirmed track will get (ids count from 1): ``next_id - 1`` tracks so
    far, reported by ``--stats``."""

    def update(
        self, dets: Detections, time_s: float, image: np.ndarray | None = None
    ) -> Detections:
        """``dets`` (frame pixels) with ``track_id`` set: the id of the confirmed track each
        belongs to, or -1. ``time_s`` is the frame's stream time; ``image`` the BGR frame,
        given only to stages that set ``reads_pixels = True`` (appearance features)."""
        ...


# What a tracker may also do, each declared here and checked once when the track node makes
# the tracker (isinstance), never probed per frame.


@runtime_checkable
class Coasting(Protocol):
    """A tracker that can say where its tracks are on a frame the detector skipped
    (``infer.interval``, a still frame of a motion node). One without it gives such frames
    no detections."""

    def coast(self, time_s: float, still: bool = False) -> Detections:
        """The boxes of its tracks where its motion model puts them at ``time_s`` (where they
        were, when ``still``: nothing moved)."""
        ...


@runtime_checkable
class EdgeAware(Protocol):
    """A tracker that lets tracks lost at the frame's border go sooner: the track node tells
    it the frame's size."""

    frame_size: tuple[int, int] | None
    """(width, height) of the source's frames."""


@runtime_checkable
class Backtracing(Protocol):
    """A tracker that traces a new track back through the boxes it was unsure of."""

    origins: dict[int, np.ndarray]
    """For the tracks that got their id on the last ``update``: where each was first seen,
    less surely (the analytics count a line crossed before then)."""
