"""One source's output time: strictly increasing, and as long as what it shows.

A source's time is read from several *sessions* (a file and its loops, a camera and its
reconnects, a shard started again) and within one session the container's clock can restart
or jump (concatenated MPEG-TS, a camera rebooted behind a proxy). Output time is kept per
session as an offset::

    pts = end of the previous session + gap + (raw pts - the session's first raw pts)

where the gap is the wall-clock time the source was away (live sources: from the last frame to
when the new session was asked for, since a camera streams from the moment it is asked while
FFmpeg holds the first second or so to probe it) or one frame (files),
and a frame without a pts (the first picture of every RTSP session) is one frame after the one
before it. Clamping to "previous + 1 µs" is never used: it squeezed a whole reconnected
session into microseconds and with it every duration computed downstream (tracker lost time,
dwell, segment length, the recorded video).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

MAX_FILE_JUMP_S = 10.0
"""A file's clock jumping forward by more than this between two frames is a discontinuity
(the next clip of a concatenation), not a pause in the recording."""

MAX_KEYFRAME_WAIT_S = 60.0
"""A first frame further than this from the first packet is a clock jump, not a wait."""
LIVE_JUMP_SLACK_S = 1.0
"""A live stream cannot get ahead of the wall clock: a jump larger than the wall-clock time
since the previous frame plus this is the camera's clock restarting."""


class Timeline:
    """Maps each session's raw pts (seconds, or None) to the run's output pts."""

    def __init__(self, live: bool, interval: float, clock: Callable[[], float] = time.time) -> None:
        self.live = live
        self.interval = interval
        """One frame, in seconds (from the stream's rate)."""
        self._clock = clock
        self.last_pts: float | None = None
        self._last_wall: float | None = None
        self._offset: float | None = None  # None: no raw pts seen yet in this session
        self._last_raw: float | None = None
        self._began = False  # a frame of this session was placed
        self._opened_at: float | None = None
        self._first_packet_raw: float | None = None
        self.discontinuities = 0
        """Times the clock restarted or jumped inside a session."""

    def resume(self, pts: float | None, wall: float | None) -> None:
        """Carry on after frames another process delivered (a restarted shard on a camera):
        the next session starts after ``pts``, delivered at ``wall`` (time.time())."""
        self.last_pts, self._last_wall = pts, wall
        self.new_session()

    def new_session(self, opened_at: float | None = None) -> None:
        """The next frame comes from a new reading of the input (reconnect, loop), asked for
        at ``opened_at`` (the clock's time; default: when its first frame comes)."""
        self._offset = self._last_raw = None
        self._began = False
        self._opened_at = opened_at
        self._first_packet_raw = None

    def first_packet(self, raw: float | None) -> None:
        """The raw pts of the session's first video packet. A camera streams from the moment
        it is asked, but its pictures decode only from the next keyframe: a first frame that
        came seconds after the first packet is placed that much after the session's start,
        not at it (the wait would otherwise vanish from the source's time)."""
        if self._first_packet_raw is None:  # read only for the session's first frame
            self._first_packet_raw = raw

    @property
    def offset(self) -> float | None:
        """Output pts minus container pts in this session, once its first frame is placed."""
        return self._offset

    def place(self, raw: float | None) -> float:
        """The output pts of the next frame, whose container pts is ``raw`` (None: unknown)."""
        now = self._clock()
        if not self._began:
            start = self._session_start(now if self._opened_at is None else self._opened_at)
            start += self._keyframe_wait(raw)
            pts = start if raw is None or self.last_pts is not None or self.live else raw
            if raw is not None:
                self._offset = pts - raw
        elif raw is None:
            pts = self._next()
        elif self._offset is None:  # the session began without pts: this frame follows on
            pts = self._next()
            self._offset = pts - raw
        else:
            pts = raw + self._offset
            if self._jumped(raw, now):
                self.discontinuities += 1
                pts = self._session_start(now)
                self._offset = pts - raw
        if self.last_pts is not None and pts <= self.last_pts:  # float rounding only
            pts = self._next()
        self.last_pts, self._last_wall = pts, now
        self._began = True
        if raw is not None:
            self._last_raw = raw
        return pts

    def _jumped(self, raw: float, now: float) -> bool:
        step = raw - (self._last_raw if self._last_raw is not None else raw)
        if step <= 0:
            return True
        if self.live:
            return step > self._wall_gap(now) + LIVE_JUMP_SLACK_S
        return step > MAX_FILE_JUMP_S

    def _session_start(self, now: float) -> float:
        """Where a new stretch of time starts: 0 for the first, else after the previous
        frame plus the time the source was away (live) or one frame (files)."""
        if self.last_pts is None:
            return 0.0
        return self.last_pts + (
            max(self.interval, self._wall_gap(now)) if self.live else self.interval
        )

    def _keyframe_wait(self, raw: float | None) -> float:
        """How far a live session's first frame lies after its first packet, where that is
        more than a frame's reordering (else 0)."""
        if not self.live or raw is None or self._first_packet_raw is None:
            return 0.0
        lead = raw - self._first_packet_raw
        return lead if 2 * self.interval < lead <= MAX_KEYFRAME_WAIT_S else 0.0

    def _next(self) -> float:
        """One frame after the previous (a session's later frames: there is one)."""
        return cast(float, self.last_pts) + self.interval

    def _wall_gap(self, now: float) -> float:
        return 0.0 if self._last_wall is None else max(0.0, now - self._last_wall)
