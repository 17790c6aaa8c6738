"""When a live connection counts as stalled: it stays open, packets may even flow, but no
picture comes. The source then drops it and reconnects."""

from __future__ import annotations


class StreamStalled(Exception):
    """Packets keep coming (or the socket stays open) but no frame decodes."""


def stalled_for(
    now: float,
    had_frame: bool,
    last_frame_at: float,
    last_video_at: float,
    opened_at: float,
    stall_s: float,
    first_frame_s: float,
) -> None:
    """Raise StreamStalled when a connection has stopped giving pictures. Before its first
    frame, video packets that do not decode yet are a camera waiting for its next keyframe,
    not a stall: only their stopping counts, and ``first_frame_s`` bounds the wait."""
    if had_frame:
        if now - last_frame_at > stall_s:
            raise StreamStalled(f"no frame for {now - last_frame_at:.1f} s")
        return
    if now - last_video_at > stall_s:
        raise StreamStalled(f"no frame for {now - last_video_at:.1f} s (no video packets)")
    if now - opened_at > first_frame_s:
        raise StreamStalled(
            f"no frame decoded in {now - opened_at:.1f} s though video packets came "
            "(no keyframe: first_frame_timeout_s)"
        )
