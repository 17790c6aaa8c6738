"""Home Assistant's MQTT discovery schema, as its documentation gives it, for the tests: the
topic layout, the keys each component takes and the values its enumerations allow.

Sources (read 2026-12-06): https://www.home-assistant.io/integrations/mqtt/ ("Discovery
topic", "Discovery payload", availability, device, origin), sensor.mqtt, binary_sensor.mqtt,
image.mqtt, camera.mqtt, and the sensor / binary sensor device and state classes pages."""

from __future__ import annotations

import json
import re
from typing import Any

TOPIC = re.compile(r"^(?P<prefix>[^/#+]+)/(?P<component>[a-z_]+)/(?:(?P<node>[a-zA-Z0-9_-]+)/)?"
                   r"(?P<object>[a-zA-Z0-9_-]+)/config$")  # fmt: skip
COMMON = {
    "name", "unique_id", "object_id", "availability", "availability_mode", "availability_topic",
    "payload_available", "payload_not_available", "device", "origin", "icon", "entity_category",
    "enabled_by_default", "json_attributes_topic", "json_attributes_template", "qos",
}  # fmt: skip
COMPONENTS = {
    "sensor": (
        {"state_topic"},
        {"value_template", "device_class", "state_class", "unit_of_measurement",
         "expire_after", "force_update", "suggested_display_precision"},
    ),
    "binary_sensor": (
        {"state_topic"},
        {"value_template", "device_class", "payload_on", "payload_off", "off_delay",
         "expire_after", "force_update"},
    ),
    "image": (set(), {"image_topic", "url_topic", "content_type", "image_encoding",
                      "url_template"}),
    "camera": ({"topic"}, {"image_encoding"}),
}  # fmt: skip
STATE_CLASSES = {"measurement", "total", "total_increasing"}
BINARY_DEVICE_CLASSES = {"motion", "occupancy", "presence", "moving", "problem", "running"}
DEVICE_KEYS = {"identifiers", "connections", "name", "manufacturer", "model", "sw_version",
               "hw_version", "suggested_area", "via_device", "configuration_url"}  # fmt: skip
AVAILABILITY_MODES = {"all", "any", "latest"}


def check_config(topic: str, payload: str) -> dict[str, Any]:
    """The payload, parsed, after asserting it is a discovery config Home Assistant takes."""
    found = TOPIC.match(topic)
    assert found, f"not a discovery topic: {topic}"
    component = found["component"]
    assert component in COMPONENTS, f"{topic}: component {component}"
    config = json.loads(payload)
    required, allowed = COMPONENTS[component]
    assert required <= set(config), f"{topic}: lacks {required - set(config)}"
    unknown = set(config) - required - allowed - COMMON
    assert not unknown, f"{topic}: keys Home Assistant does not take: {unknown}"
    if component == "image":
        assert ("image_topic" in config) != ("url_topic" in config), topic
    assert config.get("state_class", "measurement") in STATE_CLASSES, topic
    if component == "binary_sensor":
        assert config.get("device_class", "motion") in BINARY_DEVICE_CLASSES, topic
    assert config.get("availability_mode", "all") in AVAILABILITY_MODES
    for entry in config.get("availability", ()):
        assert set(entry) <= {"topic", "payload_available", "payload_not_available",
                              "value_template"}, topic  # fmt: skip
    device = config.get("device", {})
    assert set(device) <= DEVICE_KEYS and device.get("identifiers"), topic
    assert config.get("unique_id"), f"{topic}: no unique_id, so no device and no UI settings"
    return config


def template_key(template: str) -> str:
    """The state key of a ``{{ value_json['key'] }}`` template."""
    found = re.fullmatch(r"\{\{ value_json\['([a-zA-Z0-9_-]+)'\] \}\}", template)
    assert found, template
    return found[1]
