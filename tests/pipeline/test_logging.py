"""Logs for people and for log shippers, and a summary that explains dropped frames."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.helpers import FILE_CONFIG, cli
from vapipe.pipeline.metrics import explain_drops


def test_json_logs_are_one_object_per_line(tmp_path: Path) -> None:
    result = cli(
        str(FILE_CONFIG), "--max-frames", "3", "--log-format", "json",
        "--set", "cam.uri=rtsp://user:hunter2@127.0.0.1:1/x", "--set", "cam.live=false",
        "--set", "cam.reconnect.max_attempts=1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    records = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert records, result.stderr
    for record in records:
        assert set(record) >= {"time", "level", "logger", "message"}
        assert record["time"].endswith("+00:00")
    assert "hunter2" not in result.stderr


def test_the_summary_explains_drops() -> None:
    stats = {
        "queues": {
            "cam ! pre": {
                "dst": "pre", "leaky": "downstream", "dropped": 12,
                "dropped_by_source": {"cam": 12},
            },
            "pre ! det": {"dst": "det", "leaky": "no", "dropped": 0, "dropped_by_source": {}},
        }
    }  # fmt: skip
    (line,) = explain_drops(stats)
    assert line.startswith("dropped 12 frames on 'cam ! pre' (cam 12)")
    assert 'set [queues."cam ! pre"] leaky = "no"' in line
