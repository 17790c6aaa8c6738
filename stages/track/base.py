"""What the track stage needs of a tracker, so that another one (appearance-based re-ID, a
different motion model) can replace ByteTrack without touching the pipeline."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from vapipe.stages.detections import Detections


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

    # A tracker may also have ``coast(time_s) -> Detections``: the boxes of its tracks where
    # its motion model puts them at ``time_s``, for a frame the detector skipped
    # (``infer.interval``). One without it gives such frames no detections. It may also have
    # ``origins: dict[int, np.ndarray]``: for the tracks that got their id on the last
    # ``update``, where each was first seen, less surely (the analytics count a line crossed
    # before then).
