"""Home Assistant's MQTT discovery for the ``mqtt`` sink (``[nodes.mqtt.home_assistant]``):
a device per source, its entities announced as they first appear in the events, their states
kept as one retained JSON object per source, removed again with their source.

Pure bookkeeping, no broker: :class:`Discovery` turns event records into the messages to
publish (topic, payload, retain) and remembers everything it announced, so that the sink can
publish it all again on every (re)connection: the broker or Home Assistant may have lost it,
and the sink's outbox drops its oldest records when full. The payloads follow Home
Assistant's documented discovery schema (https://www.home-assistant.io/integrations/mqtt/,
per component: sensor.mqtt, binary_sensor.mqtt, image.mqtt, camera.mqtt).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import Field, field_validator

from vapipe.pipeline.stage import StageConfig

ONLINE, OFFLINE = "online", "offline"
SLUG = re.compile(r"[^a-zA-Z0-9_-]+")


class HomeAssistantConfig(StageConfig):
    """Home Assistant's MQTT discovery: what the sink announces beside its events."""

    prefix: str = "homeassistant"
    """Home Assistant's discovery prefix (its MQTT integration's setting)."""
    id: str = "vapipe"
    """This installation: the start of every unique id, device id and state topic
    (``{id}/{source_id}/state``); give each pipeline on one broker its own."""
    snapshot_dir: str = "out/media"
    """The ``dir`` of the snapshots node, whose pictures the image entity shows (each
    source's latest event picture); ``""``: no image entity."""
    snapshot_wait_s: float = Field(5.0, ge=0, le=60)
    """How long to wait for an event's picture to be written before skipping it."""
    camera_s: float = Field(2.0, ge=0, le=3600)
    """Each source is also a camera entity showing its latest annotated picture (redacted,
    behind a redact node), sent every this many seconds of the stream; 0: no camera."""
    camera_width: int = Field(640, ge=64, le=3840)
    """The camera picture's width (scaled down, aspect kept)."""

    @field_validator("prefix", "id")
    @classmethod
    def _topic_part(cls, value: str) -> str:
        if not value or SLUG.sub("", value) != value.replace("/", ""):
            raise ValueError("letters, digits, '_', '-' and '/' only")
        return value


@dataclass(frozen=True)
class Outgoing:
    """One message to publish. ``file``: the payload is that file's bytes, read when sent."""

    topic: str
    payload: str
    retain: bool = True
    file: Path | None = None
    data: bytes | None = None
    """A binary payload instead (a camera's JPEG)."""


class Entity(NamedTuple):
    """An entity as the events show it; its discovery config is made once, when first seen."""

    component: str
    key: str
    name: str
    extra: dict[str, str] = {}


@dataclass
class Source:
    """What was announced for one source: its entities' config topics and its last state."""

    slug: str
    configs: dict[str, Outgoing] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    available: bool = False
    plate: str | None = None
    """The last plate a plates node read on this source (its ``last_plate`` sensor)."""


def slug(text: str) -> str:
    """``text`` as a topic level and id part; a short hash keeps apart two names it merges."""
    clean = SLUG.sub("_", text).strip("_") or "x"
    if clean == text:
        return clean
    return f"{clean}_{_hash(text)}"


def part(text: str) -> str:
    """``text`` as one of the parts an entity's key and unique id join with '_'. A part with
    a '_' of its own gets a short hash of it, so that line ``road`` direction ``west_in`` and
    line ``road_west`` direction ``in`` never make one key."""
    clean = slug(text)
    return f"{clean}_{_hash(text)}" if clean == text and "_" in clean else clean


def key(*parts: str) -> str:
    return "_".join(part(text) for text in parts)


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:6]


