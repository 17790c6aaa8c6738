"""The source's timeline: output pts strictly increasing and as long as what was captured."""

from __future__ import annotations

import itertools

import pytest

from vapipe.stages.source.timeline import MAX_FILE_JUMP_S, Timeline

FPS = 25
STEP = 1 / FPS


class Clock:
    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def play(timeline: Timeline, raws: list[float | None], clock: Clock | None = None) -> list[float]:
    """Frames at the stream's pace on the (fake) wall clock."""
    out = []
    for raw in raws:
        out.append(timeline.place(raw))
        if clock is not None:
            clock.now += STEP
    return out


def strictly_increasing(values: list[float]) -> bool:
    return all(b > a for a, b in itertools.pairwise(values))


def session(first: float, count: int, first_missing: bool = False) -> list[float | None]:
    raws: list[float | None] = [first + i * STEP for i in range(count)]
    if first_missing:
        raws[0] = None
    return raws


def test_a_reconnected_camera_keeps_the_outage_and_its_own_durations() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=STEP, clock=clock)
    # An hour of capture, then 5 s away, then a session whose clock starts again near 0 and
    # whose first picture has no pts (as every RTSP session's does).
    first = play(timeline, session(7_200.0, FPS * 3600, first_missing=True), clock)
    clock.now += 5.0
    timeline.new_session()
    second = play(timeline, session(0.033, FPS * 120, first_missing=True), clock)
    assert first[0] == 0.0
    assert first[-1] == pytest.approx(3600 - STEP, abs=1e-6)
    # The outage is in the timeline (5 s plus the frame interval it takes to notice), and the
    # two-minute session spans two minutes, not microseconds.
    assert second[0] - first[-1] == pytest.approx(5.0 + STEP, abs=1e-6)
    assert second[-1] - second[0] == pytest.approx(120 - STEP, abs=1e-6)
    assert strictly_increasing(first + second)


def test_a_file_clock_restarting_mid_stream_continues_one_frame_later() -> None:
    timeline = Timeline(live=False, interval=STEP)
    # Two clips concatenated as MPEG-TS: the second's clock starts again at 1.4 s.
    pts = play(timeline, session(1.4, 100) + session(1.4, 100))
    assert pts[0] == pytest.approx(1.4)  # a file keeps its own clock
    assert pts[100] - pts[99] == pytest.approx(STEP)
    assert pts[-1] - pts[0] == pytest.approx(199 * STEP)
    assert strictly_increasing(pts)
    assert timeline.discontinuities == 1


def test_a_file_clock_jumping_far_ahead_is_a_discontinuity_but_a_short_pause_is_kept() -> None:
    timeline = Timeline(live=False, interval=STEP)
    pts = play(timeline, session(0.0, 10) + session(10 * STEP + MAX_FILE_JUMP_S + 5, 10))
    assert pts[10] - pts[9] == pytest.approx(STEP)
    paused = Timeline(live=False, interval=STEP)
    kept = play(paused, session(0.0, 10) + session(9 * STEP + 3.0, 10))
    assert kept[10] - kept[9] == pytest.approx(3.0)
    assert paused.discontinuities == 0


def test_a_live_clock_jumping_past_the_wall_clock_is_rebased_to_the_wall_clock() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=STEP, clock=clock)
    pts = play(timeline, session(50.0, 10) + session(86_400.0, 10), clock)
    assert pts[10] - pts[9] == pytest.approx(STEP)  # the frame came one interval later
    assert timeline.discontinuities == 1
    # A live stream read late (a full queue) may legitimately be far behind the wall clock.
    late = Timeline(live=True, interval=STEP, clock=clock)
    before = play(late, session(0.0, 10), clock)
    clock.now += 30.0
    after = play(late, session(10 * STEP + 29.0, 10), clock)
    assert after[0] - before[-1] == pytest.approx(29.0 + STEP)
    assert late.discontinuities == 0


def test_frames_without_pts_are_one_frame_apart() -> None:
    timeline = Timeline(live=False, interval=STEP)
    pts = play(timeline, [None, None, 5.0, None, 5.0 + 2 * STEP])
    assert pts == pytest.approx([0.0, STEP, 2 * STEP, 3 * STEP, 4 * STEP])


def test_a_file_read_again_continues_after_the_last_frame() -> None:
    timeline = Timeline(live=False, interval=STEP)
    pts = play(timeline, session(0.0, 10))
    timeline.new_session()  # loop = true
    pts += play(timeline, session(0.0, 10))
    assert pts[10] - pts[9] == pytest.approx(STEP)
    assert pts[-1] == pytest.approx(19 * STEP)


def test_a_restarted_shard_on_a_camera_resumes_after_the_delivered_time_plus_the_outage() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=STEP, clock=clock)
    timeline.resume(pts=300.0, wall=clock.now - 4.0)
    pts = play(timeline, session(0.0, 5, first_missing=True), clock)
    assert pts[0] == pytest.approx(304.0)
    assert pts[-1] - pts[0] == pytest.approx(4 * STEP)


def test_a_camera_s_wait_for_its_keyframe_stays_in_its_time() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=STEP, clock=clock)
    first = play(timeline, session(50.0, FPS * 10), clock)
    # Reconnected at once; its packets start at raw 300.0, but the first picture that decodes
    # is the keyframe at 304.4: 4.4 s of the camera's time went by before it.
    asked = clock.now
    timeline.new_session(asked)
    timeline.first_packet(300.0)
    timeline.first_packet(300.04)  # only the session's first packet counts
    clock.now += 4.4
    second = play(timeline, session(304.4, FPS * 4), clock)
    assert second[0] - first[-1] == pytest.approx(STEP + 4.4, abs=1e-6)
    # Frames reordered by a frame or two are no wait: the session starts where it began.
    timeline.new_session(clock.now)
    timeline.first_packet(500.0)
    third = play(timeline, session(500.0 + STEP, 5), clock)
    assert third[0] - second[-1] == pytest.approx(STEP, abs=1e-6)
    # Files are placed by their own clock: no such lead.
    file_timeline = Timeline(live=False, interval=STEP)
    file_timeline.first_packet(0.0)
    assert file_timeline.place(4.0) == 4.0
    assert strictly_increasing(first + second + third)
