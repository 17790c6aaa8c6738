"""Previews are drawn once per frame and width for every viewer, and within their CPU share:
past it a viewer gets the last picture again. Clocks are simulated: a drawing 'takes' the
CPU time the fake renderer says."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from vapipe.serve.previews import Previews


class Clocks:
    def __init__(self, cost_s: float) -> None:
        self.wall = self.cpu = 0.0
        self.cost_s = cost_s
        self.drawn: list[tuple[int, int]] = []

    def render(self, frame: Any, width: int) -> bytes:
        self.cpu += self.cost_s
        self.drawn.append((frame.seq, width))
        return f"{frame.seq}@{width}".encode()

    def previews(self, share: float) -> Previews:
        return Previews(self.render, share, lambda: self.wall, lambda: self.cpu)


def frame(seq: int) -> Any:
    return SimpleNamespace(seq=seq, capture_time=seq / 25)


def test_every_viewer_of_a_frame_gets_one_drawing() -> None:
    clocks = Clocks(cost_s=0.001)
    previews = clocks.previews(share=0.5)
    first = previews.picture("cam", frame(1), 640)
    assert first == ((1, 0.04), b"1@640")
    assert previews.picture("cam", frame(1), 640) == first  # a second viewer
    assert previews.picture("cam", frame(1), 640, after=(1, 0.04)) is None  # seen it
    assert previews.picture("cam", frame(1), 320) == ((1, 0.04), b"1@320")  # its own width
    assert clocks.drawn == [(1, 640), (1, 320)]
    assert previews.stats() == {"renders": 2, "cpu_s": 0.002, "reused": 2, "held_back": 0}
    assert previews.picture("cam", None, 640) is None
    previews.forget("cam")
    assert previews.picture("cam", frame(1), 640) == first and len(clocks.drawn) == 3


def test_past_the_cpu_share_a_viewer_gets_the_last_picture() -> None:
    clocks = Clocks(cost_s=0.5)  # a costly drawing: half a CPU second
    previews = clocks.previews(share=0.1)
    assert previews.picture("cam", frame(1), 640) == ((1, 0.04), b"1@640")
    clocks.wall = 1.0
    assert previews.picture("cam", frame(2), 640) == ((1, 0.04), b"1@640")  # held back
    assert previews.picture("cam", frame(2), 640, after=(1, 0.04)) is None
    clocks.wall = 4.0  # 0.4 s of credit came back: what the first drawing overspent
    assert previews.picture("cam", frame(3), 640)[1] == b"1@640"
    clocks.wall = 4.5
    assert previews.picture("cam", frame(3), 640)[1] == b"3@640"
    assert previews.stats()["held_back"] == 3 and previews.stats()["renders"] == 2


def test_many_viewers_of_many_streams_stay_within_the_share() -> None:
    clocks = Clocks(cost_s=0.03)  # a 1080p frame drawn and encoded
    previews = clocks.previews(share=0.1)
    for tick in range(25 * 120):  # two minutes of four streams at 25 frames/s
        clocks.wall = tick / 25
        for index, stream in enumerate(("a", "b", "c", "d")):
            for _viewer in range(3):  # three pages open, each polling every frame
                assert previews.picture(stream, frame(tick * 4 + index), 640) is not None
    # never more than the share, past the first second's credit
    assert previews.cpu_s <= 0.1 * clocks.wall + 0.1 + 0.03 + 1e-9, previews.stats()
    assert previews.cpu_s >= 0.1 * clocks.wall * 0.9, "the share is used, not starved"
    assert len(set(clocks.drawn)) == len(clocks.drawn), "a frame drawn twice at one width"


def test_forgetting_a_stream_keeps_the_others_and_a_seen_frame_is_not_sent_again() -> None:
    clocks = Clocks(cost_s=0.001)
    previews = clocks.previews(share=1.0)
    for stream in ("a", "cam", "door"):
        previews.picture(stream, frame(1), 640)
    previews.forget("cam")
    assert [previews.picture(s, frame(1), 640) for s in ("a", "door")] == [
        ((1, 0.04), b"1@640")
    ] * 2
    assert len(clocks.drawn) == 3, "the other streams' pictures were kept"
    # a frame the viewer has (its key from another width's answer) is drawn, not sent
    assert previews.picture("cam", frame(2), 640, after=(2, 2 / 25)) is None
    assert clocks.drawn[-1] == (2, 640)
    # the budget spent: a viewer that has the last picture gets nothing, the others get it
    spend = clocks.previews(share=0.01)
    clocks.cost_s = 1.0
    assert spend.picture("cam", frame(1), 640) is not None
    assert spend.picture("cam", frame(2), 640, after=(1, 0.04)) is None
    assert spend.stats()["held_back"] == 1 and spend.stats()["reused"] == 0
    assert spend.picture("cam", frame(1), 640, after=None) is not None
    assert spend.stats()["reused"] == 1
