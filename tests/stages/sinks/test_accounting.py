"""Every event a network sink takes is accounted for, whatever the outbox's size and whatever
the peer does: ``delivered (acknowledged) + refused + dropped + undelivered == offered``, for
the webhook against a server that fails then answers and one that never answers, and for MQTT
across a broker restart and a frozen broker (real Mosquitto). Outbox sizes below the events
offered must show drops: a count of 0 there is the bug this file is for."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.mqtt import Broker
from tests.stages.sinks.test_webhook import answer, serving
from vapipe.stages.sinks.mqtt import MqttConfig, MqttSink
from vapipe.stages.sinks.webhook import WebhookConfig, WebhookSink

OFFERED = 40
SIZES = [1, 5, 10, None]  # None: the default (10,000)


def records(count: int) -> list[dict[str, Any]]:
    return [{"event": "line_cross", "source_id": "cam", "seq": i, "pts": i / 25} for i in
            range(count)]  # fmt: skip


def size_settings(size: int | None) -> dict[str, Any]:
    return {} if size is None else {"outbox_size": size}


def assert_drops_follow_the_size(stats: dict[str, Any], size: int | None, kept: int) -> None:
    """At most ``size`` (and what one sender has in hand) survives a wait: the rest dropped."""
    if size is None:
        assert stats["dropped"] == 0, stats
    elif size + kept < OFFERED:
        assert stats["dropped"] >= OFFERED - size - kept, stats


@pytest.mark.parametrize("size", SIZES)
def test_webhook_failing_then_answering_accounts_for_every_event(size: int | None) -> None:
    failing = threading.Event()
    failing.set()

    def handler(conn: socket.socket, number: int) -> None:
        conn.sendall(answer(500 if failing.is_set() else 200))

    with serving(handler) as server:
        config = WebhookConfig(
            url=f"http://127.0.0.1:{server.port}/hook", batch_size=10, batch_wait_s=0,
            retry_initial_s=0.05, retry_max_s=0.2, drain_s=10, **size_settings(size),
        )  # fmt: skip
        sink = WebhookSink("hook", config)
        sink.open(None)  # type: ignore[arg-type]
        for record in records(OFFERED):
            sink.accept(record)
        deadline = time.monotonic() + 30
        while len(server.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        failing.clear()  # the server answers from now on
        sink.close()
    stats = sink.stats()
    assert stats["delivered"] + stats["rejected"] + stats["dropped"] + stats["undelivered"] == (
        OFFERED
    ), stats
    assert stats["undelivered"] == 0 and stats["delivered"] > 0, stats
    assert_drops_follow_the_size(stats, size, kept=10)


@pytest.mark.parametrize("size", SIZES)
def test_webhook_that_never_answers_accounts_for_every_event(size: int | None) -> None:
    release = threading.Event()

    def handler(conn: socket.socket, number: int) -> None:
        release.wait(30)  # connected, reading nothing back: a frozen peer

    with serving(handler) as server:
        config = WebhookConfig(
            url=f"http://127.0.0.1:{server.port}/hook", batch_size=10, batch_wait_s=0,
            timeout_s=0.3, retry_initial_s=0.05, retry_max_s=0.2, drain_s=1,
            **size_settings(size),
        )  # fmt: skip
        sink = WebhookSink("hook", config)
        sink.open(None)  # type: ignore[arg-type]
        for record in records(OFFERED):
            sink.accept(record)
        sink.close()
        release.set()
    stats = sink.stats()
    assert stats["delivered"] == 0, stats
    assert stats["dropped"] + stats["undelivered"] == OFFERED, stats
    assert_drops_follow_the_size(stats, size, kept=10)


def mqtt_sink(port: int, size: int | None, **settings: Any) -> MqttSink:
    config = MqttConfig(port=port, reconnect_max_s=1, **size_settings(size), **settings)
    sink = MqttSink("mqtt", config)
    sink.open(None)  # type: ignore[arg-type]
    return sink


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("size", SIZES)
def test_mqtt_across_a_broker_restart_accounts_for_every_event(
    tmp_path: Path, size: int | None
) -> None:
    server = Broker(tmp_path / "broker").start()
    sink = mqtt_sink(server.port, size, drain_s=20)
    try:
        wait_until(sink._connected.is_set, 20, "the first connection")
        server.stop()
        wait_until(lambda: not sink._connected.is_set(), 20, "the sink to see the broker gone")
        for record in records(OFFERED):
            sink.accept(record)
        server = Broker(tmp_path / "broker", server.port).start()
        sink.close()
    finally:
        server.stop()
    stats = sink.stats()
    assert stats["acknowledged"] + stats["dropped"] + stats["undelivered"] == OFFERED, stats
    assert stats["undelivered"] == 0 and stats["acknowledged"] > 0, stats
    # The sender may hold one record taken from the outbox while it waits for the broker.
    assert_drops_follow_the_size(stats, size, kept=1)


@pytest.mark.parametrize("size", [5, None])
def test_mqtt_to_a_frozen_broker_accounts_for_every_event(tmp_path: Path, size: int | None) -> None:
    server = Broker(tmp_path / "broker").start()
    assert server.process is not None
    sink = mqtt_sink(server.port, size, drain_s=1)
    try:
        wait_until(sink._connected.is_set, 20, "the first connection")
        server.process.send_signal(signal.SIGSTOP)  # the socket stays open; nothing answers
        for record in records(OFFERED):
            sink.accept(record)
        sink.close()
    finally:
        server.process.send_signal(signal.SIGCONT)
        server.stop()
    stats = sink.stats()
    assert stats["acknowledged"] == 0, stats
    assert stats["dropped"] + stats["undelivered"] == OFFERED, stats
    assert_drops_follow_the_size(stats, size, kept=100)


@pytest.mark.parametrize("size", [5, None])
def test_home_assistant_s_messages_are_counted_apart_from_the_events(
    tmp_path: Path, size: int | None
) -> None:
    server = Broker(tmp_path / "broker").start()
    sink = mqtt_sink(server.port, size, drain_s=20, home_assistant=True)
    try:
        wait_until(sink._connected.is_set, 20, "the first connection")
        for seq, record in enumerate(records(OFFERED)):
            # each frame's counts change: a new state for Home Assistant every time
            record.update(event="frame", analytics={"lines": {"road": {"in": seq, "out": 0}}})
            sink.accept(record)
        sink.close()
    finally:
        server.stop()
    stats = sink.stats()
    # The events' own accounting holds as without Home Assistant (its messages wait apart,
    # the newest per topic, and are never dropped from the events' outbox).
    assert stats["acknowledged"] + stats["dropped"] + stats["undelivered"] == OFFERED, stats
    assert stats["published"] == stats["acknowledged"] == OFFERED - stats["dropped"], stats
    assert_drops_follow_the_size(stats, size, kept=1)
    ha = stats["home_assistant"]
    assert ha["acknowledged"] == ha["published"] > 0, ha
    # the newest state of each topic: fewer than one a frame when they came faster than sent
    assert ha["published"] <= ha["announced"] + 3, ha  # + status, manifest and the last word
