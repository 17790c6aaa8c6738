"""JSON-lines events: each frame's ``frame`` event and the events it caused, one object per
line, flushed per line."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, BinaryIO

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.frame import Frame, Message
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, StageConfig, StageContext
from vapipe.stages.events.records import NonFinite, frame_records, message_record, to_json
from vapipe.stages.media.paths import check_writable, output_path
from vapipe.stages.sinks.path_sink import PathSink

log = logging.getLogger(__name__)


class EventsConfig(StageConfig):
    """Where the JSON lines go and which frames get one."""

    path: str = "-"
    """Output file (``{source_id}`` allowed: one file per source), or ``-`` for stdout."""
    append: bool = False
    """Append to an existing file instead of replacing it."""
    empty_frames: bool = True
    """Write ``frame`` events for frames without detections too."""


@register("events")
class EventsSink(PathSink, BatchStage):
    """Writes events as JSON lines; a killed run leaves only whole lines."""

    max_batch = 64
    batch_timeout_s = 0.0  # what is waiting, never a wait for more

    reads_pixels = False
    lines = 0
    _ran = False
    non_finite: NonFinite | None = None

    Config = EventsConfig
    config: EventsConfig
    writes_records = True

    def open(self, context: StageContext) -> None:
        self._files: dict[str, BinaryIO] = {}
        self.lines = 0
        self.non_finite = NonFinite(self.name)
        self.stdout_gone = False
        # Whether the run got going (an item, or its end of stream): only then is a file
        # replaced. A run that fails before (a model that cannot load) leaves the last run's
        # events as they were.
        self._ran = False
        if self._one_file():
            # An unwritable path fails the run before anything starts, without touching it.
            target = output_path(self.config.path, "")
            check_writable(target)
            if target.exists() and not os.access(target, os.W_OK):
                raise ConfigError(f"cannot write {target}: permission denied", key="path")

    def _one_file(self) -> bool:
        """Every source's events in one file (not stdout, not a file per source)."""
        return self.config.path != "-" and "{source_id}" not in self.config.path

    def _file(self, source_id: str) -> BinaryIO:
        path = self.config.path
        key = source_id if "{source_id}" in path else ""
        handle = self._files.get(key)
        if handle is None:
            if path == "-":
                handle = sys.stdout.buffer
            else:
                target = output_path(path, source_id)
                try:
                    # Unbuffered: each line is one write of its own, which can be taken back.
                    handle = open(target, "ab" if self.config.append else "wb", buffering=0)  # noqa: SIM115
                except OSError as exc:
                    raise ConfigError(
                        f"cannot write {target}: {exc.strerror}", key="path"
                    ) from None
            self._files[key] = handle
        return handle

    def write(self, event: dict[str, Any]) -> None:
        self.write_all([event])

    def write_all(self, events: list[dict[str, Any]]) -> None:
        """Each event a line, in order; each file's lines in one write, then flushed: a reader
        never sees half an object, and a batch of frames costs one system call, not one per
        line (each lets go of the interpreter lock, and waits to get it back)."""
        self._ran = True
        if self.stdout_gone:
            return
        by_file: dict[BinaryIO, list[bytes]] = {}
        for event in events:
            handle = self._file(str(event.get("source_id", "")))
            by_file.setdefault(handle, []).append((to_json(event, self.non_finite) + "\n").encode())
        for handle, lines in by_file.items():
            if not self._write_lines(handle, b"".join(lines), len(lines)):
                return

    def _write_lines(self, handle: BinaryIO, data: bytes, count: int) -> bool:
        """``data`` (``count`` whole lines) written and flushed; False when stdout's reader
        has gone. A full disk takes back the partial line, keeps the whole ones and raises."""
        seekable = handle.seekable()
        start = handle.tell() if seekable else 0
        written = 0
        try:
            view = memoryview(data)
            while view:
                done = handle.write(view) or 0
                written += done
                view = view[done:]
            handle.flush()
        except BrokenPipeError:
            if handle is not sys.stdout.buffer:
                raise
            # `run-pipeline ... | head`: the reader has what it wanted; nothing is wrong.
            self.stdout_gone = True
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            log.info("%s: stdout was closed by its reader; no more events there", self.name)
            return False
        except OSError:
            whole = data.rfind(b"\n", 0, written) + 1  # the lines written whole stay
            self.lines += data.count(b"\n", 0, whole)
            if seekable:  # a full disk: take the partial line back, so every line is whole
                # A device (/dev/full) cannot be truncated: the disk's error is the one to tell.
                with contextlib.suppress(OSError):
                    os.ftruncate(handle.fileno(), start + whole)
                    handle.seek(start + whole)
            raise
        self.lines += count
        return True

    def process_batch(self, frames: list[Frame]) -> list[Frame]:
        """The frames queued now, written together (the runner takes what is waiting and
        does not wait for more: ``batch_timeout_s`` 0)."""
        empty = self.config.empty_frames
        self.write_all(
            [record for frame in frames for record in frame_records(frame, empty_frames=empty)]
        )
        return frames

    def accept(self, record: dict[str, Any]) -> None:
        self._ran = True
        if record["event"] == "frame" and not (self.config.empty_frames or record["detections"]):
            return
        self.write(record)

    def handle_message(self, message: Message) -> tuple[Message]:
        self.write(message_record(message))
        if message.kind == "source_removed" and "{source_id}" in self.config.path:
            handle = self._files.pop(message.source_id, None)
            if handle is not None:
                handle.close()
        return (message,)

    def flush(self) -> tuple[()]:
        self._ran = True  # the end of a run that ran: its file exists, if empty
        return ()

    def close(self) -> None:
        if self._ran and self._one_file() and not self._files:
            with contextlib.suppress(OSError, ConfigError):  # a run without one event
                self._file("")
        for handle in self._files.values():
            if handle is not sys.stdout.buffer:
                with contextlib.suppress(OSError):  # buffers are flushed after each line
                    handle.close()
        self._files.clear()

    def stats(self) -> dict[str, Any]:
        non_finite = self.non_finite.count if self.non_finite else 0
        return {"lines": self.lines, "non_finite": non_finite}
