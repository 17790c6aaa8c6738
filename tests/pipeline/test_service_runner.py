"""The service's runner with stub stages: a source added while the graph runs is linked as its
template is, with its own kind's queue policy unless the config set one for that link."""

from __future__ import annotations

from typing import Any

import pytest

from tests.pipeline import stubs
from vapipe.pipeline import config, graph
from vapipe.pipeline.config import NodeSpec
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.service_runner import ServiceRunner

TEMPLATE = """\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 1000000
delay_s = 0.01
[nodes.sink]
type = "test-collect"
"""


def added_link(text: str, live: bool) -> tuple[Leaky, int]:
    runner = ServiceRunner(graph.build(config.parse(text, "t.toml")))
    seen: dict[str, Any] = {}

    def add(running: Any) -> None:
        cfg = stubs.CountingSource.Config(count=5, live=live)
        node = runner.add_source("cam", NodeSpec("cam", stubs.CountingSource, cfg, None), "src")
        seen["link"] = node.outputs[0]
        runner.request_stop("test")

    runner.run(handle_signals=False, on_started=add)
    link = seen["link"]
    return link.leaky, link.size


@pytest.mark.parametrize(("live", "leaky"), [(True, Leaky.DOWNSTREAM), (False, Leaky.NO)])
def test_an_added_source_gets_its_own_kind_s_link_policy(live: bool, leaky: Leaky) -> None:
    assert added_link(TEMPLATE, live) == (leaky, 8)


def test_a_policy_the_config_set_for_the_template_s_link_is_kept() -> None:
    text = TEMPLATE + '[queues."src ! sink"]\nsize = 3\nleaky = "upstream"\n'
    assert added_link(text, True) == (Leaky.UPSTREAM, 3)
    sized = TEMPLATE + '[queues."src ! sink"]\nsize = 3\n'
    assert added_link(sized, True) == (Leaky.DOWNSTREAM, 3)
