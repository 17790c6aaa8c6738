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


def test_normalized_per_line_or_zone_beside_pixels() -> None:
    from vapipe.stages.analytics.config import AnalyticsConfig
    from vapipe.stages.analytics.geometry import compile_geometry, geometry_problems

    settings = AnalyticsConfig.model_validate(
        {
            "lines": [{"name": "gate", "start": [0.5, 0], "end": [0.5, 1], "normalized": True}],
            "zones": [{"name": "bay", "polygon": [[420, 110], [600, 110], [600, 330]]}],
        }
    )
    (line,), (zone,) = compile_geometry(settings, "cam", 640, 360)
    assert line.start.tolist() == [320, 0] and line.end.tolist() == [320, 360]
    assert zone.polygon.bounds == (420, 110, 600, 330)  # the zone stays in pixels
    assert geometry_problems([line], [zone], "cam", 640, 360) == []
    # And the other way round: the node says normalized, the zone says pixels.
    swapped = AnalyticsConfig.model_validate(
        {
            "normalized": True,
            "lines": [{"name": "gate", "start": [0.5, 0], "end": [0.5, 1]}],
            "zones": [{"name": "bay", "polygon": [[420, 110], [600, 110], [600, 330]],
                       "normalized": False}],
        }
    )  # fmt: skip
    (line,), (zone,) = compile_geometry(swapped, "cam", 640, 360)
    assert line.start.tolist() == [320, 0] and zone.polygon.bounds == (420, 110, 600, 330)


def test_a_normalized_zone_must_lie_in_0_1() -> None:
    with pytest.raises(ConfigError, match="zone 'bay': normalized coordinates must lie within"):
        config.parse(
            TEXT,
            "a.toml",
            [
                'analytics.zones=[{ name = "bay", polygon = [[0, 0], [2, 0], [0, 1]], '
                "normalized = true }]"
            ],
        )
