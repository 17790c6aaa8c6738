"""The discovery messages against a real Home Assistant core (2025.4, its MQTT integration and
a Mosquitto broker on loopback): the service's camera becomes a device whose sensors hold the
run's counts, the latest event picture becomes an image, an added stream becomes a device of
its own and is deleted from Home Assistant's registries when it is removed, and every entity
turns unavailable when the run stops. Skipped where no Home Assistant is installed (it needs
Python 3.13; .ci/run installs it into .venv/ha where pyenv has one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO, wait_for
from tests.e2e.home_assistant_core import STATES, HomeAssistantCore, hass_binary
from tests.e2e.mqtt import Topics, broker
from tests.e2e.serve_helpers import per_source_outputs, serve
from tests.e2e.test_home_assistant import with_home_assistant

HASS = hass_binary()
pytestmark = pytest.mark.skipif(HASS is None, reason="no Home Assistant core installed here")
SERVICE = (REPO / "configs" / "service.toml").read_text(encoding="utf-8")


def state(topics: Topics, entity: str) -> bytes | None:
    """Home Assistant's latest state of ``entity`` (``sensor.cam_road_westbound``)."""
    domain, name = entity.split(".")
    seen = topics.payloads(f"{STATES}/{domain}/{name}/state")
    return seen[-1] if seen else None


def numbers(topics: Topics, entity: str) -> list[int]:
    domain, name = entity.split(".")
    seen = topics.payloads(f"{STATES}/{domain}/{name}/state")
    return [int(p) for p in seen if p.isdigit()]


def test_home_assistant_makes_devices_and_entities_of_the_service(tmp_path: Path) -> None:
    assert HASS is not None
    config = tmp_path / "service.toml"
    with broker(tmp_path / "broker") as server:
        config.write_text(with_home_assistant(SERVICE, server.port, "clips"))
        topics = Topics(server.port)
        core = HomeAssistantCore(HASS, tmp_path / "ha", server.port).start()
        log = core.log
        try:
            wait_for(lambda: topics.payloads("homeassistant/status")[-1:] == [b"online"], 300,
                     "Home Assistant's MQTT integration to connect", log)  # fmt: skip
            with serve(tmp_path, *per_source_outputs(), config=config) as served:
                http = served.client()
                wait_for(lambda: any(numbers(topics, "sensor.cam_road_westbound")), 300,
                         "a counted crossing in Home Assistant", log)  # fmt: skip
                wait_for(lambda: state(topics, "image.cam_latest_event") not in
                         (None, b"unknown", b"unavailable"), 120, "the picture", log)  # fmt: skip
                assert state(topics, "binary_sensor.cam_objects") in (b"on", b"off")
                assert state(topics, "sensor.cam_crossing_occupancy") is not None
                added = http.post("/api/streams", json={"id": "b", "uri": "sample:people",
                                                       "options": {"loop": True}})  # fmt: skip
                assert added.status_code == 201, added.text
                wait_for(lambda: state(topics, "binary_sensor.b_objects") in (b"on", b"off"),
                         180, "the added stream's entity", log)  # fmt: skip
                assert http.delete("/api/streams/b").status_code in (200, 202, 204)
                gone = "homeassistant/binary_sensor/vapipe_b/objects/config"
                wait_for(lambda: topics.payloads(gone)[-1:] == [b""], 120, "the removal", log)
                http.close()
                assert served.stop() == 130
            wait_for(lambda: state(topics, "sensor.cam_road_westbound") == b"unavailable", 120,
                     "the entities to turn unavailable", log)  # fmt: skip
            final = json.loads(topics.payloads("vapipe/cam/state")[-1])
            assert numbers(topics, "sensor.cam_road_westbound")[-1] == final["line_road_westbound"]
        finally:
            core.stop()
        topics.close()
    entities = core.storage("core.entity_registry")
    kept = {e["unique_id"]: e["entity_id"] for e in entities["entities"] if e["platform"] == "mqtt"}
    assert kept["vapipe_cam_line_road_westbound"] == "sensor.cam_road_westbound"
    assert kept["vapipe_cam_snapshot"] == "image.cam_latest_event"
    assert kept["vapipe_cam_camera"] == "camera.cam_live"  # the latest annotated picture
    assert not [u for u in kept if u.startswith("vapipe_b_")], "the removed stream's entities"
    deleted = {e["unique_id"] for e in entities["deleted_entities"]}
    assert "vapipe_b_objects" in deleted
    devices = core.storage("core.device_registry")
    named = {tuple(i) for d in devices["devices"] for i in d["identifiers"]}
    assert ("mqtt", "vapipe_cam") in named and ("mqtt", "vapipe_b") not in named
