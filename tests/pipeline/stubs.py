"""Stub stages for runtime tests: small, deterministic, and registered under test-* names."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import BatchStage, ParallelConfig, SourceStage, Stage, StageConfig


@dataclass
class Item:
    source_id: str
    seq: int


class CountingSourceConfig(StageConfig):
    count: int = 10
    delay_s: float = 0.0
    live: bool = False


@register("test-count")
class CountingSource(SourceStage):
    Config = CountingSourceConfig

    @classmethod
    def is_live(cls, config: Any) -> bool:
        return config.live

    def open(self, context: Any) -> None:
        self._stop = threading.Event()

    def frames(self) -> Iterator[Item]:
        for seq in range(self.config.count):
            if self._stop.is_set():
                return
            if self.config.delay_s:
                time.sleep(self.config.delay_s)
            yield Item(self.name, seq)

    def stop(self) -> None:
        self._stop.set()


STUCK_RELEASE = threading.Event()
STUCK_ENTERED = threading.Event()


@register("test-stuck")
class StuckSource(SourceStage):
    """A source inside a call that ignores stop() (FFmpeg opening a silent camera), until the
    test sets STUCK_RELEASE."""

    Config = CountingSourceConfig

    def frames(self) -> Iterator[Item]:
        STUCK_ENTERED.set()
        STUCK_RELEASE.wait()
        return iter(())


@register("test-list")
class ListSource(SourceStage):
    """A plug-in's source may give any iterable, not only a generator."""

    Config = CountingSourceConfig

    def frames(self) -> Iterator[Item]:
        return iter([Item(self.name, seq) for seq in range(self.config.count)])


class CollectConfig(ParallelConfig):
    delay_s: float = 0.0
    fail_at: int | None = None
    fail_in: Literal["open", "flush", "close"] | None = None
    jitter: bool = False
    open_delay_s: float = 0.0


@register("test-collect")
class Collect(Stage):
    """Records every item and whether it was flushed and closed; can fail at one seq, or in
    open, flush or close."""

    Config = CollectConfig
    config: CollectConfig

    def __init__(self, name: str, config: CollectConfig) -> None:
        super().__init__(name, config)
        self.items: list[Item] = []
        self.opened = self.closed = self.flushed = False
        self._lock = threading.Lock()

    def open(self, context: Any) -> None:
        if self.config.fail_in == "open":
            raise RuntimeError("cannot open")
        time.sleep(self.config.open_delay_s)
        self.opened = True

    def process(self, item: Item) -> tuple[Item]:
        if self.config.fail_at is not None and item.seq == self.config.fail_at:
            raise RuntimeError("boom")
        delay = self.config.delay_s
        if self.config.jitter:
            delay *= (item.seq * 7919) % 5  # uneven work so workers finish out of order
        if delay:
            time.sleep(delay)
        with self._lock:
            self.items.append(item)
        return (item,)

    def flush(self) -> tuple[()]:
        self.flushed = True
        if self.config.fail_in == "flush":
            raise RuntimeError("flush failed")
        return ()

    def close(self) -> None:
        self.closed = True
        if self.config.fail_in == "close":
            raise RuntimeError("close failed")


class BatchConfig(StageConfig):
    max_batch: int = Field(4, ge=1)
    timeout_ms: float = 1000.0


@register("test-batch")
class Batcher(BatchStage):
    Config = BatchConfig

    def open(self, context: Any) -> None:
        self.max_batch = self.config.max_batch
        self.batch_timeout_s = self.config.timeout_ms / 1000
        self.batches: list[list[int]] = []

    def process_batch(self, items: list[Item]) -> list[Item]:
        self.batches.append([item.seq for item in items])
        return items


@register("test-hold")
class HoldUntilFlush(Stage):
    """Holds every item back until end-of-stream, like an encoder with a tail."""

    def open(self, context: Any) -> None:
        self.held: list[Item] = []

    def process(self, item: Item) -> tuple[()]:
        self.held.append(item)
        return ()

    def flush(self) -> list[Item]:
        held, self.held = self.held, []
        return held


@register("test-log")
class Log(Stage):
    """Records items and in-band messages in the order they came, as (what, source, detail)."""

    def open(self, context: Any) -> None:
        self.log: list[tuple[str, str, Any]] = []
        self.messages: list[Any] = []
        self._lock = threading.Lock()

    def process(self, item: Item) -> tuple[Item]:
        with self._lock:
            self.log.append(("item", item.source_id, item.seq))
        return (item,)

    def handle_message(self, message: Any) -> tuple[Any]:
        with self._lock:
            self.log.append(("message", message.source_id, message.kind))
            self.messages.append(message)
        return (message,)

    def of(self, source_id: str) -> list[tuple[str, str, Any]]:
        with self._lock:
            return [entry for entry in self.log if entry[1] == source_id]


class FailingSourceConfig(CountingSourceConfig):
    fail_after: int = 3


@register("test-fail-source")
class FailingSource(CountingSource):
    """A source that raises after ``fail_after`` items (a camera whose decoder broke)."""

    Config = FailingSourceConfig

    def frames(self) -> Iterator[Item]:
        for seq in range(self.config.fail_after):
            yield Item(self.name, seq)
        raise RuntimeError("decoder broke")


class MessagesSourceConfig(StageConfig):
    count: int = 6
    every: int = 2


MESSAGES_SENT = threading.Event()


@register("test-messages")
class MessagesSource(SourceStage):
    """Items with an in-band message after every ``every``-th (a camera going down and up)."""

    Config = MessagesSourceConfig

    def frames(self) -> Iterator[Any]:
        from vapipe.pipeline.frame import Message

        for seq in range(self.config.count):
            yield Item(self.name, seq)
            if seq % self.config.every == self.config.every - 1:
                yield Message(self.name, f"after-{seq}", time.time(), seq)
        MESSAGES_SENT.set()


@register("test-batch-log")
class BatchLog(Batcher):
    """A batcher (``timeout_ms = 0``: everything waiting at once, as the nms node and the
    events sink take it) that also records items and messages in the order it handled them."""

    def open(self, context: Any) -> None:
        super().open(context)
        self.log: list[Any] = []

    def process_batch(self, items: list[Item]) -> list[Item]:
        if not self.batches:  # the rest queue up meanwhile: the next batch takes them all
            MESSAGES_SENT.wait(30)
        self.log += [item.seq for item in items]
        return super().process_batch(items)

    def handle_message(self, message: Any) -> tuple[Any]:
        self.log.append(message.kind)
        return (message,)
