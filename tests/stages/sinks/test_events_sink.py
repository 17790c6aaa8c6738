"""The events sink writes the frames waiting in one go: each file's lines in one write, in
order, every line whole, even when the disk fills in the middle of a batch."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, Message, StreamInfo
from vapipe.pipeline.stage import StageContext
from vapipe.stages.sinks.events import EventsConfig, EventsSink


def frame(source: str, seq: int, boxes: int = 1) -> Frame:
    info = StreamInfo(source, "x", 64, 64, None)
    item = Frame(source, seq, seq / 10, 1_796_000_000.0 + seq, None, info)  # type: ignore[arg-type] - no pixels read
    corner = np.arange(boxes * 2, dtype=np.float32).reshape(boxes, 2)
    item.detections = Detections(
        np.concatenate([corner, corner + 10.125], axis=1),
        np.full(boxes, 0.56785, np.float32),
        np.zeros(boxes, np.int32),
        ("person",),
    )
    return item


def sink(path: Path | str, **settings: Any) -> EventsSink:
    node = EventsSink("events", EventsConfig(path=str(path), **settings))
    node.open(StageContext("events"))
    return node


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_batch_goes_to_each_source_s_file_in_order(tmp_path: Path) -> None:
    node = sink(tmp_path / "{source_id}.jsonl")
    frames = [frame("a", 0), frame("b", 0), frame("a", 1), frame("b", 1, boxes=3), frame("a", 2)]
    frames[2].events.append({"event": "line_cross", "track_id": 4, "line": "door"})
    assert node.process_batch(frames) == frames
    node.close()
    a, b = lines(tmp_path / "a.jsonl"), lines(tmp_path / "b.jsonl")
    assert [(r["event"], r["seq"]) for r in a] == [
        ("frame", 0), ("frame", 1), ("line_cross", 1), ("frame", 2)
    ]  # fmt: skip
    assert [(r["seq"], len(r["detections"])) for r in b] == [(0, 1), (1, 3)]
    assert b[1]["detections"][2]["xyxy"] == [4.0, 5.0, 14.12, 15.12]
    assert b[1]["detections"][0]["score"] == round(float(np.float32(0.56785)), 4) == 0.5678
    assert node.stats()["lines"] == 6


def test_empty_frames_off_leaves_out_frames_without_detections(tmp_path: Path) -> None:
    node = sink(tmp_path / "e.jsonl", empty_frames=False)
    node.process_batch([frame("a", 0, boxes=0), frame("a", 1), frame("a", 2, boxes=0)])
    node.close()
    assert [r["seq"] for r in lines(tmp_path / "e.jsonl")] == [1]


class FillingFile:
    """A file on a disk that fills after ``room`` bytes, taking at most ``chunk`` a write."""

    def __init__(self, path: Path, room: int, chunk: int) -> None:
        self.file = path.open("wb", buffering=0)
        self.room, self.chunk = room, chunk

    def write(self, data: memoryview) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        done = self.file.write(data[: min(self.chunk, self.room)]) or 0
        self.room -= done
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)


@pytest.mark.parametrize("room", [0, 40, 150, 299])
def test_a_disk_filling_in_a_batch_keeps_the_whole_lines_and_takes_back_the_part(
    tmp_path: Path, room: int
) -> None:
    path = tmp_path / "full.jsonl"
    node = sink(path)
    handle = FillingFile(path, room, chunk=64)
    node._files[""] = handle  # type: ignore[assignment] - a file object in all it is asked
    batch = [frame("a", seq) for seq in range(4)]
    whole = [(json.dumps(r, separators=(",", ":")) + "\n").encode()
             for f in batch for r in _records(f)]  # fmt: skip
    with pytest.raises(OSError, match="No space"):
        node.process_batch(batch)
    kept, used = 0, 0
    while kept < len(whole) and used + len(whole[kept]) <= room:
        used += len(whole[kept])
        kept += 1
    assert path.read_bytes() == b"".join(whole[:kept])
    assert node.stats()["lines"] == kept
    handle.file.close()


def _records(item: Frame) -> list[dict[str, Any]]:
    from vapipe.stages.events.records import frame_records

    return list(frame_records(item))


def test_messages_are_lines_of_their_own(tmp_path: Path) -> None:
    node = sink(tmp_path / "m.jsonl")
    node.process_batch([frame("a", 0)])
    node.handle_message(Message("a", "source_down", 1_796_000_001.0, seq=0, pts=0.0))
    node.process_batch([frame("a", 1)])
    node.close()
    assert [r["event"] for r in lines(tmp_path / "m.jsonl")] == ["frame", "source_down", "frame"]


def whole_lines(batch: list[Frame]) -> list[bytes]:
    return [(json.dumps(r, separators=(",", ":")) + "\n").encode()
            for f in batch for r in _records(f)]  # fmt: skip


@pytest.mark.parametrize("past", [-1, 0, 5])
def test_a_disk_filling_in_a_later_batch_keeps_the_earlier_ones_and_goes_on_from_there(
    tmp_path: Path, past: int
) -> None:
    path = tmp_path / "later.jsonl"
    node = sink(path)
    first, second, third = [frame("a", 0)], [frame("a", 1), frame("a", 2)], [frame("a", 3)]
    one, two, three = whole_lines(first), whole_lines(second), whole_lines(third)
    # Room for the first batch and the second's first line, ``past`` bytes from its newline's
    # end: one byte short of it, just it, or some of the next line.
    handle = FillingFile(path, len(one[0]) + len(two[0]) + past, chunk=7)
    node._files[""] = handle  # type: ignore[assignment] - a file object in all it is asked
    node.process_batch(first)
    with pytest.raises(OSError, match="No space"):
        node.process_batch(second)
    kept = one[0] + (two[0] if past >= 0 else b"")
    assert path.read_bytes() == kept, "a part line stayed, or a whole one went"
    handle.room = 10**6  # space freed: the next batch goes on where the whole lines end
    node.process_batch(third)
    assert path.read_bytes() == kept + three[0]
    assert node.stats()["lines"] == kept.count(b"\n") + 1
    handle.file.close()


class HesitantFile(FillingFile):
    """A non-blocking file: every other write takes nothing (returns None)."""

    calls = 0

    def write(self, data: memoryview) -> int:
        self.calls += 1
        return None if self.calls % 2 else super().write(data)  # type: ignore[return-value]


def test_writes_that_take_nothing_are_tried_again(tmp_path: Path) -> None:
    path = tmp_path / "slow.jsonl"
    node = sink(path)
    handle = HesitantFile(path, 10**6, chunk=5)
    node._files[""] = handle  # type: ignore[assignment]
    batch = [frame("a", 0), frame("a", 1, boxes=2)]
    node.process_batch(batch)
    assert path.read_bytes() == b"".join(whole_lines(batch)) and handle.calls > 10
    handle.file.close()


def test_a_pipe_is_written_without_asking_where_it_is(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    node = sink(tmp_path / "p.jsonl")
    pipe = open(write_end, "wb", buffering=0)  # noqa: SIM115 - closed below
    node._files[""] = pipe  # type: ignore[assignment]
    batch = [frame("a", 0), frame("a", 1)]
    node.process_batch(batch)
    pipe.close()
    with open(read_end, "rb") as reader:
        assert reader.read() == b"".join(whole_lines(batch))


class BrokenPipe:
    """A reader that has gone (``run-pipeline ... | head``)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.writes = fd, 0

    def write(self, data: memoryview) -> int:
        self.writes += 1
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.fd


