"""Live streams: each source's latest frames drawn, encoded once (``live_encode``) on a thread
of their own, and handed to every viewer, each through a small queue of its own.

The pipeline never waits for a stream: ``offer`` keeps only the newest frame for the encoder
(an encoder slower than the source skips frames), and a viewer whose queue is full loses its
own pictures up to the next keyframe (then goes on from there, decodable), never anyone
else's. Nothing is drawn or encoded while nobody watches.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vapipe.pipeline.frame import Frame
from vapipe.stages.media.draw import annotate
from vapipe.stages.media.live_encode import (
    H264,
    TIME_BASE,
    FragmentedMp4,
    codec_string,
    output_size,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveSettings:
    width: int = 1280
    """The most a stream is wide (scaled down, aspect kept)."""
    fps: float = 15.0
    """The most pictures a second a stream carries."""
    keyframe_s: float = 1.0
    bitrate: int = 2_000_000
    draw: bool = True
    """Boxes, labels, lines and zones drawn, as the video sink draws them."""
    queue: int = 30
    """Pictures a viewer may fall behind before it skips to the next keyframe."""
    threads: int = 1
    """Encoder threads per stream."""
    stalled_s: float = 10.0
    """A viewer that has taken nothing for this long while pictures came is let go (a
    client gone without its connection saying so)."""


class Viewer:
    """One viewer's queue: what it has not taken yet, from a keyframe on."""

    def __init__(self, limit: int, first: bytes = b"") -> None:
        self.limit = limit
        self.items: deque[bytes] = deque()
        self.cond = threading.Condition()
        self.started = False  # nothing is sent before a keyframe
        self.skipping = False  # fell behind: waits for the next keyframe
        self.closed = False
        self.sent = self.dropped = 0
        self.last_taken = time.monotonic()
        if first:
            self.items.append(first)

    def stalled(self, now: float, after_s: float) -> bool:
        """It has taken nothing for ``after_s`` though there was something to take."""
        with self.cond:
            return bool(self.items or self.skipping) and now - self.last_taken > after_s

    def put(self, data: bytes, keyframe: bool) -> None:
        with self.cond:
            if keyframe:
                self.started, self.skipping = True, False
            if not self.started or self.skipping:
                self.dropped += 1
                return
            if len(self.items) >= self.limit:
                # Behind: what it holds is dropped, and the rest up to a keyframe (a picture
                # without the ones before it does not decode).
                self.dropped += len(self.items) + 1
                self.items.clear()
                self.skipping = True
                return
            self.items.append(data)
            self.cond.notify()

    def get(self, timeout: float) -> bytes | None:
        """The next item, or None when none came within ``timeout`` or the stream ended."""
        with self.cond:
            if not self.items and not self.closed:
                self.cond.wait(timeout)
            if not self.items:
                return None
            self.sent += 1
            self.last_taken = time.monotonic()
            return self.items.popleft()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()


