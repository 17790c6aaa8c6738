"""The source's timeline: output pts strictly increasing and as long as what was captured."""

from __future__ import annotations

import itertools
import math

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


# Exact binary fractions below (a quarter-second frame), so that each rule is tested at its
# bound, not only on either side of it.
Q = 0.25


@pytest.mark.parametrize(("jump", "discontinuity"), [(9.5, False), (10.0, False), (10.5, True)])
def test_a_file_clock_jump_is_a_discontinuity_only_past_ten_seconds(
    jump: float, discontinuity: bool
) -> None:
    timeline = Timeline(live=False, interval=Q)
    timeline.place(0.0)
    timeline.place(Q)
    after = timeline.place(Q + jump)
    assert after == (2 * Q if discontinuity else Q + jump)
    assert timeline.discontinuities == int(discontinuity)
    # and the frames after it follow on from where it was placed
    assert timeline.place(Q + jump + Q) == after + Q


@pytest.mark.parametrize(("step", "discontinuity"), [(1.25, False), (1.5, False), (1.75, True)])
def test_a_live_clock_jump_is_measured_against_the_wall_clock_plus_a_second(
    step: float, discontinuity: bool
) -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=Q, clock=clock)
    assert timeline.place(10.0) == 0.0  # a camera's time starts at 0, whatever its clock says
    clock.now += 0.5
    after = timeline.place(10.0 + step)  # 1.5 = the 0.5 s that went by + the 1 s of slack
    assert after == (0.5 if discontinuity else step)
    assert timeline.discontinuities == int(discontinuity)
    clock.now += Q
    assert timeline.place(10.0 + step + Q) == after + Q


def test_a_repeated_or_backward_pts_is_a_restart_placed_by_the_wall_clock() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=Q, clock=clock)
    timeline.place(10.0)
    clock.now += 0.5
    assert timeline.place(10.0) == 0.5  # the same pts again: 0.5 s went by
    clock.now += 0.5
    assert timeline.place(9.0) == 1.0  # back in time: likewise
    assert timeline.discontinuities == 2


def test_a_wall_clock_stepped_back_is_no_time_away() -> None:
    clock = Clock()
    timeline = Timeline(live=True, interval=Q, clock=clock)
    timeline.place(10.0)
    clock.now -= 0.5  # NTP corrected the host's clock
    assert timeline.place(10.75) == 0.75  # within a second of slack: not a jump
    assert timeline.discontinuities == 0


def test_the_time_away_is_now_minus_the_last_frame_not_a_remainder() -> None:
    clock = Clock(start=4.0)
    timeline = Timeline(live=True, interval=Q, clock=clock)
    timeline.place(10.0)
    clock.now = 14.0  # 10 s without frames
    timeline.new_session()
    assert timeline.place(None) == 10.0


def test_a_resumed_camera_without_a_delivery_time_starts_one_frame_on() -> None:
    timeline = Timeline(live=True, interval=Q, clock=Clock())
    timeline.resume(pts=300.0, wall=None)
    assert timeline.place(None) == 300.0 + Q


def reconnected(away: float, first_packet: float) -> tuple[Timeline, Clock]:
    """A camera's timeline after one frame at 0, asked for again ``away`` seconds later, whose
    new session's first video packet has pts ``first_packet``."""
    clock = Clock()
    timeline = Timeline(live=True, interval=Q, clock=clock)
    timeline.place(0.0)
    clock.now += away
    timeline.new_session(clock.now)
    timeline.first_packet(first_packet)
    return timeline, clock


@pytest.mark.parametrize(
    ("first_packet", "lead", "counted"),
    [
        (3.0, 0.5, False),  # two frames of reordering: no wait
        (3.0, 0.625, True),  # just past it
        (3.0, 1.0, True),
        (3.0, 4.4, True),  # the first packet's pts is not a divisor of anything
        (3.0, 59.5, True),
        (3.0, 60.0, True),  # the longest wait believed
        (3.0, 60.5, False),  # past it: a clock jump, not a wait
    ],
)
def test_a_keyframe_wait_counts_between_two_frames_and_a_minute(
    first_packet: float, lead: float, counted: bool
) -> None:
    timeline, _ = reconnected(0.0, first_packet)  # at once: the session starts a frame on
    assert timeline.place(first_packet + lead) == pytest.approx(Q + (lead if counted else 0.0))


def test_a_reordered_first_frame_after_an_outage_starts_at_the_outage_end() -> None:
    timeline, _ = reconnected(3.0, 100.0)
    assert timeline.place(100.0 + Q) == 3.0  # one frame of reordering adds nothing


def test_a_first_frame_without_pts_after_its_first_packet_starts_the_session() -> None:
    timeline, clock = reconnected(2.0, 50.0)  # RTSP: packets have pts, the first picture none
    assert timeline.place(None) == 2.0
    clock.now += Q
    assert timeline.place(50.0 + Q) == 2.0 + Q


def test_a_pts_that_rounds_onto_the_previous_one_is_moved_a_frame_on() -> None:
    # Far into a long run, a step of one unit in the last place of the camera's small pts is
    # lost when added to the large offset: the sum equals the previous output pts.
    clock = Clock()
    timeline = Timeline(live=True, interval=Q, clock=clock)
    timeline.resume(pts=1e9, wall=clock.now)
    first = timeline.place(1.0)
    assert first == 1e9 + Q
    assert timeline.place(math.nextafter(1.0, 2.0)) == first + Q
    assert timeline.discontinuities == 0
