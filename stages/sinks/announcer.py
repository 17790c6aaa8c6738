"""Home Assistant's side of the ``mqtt`` sink: what :class:`Discovery` makes waits here apart
from the events, the latest per topic (each is a retained config or state, so a newer one
replaces what waits and nothing needs dropping), is published before the events' next batch,
and is counted apart from them. On connecting it reads what the run before announced, once,
and removes the streams this run no longer has."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from vapipe.pipeline.frame import Frame
from vapipe.stages.events.records import Record
from vapipe.stages.media.draw import annotated_jpeg
from vapipe.stages.sinks.home_assistant import Discovery, Outgoing

log = logging.getLogger(__name__)


class Announcer:
    """Home Assistant's messages of one sink, their counts and their broker subscriptions."""

    def __init__(self, name: str, discovery: Discovery, configured: Iterable[str]) -> None:
        self.name, self.discovery = name, discovery
        self.configured = set(configured)
        self.lock = threading.Lock()  # the events' thread and paho's both announce
        self.again = threading.Event()  # publish everything again (a connection, HA restarted)
        self.waiting: dict[str, Outgoing] = {}
        self.manifest_read = False
        self.announced = self.published = self.acknowledged = self.removed = 0
        self.pictured: dict[str, float] = {}
        """Source -> the stream time of its camera's last picture."""
        self.pictures = 0

    def offer(self, record: Record) -> None:
        with self.lock:
            messages = self.discovery.update(record)
            self._wait(messages)
        self.announced += len(messages)

    def picture(self, frame: Frame) -> None:
        """The frame as its source's camera picture, when ``camera_s`` has passed since the
        last one (annotated as the video sink draws it, ``camera_width`` wide, JPEG)."""
        settings = self.discovery.config
        last = self.pictured.get(frame.source_id)
        if not settings.camera_s or (
            last is not None and 0 <= frame.pts - last < settings.camera_s
        ):
            return
        self.pictured[frame.source_id] = frame.pts
        jpeg = annotated_jpeg(frame, settings.camera_width)
        with self.lock:
            messages = self.discovery.camera(frame.source_id, jpeg)
            self._wait(messages)
        self.announced += len(messages)
        self.pictures += 1

    def subscribe(self, client: Any) -> None:
        """On every connection: Home Assistant's restarts and, until read, the manifest."""
        client.subscribe(f"{self.discovery.config.prefix}/status", qos=1)
        if not self.manifest_read:
            client.subscribe(self.discovery.manifest_topic, qos=1)
        self.again.set()

    def on_message(self, client: Any, userdata: Any, message: Any) -> None:
        if message.topic == self.discovery.manifest_topic:
            self._read_manifest(client, message.payload)
        elif message.payload == b"online":  # Home Assistant (re)started: announce again
            self.again.set()

    def send(self, publish: Callable[[Outgoing], bool]) -> None:
        """Publish what waits; where ``publish`` fails, the rest waits for the next time
        (unless something newer for its topic came meanwhile)."""
        with self.lock:
            if self.again.is_set():
                self.again.clear()
                self._wait(self.discovery.everything())
            waiting, self.waiting = list(self.waiting.values()), {}
        for index, message in enumerate(waiting):
            if not publish(message):
                with self.lock:
                    for later in waiting[index:]:
                        self.waiting.setdefault(later.topic, later)
                return

    def sent(self) -> None:
        """One of ours handed to paho (the sink counts its acknowledgement)."""
        self.published += 1

    def stats(self) -> dict[str, int]:
        """``announced`` made, the newest of each topic ``published``, ``acknowledged`` by the
        broker, ``removed`` topics of streams no longer configured."""
        return {
            "announced": self.announced,
            "camera_pictures": self.pictures,
            "published": self.published,
            "acknowledged": self.acknowledged,
            "removed": self.removed,
        }

    def _read_manifest(self, client: Any, payload: bytes) -> None:
        """The first answer is the retained one, the run before's: read it once."""
        if self.manifest_read:
            return
        self.manifest_read = True
        client.unsubscribe(self.discovery.manifest_topic)
        with self.lock:
            removals = self.discovery.stale(payload, self.configured)
            self._wait(removals)
        self.removed += sum(1 for message in removals if not message.payload)
        if self.removed:
            log.info("%s: %d topics of streams no longer configured removed from Home "
                     "Assistant", self.name, self.removed)  # fmt: skip

    def _wait(self, messages: list[Outgoing]) -> None:
        """Caller holds the lock."""
        for message in messages:
            self.waiting.pop(message.topic, None)  # the newest goes last
            self.waiting[message.topic] = message