class LiveStream:
    """One source's live stream: the newest frame offered, encoded on this stream's thread
    while anyone watches; MP4 fragments for browsers, access units for RTSP."""

    def __init__(
        self,
        source_id: str,
        settings: LiveSettings,
        watchers: Callable[[], int] = lambda: 0,
        on_unit: Callable[[str, bytes, bool], None] | None = None,
    ) -> None:
        self.source_id, self.settings = source_id, settings
        self.external_watchers = watchers
        self.on_unit = on_unit
        """Each access unit (Annex B) and whether it is a keyframe: an RTSP server's feed."""
        self.lock = threading.Condition()
        self.newest: Frame | None = None
        self.mp4_viewers: list[Viewer] = []
        self.encoder: H264 | None = None
        self.mp4: FragmentedMp4 | None = None
        self.want_keyframe = True
        self.epoch: float | None = None
        """Wall-clock time of media time 0 (a viewer's latency: now - epoch - media time)."""
        self.encoded = self.skipped = self.let_go = 0
        self.encode_s = 0.0
        self.last_pts = -1
        self.running = True
        self.thread = threading.Thread(target=self._run, name=f"live-{source_id}", daemon=True)
        self.thread.start()

    # -- the pipeline's side ------------------------------------------------------------------

    def offer(self, frame: Frame) -> None:
        """The stream's newest frame (never waits; an older one not yet encoded is skipped)."""
        with self.lock:
            if self.newest is not None and self.watched():
                self.skipped += 1
            self.newest = frame
            self.lock.notify()

    # -- viewers ------------------------------------------------------------------------------

    def watched(self) -> bool:
        return bool(self.mp4_viewers) or self.external_watchers() > 0

    def watch_mp4(self) -> Viewer:
        """A browser's viewer: the stream's header first, then fragments from a keyframe
        (asked for at once, so a new viewer waits a frame, not a keyframe interval)."""
        with self.lock:
            viewer = Viewer(self.settings.queue)
            self.mp4_viewers.append(viewer)
            self.want_keyframe = True
            self.lock.notify()
            return viewer

    def header(self, timeout: float) -> bytes | None:
        """The fragmented MP4's header (ftyp + moov), once the first picture is encoded."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while (self.mp4 is None or not self.mp4.init) and self.running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.lock.wait(left)
            return self.mp4.init if self.mp4 is not None else None

    def codec_string(self) -> str:
        """The MIME type and codec of the MP4 (for Media Source Extensions)."""
        with self.lock:
            return self.mp4.codec if self.mp4 is not None else codec_string(b"")

    def leave(self, viewer: Viewer) -> None:
        with self.lock:
            if viewer in self.mp4_viewers:
                self.mp4_viewers.remove(viewer)
        viewer.close()

    def keyframe_wanted(self) -> None:
        """An RTSP viewer joined: the next picture is a keyframe."""
        with self.lock:
            self.want_keyframe = True
            self.lock.notify()

    # -- the encoder's thread -------------------------------------------------------------

    def _run(self) -> None:
        interval = 1.0 / self.settings.fps
        last = 0.0
        while True:
            with self.lock:
                # Nobody watching: nothing is encoded (the newest frame is only held, for a
                # viewer who comes).
                while self.running and (self.newest is None or not self.watched()):
                    self.lock.wait(0.5)
                if not self.running or self.newest is None:
                    break
                frame, self.newest = self.newest, None
            wait = last + interval - time.monotonic()
            if wait > 0:  # at most ``fps``: this one waits, a newer one may replace it
                with self.lock:
                    self.newest = self.newest or frame
                    self.lock.wait(wait)
                continue
            last = time.monotonic()
            try:
                self._encode(frame)
            except Exception as exc:  # a stream's failure must not take the pipeline down
                log.warning("live stream %s: %s", self.source_id, exc)
                self._reset()
        self._reset()

    def _encode(self, frame: Frame) -> None:
        started = time.thread_time()
        settings = self.settings
        picture = annotate(frame) if settings.draw else frame.image
        if self.encoder is None:
            height, width = picture.shape[:2]
            width, height = output_size(width, height, settings.width)
            self.encoder = H264(
                width, height, settings.fps, settings.keyframe_s, settings.bitrate,
                settings.threads,
            )  # fmt: skip
            self.mp4 = FragmentedMp4(width, height)
            self.epoch = frame.capture_time
        assert self.mp4 is not None and self.epoch is not None
        pts = max(self.last_pts + 1, round((frame.capture_time - self.epoch) / TIME_BASE))
        self.last_pts = pts
        with self.lock:
            keyframe, self.want_keyframe = self.want_keyframe, False
        units = self.encoder.encode(np.asarray(picture), pts, keyframe)
        with self.lock:
            viewers = list(self.mp4_viewers)
        for unit in units:
            if self.on_unit is not None:
                self.on_unit(self.source_id, unit.data, unit.keyframe)
            fragments = self.mp4.add(unit)
            with self.lock:
                self.lock.notify_all()  # the header, once written
            for data, starts_gop in fragments:
                for viewer in viewers:
                    viewer.put(data, starts_gop)
        now = time.monotonic()
        for viewer in viewers:
            if viewer.stalled(now, settings.stalled_s):
                self.leave(viewer)
                self.let_go += 1
        self.encoded += 1
        self.encode_s += time.thread_time() - started

    def _reset(self) -> None:
        if self.encoder is not None:
            self.encoder.close()
        if self.mp4 is not None:
            self.mp4.close()
        self.encoder = self.mp4 = None

    def close(self) -> None:
        with self.lock:
            self.running = False
            viewers, self.mp4_viewers = self.mp4_viewers, []
            self.lock.notify_all()
        for viewer in viewers:
            viewer.close()
        self.thread.join(timeout=10)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            viewers = list(self.mp4_viewers)
        return {
            "encoded": self.encoded,
            "skipped": self.skipped,
            "encode_cpu_s": round(self.encode_s, 3),
            "viewers": len(viewers) + self.external_watchers(),
            "viewer_dropped": sum(viewer.dropped for viewer in viewers),
            "viewers_let_go": self.let_go,
        }
