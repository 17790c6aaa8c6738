"""The mqtt sink against a real Mosquitto broker: every event arrives, in order, on its
topic; the filter works; a broker that goes away for 10 s neither slows the video path nor
loses what was queued; credentials never show."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.helpers import REPO, cli, read_events, read_lines, spawn, wait_for
from tests.e2e.mqtt import Broker, Subscriber, broker
from tests.e2e.rtsp import free_port
from tests.events_schema import assert_valid_events

ANALYTICS = (REPO / "configs" / "analytics.toml").read_text(encoding="utf-8")


def with_mqtt(port: int, extra: str = "") -> str:
    """configs/analytics.toml with an mqtt sink beside the events sink."""
    text = ANALYTICS.replace('"analytics ! events"]', '"analytics ! events", "analytics ! mqtt"]')
    return text + f'\n[nodes.mqtt]\ntype = "mqtt"\nport = {port}\n{extra}'


def test_every_event_arrives_in_order_on_its_topic(tmp_path: Path) -> None:
    with broker(tmp_path / "broker") as server:
        subscriber = Subscriber(server.port)
        config = tmp_path / "a.toml"
        config.write_text(with_mqtt(server.port))
        result = cli(str(config), "--max-frames", "150", "--stats", "s.json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        written = read_events(tmp_path / "out/analytics.jsonl")
        wait_for(lambda: len(subscriber.received()) >= len(written), 20, "every message")
        received = subscriber.received()
        subscriber.close()
    assert [payload for _, payload in received] == written, "the broker got other events"
    assert all(topic == f"vapipe/cam/{p['event']}" for topic, p in received)
    assert any(p["event"] == "line_cross" for _, p in received), "no analytics event to check"
    stats = json.loads((tmp_path / "s.json").read_text())["stages"]["mqtt"]
    assert stats["published"] == stats["acknowledged"] == len(written)
    assert stats["dropped"] == 0 and stats["undelivered"] == 0
    # The broker-down test asserts reconnects >= 1: a healthy run must say 0.
    assert stats["reconnects"] == 0 and stats["outbox_high_water"] >= 1, stats


def test_event_type_filter_and_masked_credentials(tmp_path: Path) -> None:
    secret = "p4ss-w0rd-xyz"
    with broker(tmp_path / "broker") as server:
        subscriber = Subscriber(server.port)
        config = tmp_path / "a.toml"
        config.write_text(
            with_mqtt(
                server.port,
                'event_types = ["line_cross"]\nusername = "cam-user"\n'
                f'password = "{secret}"\ntopic = "site/{{source_id}}/{{event}}"\n',
            )
        )
        subscriber.client.subscribe("site/#", qos=1)
        result = cli(str(config), "--max-frames", "150", "--stats", "s.json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        crossings = [
            e for e in read_events(tmp_path / "out/analytics.jsonl") if e["event"] == "line_cross"
        ]
        assert crossings, "the clip's first 150 frames should count cars"
        wait_for(lambda: len(subscriber.received()) >= len(crossings), 20, "the crossings")
        # The pipeline had every message acknowledged before it exited; a marker published
        # now reaches the subscriber after anything else it (wrongly) published.
        marker = Subscriber.publish_marker(server.port, "site/marker")
        wait_for(lambda: marker in [p for _, p in subscriber.received()], 20, "the marker")
        received = [(t, p) for t, p in subscriber.received() if p != marker]
        subscriber.close()
    assert [p for _, p in received] == crossings
    assert {t for t, _ in received} == {"site/cam/line_cross"}
    for text in (result.stderr, (tmp_path / "s.json").read_text()):
        assert secret not in text


OBSERVER = {"observer": "observer-pw"}


def test_broker_down_for_10_s_keeps_the_frame_rate_and_drains_after(tmp_path: Path) -> None:
    server = Broker(tmp_path / "broker", users=OBSERVER).start()
    subscriber = Subscriber(server.port, login=("observer", "observer-pw"))
    config = tmp_path / "a.toml"
    # A camera-like source: the clip at its own pace (24 fps), looped.
    config.write_text(with_mqtt(server.port, "reconnect_max_s = 1\n"))
    events = tmp_path / "out/analytics.jsonl"
    pipeline = spawn(
        str(config), "--set", "cam.realtime=true", "--set", "cam.loop=true",
        "--max-frames", "600", "--stats", "s.json", cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for(lambda: len(read_lines(events)) >= 48, 60, "two seconds of frames")
        server.stop()
        lines_at_stop = len(read_lines(events))
        # Ten seconds of the camera's frames (24 fps) go through while the broker is down: the
        # video path never waits for it (a blocked one would time out here).
        wait_for(lambda: len(read_lines(events)) >= lines_at_stop + 240, 60, "10 s of frames")
        # The broker comes back closed to the pipeline until the test's subscriber has its
        # subscription again: what the pipeline sends first after the outage must have
        # someone to go to, whatever order the two clients' reconnect timers fire in.
        server = Broker(tmp_path / "broker", server.port, OBSERVER, allow_anonymous=False)
        server.start()
        wait_for(lambda: subscriber.subscribes >= 2, 30, "the subscriber to subscribe again")
        server.let_anonymous_in()
        _, stderr = pipeline.communicate(timeout=120)
    finally:
        if pipeline.poll() is None:
            pipeline.send_signal(signal.SIGKILL)
        server.stop()
    assert pipeline.returncode == 0, stderr[-2000:]
    written = read_events(events)

    def missing() -> list[dict]:
        got = {(p["event"], p["seq"], p.get("track_id")) for _, p in subscriber.received()}
        return [e for e in written if (e["event"], e["seq"], e.get("track_id")) not in got]

    deadline = time.monotonic() + 60
    while missing() and time.monotonic() < deadline:
        time.sleep(0.2)
    lost = missing()
    received = [p for _, p in subscriber.received()]
    subscriber.close()
    assert_valid_events(received)
    stats = json.loads((tmp_path / "s.json").read_text())["stages"]["mqtt"]
    # Which side lost them, if any were: the sink's counts and the subscriber's connections.
    assert not lost, (
        f"{len(lost)} of {len(written)} events never arrived: {lost[:2]}, ...; sink stats "
        f"{stats}; subscriber connected {subscriber.connects} times, got {len(received)}"
    )
    assert stats["reconnects"] >= 1 and stats["dropped"] == 0, stats
    assert "broker connection lost" in stderr


def test_a_frozen_broker_is_warned_about_and_what_it_never_acknowledged_is_undelivered(
    tmp_path: Path,
) -> None:
    server = Broker(tmp_path / "broker").start()
    config = tmp_path / "a.toml"
    config.write_text(with_mqtt(server.port, "drain_s = 1\n"))
    events = tmp_path / "out/analytics.jsonl"
    log = tmp_path / "stderr.log"
    assert server.process is not None
    # The run ends once the warning came (Ctrl-C), not after a fixed number of frames: on a
    # loaded machine the first events can come late enough that a fixed run ends before the
    # broker has been silent for the warning's 5 s.
    with log.open("w") as stderr_file:
        pipeline = subprocess.Popen(
            [sys.executable, "-m", "vapipe", str(config), "--set", "cam.realtime=true",
             "--set", "cam.loop=true", "--stats", "s.json"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr_file, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: len(read_lines(events)) >= 48, 60, "two seconds of frames", log)
            server.process.send_signal(signal.SIGSTOP)  # the socket stays open; nothing answers
            wait_for(lambda: "unreachable for" in log.read_text(), 60, "the warning", log)
            pipeline.send_signal(signal.SIGINT)
            pipeline.wait(timeout=120)
        finally:
            server.process.send_signal(signal.SIGCONT)
            if pipeline.poll() is None:
                pipeline.send_signal(signal.SIGKILL)
            server.stop()
    stderr = log.read_text()
    assert pipeline.returncode == 130, stderr[-2000:]
    stats = json.loads((tmp_path / "s.json").read_text())["stages"]["mqtt"]
    offered = len(read_lines(events))
    # Every event the sink took is acknowledged, dropped or counted undelivered: none vanish.
    assert stats["acknowledged"] + stats["dropped"] + stats["undelivered"] == offered, stats
    assert stats["undelivered"] >= offered - 48 - 24 and stats["acknowledged"] < offered, stats
    # Said while it happened, and again at the end.
    assert "messages not acknowledged" in stderr, stderr[-3000:]
    assert f"{stats['undelivered']} events not delivered" in stderr, stderr[-2000:]


def test_a_topic_mqtt_would_refuse_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "a.toml"
    config.write_text(with_mqtt(free_port()))
    for override, problem in [
        ("mqtt.topic=site/#/{event}", "a wildcard ('#' or '+')"),
        ("cam.source_id='cam+1'", "a wildcard ('#' or '+')"),
        (f"cam.source_id='{'x' * 70000}'", "longer than MQTT allows"),
    ]:
        result = cli(str(config), "--set", override, "--max-frames", "3", cwd=tmp_path)
        assert result.returncode == 2, result.stderr[-2000:]
        last = result.stderr.strip().splitlines()[-1]
        assert "node 'mqtt' key 'topic'" in last and problem in last, last
        assert len(last) < 400 and "Traceback" not in result.stderr
