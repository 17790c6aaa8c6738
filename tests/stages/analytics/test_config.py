"""Analytics and track config errors: one line naming the node, key and line or zone."""

from __future__ import annotations

import pytest

from vapipe.pipeline import config
from vapipe.pipeline.errors import ConfigError

TEXT = """\
links = ["cam ! pre ! det ! nms ! track ! analytics ! events"]
[nodes.cam]
type = "source"
uri = "x.mp4"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
[nodes.track]
type = "track"
[nodes.analytics]
type = "analytics"
lines = [{ name = "road", start = [0, 100], end = [640, 100] }]
[nodes.events]
type = "events"
"""


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        pytest.param(
            'analytics.zones=[{ name = "bay", polygon = [[0, 0], [10, 10], [10, 0], [0, 10]] }]',
            "key 'zones.0': zone 'bay': invalid polygon (Self-intersection[5 5])",
            id="self-intersecting",
        ),
        pytest.param(
            'analytics.zones=[{ name = "flat", polygon = [[0, 0], [5, 5], [10, 10]] }]',
            "key 'zones.0': zone 'flat': the polygon has no area",
            id="degenerate",
        ),
        pytest.param(
            'analytics.lines=[{ name = "dot", start = [5, 5], end = [5, 5] }]',
            "key 'lines.0': line 'dot': start and end are the same point",
            id="zero-length",
        ),
        pytest.param(
            'analytics.lines=[{ name = "a", start = [0, 0], end = [1, 1] },'
            ' { name = "a", start = [0, 1], end = [1, 0] }]',
            "node 'analytics': line 'a' is declared twice",
            id="duplicate-name",
        ),
        pytest.param(
            'analytics.lines=[{ name = "road", start = [0, 0], end = [640, 1] }]',
            "node 'analytics': line 'road': normalized coordinates must lie within 0-1",
            id="normalized-out-of-range",
        ),
        pytest.param(
            'analytics.zones=[{ name = "bay", polygon = [[0, 0], [1, 0], [1, 1]], dwel_s = 3 }]',
            "key 'zones.0.dwel_s': unknown key (did you mean 'dwell_s'?)",
            id="misspelt-zone-key",
        ),
        pytest.param(
            "track.low_score=0.9",
            "node 'track': low_score must not exceed high_score",
            id="track-thresholds",
        ),
    ],
)
def test_geometry_errors_are_one_line(override: str, expected: str) -> None:
    overrides = [override]
    if "normalized" in expected:
        overrides.append("analytics.normalized=true")
    with pytest.raises(ConfigError) as raised:
        config.parse(TEXT, "a.toml", overrides)
    message = str(raised.value)
    assert expected in message and "\n" not in message, message


def test_lines_and_zones_set_from_the_command_line() -> None:
    spec = config.parse(
        TEXT,
        "a.toml",
        [
            'analytics.lines=[{ name = "x", start = [0.1, 0.5], end = [0.9, 0.5] }]',
            'analytics.zones=[{ name = "z", polygon = [[0, 0], [0.5, 0], [0.5, 0.5]] }]',
            "analytics.normalized=true",
        ],
    )
    analytics = spec.nodes["analytics"].config
    assert [line.name for line in analytics.lines] == ["x"]  # type: ignore[attr-defined]
    assert [zone.name for zone in analytics.zones] == ["z"]  # type: ignore[attr-defined]
