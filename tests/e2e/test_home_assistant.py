"""Home Assistant's MQTT discovery against a real Mosquitto broker: a run announces its
camera's entities with retained configs Home Assistant's schema takes, keeps their states
equal to the run's own counts, shows the latest event picture, says "offline" when it stops
(cleanly, or by its last will when killed), and a stream removed from ``serve`` takes its
entities with it. No Home Assistant runs here: its documented schema stands in
(tests/stages/sinks/home_assistant_schema.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.e2e.helpers import FILE_CONFIG, REPO, cli, read_events, spawn, wait_for
from tests.e2e.mqtt import Topics, broker
from tests.e2e.serve_helpers import per_source_outputs, serve
from tests.stages.sinks.home_assistant_schema import check_config, template_key

SERVICE = (REPO / "configs" / "service.toml").read_text(encoding="utf-8")


def with_home_assistant(text: str, port: int, after: str) -> str:
    """A config with an mqtt node fed by ``after``, announcing to Home Assistant."""
    text = text.replace("links = [", f'links = [\n    "{after} ! mqtt",', 1)
    return text + (
        f'\n[nodes.mqtt]\ntype = "mqtt"\nport = {port}\nevent_types = ["line_cross"]\n'
        "home_assistant = true\n"
    )


def test_a_run_announces_its_camera_and_keeps_its_counts(tmp_path: Path) -> None:
    config = tmp_path / "ha.toml"
    with broker(tmp_path / "broker") as server:
        config.write_text(with_home_assistant(SERVICE, server.port, "clips"))
        live = Topics(server.port)
        ran = cli(str(config), "--set", "cam.loop=false", "--set", "cam.realtime=false",
                  "--stats", "stats.json", cwd=tmp_path)  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-3000:]
        kept = Topics.retained_now(server.port)
        live.close()
    assert live.payloads("vapipe/status")[0] == b"online"
    assert kept["vapipe/status"] == b"offline", "a run that ended must show as unavailable"
    assert kept["vapipe/cam/available"] == b"online"
    announced = {t: check_config(t, p.decode()) for t, p in kept.items() if t.endswith("/config")}
    by_key = {topic.split("/")[-2]: config for topic, config in announced.items()}
    assert {"objects", "line_road_westbound", "line_road_eastbound", "zone_crossing_occupancy",
            "zone_crossing_occupied", "snapshot"} <= set(by_key)  # fmt: skip
    state = json.loads(kept["vapipe/cam/state"])
    for key, entity in by_key.items():
        if key not in ("snapshot", "camera"):
            assert template_key(entity["value_template"]) in state, key
    # the camera entity: the latest annotated picture of the stream, a JPEG
    assert by_key["camera"]["topic"] == "vapipe/cam/camera"
    assert kept["vapipe/cam/camera"][:3] == b"\xff\xd8\xff"
    events = read_events(tmp_path / "out" / "cam.jsonl")
    crossings = [e for e in events if e["event"] == "line_cross"]
    assert crossings, "no crossing to count"
    final = crossings[-1]["counts"]
    assert state["line_road_westbound"] == final["westbound"]
    assert state["line_road_eastbound"] == final["eastbound"]
    cars = sum(e["class_name"] == "car" and e["direction"] == "westbound" for e in crossings)
    assert state.get("line_road_westbound_car", 0) == cars
    pictured = [e for e in events if e.get("snapshot")]
    picture = (tmp_path / "out" / "media" / pictured[-1]["snapshot"]).read_bytes()
    assert kept["vapipe/cam/snapshot"] == picture and picture[:2] == b"\xff\xd8"
    stats = json.loads((tmp_path / "stats.json").read_text())["stages"]["mqtt"]
    assert stats["home_assistant"]["acknowledged"] >= len(announced)
    assert stats["undelivered"] == 0


def test_a_killed_run_shows_offline_by_its_last_will(tmp_path: Path) -> None:
    config = tmp_path / "ha.toml"
    with broker(tmp_path / "broker") as server:
        config.write_text(with_home_assistant(SERVICE, server.port, "clips"))
        live = Topics(server.port, "vapipe/status")
        process = spawn(str(config), cwd=tmp_path)  # the clip loops: it runs until killed
        try:
            wait_for(lambda: live.payloads("vapipe/status") == [b"online"], 120, "online")
            wait_for(lambda: bool(Topics.retained_now(server.port).get("vapipe/cam/state")),
                     120, "a state")  # fmt: skip
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        wait_for(lambda: live.payloads("vapipe/status")[-1:] == [b"offline"], 60, "the will")
        live.close()


def test_a_stream_removed_from_the_service_takes_its_entities(tmp_path: Path) -> None:
    config = tmp_path / "ha.toml"
    objects = "homeassistant/binary_sensor/vapipe_{}/objects/config"
    with broker(tmp_path / "broker") as server:
        text = FILE_CONFIG.read_text(encoding="utf-8")
        config.write_text(with_home_assistant(text, server.port, "nms"))
        live = Topics(server.port)
        with (
            serve(tmp_path, *per_source_outputs(), config=config) as served,
            served.client() as http,
        ):
            wait_for(lambda: live.payloads(objects.format("cam")), 120, "the first stream's")
            added = http.post("/api/streams", json={"id": "b", "uri": "sample:people",
                                                   "options": {"loop": True}})  # fmt: skip
            assert added.status_code == 201, added.text
            wait_for(lambda: live.payloads(objects.format("b")), 120, "the added stream's")
            assert http.delete("/api/streams/b").status_code in (200, 202, 204)
            wait_for(lambda: live.payloads(objects.format("b"))[-1:] == [b""], 120, "removal")
            kept = Topics.retained_now(server.port)
            assert objects.format("cam") in kept, "the other stream keeps its entities"
            assert not [t for t in kept if "/vapipe_b/" in t or t.startswith("vapipe/b/")]
            assert served.stop() == 130
        live.close()


def test_a_camera_taken_out_of_the_config_is_removed_by_the_next_run(tmp_path: Path) -> None:
    config = tmp_path / "ha.toml"
    objects = "homeassistant/binary_sensor/vapipe_{}/objects/config"
    with broker(tmp_path / "broker") as server:
        config.write_text(with_home_assistant(FILE_CONFIG.read_text(), server.port, "nms"))
        for source_id in ("yard", "road"):  # the second run no longer has the yard camera
            ran = cli(str(config), "--set", f"cam.source_id={source_id}", "--max-frames", "20",
                      "--stats", f"{source_id}.json", cwd=tmp_path)  # fmt: skip
            assert ran.returncode == 0, ran.stderr[-3000:]
            if source_id == "yard":
                assert objects.format("yard") in Topics.retained_now(server.port)
        kept = Topics.retained_now(server.port)
    assert objects.format("road") in kept
    assert not [t for t in kept if "vapipe_yard" in t or t.startswith("vapipe/yard/")], kept
    assert set(json.loads(kept["vapipe/announced"])["sources"]) == {"road"}
    stats = json.loads((tmp_path / "road.json").read_text())["stages"]["mqtt"]
    assert stats["home_assistant"]["removed"] >= 3, stats  # the yard's config, state, ...
    assert stats["home_assistant"]["acknowledged"] == stats["home_assistant"]["published"]
