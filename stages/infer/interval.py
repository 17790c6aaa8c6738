"""Which frames the detector sees when ``infer.interval`` (or ``interval_s``) asks it to skip
some: per source, one in N, or one per so many seconds of stream time. The sources are
staggered (the k-th source seen detects on the frames where ``(seq + k) % N == 0``), so that
a batch of frames from many cameras holds about 1/N of them to detect, not all or none."""

from __future__ import annotations

import threading

from vapipe.pipeline.frame import Frame


class DetectionSchedule:
    """Whether each frame is one to detect on. Safe from the infer node's worker threads.
    Asked once per frame: by the preprocess node before it (which then makes no tensor for a
    skipped frame), else by the infer node."""

    def __init__(self, interval: int, interval_s: float | None) -> None:
        self.interval, self.interval_s = interval, interval_s
        self.active = interval > 1 or interval_s is not None
        self.detected = 0
        self.skipped = 0
        self._offsets: dict[str, int] = {}
        self._last_pts: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, frame: Frame) -> bool:
        with self._lock:
            due = self._due(frame)
            if due:
                self.detected += 1
            else:
                self.skipped += 1
            return due

    def _due(self, frame: Frame) -> bool:
        source = frame.source_id
        if self.interval_s is not None:
            last = self._last_pts.get(source)
            # A stream that starts again (a camera reconnected) goes back in time: detect.
            if last is None or frame.pts < last or frame.pts - last >= self.interval_s - 1e-6:
                self._last_pts[source] = frame.pts
                return True
            return False
        if self.interval <= 1:
            return True
        offset = self._offsets.setdefault(source, len(self._offsets) % self.interval)
        return (frame.seq + offset) % self.interval == 0

    def forget(self, source_id: str) -> None:
        """A source removed from a running service: its place in the stagger is free."""
        with self._lock:
            self._offsets.pop(source_id, None)
            self._last_pts.pop(source_id, None)
