"""What the graph checks before anything opens: a node that needs another kind before it
(analytics after track) or reads another node's results (classify on a detect_inside) has it
on every path from every source; the error names the source of a path without it."""

from __future__ import annotations

import re

import pytest

from tests.pipeline import stubs  # noqa: F401  (registers test-* stages)
from vapipe.pipeline import config, graph
from vapipe.pipeline.errors import ConfigError

LINE = 'lines = [{ name = "door", start = [0, 0], end = [1, 1] }]'


def built(links: str, *tables: str) -> list[str]:
    sources = "".join(f'[nodes.{name}]\ntype = "test-count"\n' for name in ("cam", "cam2"))
    text = f"links = [{links}]\n{sources}" + "".join(tables)
    spec = config.parse(text, "g.toml")
    return graph.build(spec).order


TRACK = '[nodes.track]\ntype = "track"\n'
ANALYTICS = f'[nodes.an]\ntype = "analytics"\n{LINE}\n'
EVENTS = '[nodes.ev]\ntype = "events"\npath = "-"\n'


def refused(links: str, *tables: str) -> str:
    """The error, without the file and line it starts with."""
    with pytest.raises(ConfigError) as caught:
        built(links, *tables)
    return re.sub(r"^g\.toml(:\d+)?: ", "", str(caught.value))


def test_a_node_needing_a_tracker_has_one_on_every_path_and_the_bare_path_is_named() -> None:
    assert built('"cam ! track ! an ! ev", "cam2 ! track"', TRACK, ANALYTICS, EVENTS)[-1] == "ev"
    said = refused('"cam ! track ! an ! ev", "cam2 ! an"', EVENTS, TRACK, ANALYTICS)
    assert said == (
        "node 'an': needs a 'track' node before it, on the way from source 'cam2' "
        '(e.g. links = ["... ! nms ! track ! an"])'
    )
    # further back: the path without a tracker is two hops long (cam2 ! an2 ! an)
    second = f'[nodes.an2]\ntype = "analytics"\n{LINE}\n'
    said = refused('"cam ! track ! an", "cam2 ! an2 ! an"', TRACK, ANALYTICS, second)
    assert said.startswith("node 'an': needs a 'track' node before it, on the way from source "
                           "'cam2'")  # fmt: skip
    # a tracker on one branch of a fork only
    fork = f'[nodes.an3]\ntype = "analytics"\n{LINE}\n'
    said = refused('"cam ! track ! an3", "cam ! ev ! an3", "cam2 ! track"', TRACK, fork,
                   '[nodes.ev]\ntype = "nms"\n')  # fmt: skip
    assert said.startswith("node 'an3': needs a 'track' node before it, on the way from "
                           "source 'cam'")  # fmt: skip


def test_a_node_reading_another_s_results_has_it_on_every_path() -> None:
    faces = '[nodes.faces]\ntype = "detect_inside"\nmodel = "yunet"\n'
    names = '[nodes.names]\ntype = "classify"\nmodel = "resnet18"\non = "faces"\n'
    order = built('"cam ! track ! faces ! names", "cam2 ! track"', TRACK, faces, names)
    assert order.index("faces") < order.index("names")
    said = refused('"cam ! track ! faces ! names", "cam2 ! track ! names"', TRACK, faces, names)
    assert said == (
        "node 'names': reads the results of node 'faces', which is not on its way from "
        "source 'cam' (link ... ! faces ! ... ! names)"
    )
    gone = names.replace('on = "faces"', 'on = "nobody"')
    said = refused('"cam ! track ! faces ! names", "cam2 ! track"', TRACK, faces, gone)
    assert said == "node 'names': reads the results of node 'nobody', which does not exist"


def test_every_node_is_checked_not_only_those_before_the_first_without_needs() -> None:
    # the events node has no needs and comes first in the file: the analytics after it is
    # still checked
    said = refused('"cam ! ev", "cam ! an", "cam2 ! ev"', EVENTS, ANALYTICS)
    assert "node 'an': needs a 'track' node before it, on the way from source 'cam'" in said
