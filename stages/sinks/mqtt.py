"""The ``mqtt`` sink: events published to an MQTT broker (paho-mqtt), one message each.

The video path never waits for the broker: ``process`` only puts records into a bounded
outbox, and a sender thread hands them to paho while the connection is up. paho reconnects
with backoff; while the broker is down the outbox fills and then drops its oldest records,
counted in the stats. Needs ``pip install 'vapipe[mqtt]'``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Literal

from pydantic import Field, SecretStr

from vapipe.pipeline.errors import ConfigError, MissingDependencyError
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import StageContext
from vapipe.stages.sinks.outbox import Outbox, OutboxConfig, OutboxSink
from vapipe.stages.sinks.records import Record, to_json

log = logging.getLogger(__name__)


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


@register("mqtt")
class MqttSink(OutboxSink):
    """Publishes events to an MQTT broker without ever holding up the video path."""

    Config = MqttConfig
    config: MqttConfig

    def open(self, context: StageContext) -> None:
        try:
            import paho.mqtt.client as paho
        except ImportError:
            raise MissingDependencyError("paho-mqtt", "the mqtt sink", extra="mqtt") from None
        cfg = self.config
        try:
            cfg.topic.format(source_id="s", event="e")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"bad placeholder in topic '{cfg.topic}': only {{source_id}} and {{event}} "
                f"are known ({exc})",
                key="topic",
            ) from None
        self._paho = paho
        self.outbox = Outbox(cfg.outbox_size)
        self.published = self.acked = self.reconnects = self.connects = 0
        self._connected = threading.Event()
        self._closing = threading.Event()
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
        return client

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            log.warning("%s: broker refused the connection: %s", self.name, reason)
            return
        self.connects += 1
        self.reconnects = self.connects - 1
        self._connected.set()
        log.info("%s: connected to %s:%d", self.name, self.config.host, self.config.port)

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if self._connected.is_set() and not self._closing.is_set():
            log.warning("%s: broker connection lost (%s); reconnecting", self.name, reason)
        self._connected.clear()

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason: Any, props: Any) -> None:
        self.acked += 1

    def _send(self) -> None:
        paho = self._paho
        while not (self._closing.is_set() and not len(self.outbox)):
            if not self._connected.wait(0.2):
                continue
            batch = self.outbox.take(100, wait_s=0.2)
            for index, (topic, payload) in enumerate(batch):
                info = self.client.publish(topic, payload, self.config.qos, self.config.retain)
                # Lost the connection just now: paho keeps a QoS 1/2 message and sends it after
                # reconnecting; a QoS 0 one, or one refused by paho's full queue, comes back.
                kept = info.rc == paho.MQTT_ERR_NO_CONN and self.config.qos > 0
                if info.rc != paho.MQTT_ERR_SUCCESS and not kept:
                    self.outbox.give_back(batch[index:])
                    self._closing.wait(0.05)
                    break
                self.published += 1

    def prepare(self, record: Record) -> tuple[str, str]:
        topic = self.config.topic.format(source_id=record["source_id"], event=record["event"])
        return topic, to_json(record)

    def close(self) -> None:
        if not hasattr(self, "client"):
            return
        drained = self.outbox.wait_empty(self.config.drain_s)
        self._closing.set()
        self.outbox.close()
        self._sender.join(self.config.drain_s + 1)
        if self.config.qos:
            self._wait_acked(self.config.drain_s)
        if not drained:
            log.warning(
                "%s: %d events not delivered: the broker was unreachable at the end",
                self.name,
                len(self.outbox),
            )
        self.client.disconnect()
        self.client.loop_stop()

    def _wait_acked(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self.acked < self.published and time.monotonic() < deadline:
            time.sleep(0.02)

    def stats(self) -> dict[str, Any]:
        outbox = getattr(self, "outbox", None)
        return {
            "published": getattr(self, "published", 0),
            "acknowledged": getattr(self, "acked", 0),
            "dropped": outbox.dropped if outbox else 0,
            "undelivered": len(outbox) if outbox else 0,
            "outbox_high_water": outbox.high_water if outbox else 0,
            "reconnects": getattr(self, "reconnects", 0),
        }
