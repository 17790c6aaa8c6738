"""VA-API decoding and MIGraphX never share a process (issue 50): the graph is refused before
anything loads, in one line naming the source's hwaccel and the model's node, wherever the
MIGraphX session is (an infer node, asked for by name or picked by ``auto``; a table such as
``track.appearance``). No AMD GPU here: onnxruntime's offer and PyAV's device types are
stood in for."""

from __future__ import annotations

import av.codec.hwaccel
import onnxruntime
import pytest

from vapipe.pipeline import config as config_module
from vapipe.pipeline import graph as graph_module
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.prepare import check_native_stacks, native_stacks

BASE = """
links = ["cam ! pre ! det ! nms ! track ! events"]
[nodes.cam]
type = "source"
uri = "x.mp4"
{hwaccel}
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
{backend}
[nodes.nms]
type = "nms"
[nodes.track]
type = "track"
{track}
[nodes.events]
type = "events"
"""


@pytest.fixture(autouse=True)
def vaapi_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """A PyAV built with VA-API (the PyPI wheels have none)."""
    monkeypatch.setattr(av.codec.hwaccel, "hwdevices_available", lambda: ["vaapi", "cuda"])


def offer_migraphx(monkeypatch: pytest.MonkeyPatch, offered: bool) -> None:
    providers = ["MIGraphXExecutionProvider"] * offered + ["CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: providers)


def check(hwaccel: str = "", backend: str = "", track: str = "") -> None:
    text = BASE.format(hwaccel=hwaccel, backend=backend, track=track)
    check_native_stacks(graph_module.build(config_module.parse(text, file="box.toml")))


VAAPI = 'hwaccel = "vaapi"'
MIGRAPHX = 'backend = { type = "onnxruntime", providers = ["migraphx", "cpu"] }'


def test_vaapi_beside_migraphx_by_name_is_one_line_naming_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offer_migraphx(monkeypatch, False)  # asked for by name: refused wherever it would run
    with pytest.raises(ConfigError) as caught:
        check(VAAPI, MIGRAPHX)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "box.toml:6: node 'cam' key 'hwaccel': vaapi here and migraphx in node 'det'"
    )
    assert "remove hwaccel" in message and 'providers = "cpu"' in message
    assert "nixpkgs#499005" in message


@pytest.mark.parametrize("backend", ["", 'backend = { type = "onnxruntime" }'])
def test_auto_is_refused_only_where_it_would_pick_migraphx(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    offer_migraphx(monkeypatch, False)
    check(VAAPI, backend)  # onnxruntime offers no MIGraphX: nothing to clash with
    offer_migraphx(monkeypatch, True)
    with pytest.raises(ConfigError, match="migraphx in node 'det'"):
        check(VAAPI, backend)


def test_a_model_in_a_table_counts_too(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_migraphx(monkeypatch, False)
    appearance = "[nodes.track.appearance]\n" + MIGRAPHX
    with pytest.raises(ConfigError, match="migraphx in node 'track'"):
        check(VAAPI, 'backend = { type = "onnxruntime", providers = "cpu" }', appearance)


def test_either_alone_or_another_pair_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_migraphx(monkeypatch, True)
    check("", MIGRAPHX)  # MIGraphX with software decoding
    check('hwaccel = "cuda"', MIGRAPHX)
    check(VAAPI, 'backend = { type = "onnxruntime", providers = ["rocm", "cpu"] }')
    check(VAAPI, 'backend = { type = "torch" }')


def test_each_config_declares_its_own_stacks(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_migraphx(monkeypatch, False)
    text = BASE.format(hwaccel=VAAPI, backend=MIGRAPHX, track="")
    graph = graph_module.build(config_module.parse(text))
    found = {name: native_stacks(node.config) for name, node in graph.nodes.items()}
    assert found == {"cam": {"vaapi"}, "pre": set(), "det": {"migraphx"}, "nms": set(),
                     "track": set(), "events": set()}  # fmt: skip


def test_the_first_of_each_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    offer_migraphx(monkeypatch, False)
    text = BASE.format(hwaccel=VAAPI, backend=MIGRAPHX, track="")
    text = text.replace('links = ["cam ! pre', 'links = ["cam2 ! pre", "cam ! pre')
    text += '[nodes.cam2]\ntype = "source"\nuri = "y.mp4"\nhwaccel = "vaapi"\n'
    text += "[nodes.track.appearance]\n" + MIGRAPHX
    with pytest.raises(ConfigError, match=r"node 'cam' key 'hwaccel': .* in node 'det' "):
        check_native_stacks(graph_module.build(config_module.parse(text)))
