"""The ``mqtt`` sink: events published to an MQTT broker (paho-mqtt), one message each.

The video path never waits for the broker: ``process`` only puts records into a bounded
outbox, and a sender thread hands them to paho while the connection is up. paho reconnects
with backoff; while the broker is down the outbox fills and then drops its oldest records,
counted in the stats. A broker that is down, or that takes messages but acknowledges none
(QoS 1/2) for a few seconds, is warned about while it lasts; whatever is unacknowledged at
the end is counted as undelivered. With ``[nodes.mqtt.home_assistant]`` it also announces
each source to Home Assistant (MQTT discovery, stages/sinks/home_assistant.py), with the run's
availability as its last will. Needs ``pip install 'vapipe[mqtt]'``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from vapipe.pipeline.errors import ConfigError, MissingDependencyError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.stages.events.outbox import Reachability
from vapipe.stages.events.records import NonFinite, Record, to_json
from vapipe.stages.sinks.announcer import Announcer
from vapipe.stages.sinks.home_assistant import Discovery, HomeAssistantConfig, Outgoing
from vapipe.stages.sinks.outbox_sink import OutboxConfig, OutboxSink

log = logging.getLogger(__name__)

MAX_TOPIC_BYTES = 65535  # MQTT's limit on a topic name, UTF-8 encoded
EVENT_NAME_ROOM = 32  # bytes kept for the longest event type's name in a topic


class MqttConfig(OutboxConfig):
    """The broker, the topic of each event, delivery options and the outbox."""

    host: str = "127.0.0.1"
    """Broker host name or address."""
    port: int = Field(1883, ge=1, le=65535)
    """Broker port (8883 is the usual one with TLS)."""
    topic: str = "vapipe/{source_id}/{event}"
    """Topic of each message; ``{source_id}`` and ``{event}`` are filled in."""
    qos: Literal[0, 1, 2] = 1
    """MQTT quality of service: 0 at most once, 1 at least once, 2 exactly once."""
    retain: bool = False
    """Ask the broker to keep the last message of each topic for new subscribers."""
    client_id: str = ""
    """Client id; empty lets the broker choose one."""
    username: str | None = None
    """User name, for brokers that require one."""
    password: SecretStr | None = None
    """Password; never shown in logs, errors, stats or ``repr``."""
    tls: bool = False
    """Connect with TLS (with ``ca_file`` for a private CA, else the system's)."""
    ca_file: str | None = None
    """CA certificates (PEM) to verify the broker with."""
    cert_file: str | None = None
    """Client certificate (PEM), for brokers that authenticate clients by certificate."""
    key_file: str | None = None
    """The client certificate's private key (PEM)."""
    keepalive_s: int = Field(30, ge=5, le=3600)
    """Seconds between keep-alive pings; a dead connection is noticed within 1.5 times this."""
    reconnect_min_s: int = Field(1, ge=1)
    """First wait before reconnecting; doubles up to ``reconnect_max_s``."""
    reconnect_max_s: int = Field(30, ge=1)
    """Longest wait between reconnection attempts."""
    home_assistant: HomeAssistantConfig | None = None
    """Home Assistant's MQTT discovery (``home_assistant = true`` or a table of its keys): a
    device per source with sensors for its lines' counts and zones' occupancy."""

    @field_validator("home_assistant", mode="before")
    @classmethod
    def _switch(cls, value: Any) -> Any:
        return {} if value is True else None if value is False else value


@register("mqtt")
class MqttSink(OutboxSink):
    """Publishes events to an MQTT broker without ever holding up the video path."""

    Config = MqttConfig
    config: MqttConfig
    published = acked = reconnects = connects = invalid = pictures_missing = 0
    discovery: Discovery | None = None
    announcer: Announcer | None = None
    non_finite: NonFinite | None = None
    unacknowledged: int | None = None
    """Set when it closes: what the broker never acknowledged."""

    def __init__(self, name: str, config: MqttConfig) -> None:
        super().__init__(name, config)
        self.reads_pixels = self.writes_pictures(config)  # the camera's pictures

    @classmethod
    def writes_pictures(cls, config: MqttConfig) -> bool:
        return config.home_assistant is not None and config.home_assistant.camera_s > 0

    def process(self, frame: Frame) -> tuple[Frame]:
        if self.announcer is not None and self.reads_pixels:
            self.announcer.picture(frame)
        return super().process(frame)

    @classmethod
    def check_for_sources(cls, config: MqttConfig, source_ids: Sequence[str]) -> None:
        """Every topic the run can publish to is a valid MQTT topic name."""
        for source_id in source_ids or ["s"]:
            topic_for(config.topic, source_id, "e")

    def open(self, context: StageContext) -> None:
        try:
            import paho.mqtt.client as paho
        except ImportError:
            raise MissingDependencyError("paho-mqtt", "the mqtt sink", extra="mqtt") from None
        cfg = self.config
        topic_for(cfg.topic, "s", "e")
        self._paho = paho
        self.published = self.acked = self.reconnects = self.connects = self.invalid = 0
        self.non_finite = NonFinite(self.name)
        self._unacked_since: float | None = None  # monotonic, while published > acked
        self.reach = Reachability(self.name, f"mqtt://{cfg.host}:{cfg.port}")
        self._connected = threading.Event()
        self._closing = threading.Event()
        # Whose each message id is (True: Home Assistant's), to count acknowledgements apart.
        # Never held while calling paho: its thread holds its own lock calling on_publish.
        self._mid_lock = threading.Lock()
        self._whose: dict[int, bool] = {}
        self._early: set[int] = set()  # acknowledged before publish() returned its id
        if cfg.home_assistant is not None:
            self.discovery = Discovery(cfg.home_assistant, installed_version())
            configured = context.source_ids if context is not None else ()
            self.announcer = Announcer(self.name, self.discovery, configured)
        self.client = self._client()
        self.client.connect_async(cfg.host, cfg.port, cfg.keepalive_s)
        self.client.loop_start()
        self._sender = threading.Thread(target=self._send, name=f"{self.name}-send", daemon=True)
        self._sender.start()
        log.info("%s: publishing to mqtt://%s:%d (%s)", self.name, cfg.host, cfg.port, cfg.topic)

    def _client(self) -> Any:
        cfg, paho = self.config, self._paho
        client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=cfg.client_id)
        if cfg.username is not None:
            password = cfg.password.get_secret_value() if cfg.password else None
            client.username_pw_set(cfg.username, password)
        if cfg.tls:
            try:
                client.tls_set(ca_certs=cfg.ca_file, certfile=cfg.cert_file, keyfile=cfg.key_file)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"TLS set-up failed: {exc}", key="tls") from None
        client.reconnect_delay_set(
            cfg.reconnect_min_s, max(cfg.reconnect_max_s, cfg.reconnect_min_s)
        )
        client.max_queued_messages_set(1000)  # paho's own queue stays small; ours is the outbox
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        if self.discovery is not None:  # the broker says "offline" for us if we die
            death = self.discovery.death()
            client.will_set(death.topic, death.payload, qos=1, retain=True)
            assert self.announcer is not None
            client.on_message = self.announcer.on_message
        return client

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            log.warning("%s: broker refused the connection: %s", self.name, reason)
            return
        self.connects += 1
        self.reconnects = self.connects - 1
        if self.announcer is not None:
            self.announcer.subscribe(client)
        self._connected.set()
        log.info("%s: connected to %s:%d", self.name, self.config.host, self.config.port)

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if self._connected.is_set() and not self._closing.is_set():
            log.warning("%s: broker connection lost (%s); reconnecting", self.name, reason)
        self._connected.clear()

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        with self._mid_lock:
            whose = self._whose.pop(mid, None)
            if whose is None:
                self._early.add(mid)
        if whose is not None:
            self._count_ack(whose)
        self._unacked_since = time.monotonic() if self.in_flight() else None

    def _sent(self, mid: int, home_assistant: bool) -> None:
        """A message paho took (or keeps for after reconnecting) as ``mid``."""
        if home_assistant and self.announcer is not None:
            self.announcer.sent()
        with self._mid_lock:
            early = mid in self._early
            if early:
                self._early.discard(mid)
            else:
                self._whose[mid] = home_assistant
        if early:
            self._count_ack(home_assistant)

    def _count_ack(self, home_assistant: bool) -> None:
        if home_assistant and self.announcer is not None:
            self.announcer.acknowledged += 1
        else:
            self.acked += 1

    def in_flight(self) -> int:
        """Events published and not yet acknowledged by the broker (QoS 1 and 2)."""
        return max(0, self.published - self.acked) if self.config.qos else 0

    def _send(self) -> None:
        while not (self._closing.is_set() and not len(self.outbox)):
            self._watch_broker()
            if not self._connected.wait(0.2):
                continue
            if self.announcer is not None:
                self.announcer.send(lambda message: self._publish(message, home_assistant=True))
            batch = self.outbox.take(100, wait_s=0.2)
            for index, message in enumerate(batch):
                if not self._publish(message):
                    self.outbox.give_back(batch[index:])
                    self._closing.wait(0.05)
                    break

    def _publish(self, message: Outgoing, home_assistant: bool = False) -> bool:
        """Handed to paho (or dropped as unpublishable); False: give it back, try later."""
        paho = self._paho
        payload: str | bytes = message.payload if message.data is None else message.data
        if message.file is not None:
            picture = self._picture(message.file)
            if picture is None:
                return True
            payload = picture
        try:
            info = self.client.publish(message.topic, payload, self.config.qos, message.retain)
        except (ValueError, TypeError) as exc:  # paho refuses this topic or payload for good
            self.invalid += 1
            if self.invalid == 1:
                log.warning(
                    "%s: an event cannot be published (%s); dropped, counting", self.name, exc
                )
            return True
        # Lost the connection just now: paho keeps a QoS 1/2 message and sends it after
        # reconnecting; a QoS 0 one, or one refused by paho's full queue, comes back.
        kept = info.rc == paho.MQTT_ERR_NO_CONN and self.config.qos > 0
        if info.rc != paho.MQTT_ERR_SUCCESS and not kept:
            return False
        self._sent(info.mid, home_assistant)
        if home_assistant:
            return True
        if not self.in_flight():
            self._unacked_since = time.monotonic()
        self.published += 1
        return True

    def _watch_broker(self) -> None:
        """Warn while the broker is away, or takes messages and acknowledges none."""
        waiting = len(self.outbox) + self.in_flight()
        stalled = self._unacked_since
        if not self._connected.is_set():
            self.reach.failing("not connected", waiting)
        elif stalled is not None and time.monotonic() - stalled >= 1.0 and self.in_flight():
            self.reach.failing("messages not acknowledged", waiting, since=stalled)
        else:
            self.reach.reachable()

    def _picture(self, path: Any) -> bytes | None:
        """An event's picture, once its node has written it (it appears whole: write_whole)."""
        assert self.config.home_assistant is not None
        deadline = time.monotonic() + self.config.home_assistant.snapshot_wait_s
        while not path.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            return bytes(path.read_bytes())
        except OSError:
            self.pictures_missing += 1
            if self.pictures_missing == 1:
                log.warning("%s: no picture at %s for Home Assistant (is home_assistant."
                            "snapshot_dir the snapshots node's dir?)", self.name, path)  # fmt: skip
            return None

    def _offer(self, record: Record) -> None:
        if self.announcer is not None:
            self.announcer.offer(record)
        super()._offer(record)

    def prepare(self, record: Record) -> Outgoing:
        topic = topic_for(self.config.topic, record["source_id"], record["event"])
        return Outgoing(topic, to_json(record, self.non_finite), self.config.retain)

    def close(self) -> None:
        if self._sender is None:
            return
        drained = self.outbox.wait_empty(self.config.drain_s)
        self._closing.set()
        self.outbox.close()
        self._sender.join(self.config.drain_s + 1)
        if self.config.qos:
            self._wait_acked(self.config.drain_s)
        if self.discovery is not None and self._connected.is_set():  # a clean end: say so
            death = self.discovery.death()
            sent = self.client.publish(death.topic, death.payload, 1, death.retain)
            self._sent(sent.mid, home_assistant=True)  # Home Assistant's, not an event
            with contextlib.suppress(RuntimeError, ValueError):  # the connection went just now
                sent.wait_for_publish(max(0.5, min(self.config.drain_s, 5.0)))
        self.client.disconnect()
        self.client.loop_stop()
        self.unacknowledged = self.in_flight()
        if not drained or self.unacknowledged:
            log.warning(
                "%s: %d events not delivered (%d never sent, %d not acknowledged): the broker "
                "was unreachable at the end",
                self.name,
                len(self.outbox) + self.unacknowledged,
                len(self.outbox),
                self.unacknowledged,
            )

    def _wait_acked(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.in_flight() and time.monotonic() < deadline:
            time.sleep(0.02)

    def stats(self) -> dict[str, Any]:
        outbox = self.outbox
        unacknowledged = self.unacknowledged
        if unacknowledged is None:  # still running: what is in flight now
            unacknowledged = self.in_flight() if self._sender is not None else 0
        return {
            "published": self.published,
            "acknowledged": self.acked,
            "dropped": outbox.dropped + self.invalid,
            "unpublishable": self.invalid,
            "undelivered": len(outbox) + unacknowledged,
            "outbox_high_water": outbox.high_water,
            "reconnects": self.reconnects,
            "non_finite": self.non_finite.count if self.non_finite else 0,
            **({"home_assistant": self.announcer.stats()} if self.announcer else {}),
        }


def topic_for(template: str, source_id: str, event: str) -> str:
    """The topic of one event; ConfigError where MQTT would refuse it (a wildcard, NUL, too
    long) or the template names an unknown placeholder."""
    try:
        topic = template.format(source_id=source_id, event=event)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"bad placeholder in topic '{template}': only {{source_id}} and {{event}} "
            f"are known ({exc})",
            key="topic",
        ) from None
    problem = None
    if not topic:
        problem = "it is empty"
    elif "#" in topic or "+" in topic:
        problem = "it holds a wildcard ('#' or '+'), which only subscriptions may use"
    elif "\0" in topic:
        problem = "it holds a NUL character"
    elif len(topic.encode()) + EVENT_NAME_ROOM > MAX_TOPIC_BYTES:
        problem = f"it is longer than MQTT allows ({MAX_TOPIC_BYTES} bytes)"
    if problem:
        raise ConfigError(
            f"topic '{_short(topic)}' (source_id {_short(repr(source_id))}) is not a valid MQTT "
            f"topic: {problem}",
            key="topic",
        )
    return topic


def _short(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def installed_version() -> str:
    """vapipe's version as installed (a stage may not import the package's API for it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vapipe")
    except PackageNotFoundError:
        return "unknown"
