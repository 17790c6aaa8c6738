"""The copy of each GPU-decoded picture out of the decoder's surfaces: made on the decoder's
own CUDA stream, which becomes the source thread's current stream once (not entered and left
around every picture), again in any other thread that copies, and finished (the stream
synchronised after each copy) before the picture is handed on, so it carries no event for its
readers to wait on. A stand-in for torch's CUDA calls records them."""

from __future__ import annotations

import threading
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import numpy as np

from vapipe.stages.source.device_stream import NO_PTS, AnnexBStream


class FakeCuda:
    def __init__(self) -> None:
        self.current: dict[int, Any] = {}
        self.set_calls: list[tuple[int, Any]] = []
        self.recorded: list[tuple[Any, Any]] = []
        self.log: list[str] = []

    def Stream(self, device: Any) -> Any:
        cuda = self
        return SimpleNamespace(
            cuda_stream=1234, device=device, synchronize=lambda: cuda.log.append("synchronize")
        )

    def set_stream(self, stream: Any) -> None:
        self.set_calls.append((threading.get_ident(), stream))
        self.current[threading.get_ident()] = stream

    def Event(self) -> Any:
        cuda = self
        event = SimpleNamespace()
        event.record = lambda stream: cuda.recorded.append((event, stream))
        return event


class Copying(AnnexBStream):
    def __init__(self, cuda: FakeCuda) -> None:
        self.codec, self.time_base = "h264", Fraction(1, 90000)
        self._copies_on(SimpleNamespace(cuda=cuda), SimpleNamespace(type="cuda"))

    def _feed(self, packet: Any) -> list[Any]:
        return []


def test_the_copy_stream_is_made_current_once_per_thread_and_every_picture_has_its_event() -> None:
    cuda = FakeCuda()
    stream = Copying(cuda)
    seen_current = []

    def copy() -> np.ndarray:
        seen_current.append(cuda.current.get(threading.get_ident()))
        cuda.log.append("copy")
        return np.zeros((6, 4), np.uint8)

    pictures = [stream._copied(copy, pts) for pts in (0, 3003, NO_PTS)]
    main = threading.get_ident()
    assert cuda.set_calls == [(main, stream.stream)]
    assert seen_current == [stream.stream] * 3, "a copy ran outside the decoder's stream"
    # Each copy finished before its picture is handed on: nothing for a reader to wait on.
    assert cuda.log == ["copy", "synchronize"] * 3 and cuda.recorded == []
    assert [p.ready for p in pictures] == [None] * 3
    assert [p.pts for p in pictures] == [0, 3003, None]
    assert pictures[1].time_base == Fraction(1, 90000)

    other = threading.Thread(target=stream._copied, args=(copy, 6006))
    other.start()
    other.join()
    assert len(cuda.set_calls) == 2 and cuda.set_calls[1][0] != main
    assert seen_current[-1] is stream.stream
    stream._copied(copy, 9009)  # back in the first thread: made current there again
    assert len(cuda.set_calls) == 3 and cuda.set_calls[2][0] == main


def test_on_the_cpu_no_stream_and_no_event() -> None:
    class OnCpu(Copying):
        def __init__(self) -> None:
            self.codec, self.time_base = "h264", Fraction(1, 25)
            self._copies_on(SimpleNamespace(), SimpleNamespace(type="cpu"))

    picture = OnCpu()._copied(lambda: np.ones((6, 4), np.uint8), 5)
    assert picture.ready is None and picture.pts == 5 and picture.tensor.sum() == 24
    # Before the first shown picture (an edit list's B-frames) a timestamp is negative: only
    # the decoder's "none" (-1) means none.
    assert OnCpu()._copied(lambda: np.ones((6, 4), np.uint8), -3003).pts == -3003
