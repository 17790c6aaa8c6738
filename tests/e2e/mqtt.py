"""A real Mosquitto broker for the tests, on a free loopback port, and a subscriber."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from tests.e2e.rtsp import free_port


class Broker:
    """Mosquitto with persistence, so a restart keeps sessions and their queued messages."""

    def __init__(
        self,
        folder: Path,
        port: int | None = None,
        users: dict[str, str] | None = None,
        allow_anonymous: bool = True,
    ) -> None:
        self.folder, self.port = folder, port or free_port()
        self.users, self.allow_anonymous = users or {}, allow_anonymous
        self.process: subprocess.Popen[str] | None = None

    def _write_conf(self) -> Path:
        conf = self.folder / "mosquitto.conf"
        lines = [
            f"listener {self.port} 127.0.0.1",
            f"allow_anonymous {str(self.allow_anonymous).lower()}",
            "persistence true",
            f"persistence_location {self.folder}/",
            "autosave_interval 1",
        ]
        if os.geteuid() == 0:
            # Started as root, mosquitto becomes user "mosquitto", who cannot read or write
            # the test's root-only temp folder: no password file, and no saved sessions.
            lines.append("user root")
        if self.users:
            passwords = self.folder / "passwords"
            passwords.write_text("")
            for user, password in self.users.items():
                subprocess.run(
                    ["mosquitto_passwd", "-b", str(passwords), user, password], check=True
                )
            lines.append(f"password_file {passwords}")
        conf.write_text("\n".join(lines) + "\n")
        return conf

    def let_anonymous_in(self) -> None:
        """Open the broker to anonymous clients (the pipeline) without restarting it."""
        self.allow_anonymous = True
        self._write_conf()
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)  # mosquitto reloads allow_anonymous

    def start(self) -> Broker:
        binary = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        if not Path(binary).exists():
            pytest.fail("the MQTT tests need Debian's mosquitto (see .ci/run)")
        self.folder.mkdir(parents=True, exist_ok=True)
        conf = self._write_conf()
        self.process = subprocess.Popen(
            [binary, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return self
            if self.process.poll() is not None:
                pytest.fail(f"mosquitto did not start: {self.process.stderr.read()[-500:]}")  # type: ignore[union-attr]
            time.sleep(0.05)
        pytest.fail("mosquitto did not listen within 10 s")

    def stop(self) -> None:
        """A clean stop: mosquitto saves its sessions first."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(10)


@contextlib.contextmanager
def broker(folder: Path) -> Iterator[Broker]:
    server = Broker(folder).start()
    try:
        yield server
    finally:
        server.stop()


class Subscriber:
    """Collects every message under ``topic`` (QoS 1, persistent session: it also gets what
    was published while it was reconnecting)."""

    def __init__(
        self, port: int, topic: str = "vapipe/#", login: tuple[str, str] | None = None
    ) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._subscribed = threading.Event()
        self.subscribes = 0
        self.client = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id="vapipe-test-sub", clean_session=False
        )
        if login:
            self.client.username_pw_set(*login)
        self.connects = 0
        self.client.on_connect = lambda c, u, f, r, p: self._on_connect(c, topic)
        self.client.on_subscribe = lambda *args: self._on_subscribe()
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(1, 1)
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        assert self._subscribed.wait(10), "the test subscriber could not subscribe"

    def _on_subscribe(self) -> None:
        self.subscribes += 1
        self._subscribed.set()

    def _on_connect(self, client: Any, topic: str) -> None:
        self.connects += 1
        client.subscribe(topic, qos=1)

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        with self._lock:
            self.messages.append((message.topic, json.loads(message.payload)))

    @staticmethod
    def publish_marker(port: int, topic: str) -> dict[str, Any]:
        """Publish a unique message (QoS 1, acknowledged) from a client of its own."""
        marker = {"marker": os.urandom(8).hex()}
        client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        client.connect("127.0.0.1", port, 30)
        client.loop_start()
        client.publish(topic, json.dumps(marker), qos=1).wait_for_publish(10)
        client.disconnect()
        client.loop_stop()
        return marker

    def received(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return list(self.messages)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class Topics:
    """Every message under ``topic``, raw (Home Assistant's payloads are not all JSON), in
    order; ``retained_now`` reads what the broker keeps, as a client connecting now gets it."""

    def __init__(self, port: int, topic: str = "#") -> None:
        self.port = port
        self.messages: list[tuple[str, bytes]] = []
        self._lock = threading.Lock()
        subscribed = threading.Event()
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        self.client.on_connect = lambda c, u, f, r, p: c.subscribe(topic, qos=1)
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        assert subscribed.wait(10), "the test subscriber could not subscribe"

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        with self._lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def payloads(self, topic: str) -> list[bytes]:
        with self._lock:
            return [payload for name, payload in self.messages if name == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    @staticmethod
    def retained_now(port: int) -> dict[str, bytes]:
        """The retained message of every topic (empty ones are deleted ones): a marker
        published after subscribing arrives after all of them."""
        reader = Topics(port)
        marker = f"vapipe-test/marker/{os.urandom(4).hex()}"
        reader.client.publish(marker, b"x", qos=1)
        deadline = time.monotonic() + 20
        while not reader.payloads(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        reader.close()
        assert reader.payloads(marker), "the broker did not send the marker back"
        return {name: payload for name, payload in reader.messages if not name.startswith(
            "vapipe-test/")}  # fmt: skip
