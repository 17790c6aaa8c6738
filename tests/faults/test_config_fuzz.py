"""Every shipped config, mutated at random (hypothesis): each mutant either validates or is
rejected with one ConfigError line naming where; never another exception, never a hang."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vapipe.pipeline import config, graph
from vapipe.pipeline.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("VAPIPE_RTSP_URL", "rtsp://127.0.0.1:8554/stream")  # rtsp.toml needs one
CONFIGS = sorted((REPO / "configs").glob("*.toml"))

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.lists(st.integers(min_value=-5, max_value=2000), max_size=5),
    st.lists(st.lists(st.floats(-10, 2000), min_size=2, max_size=2), max_size=6),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.sampled_from(["auto", "-", "{source_id}", "sample:nope", "rtsp://u:p@h/x", "torch"]),
)


def paths(table: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every key path in a TOML table."""
    found = []
    if isinstance(table, dict):
        for key, value in table.items():
            found.append((*prefix, key))
            found.extend(paths(value, (*prefix, key)))
    return found


def toml_value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            {float("inf"): "inf", float("-inf"): "-inf"}.get(value, repr(value))
            if value == value
            else "nan"
        )
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {toml_value(v)}' for k, v in value.items()) + "}"
    return str(value)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
@settings(
    max_examples=int(os.environ.get("VAPIPE_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=not os.environ.get("VAPIPE_FUZZ_EXAMPLES"),  # CI: the same examples every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_configs_validate_or_fail_with_one_line(path: Path, data: st.DataObject) -> None:
    text = path.read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    node_keys = [p for p in paths(raw.get("nodes", {})) if len(p) >= 2]
    target = data.draw(st.sampled_from(node_keys), label="key")
    mutation = data.draw(st.sampled_from(["set", "misspell", "new-key"]), label="mutation")
    key = ".".join(target)
    if mutation == "set":
        override = f"{key}={toml_value(data.draw(VALUES, label='value'))}"
    elif mutation == "misspell":
        override = f"{key}x={toml_value(data.draw(VALUES, label='value'))}"
    else:
        override = f"{target[0]}.{data.draw(st.from_regex(r'[a-z_]{1,12}', fullmatch=True))}=1"
    try:
        graph.build(config.parse(text, path.name, [override]))
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message, message
        assert "Traceback" not in message
