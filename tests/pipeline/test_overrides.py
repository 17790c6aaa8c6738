"""``--set NODE.KEY=VALUE`` and ``${VAR}`` expansion, on the raw config before validation:
where each form writes, what an error line names, and what it never shows."""

from __future__ import annotations

from typing import Any

import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.overrides import apply_override, expand_env, shown


def raw() -> dict[str, Any]:
    return {
        "pipeline": {"name": "cams"},
        "nodes": {
            "cam": {"type": "source", "uri": "a.mp4"},
            "det": {"type": "infer", "max_batch": 4,
                    "backend": {"type": "onnxruntime", "providers": ["cpu"]}},
            "trk": {"type": "track", "backend": "bytetrack"},
        },
    }  # fmt: skip


def test_a_value_is_toml_and_an_unquoted_word_is_a_string() -> None:
    config = raw()
    apply_override(config, "det.max_batch=8", "x.toml")
    apply_override(config, "cam.uri=rtsp://cam/1", "x.toml")
    apply_override(config, "det.classes=[0, 2]", "x.toml")
    assert config["nodes"]["det"]["max_batch"] == 8
    assert config["nodes"]["cam"]["uri"] == "rtsp://cam/1"
    assert config["nodes"]["det"]["classes"] == [0, 2]


@pytest.mark.parametrize("override", ["det=3", "det.model", "det.=3", ".model=3", "=3", "det"])
def test_anything_but_node_key_value_is_one_error(override: str) -> None:
    config = raw()
    with pytest.raises(ConfigError, match=r"--set expects NODE\.KEY=VALUE, got") as caught:
        apply_override(config, override, "x.toml")
    assert caught.value.file == "x.toml" and config == raw()  # nothing written


def test_pipeline_and_serve_keys_go_to_their_tables_at_any_depth() -> None:
    config = raw()
    apply_override(config, "pipeline.shards=2", "x.toml")
    apply_override(config, "pipeline.shard_resources.num_gpus=0.25", "x.toml")
    apply_override(config, "serve.port=8080", "x.toml")
    assert config["pipeline"] == {"name": "cams", "shards": 2,
                                  "shard_resources": {"num_gpus": 0.25}}  # fmt: skip
    assert config["serve"] == {"port": 8080} and "pipeline" not in config["nodes"]


def test_a_node_named_like_a_table_gets_its_own_set() -> None:
    config = raw()
    config["nodes"]["serve"] = {"type": "events"}
    apply_override(config, "serve.path=out.jsonl", "x.toml")
    assert config["nodes"]["serve"] == {"type": "events", "path": "out.jsonl"}
    assert "serve" not in config


