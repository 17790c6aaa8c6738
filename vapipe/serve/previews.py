"""The previews of a service's streams (the page's tiles, ``/streams/ID/mjpeg`` and
``snapshot.jpg``), drawn so that no number of viewers slows the pipeline.

A preview is the frame annotated, scaled and JPEG-encoded: on 2 cores, one per stream and
viewer at 5 frames/s took the streams from 24 to 15 frames/s. So each frame is drawn once
per width, whoever asks (every viewer of a stream gets the same bytes), one preview is drawn
at a time, and all previews together get at most ``preview_cpu_share`` of one core: the CPU
time each drawing took is charged against that share, and while it is spent a viewer gets
the last picture again (its preview slows; the pipeline does not). The counts (drawn, CPU
seconds, answered with the last picture) are in ``/metrics``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from vapipe.pipeline.frame import Frame

Key = tuple[int, float]  # a frame's (seq, capture_time): what tells two pictures apart
Picture = tuple[Key, bytes]


class Previews:
    """Drawn previews by stream and width, and the CPU budget they are drawn within."""

    def __init__(
        self,
        render: Callable[[Frame, int], bytes],
        cpu_share: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self._render, self.cpu_share = render, cpu_share
        self._clock, self._cpu_clock = clock, cpu_clock
        self._lock = threading.Lock()  # one drawing at a time
        self._drawn: dict[tuple[str, int], Picture] = {}
        # CPU seconds previews may still spend: grows at cpu_share per second, up to a second's
        # worth, so that an idle page may draw its first pictures at once.
        self._credit = self._most = max(cpu_share, 0.05)
        self._since = clock()
        self.renders = self.reused = self.held_back = 0
        self.cpu_s = 0.0

    def picture(
        self, stream_id: str, frame: Frame | None, width: int, after: Any = None
    ) -> Picture | None:
        """The preview of ``frame`` (the stream's latest), or the last one drawn while the
        budget is spent; None where there is nothing yet, or nothing newer than ``after``."""
        if frame is None:
            return None
        key: Key = (frame.seq, frame.capture_time)
        with self._lock:
            last = self._drawn.get((stream_id, width))
            if last is not None and (last[0] == key or not self._affordable()):
                if last[0] != key:
                    self.held_back += 1
                else:
                    self.reused += 1
                return None if last[0] == after else last
            started = self._cpu_clock()
            jpeg = self._render(frame, width)
            spent = max(0.0, self._cpu_clock() - started)
            self._credit -= spent
            self.renders += 1
            self.cpu_s += spent
            self._drawn[(stream_id, width)] = (key, jpeg)
            return None if key == after else (key, jpeg)

    def forget(self, stream_id: str) -> None:
        with self._lock:
            for held in [held for held in self._drawn if held[0] == stream_id]:
                del self._drawn[held]

    def stats(self) -> dict[str, float]:
        return {
            "renders": self.renders,
            "cpu_s": round(self.cpu_s, 3),
            "reused": self.reused,
            "held_back": self.held_back,
        }

    def _affordable(self) -> bool:
        """Caller holds the lock."""
        now = self._clock()
        self._credit = min(self._most, self._credit + self.cpu_share * (now - self._since))
        self._since = now
        return self._credit > 0
