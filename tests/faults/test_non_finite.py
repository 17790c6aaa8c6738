"""A second model whose output JSON cannot hold (NaN, infinity): every event is still written,
each such value as null, counted per sink and warned about once, naming the field."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import cli
from tests.object_models import broken_embedder
from vapipe.stages.events.records import NonFinite, to_json

GRAPH = """\
links = ["cam ! pre ! det ! nms ! track ! who ! events"]
[nodes.cam]
type = "source"
uri = "sample:people"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
classes = [0]
[nodes.track]
type = "track"
[nodes.who]
type = "embed"
model = "{model}"
on_classes = ["person"]
vector = true
[nodes.events]
type = "events"
path = "out/events.jsonl"
"""


def strict(line: str) -> Any:
    """JSON as a strict parser reads it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in a line")

    return json.loads(line, parse_constant=refuse)


def test_an_embedder_that_gives_nan_and_infinity_loses_no_event(tmp_path: Path) -> None:
    model = broken_embedder(tmp_path / "broken.onnx")
    (tmp_path / "graph.toml").write_text(GRAPH.format(model=model))
    result = cli("graph.toml", "--no-progress", "--max-frames", "30", "--stats", "stats.json",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    frames = [strict(line) for line in (tmp_path / "out/events.jsonl").read_text().splitlines()]
    assert [f["seq"] for f in frames if f["event"] == "frame"] == list(range(30))
    vectors = [
        d["attributes"]["who"]["vector"]
        for f in frames if f["event"] == "frame"
        for d in f["detections"] if "who" in d.get("attributes", {})
    ]  # fmt: skip
    assert vectors, "the node gave no result to look at"
    # NaN and infinity are null, the crop's mean colour after them as the model gave it.
    assert all(len(v) == 9 and v[:6] == [None] * 6 for v in vectors), vectors[0]
    assert all(0 < value < 1 for v in vectors for value in v[6:]), vectors[0]
    stages = json.loads((tmp_path / "stats.json").read_text())["stages"]
    nulls = sum(v.count(None) for v in vectors)
    assert stages["events"]["non_finite"] == nulls
    warnings = [line for line in result.stderr.splitlines() if "written as null" in line]
    assert len(warnings) == 1 and "detections[" in warnings[0], result.stderr[-2000:]


def test_each_value_json_cannot_hold_is_null_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    count = NonFinite("events")
    record = {"event": "frame", "a": [1.0, float("nan")], "b": {"c": float("-inf")}, "d": 2.5}
    with caplog.at_level(logging.WARNING):
        line = to_json(record, count)
        again = to_json(record, count)
    assert strict(line) == {"event": "frame", "a": [1.0, None], "b": {"c": None}, "d": 2.5}
    assert line == again and count.count == 4
    (warning,) = caplog.messages  # once per sink, not per line
    assert warning.startswith("events: a frame event held a[1], b.c (NaN or infinity)")


def test_a_record_json_holds_is_written_as_it_is() -> None:
    count = NonFinite("events")
    record = {"event": "frame", "score": 0.5, "name": "ä", "list": [1, 2]}
    assert to_json(record, count) == '{"event":"frame","score":0.5,"name":"ä","list":[1,2]}'
    assert count.count == 0


def test_many_fields_are_named_three_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    count = NonFinite("mqtt")
    with caplog.at_level(logging.WARNING):
        to_json({"event": "frame", "v": [float("inf")] * 5})  # nobody counts: still null
        to_json({"event": "zone_enter", "v": [float("inf")] * 5}, count)
    assert count.count == 5
    (warning,) = caplog.messages
    assert warning.startswith("mqtt: a zone_enter event held v[0], v[1], v[2] and 2 more (")
