"""Home Assistant's MQTT discovery, without a broker: what Discovery announces for each record
(checked against Home Assistant's documented schema), when states are published, and what
is emptied when a source goes. The real broker and the run: tests/e2e/test_home_assistant.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.stages.sinks.config_bounds import assert_bounds
from tests.stages.sinks.home_assistant_schema import check_config, template_key
from vapipe.stages.sinks.home_assistant import Discovery, HomeAssistantConfig, Outgoing, slug
from vapipe.stages.sinks.mqtt import MqttConfig


def frame(source: str = "cam", westbound: int = 1, occupancy: int = 2, **extra: Any) -> dict:
    return {
        "event": "frame", "source_id": source, "seq": 0, "pts": 0.0, "time": "t",
        "detections": [{"xyxy": [0, 0, 1, 1]}] if occupancy else [],
        "analytics": {
            "lines": {"road": {"westbound": westbound, "eastbound": 0,
                               "by_class": {"westbound": {"car": westbound}, "eastbound": {}}}},
            "zones": {"crossing": {"occupancy": occupancy, "track_ids": list(range(occupancy))}},
        },
        **extra,
    }  # fmt: skip


def discovery(**config: Any) -> Discovery:
    return Discovery(HomeAssistantConfig(**config), "9.9.9")


def configs(messages: list[Outgoing]) -> dict[str, dict[str, Any]]:
    """The discovery configs among ``messages``, parsed and checked, by their object id."""
    found = {}
    for message in messages:
        if message.topic.endswith("/config"):
            config = check_config(message.topic, message.payload)
            found[message.topic.split("/")[-2]] = config
    return found


def states(messages: list[Outgoing]) -> list[dict[str, Any]]:
    return [json.loads(m.payload) for m in messages if m.topic.endswith("/state")]


def test_a_first_frame_announces_a_device_with_its_lines_zones_and_state() -> None:
    ha = discovery()
    messages = ha.update(frame())
    assert all(m.retain for m in messages), "a late Home Assistant must find them all"
    found = configs(messages)
    assert set(found) == {
        "objects", "line_road_westbound", "line_road_eastbound", "line_road_westbound_car",
        "zone_crossing_occupancy", "zone_crossing_occupied",
    }  # fmt: skip
    (state,) = states(messages)
    assert state == {
        "objects": "ON", "line_road_westbound": 1, "line_road_eastbound": 0,
        "line_road_westbound_car": 1, "zone_crossing_occupancy": 2, "zone_crossing_occupied": "ON",
    }  # fmt: skip
    for key, config in found.items():
        assert template_key(config["value_template"]) == key and key in state
        assert config["state_topic"] == "vapipe/cam/state"
        assert config["device"]["identifiers"] == ["vapipe_cam"]
        assert config["device"]["name"] == "cam" and config["device"]["sw_version"] == "9.9.9"
        assert config["unique_id"] == f"vapipe_cam_{key}"
        assert [a["topic"] for a in config["availability"]] == [
            "vapipe/status",
            "vapipe/cam/available",
        ]
    assert found["line_road_westbound"]["state_class"] == "total_increasing"
    assert found["zone_crossing_occupancy"]["state_class"] == "measurement"
    assert found["zone_crossing_occupied"]["device_class"] == "occupancy"
    assert found["line_road_westbound_car"]["name"] == "road westbound car"
    assert Outgoing("vapipe/cam/available", "online") in messages
    assert messages[0].topic == "vapipe/cam/available", "available before its entities"


def test_states_go_out_only_when_they_change_and_new_classes_get_entities() -> None:
    ha = discovery()
    ha.update(frame())
    assert ha.update(frame()) == [], "nothing changed: nothing sent"
    (changed,) = ha.update(frame(westbound=2))
    assert (
        changed.topic == "vapipe/cam/state"
        and json.loads(changed.payload)["line_road_westbound"] == 2
    )
    record = frame(westbound=2)
    record["analytics"]["lines"]["road"]["by_class"]["eastbound"] = {"bus": 1}
    messages = ha.update(record)
    assert set(configs(messages)) == {"line_road_eastbound_bus"}
    assert states(messages)[0]["line_road_eastbound_bus"] == 1
    empty = ha.update(frame(occupancy=0, westbound=2))
    assert (
        states(empty)[0]["objects"] == "OFF" and states(empty)[0]["zone_crossing_occupied"] == "OFF"
    )


def test_a_models_labels_on_a_line_get_sensors_of_their_own() -> None:
    record = frame()
    record["analytics"]["lines"]["road"]["by_attribute"] = {"colour": {"red": {"westbound": 3}}}
    messages = discovery().update(record)
    found = configs(messages)
    assert found["line_road_westbound_colour_red"]["name"] == "road westbound red"
    assert states(messages)[0]["line_road_westbound_colour_red"] == 3


def test_motion_is_a_binary_sensor_where_a_motion_node_reports() -> None:
    assert "motion" not in configs(discovery().update(frame()))
    ha = discovery()
    found = configs(ha.update(frame(motion=True)))
    assert found["motion"]["device_class"] == "motion"
    assert states(ha.update(frame(motion=False)))[0]["motion"] == "OFF"


def test_a_source_going_down_and_up_flips_its_availability() -> None:
    ha = discovery()
    ha.update(frame())
    down = {"event": "source_down", "source_id": "cam", "seq": 3}
    assert ha.update(down) == [Outgoing("vapipe/cam/available", "offline")]
    assert ha.update(frame(westbound=1)) == [Outgoing("vapipe/cam/available", "online")]
    assert ha.update({"event": "source_up", "source_id": "cam"}) == [
        Outgoing("vapipe/cam/available", "online")
    ]


def test_a_removed_source_empties_every_retained_topic_it_had() -> None:
    ha = discovery()
    announced = [m.topic for m in ha.update(frame()) if m.topic.endswith("/config")]
    ha.update(frame(source="door"))
    *gone, manifest = ha.update({"event": "source_removed", "source_id": "cam", "seq": 9})
    assert manifest.topic == "vapipe/announced" and manifest.retain
    assert set(json.loads(manifest.payload)["sources"]) == {"door"}
    assert all(m.payload == "" and m.retain for m in gone)
    assert {m.topic for m in gone} == {
        *announced, "vapipe/cam/state", "vapipe/cam/available", "vapipe/cam/snapshot",
        "vapipe/cam/camera",
    }  # fmt: skip
    assert ha.update({"event": "source_removed", "source_id": "cam"}) == []
    assert all("/cam/" not in m.topic and "_cam/" not in m.topic for m in ha.everything())
    assert "door" in ha.sources
    again = configs(ha.update(frame()))  # the same id added again: announced again
    assert "objects" in again


def test_an_event_picture_gets_an_image_entity_and_its_file(tmp_path: Path) -> None:
    ha = discovery(snapshot_dir=str(tmp_path))
    ha.update(frame())
    event = {"event": "line_cross", "source_id": "cam", "snapshot": "a/b.jpg"}
    messages = ha.update(event)
    image = configs(messages)["snapshot"]
    assert image["image_topic"] == "vapipe/cam/snapshot" and image["content_type"] == "image/jpeg"
    assert Outgoing("vapipe/cam/snapshot", "", True, tmp_path / "a/b.jpg") in messages
    assert configs(ha.update(event)) == {}, "announced once"
    assert all(m.file is None for m in discovery(snapshot_dir="").update(event))


def test_everything_announced_is_published_again_after_a_reconnection() -> None:
    ha = discovery(id="site-2", prefix="ha")
    first = ha.update(frame())
    ha.update({"event": "source_down", "source_id": "cam"})
    again = ha.everything()
    assert again[0] == Outgoing("site-2/status", "online")
    assert {m.topic for m in again if m.topic.endswith("/config")} == {
        m.topic for m in first if m.topic.endswith("/config")
    }  # fmt: skip
    assert all(m.topic.startswith("ha/") for m in again if m.topic.endswith("/config"))
    assert Outgoing("site-2/cam/available", "offline") in again
    (state,) = [m for m in first if m.topic == "site-2/cam/state"]
    assert state in again and again[-1] == ha.manifest()
    assert ha.death() == Outgoing("site-2/status", "offline")


def test_names_that_are_no_topic_level_are_made_into_distinct_ones() -> None:
    assert slug("cam_1") == "cam_1"
    assert slug("cam/1") != slug("cam 1") and slug("cam/1").startswith("cam_1_")
    ha = discovery()
    messages = ha.update(frame(source="front door/1"))
    for topic in (m.topic for m in messages):
        check = topic.split("/")
        assert all(part and "+" not in part and "#" not in part for part in check)
    assert configs(messages)  # every config topic passed Home Assistant's pattern


def test_the_switch_and_its_table_in_the_mqtt_config() -> None:
    assert MqttConfig(home_assistant=True).home_assistant == HomeAssistantConfig()
    assert MqttConfig(home_assistant=False).home_assistant is None
    assert MqttConfig().home_assistant is None
    table = MqttConfig(home_assistant={"prefix": "ha", "id": "garage"}).home_assistant
    assert table is not None and (table.prefix, table.id) == ("ha", "garage")
    for bad in ("home/+", "a#", "", "x y"):
        with pytest.raises(ValidationError):
            HomeAssistantConfig(prefix=bad)


def test_the_picture_wait_is_bounded() -> None:
    assert_bounds(HomeAssistantConfig, "snapshot_wait_s", [0.0, 60.0], [-0.5, 60.5])


def test_keys_and_unique_ids_of_different_names_never_meet() -> None:
    # line "road" direction "west_in" and line "road_west" direction "in" joined by '_'
    # were one entity (8 shown for 9 counts); a part with a '_' of its own now gets a hash.
    ha = discovery()
    record = frame()
    record["analytics"]["lines"] = {"road": {"west_in": 1, "in": 4}, "road_west": {"in": 2}}
    messages = ha.update(record)
    found = configs(messages)
    keys = [k for k in found if k.startswith("line_")]
    assert len(keys) == 3 and "line_road_in" in keys, keys
    (state,) = states(messages)
    assert sorted(state[k] for k in keys) == [1, 2, 4]
    ids = {config["unique_id"] for config in found.values()}
    assert len(ids) == len(found)
    # the device: installation "a_b" with camera "c" is not installation "a" with "b_c"
    one = configs(discovery(id="a_b").update(frame(source="c")))
    other = configs(discovery(id="a").update(frame(source="b_c")))
    assert one["objects"]["unique_id"] != other["objects"]["unique_id"]
    assert one["objects"]["device"]["identifiers"] != other["objects"]["device"]["identifiers"]


def test_a_stream_the_last_run_announced_and_this_one_has_not_is_removed() -> None:
    before = discovery()
    before.update(frame(source="road"))
    before.update(frame(source="yard"))
    manifest = before.manifest().payload.encode()
    yard = [t for t in json.loads(manifest)["sources"]["yard"]]
    assert "homeassistant/binary_sensor/vapipe_yard/objects/config" in yard
    assert "vapipe/yard/state" in yard
    now = discovery()
    *removed, renewed = now.stale(manifest, configured={"road"})
    assert {m.topic for m in removed} == set(yard)
    assert all(m.payload == "" and m.retain for m in removed)
    assert renewed == now.manifest()
    assert now.stale(manifest, configured={"road", "yard"}) == []
    now.update(frame(source="yard"))  # an added stream this run has already seen: kept
    assert now.stale(manifest, configured={"road"}) == []
    for unreadable in (b"", b"not json", b"[]", b'{"sources": 3}', b'{"other": {}}'):
        assert now.stale(unreadable, configured=set()) == []


def plate_event(text: str, name: str | None = None) -> dict[str, Any]:
    return {"event": "plate", "source_id": "cam", "seq": 5, "pts": 0.2, "time": "t",
            "track_id": 3, "plate": text, "score": 0.97, "known": name is not None,
            **({"name": name} if name else {})}  # fmt: skip


def test_a_plate_gives_the_last_plate_sensor_which_frames_keep() -> None:
    ha = discovery()
    ha.update(frame())
    messages = ha.update(plate_event("KX4921"))
    found = configs(messages)
    assert list(found) == ["last_plate"]
    assert found["last_plate"]["name"] == "last plate"
    assert template_key(found["last_plate"]["value_template"]) == "last_plate"
    (state,) = states(messages)
    assert state["last_plate"] == "KX4921" and state["objects"] == "ON"
    # The next frame's state keeps it (a frame knows nothing of plates).
    (later,) = states(ha.update(frame(westbound=2)))
    assert later["last_plate"] == "KX4921" and later["line_road_westbound"] == 2
    named = ha.update(plate_event("7HJK582", "Bob's car"))
    assert configs(named) == {}, "announced once"
    assert states(named)[0]["last_plate"] == "7HJK582 (Bob's car)"
    assert states(ha.update(frame(westbound=2))) == [], "nothing changed: nothing sent"
