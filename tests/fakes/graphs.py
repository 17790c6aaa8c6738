"""A stand-in for CUDA graph capture (stages/lazy_graphs.py) on torch's CPU device: capture
records the function and, as CUDA does, writes nothing into the outputs it makes (they hold
-7 until a replay); a replay runs the function on the graph's own input into them. ``wrong``
makes every replay off by one; ``fail`` makes capture raise as a driver refusing it does."""

from __future__ import annotations

from typing import Any

from vapipe.stages.lazy_graphs import CAPTURING, LazyGraphs, Outputs


class StandInGraph:
    def __init__(self, function: Any, static_in: Any, static_out: Outputs, wrong: bool) -> None:
        self.function, self.static_in, self.static_out = function, static_in, static_out
        self.wrong = wrong

    def replay(self) -> None:
        for out, value in zip(self.static_out, self.function(self.static_in), strict=True):
            out.copy_(value)
            if self.wrong:
                out.add_(1)


class StandInGraphs(LazyGraphs):
    def __init__(self, torch: Any, *, wrong: bool = False, fail: bool = False) -> None:
        super().__init__(torch, None, "stand-in")
        self.wrong, self.fail = wrong, fail
        self.captured: list[tuple[int, ...]] = []

    def _capture(self, function: Any, static_in: Any) -> tuple[Any, Outputs]:
        # One capture at a time in the process: another thread's would break this one.
        assert CAPTURING.locked(), "captured without the process's capture lock"
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.captured.append(tuple(static_in.shape))
        static_out = tuple(out.new_full(out.shape, -7) for out in function(static_in))
        return StandInGraph(function, static_in, static_out, self.wrong), static_out
