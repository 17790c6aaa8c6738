"""Config and graph validation: every error is one line naming file, line, node and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline import stubs  # noqa: F401  (registers test-* stages)
from vapipe.cli.main import main
from vapipe.pipeline import config, graph, urls
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.queues import Leaky

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
links = ["src ! sink"]

[nodes.src]
type = "test-count"
count = 3

[nodes.sink]
type = "test-collect"
"""


def parse(text: str, overrides: tuple[str, ...] = ()) -> graph.Graph:
    return graph.build(config.parse(text, "p.toml", overrides))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            GOOD.replace('type = "test-collect"', 'type = "test-colect"'),
            "p.toml:8: node 'sink' key 'type': unknown type 'test-colect' "
            "(did you mean 'test-collect'?)",
            id="unknown-type",
        ),
        pytest.param(
            GOOD.replace("count = 3", "cuont = 3"),
            "p.toml:5: node 'src' key 'cuont': unknown key (did you mean 'count'?)",
            id="unknown-key",
        ),
        pytest.param(
            GOOD.replace("count = 3", 'count = "three"'),
            "p.toml:5: node 'src' key 'count': input should be a valid integer, got string 'three'",
            id="wrong-type",
        ),
        pytest.param(
            GOOD.replace('type = "test-count"\n', ""),
            "p.toml:3: node 'src' key 'type': missing required key",
            id="missing-type",
        ),
        pytest.param(
            GOOD.replace('"src ! sink"', '"src ! snk"'),
            "p.toml:1: key 'links': link 'src ! snk' names undefined node 'snk' "
            "(did you mean 'sink'?)",
            id="undefined-link-node",
        ),
        pytest.param(
            GOOD.replace('"src ! sink"', '"src ! sink", "sink ! other", "other ! sink"')
            + '\n[nodes.other]\ntype = "test-collect"\n',
            "p.toml:1: key 'links': links form a cycle through sink, other",
            id="cycle",
        ),
        pytest.param(
            GOOD + '\n[nodes.lonely]\ntype = "test-collect"\n',
            "p.toml:10: node 'lonely': not reachable from a source",
            id="unreachable",
        ),
        pytest.param(
            GOOD.replace("count = 3", "count = 3\ncount = 4"),
            "p.toml:6: invalid TOML",
            id="toml-syntax",
        ),
        pytest.param(
            GOOD.replace('links = ["src ! sink"]', 'linkz = ["src ! sink"]'),
            "p.toml:1: key 'linkz': unknown top-level key (did you mean 'links'?)",
            id="unknown-top-level",
        ),
        pytest.param(
            GOOD + '\n[queues."src ! sink"]\nleaky = "sideways"\n',
            "p.toml:11: key 'queues.\"src ! sink\".leaky': input should be 'no', "
            "'upstream' or 'downstream'",
            id="bad-leaky",
        ),
        pytest.param(
            GOOD + '\n[queues."sink ! src"]\nsize = 2\n',
            "names no declared link",
            id="queue-for-missing-link",
        ),
        pytest.param(
            GOOD.replace('links = ["src ! sink"]', 'links = ["src ! sink", "sink ! src"]'),
            "node 'src': a 'test-count' node takes no input",
            id="link-into-source",
        ),
    ],
)
def test_validation_errors(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    message = str(caught.value)
    assert expected in message, f"expected {expected!r} in {message!r}"
    assert "\n" not in message, f"error is not one line: {message!r}"


def test_unknown_type_lists_valid_types() -> None:
    with pytest.raises(ConfigError, match=r"valid types: .*infer.*source"):
        parse(GOOD.replace('type = "test-collect"', 'type = "nope"'))


def test_unknown_key_lists_valid_keys() -> None:
    with pytest.raises(ConfigError, match=r"valid keys: count, delay_s, live"):
        parse(GOOD.replace("count = 3", "zzz = 3"))


def test_set_overrides_take_toml_values_and_bare_words_as_strings() -> None:
    spec = config.parse(GOOD, "p.toml", ["src.count=7", "sink.workers=2"])
    assert spec.nodes["src"].config.count == 7
    assert spec.nodes["sink"].config.workers == 2
    with pytest.raises(ConfigError, match="input should be a valid integer, got string 'seven'"):
        config.parse(GOOD, "p.toml", ["src.count=seven"])
    with pytest.raises(ConfigError, match=r"--set nope\.count=1: no node 'nope'"):
        config.parse(GOOD, "p.toml", ["nope.count=1"])
    with pytest.raises(ConfigError, match=r"--set expects NODE\.KEY=VALUE"):
        config.parse(GOOD, "p.toml", ["count"])


@pytest.mark.parametrize(
    "override",
    ["mqt.password=S3cr3t-99", "src.pasword=S3cr3t-99", "src.passwrd=S3cr3t-99",
     "hok.headers={Authorization='Bearer S3cr3t-99'}", "src.api_kee=S3cr3t-99",
     "src.Token=S3cr3t-99", "src.uri=rtsp://admin:S3cr3t-99@cam/s x"],
)  # fmt: skip
def test_a_set_that_is_wrong_never_shows_a_secret_whatever_the_typo(
    override: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each case on its own: the secrets an earlier case registered would mask this one's.
    monkeypatch.setattr(urls, "_secrets", set())
    with pytest.raises(ConfigError) as refused:
        config.parse(GOOD, "p.toml", [override])
    assert "S3cr3t-99" not in str(refused.value) and "***" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_set_that_is_wrong_is_shown_on_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(urls, "_secrets", set())
    with pytest.raises(ConfigError) as refused:
        config.parse(GOOD, "p.toml", ["src.count.x=Plain-7\n"])
    assert str(refused.value) == "p.toml: --set src.count.x=Plain-7\\n: 'count' is not a table"


def test_a_set_that_names_no_secret_shows_its_value() -> None:
    with pytest.raises(ConfigError, match=r"--set nope\.count=17: no node 'nope'"):
        config.parse(GOOD, "p.toml", ["nope.count=17"])
    with pytest.raises(ConfigError, match=r"--set src\.cuont=17: .*unknown key"):
        config.parse(GOOD, "p.toml", ["src.cuont=17"])
    for near_a_secret in ("path=out/x.mp4", "threads=3", "batch=2"):  # a letter from one
        with pytest.raises(ConfigError, match=f"--set src.{near_a_secret}: "):
            config.parse(GOOD, "p.toml", [f"src.{near_a_secret}"])


def test_the_serve_table_is_checked_and_set_like_pipeline() -> None:
    text = GOOD + '\n[serve]\ntemplate = "src"\n'
    spec = config.parse(text, "p.toml", ["serve.preview_fps=2"])
    assert (spec.serve.template, spec.serve.preview_fps, spec.serve.preview_width) == (
        "src",
        2,
        640,
    )
    with pytest.raises(ConfigError, match=r"key 'serve.preview_width': input should be"):
        config.parse(GOOD, "p.toml", ["serve.preview_width=9"])
    with pytest.raises(ConfigError, match=r"key 'serve.tempalte': unknown key.*'template'"):
        config.parse(GOOD + '\n[serve]\ntempalte = "src"\n', "p.toml")


def test_env_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    text = GOOD.replace('type = "test-collect"', 'type = "test-collect"\nfail_at = 1') + (
        '\n[pipeline]\nname = "${RUN_NAME:-fallback}-${RUN_SUFFIX}"\n'
    )
    monkeypatch.setenv("RUN_SUFFIX", "x")
    monkeypatch.delenv("RUN_NAME", raising=False)
    assert config.parse(text, "p.toml").settings.name == "fallback-x"
    monkeypatch.setenv("RUN_NAME", "cams")
    assert config.parse(text, "p.toml").settings.name == "cams-x"
    monkeypatch.delenv("RUN_SUFFIX")
    with pytest.raises(ConfigError, match=r"\$\{RUN_SUFFIX\} is not set"):
        config.parse(text, "p.toml")


def test_queue_settings_and_live_default() -> None:
    text = GOOD + '\n[queues."src ! sink"]\nsize = 3\nleaky = "upstream"\n'
    (edge,) = parse(text).edges
    assert (edge.size, edge.leaky) == (3, Leaky.UPSTREAM)
    (edge,) = parse(GOOD).edges
    assert (edge.size, edge.leaky) == (8, Leaky.NO), "file sources block by default"
    (edge,) = parse(GOOD.replace("count = 3", "live = true")).edges
    assert edge.leaky is Leaky.DOWNSTREAM, "live sources drop the oldest by default"


def test_fan_out_and_fan_in_are_allowed() -> None:
    text = """\
links = ["a ! mid ! out1", "mid ! out2", "b ! mid"]
[nodes.a]
type = "test-count"
[nodes.b]
type = "test-count"
[nodes.mid]
type = "test-collect"
[nodes.out1]
type = "test-collect"
[nodes.out2]
type = "test-collect"
"""
    built = parse(text)
    assert sorted(built.successors("mid")) == ["out1", "out2"]
    assert sorted(edge.src for edge in built.edges if edge.dst == "mid") == ["a", "b"]
    assert built.order.index("mid") > max(built.order.index("a"), built.order.index("b"))


def test_cli_config_error_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("count = 3", "cuont = 3"))
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: {bad}:5: node 'src' key 'cuont': unknown key (did you mean 'count'?); "
        "valid keys: count, delay_s, live"
    ], err
    assert main([str(tmp_path / "missing.toml")]) == 2
    assert "config file not found" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted((REPO / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_is_valid(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAPIPE_RTSP_URL", "rtsp://127.0.0.1:8554/stream")
    built = graph.build(config.load(path))
    assert built.order, f"{path} has no nodes"


def test_the_camera_config_names_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAPIPE_RTSP_URL", raising=False)
    with pytest.raises(ConfigError) as raised:
        config.load(REPO / "configs" / "rtsp.toml")
    assert str(raised.value).endswith(
        "node 'cam' key 'uri': environment variable ${VAPIPE_RTSP_URL} is not set: set it, "
        "or give the value with --set cam.uri=..."
    )


def test_nested_tables_are_checked_with_their_own_keys() -> None:
    text = """\
links = ["cam ! sink"]
[nodes.cam]
type = "source"
uri = "rtsp://cam/x"
[nodes.cam.reconnect]
max_atempts = 3
[nodes.sink]
type = "test-collect"
"""
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert str(caught.value) == (
        "p.toml:6: node 'cam' key 'reconnect.max_atempts': unknown key (did you mean "
        "'max_attempts'?); valid keys: initial_s, max_s, max_attempts, jitter"
    )


def test_a_links_own_queue_size_beats_the_pipelines() -> None:
    built = parse(
        'links = ["cam ! pre ! det"]\n[pipeline]\nqueue_size = 8\n'
        '[nodes.cam]\ntype = "source"\nuri = "x.mp4"\n[nodes.pre]\ntype = "preprocess"\n'
        '[nodes.det]\ntype = "infer"\nmodel = "m.onnx"\n[queues."cam ! pre"]\nsize = 3\n'
    )
    sizes = {edge.name: edge.size for edge in built.edges}
    assert sizes == {"cam ! pre": 3, "pre ! det": 8}


def test_set_paths_reach_the_table_they_name() -> None:
    from vapipe.pipeline.overrides import apply_override

    raw: dict = {"nodes": {"det": {"type": "infer", "backend": "torch"}, "cam": {"uri": "x"}}}
    apply_override(raw, "pipeline.shards=2", "f")
    apply_override(raw, "pipeline.shard_resources.num_gpus=0.25", "f")
    apply_override(raw, "serve.template=cam", "f")
    assert raw["pipeline"] == {"shards": 2, "shard_resources": {"num_gpus": 0.25}}
    assert raw["serve"] == {"template": "cam"}
    with pytest.raises(ConfigError, match=r"^f: \[pipeline\.shards\] is not a table$"):
        apply_override(raw, "pipeline.shards.x=1", "f")
    # backend = "torch" is shorthand for a table: a key under it keeps the type.
    apply_override(raw, "det.backend.device=cuda", "f")
    assert raw["nodes"]["det"]["backend"] == {"type": "torch", "device": "cuda"}
    # NODE.TABLE.type=X starts that table afresh: the other type's keys do not carry over.
    apply_override(raw, "det.backend.type=onnxruntime", "f")
    assert raw["nodes"]["det"]["backend"] == {"type": "onnxruntime"}
    apply_override(raw, "cam.reconnect.max_s=3", "f")
    assert raw["nodes"]["cam"]["reconnect"] == {"max_s": 3}
    apply_override(raw, "cam.loop=true", "f")
    with pytest.raises(ConfigError, match=r"^f: --set cam\.loop\.x=1: 'loop' is not a table$"):
        apply_override(raw, "cam.loop.x=1", "f")
    apply_override(raw, "cam.uri=a bare word", "f")
    assert raw["nodes"]["cam"]["loop"] is True and raw["nodes"]["cam"]["uri"] == "a bare word"
    # A node that happens to be named like a table: the node wins.
    named = {"nodes": {"pipeline": {"type": "x"}}}
    apply_override(named, "pipeline.count=3", "f")
    assert named == {"nodes": {"pipeline": {"type": "x", "count": 3}}}


@pytest.mark.parametrize("bad", ["cam", "cam.uri", ".uri=x", "cam.=x", "=x", "cam..uri=x"])
def test_a_set_that_is_not_node_key_value_says_so(bad: str) -> None:
    from vapipe.pipeline.overrides import apply_override

    with pytest.raises(ConfigError, match=r"^f: --set expects NODE\.KEY=VALUE, got '"):
        apply_override({"nodes": {"cam": {}}}, bad, "f")


def test_an_unknown_node_is_named_with_a_suggestion_and_a_long_set_is_cut() -> None:
    from vapipe.pipeline.overrides import apply_override, shown

    raw: dict = {"nodes": {"cam": {}, "det": {}}}
    with pytest.raises(ConfigError) as caught:
        apply_override(raw, "cma.uri=x", "f")
    assert str(caught.value) == (
        "f: --set cma.uri=x: no node 'cma' (did you mean 'cam'?); nodes: cam, det"
    )
    assert shown("c" * 80) == "c" * 80
    assert shown("c" * 81) == "c" * 77 + "..."
    assert shown("nope.x=" + "v" * 100, limit=20) == "nope.x=vvvvvvvvvv..."


SOURCE = (
    'links = ["cam ! events"]\n[nodes.cam]\ntype = "source"\nuri = "x.mp4"\n{keys}\n'
    '[nodes.events]\ntype = "events"\n'
)


def test_a_misspelt_key_is_named_before_a_bad_value_beside_it() -> None:
    text = SOURCE.format(keys='loop = "maybe"\nrelatime = true')
    with pytest.raises(ConfigError, match=r"key 'relatime': unknown key \(did you mean 'realtime'"):
        parse(text)


def test_of_two_bad_values_one_is_named_the_first_the_config_class_checks() -> None:
    with pytest.raises(ConfigError, match=r"node 'cam' key 'realtime': "):
        parse(SOURCE.format(keys='loop = "maybe"\nrealtime = "perhaps"'))


@pytest.mark.parametrize(
    ("make", "said"),
    [
        pytest.param(lambda p: os.mkfifo(p), "it is a device, FIFO or socket", id="fifo"),
        pytest.param(lambda p: p.mkdir(), "it is a folder", id="folder"),
        pytest.param(
            lambda p: (p.touch(), os.truncate(p, 4 * 2**30)),
            "4,294,967,296 bytes, over the 4 MiB",
            id="sparse-4-GB",
        ),
        pytest.param(
            lambda p: p.write_bytes(b"#" * (4 * 2**20 + 1)), "4,194,305 bytes", id="just-over"
        ),
    ],
)
def test_only_a_regular_file_of_at_most_4_mib_is_read_as_a_config(
    tmp_path: Path, make: Any, said: str
) -> None:
    from vapipe.pipeline.config import load

    path = tmp_path / "pipeline.toml"
    make(path)
    with pytest.raises(ConfigError) as caught:  # a FIFO with no writer would block an open
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: not a config file: ") and said in message, message
    assert caught.value.file == str(path)


def test_a_config_of_exactly_4_mib_is_read(tmp_path: Path) -> None:
    from vapipe.pipeline.config import MAX_CONFIG_BYTES, read_config_text

    path = tmp_path / "big.toml"
    body = 'links = ["a ! b"]\n'
    path.write_text(body + "#" * (MAX_CONFIG_BYTES - len(body) - 1) + "\n")
    assert read_config_text(str(path)).startswith(body)


def test_a_character_device_as_config_is_exit_2_at_once() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "vapipe", "/dev/zero"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stderr == "error: /dev/zero: not a config file: it is a device, FIFO or socket\n"