@pytest.mark.parametrize(
    ("config", "override", "message"),
    [
        (raw(), "pipeline.name.first=1", "[pipeline.name] is not a table"),
        ({"pipeline": {"a": {"b": 3}}}, "pipeline.a.b.c=1", "[pipeline.a.b] is not a table"),
        (raw(), "det.max_batch.x=1", "--set det.max_batch.x=1: 'max_batch' is not a table"),
    ],
)
def test_a_value_that_is_not_a_table_is_named_with_its_whole_path(
    config: dict[str, Any], override: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        apply_override(config, override, "x.toml")
    assert caught.value.message == message and caught.value.file == "x.toml"


def test_an_unknown_node_is_named_with_the_closest_one_and_the_list() -> None:
    with pytest.raises(ConfigError) as caught:
        apply_override(raw(), "dett.max_batch=2", "x.toml")
    assert caught.value.message == (
        "--set dett.max_batch=2: no node 'dett' (did you mean 'det'?); nodes: cam, det, trk"
    )


def test_a_table_s_type_set_starts_a_fresh_table_of_that_type() -> None:
    config = raw()
    apply_override(config, "det.backend.type=torch", "x.toml")
    assert config["nodes"]["det"]["backend"] == {"type": "torch"}  # onnxruntime's keys gone
    apply_override(config, "det.backend.device=cuda:1", "x.toml")
    assert config["nodes"]["det"]["backend"] == {"type": "torch", "device": "cuda:1"}
    config = raw()
    apply_override(config, "det.backend.providers=[]", "x.toml")  # a key: the table stays
    assert config["nodes"]["det"]["backend"] == {"type": "onnxruntime", "providers": []}
    apply_override(config, "det.type=infer", "x.toml")  # the node's own type: nothing reset
    assert config["nodes"]["det"]["max_batch"] == 4


@pytest.mark.parametrize("inner", ["options", "alpha"])
def test_only_the_table_whose_type_is_set_starts_fresh(inner: str) -> None:
    config = raw()
    config["nodes"]["det"]["backend"][inner] = {"type": "a", "depth": 2}
    apply_override(config, f"det.backend.{inner}.type=b", "x.toml")
    assert config["nodes"]["det"]["backend"] == {
        "type": "onnxruntime", "providers": ["cpu"], inner: {"type": "b"},
    }  # fmt: skip


def test_a_key_under_a_shorthand_string_keeps_it_as_the_type() -> None:
    config = raw()
    apply_override(config, "trk.backend.track_buffer=60", "x.toml")
    assert config["nodes"]["trk"]["backend"] == {"type": "bytetrack", "track_buffer": 60}


def test_an_override_is_shown_on_one_line_cut_to_the_limit() -> None:
    assert shown("cam.uri=a\nb\rc") == "cam.uri=a\\nb\\rc"
    exact = "cam.uri=" + "x" * 72
    assert shown(exact) == exact and len(exact) == 80
    longer = exact + "y"
    assert shown(longer) == longer[:77] + "..." and len(shown(longer)) == 80
    assert shown("cam.uri=abcdefghij", limit=10) == "cam.uri..."


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("mqtt.password=hunter2", "mqtt.password=***"),
        ("mqtt.pasword=hunter2", "mqtt.pasword=***"),  # a typo of a secret word
        ("hook.headers={a = 'b'}", "hook.headers=***"),
        ("det.threads=4", "det.threads=4"),  # a plain word close to a secret one
        ("cam.uri=rtsp://user:pw@cam/1", "cam.uri=rtsp://***@cam/1"),
        # Not NODE.KEY=VALUE: where the value starts is unknown, so only the name is shown.
        ("mqtt.password:hunter2", "mqtt.password..."),
        ("mqtt.password hunter2", "mqtt.password..."),
        ("mqtt={password = 'hunter2'}", "mqtt..."),
        ("mqtt.tls={password = 'hunter2'}", "mqtt.tls=***"),  # a table may hold a secret
        ("mqtt.x:y=hunter2", "mqtt.x..."),
        ("=hunter2", "..."),
    ],
)
def test_a_secret_looking_value_is_never_shown(override: str, expected: str) -> None:
    assert shown(override) == expected


def test_environment_variables_and_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAM", "rtsp://cam/1")
    monkeypatch.setenv("EMPTY", "")
    monkeypatch.delenv("MISSING", raising=False)
    value = {"a": "${CAM}", "b": ["${MISSING:-x.mp4}", 3], "c": "${EMPTY:-fallback}",
             "d": "${EMPTY}", "e": "at ${CAM} and ${MISSING:-}"}  # fmt: skip
    assert expand_env(value, "x.toml", "", ()) == {
        "a": "rtsp://cam/1", "b": ["x.mp4", 3], "c": "fallback", "d": "",
        "e": "at rtsp://cam/1 and ",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("value", "node", "key", "message"),
    [
        ({"nodes": {"cam": {"uri": "${MISSING}"}}}, "cam", "uri",
         "environment variable ${MISSING} is not set: set it, or give the value with --set "
         "cam.uri=..."),
        ({"serve": {"auth": {"token": "${MISSING}"}}}, None, "token",
         "environment variable ${MISSING} is not set"),
        ({"alpha": {"x": {"y": "${MISSING}"}}}, None, "y",
         "environment variable ${MISSING} is not set"),
        ({"nodes": {"cam": "${MISSING}"}}, None, "cam",
         "environment variable ${MISSING} is not set"),
        ({"nodes": "${MISSING}"}, None, "nodes", "environment variable ${MISSING} is not set"),
    ],
)  # fmt: skip
def test_an_unset_variable_is_one_error_naming_where_it_is_used(
    monkeypatch: pytest.MonkeyPatch, value: Any, node: str | None, key: str, message: str
) -> None:
    monkeypatch.delenv("MISSING", raising=False)
    with pytest.raises(ConfigError) as caught:
        expand_env(value, "x.toml", "", ())
    assert (caught.value.message, caught.value.node, caught.value.key) == (message, node, key)