def test_stdout_closed_by_its_reader_ends_the_events_there_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = (tmp_path / "stdout").open("wb")
    broken = BrokenPipe(target.fileno())
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=broken, fileno=target.fileno))
    node = sink("-")
    node.process_batch([frame("a", 0)])  # no error: the reader has what it wanted
    node.process_batch([frame("a", 1)])
    node.handle_message(Message("a", "source_down", 1_796_000_001.0))
    assert broken.writes == 1 and node.stdout_gone and node.stats()["lines"] == 0
    target.close()


def test_a_broken_pipe_that_is_not_stdout_is_an_error(tmp_path: Path) -> None:
    node = sink(tmp_path / "x.jsonl")
    node._files[""] = BrokenPipe(-1)  # type: ignore[assignment]
    with pytest.raises(BrokenPipeError):
        node.process_batch([frame("a", 0)])
    assert not node.stdout_gone


def test_a_run_whose_frames_are_all_left_out_still_leaves_its_file(tmp_path: Path) -> None:
    path = tmp_path / "none.jsonl"
    path.write_text("last run's events\n")
    node = sink(path, empty_frames=False)
    node.process_batch([frame("a", 0, boxes=0)])
    node.close()
    assert path.read_bytes() == b"", "the last run's events were left as if this run had not run"