class Discovery:
    """The discovery configs, states and availability of every source seen, as messages."""

    def __init__(self, config: HomeAssistantConfig, version: str) -> None:
        self.config, self.version = config, version
        self.sources: dict[str, Source] = {}
        self.status_topic = f"{config.id}/status"
        """The run's availability (the sink's last will: ``offline`` if it dies)."""
        self.manifest_topic = f"{config.id}/announced"
        """Every topic announced, by source (retained): what the next run removes for the
        sources it no longer has."""

    def birth(self) -> Outgoing:
        return Outgoing(self.status_topic, ONLINE)

    def death(self) -> Outgoing:
        return Outgoing(self.status_topic, OFFLINE)

    def topic(self, source_id: str, what: str) -> str:
        return f"{self.config.id}/{self.sources[source_id].slug}/{what}"

    def update(self, record: dict[str, Any]) -> list[Outgoing]:
        """The messages one event record calls for (often none)."""
        kind, source_id = record["event"], record["source_id"]
        if kind == "source_removed":
            return self.remove(source_id)
        if source_id not in self.sources:
            self.sources[source_id] = Source(slug(source_id))
        out = []
        if kind in ("source_down", "source_up") or not self.sources[source_id].available:
            out.extend(self._availability(source_id, kind != "source_down"))
        if kind == "frame":
            out.extend(self._frame(source_id, record))
        elif kind == "plate":
            out.extend(self._plate(source_id, record))
        picture = record.get("snapshot")
        if picture and self.config.snapshot_dir:
            out.extend(self._new(source_id, [Entity("image", "snapshot", "latest event")]))
            path = Path(self.config.snapshot_dir) / picture
            out.append(Outgoing(self.topic(source_id, "snapshot"), "", True, path))
        if any(message.topic.endswith("/config") for message in out):
            out.append(self.manifest())
        return out

    def camera(self, source_id: str, jpeg: bytes) -> list[Outgoing]:
        """The source's camera entity (announced once) and its newest picture."""
        if source_id not in self.sources:
            self.sources[source_id] = Source(slug(source_id))
        out = self._new(source_id, [Entity("camera", "camera", "live")])
        if out:
            out.append(self.manifest())
        return [*out, Outgoing(self.topic(source_id, "camera"), "", True, data=jpeg)]

    def remove(self, source_id: str) -> list[Outgoing]:
        """Empty retained payloads: Home Assistant deletes the entities, the broker the states."""
        if source_id not in self.sources:
            return []
        topics = self._topics(source_id)
        del self.sources[source_id]
        return [*(Outgoing(topic, "") for topic in topics), self.manifest()]

    def everything(self) -> list[Outgoing]:
        """All that is announced now, to publish again after a (re)connection."""
        out = [self.birth()]
        for source_id, source in self.sources.items():
            out.extend(source.configs.values())
            out.append(self._available(source_id))
            if source.state:
                out.append(self._state(source_id))
        return [*out, self.manifest()]

    def manifest(self) -> Outgoing:
        """The retained list of every topic announced, by source."""
        announced = {source_id: self._topics(source_id) for source_id in self.sources}
        return Outgoing(self.manifest_topic, json.dumps({"sources": announced}))

    def stale(self, manifest: bytes, configured: set[str]) -> list[Outgoing]:
        """What an earlier run announced (its ``manifest``) for sources this run neither has
        in its config nor has seen: empty retained payloads for each of their topics, so that
        Home Assistant deletes a camera taken out of the config. Nothing for a manifest that
        cannot be read (another program's, or none)."""
        try:
            earlier = json.loads(manifest)["sources"]
            gone = {
                source_id: [topic for topic in topics if isinstance(topic, str)]
                for source_id, topics in earlier.items()
                if source_id not in configured and source_id not in self.sources
            }
        except (ValueError, KeyError, TypeError, AttributeError):
            return []
        out = [Outgoing(topic, "") for topics in gone.values() for topic in topics]
        return [*out, self.manifest()] if out else []

    def _topics(self, source_id: str) -> list[str]:
        kept = [
            self.topic(source_id, what) for what in ("state", "available", "snapshot", "camera")
        ]
        return [*self.sources[source_id].configs, *kept]

    def _availability(self, source_id: str, up: bool) -> list[Outgoing]:
        self.sources[source_id].available = up
        return [self._available(source_id)]

    def _available(self, source_id: str) -> Outgoing:
        up = self.sources[source_id].available
        return Outgoing(self.topic(source_id, "available"), ONLINE if up else OFFLINE)

    def _state(self, source_id: str) -> Outgoing:
        return Outgoing(self.topic(source_id, "state"), json.dumps(self.sources[source_id].state))

    def _frame(self, source_id: str, record: dict[str, Any]) -> list[Outgoing]:
        """New entities for lines, directions, classes and zones first seen; the state when
        it changed."""
        state: dict[str, Any] = {"objects": "ON" if record.get("detections") else "OFF"}
        out = [Entity("binary_sensor", "objects", "objects", {"device_class": "occupancy"})]
        if "motion" in record:
            out.append(Entity("binary_sensor", "motion", "motion", {"device_class": "motion"}))
            state["motion"] = "ON" if record["motion"] else "OFF"
        analytics = record.get("analytics") or {}
        for line, counts in analytics.get("lines", {}).items():
            for direction, total in counts.items():
                if isinstance(total, int):
                    name = key("line", line, direction)
                    out.append(count(name, f"{line} {direction}"))
                    state[name] = total
            for direction, classes in counts.get("by_class", {}).items():
                for class_name, total in classes.items():
                    name = key("line", line, direction, class_name)
                    out.append(count(name, f"{line} {direction} {class_name}"))
                    state[name] = total
            for node, labels in counts.get("by_attribute", {}).items():  # a model's labels
                for label, directions in labels.items():
                    for direction, total in directions.items():
                        name = key("line", line, direction, node, label)
                        out.append(count(name, f"{line} {direction} {label}"))
                        state[name] = total
        for zone, facts in analytics.get("zones", {}).items():
            zone_key = key("zone", zone)
            out.append(
                Entity(
                    "sensor",
                    f"{zone_key}_occupancy",
                    f"{zone} occupancy",
                    {"state_class": "measurement", "unit_of_measurement": "objects"},
                )
            )
            out.append(Entity("binary_sensor", f"{zone_key}_occupied", f"{zone} occupied",
                              {"device_class": "occupancy"}))  # fmt: skip
            state[f"{zone_key}_occupancy"] = facts["occupancy"]
            state[f"{zone_key}_occupied"] = "ON" if facts["occupancy"] else "OFF"
        source = self.sources[source_id]
        if source.plate is not None:
            state["last_plate"] = source.plate
        announced = self._new(source_id, out)
        if state != source.state:
            source.state = state
            announced.append(self._state(source_id))
        return announced

    def _plate(self, source_id: str, record: dict[str, Any]) -> list[Outgoing]:
        """The ``last_plate`` sensor: the plate, and its known name where it has one."""
        source = self.sources[source_id]
        name = record.get("name")
        source.plate = f"{record['plate']} ({name})" if name else str(record["plate"])
        out = self._new(source_id, [Entity("sensor", "last_plate", "last plate",
                                           {"icon": "mdi:card-text-outline"})])  # fmt: skip
        source.state = {**source.state, "last_plate": source.plate}
        return [*out, self._state(source_id)]

    def _new(self, source_id: str, entities: list[Entity]) -> list[Outgoing]:
        """The configs of the entities not announced yet (made only for those: this runs for
        every frame), now remembered as announced."""
        known = self.sources[source_id].configs
        fresh = []
        for entity in entities:
            topic = self._config_topic(source_id, entity)
            if topic not in known:
                known[topic] = self._config(source_id, entity, topic)
                fresh.append(known[topic])
        return fresh

    def _node(self, source_id: str) -> str:
        return key(self.config.id, source_id)

    def _config_topic(self, source_id: str, entity: Entity) -> str:
        """``{prefix}/{component}/{node}/{key}/config``."""
        node = self._node(source_id)
        return f"{self.config.prefix}/{entity.component}/{node}/{entity.key}/config"

    def _config(self, source_id: str, entity: Entity, topic: str) -> Outgoing:
        """One entity's discovery config, published on ``topic``."""
        component, entity_key, name, extra = entity
        node = self._node(source_id)
        payload: dict[str, Any] = {
            "name": name,
            "unique_id": f"{node}_{entity_key}",
            "availability": [
                {"topic": self.status_topic},
                {"topic": self.topic(source_id, "available")},
            ],
            "availability_mode": "all",
            "device": {
                "identifiers": [node],
                "name": source_id,
                "manufacturer": "vapipe",
                "model": "video analytics pipeline",
                "sw_version": self.version,
            },
            "origin": {"name": "vapipe", "sw_version": self.version},
            **extra,
        }
        if component == "image":
            payload["image_topic"] = self.topic(source_id, "snapshot")
            payload["content_type"] = "image/jpeg"
        elif component == "camera":
            payload["topic"] = self.topic(source_id, "camera")
        else:
            payload["state_topic"] = self.topic(source_id, "state")
            payload["value_template"] = f"{{{{ value_json['{entity_key}'] }}}}"
        if component == "binary_sensor":
            payload["payload_on"], payload["payload_off"] = "ON", "OFF"
        return Outgoing(topic, json.dumps(payload))


def count(entity_key: str, name: str) -> Entity:
    """A line's running count (in one direction, of one class or label)."""
    return Entity("sensor", entity_key, name, {"state_class": "total_increasing",
                                         "unit_of_measurement": "objects"})  # fmt: skip
