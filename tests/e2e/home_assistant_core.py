"""A real Home Assistant core for the tests, on loopback: its MQTT integration set up against
the test's broker (a config entry written into its storage, as its UI would), and its
``mqtt_statestream`` publishing every entity's state back to the broker, so that a test reads
what Home Assistant itself made of the discovery messages without a login.

Home Assistant needs Python 3.13: .ci/run installs it into ``.venv/ha`` where pyenv has one
(``VAPIPE_HASS`` names another ``hass``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.rtsp import free_port

REPO = Path(__file__).resolve().parents[2]
STATES = "hastates"
"""Where Home Assistant publishes its entities' states (``hastates/DOMAIN/OBJECT/state``)."""


def hass_binary() -> Path | None:
    given = os.environ.get("VAPIPE_HASS")
    path = Path(given) if given else REPO / ".venv" / "ha" / "bin" / "hass"
    return path if path.is_file() else None


class HomeAssistantCore:
    def __init__(self, binary: Path, folder: Path, broker_port: int) -> None:
        self.binary, self.folder, self.broker_port = binary, folder, broker_port
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "hass.log"

    def _write_config(self) -> None:
        storage = self.folder / ".storage"
        storage.mkdir(parents=True, exist_ok=True)
        (self.folder / "configuration.yaml").write_text(
            "homeassistant:\n  name: vapipe-test\n  latitude: 0\n  longitude: 0\n"
            "  elevation: 0\n  unit_system: metric\n  time_zone: UTC\n  country: DE\n"
            f"http:\n  server_host: 127.0.0.1\n  server_port: {free_port()}\n"
            f"mqtt_statestream:\n  base_topic: {STATES}\n"
        )
        entry = {
            "created_at": "2026-12-06T00:00:00+00:00", "modified_at": "2026-12-06T00:00:00+00:00",
            "data": {"broker": "127.0.0.1", "port": self.broker_port},
            "options": {"discovery": True, "discovery_prefix": "homeassistant"},
            "discovery_keys": {}, "disabled_by": None, "domain": "mqtt",
            "entry_id": "01JVAPIPETESTMQTTENTRY0000", "version": 1, "minor_version": 2,
            "pref_disable_new_entities": False, "pref_disable_polling": False,
            "source": "user", "subentries": [], "title": "Mosquitto", "unique_id": None,
        }  # fmt: skip
        entries = {"version": 1, "minor_version": 5, "key": "core.config_entries",
                   "data": {"entries": [entry]}}  # fmt: skip
        (storage / "core.config_entries").write_text(json.dumps(entries))

    def start(self) -> HomeAssistantCore:
        self._write_config()
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(self.binary), "-c", str(self.folder), "--skip-pip"],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""

    def stop(self) -> None:
        """A clean stop: Home Assistant writes its registries out first."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def storage(self, key: str) -> dict[str, Any]:
        return json.loads((self.folder / ".storage" / key).read_text())["data"]
