"""The service's runner with stub stages: a source added while the graph runs is linked as its
template is, with its own kind's queue policy unless the config set one for that link."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.e2e.helpers import wait_for
from tests.pipeline import stubs
from vapipe.pipeline import config, graph
from vapipe.pipeline.config import NodeSpec
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.frame import Message
from vapipe.pipeline.metrics import Histogram
from vapipe.pipeline.queues import Leaky
from vapipe.pipeline.stage import StageContext
from vapipe.serve.runner import ServiceRunner, open_within

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


LOGGED = TEMPLATE.replace('type = "test-collect"', 'type = "test-log"')


def serve(scenario: Callable[[ServiceRunner], None], text: str = LOGGED) -> ServiceRunner:
    """Run the service with ``scenario(runner)`` in a thread of its own once it started; the
    run stops when the scenario returns (or fails: its error is raised here)."""
    runner = ServiceRunner(graph.build(config.parse(text, "t.toml")))
    failed: list[BaseException] = []

    def started(running: Any) -> None:
        def body() -> None:
            try:
                scenario(runner)
            except BaseException as exc:  # raised in the test's thread below
                failed.append(exc)
            finally:
                runner.request_stop("test")

        threading.Thread(target=body, daemon=True).start()

    runner.run(handle_signals=False, on_started=started)
    if failed:
        raise failed[0]
    return runner


def counting(count: int, delay_s: float = 0.0) -> NodeSpec:
    cfg = stubs.CountingSource.Config(count=count, delay_s=delay_s)
    return NodeSpec("cam", stubs.CountingSource, cfg, None)


def sink_of(runner: ServiceRunner) -> stubs.Log:
    return cast(stubs.Log, runner.nodes()["sink"].stage)


def test_a_removed_source_drains_behind_its_last_frame_and_leaves_nothing() -> None:
    def scenario(runner: ServiceRunner) -> None:
        node = runner.add_source("cam", counting(1_000_000, 0.005), "src")
        assert sorted(runner.source_ids()) == ["cam", "src"]
        assert [thread.daemon for thread in node.threads] == [True]  # never holds the exit
        sink = sink_of(runner)
        wait_for(lambda: len(sink.of("cam")) >= 5, 30, "frames of the added source")
        # per-source series the removal must take away
        sink_node = runner.nodes()["sink"]
        sink_node.metrics.latency["cam"] = Histogram()
        # a link that stays (downstream of several sources, as 'pre ! det' is) counted drops
        # of the removed source's frames
        shared = next(li for li in sink_node.inbox.links if li.name == "src ! sink")
        shared.stats.dropped_by_source["cam"] += 2
        shared.stats.dropped_by_source["src"] += 1
        assert runner.remove_source("cam", "src", timeout_s=30) is True
        logged = sink.of("cam")
        assert logged[-1] == ("message", "cam", "source_removed"), logged[-3:]
        assert [kind for kind, _, _ in logged[:-1]] == ["item"] * (len(logged) - 1)
        assert [seq for _, _, seq in logged[:-1]] == list(range(len(logged) - 1))
        assert node.finished.is_set() and "cam" not in runner.nodes()
        assert runner.source_ids() == ["src"]
        assert "cam" not in sink_node.metrics.latency
        assert "cam" not in shared.stats.dropped_by_source
        assert shared.stats.dropped_by_source["src"] == 1  # the others' are kept
        count = len(sink.of("src"))
        wait_for(lambda: len(sink.of("src")) > count, 30, "the template's source going on")

    serve(scenario)


def test_a_source_that_ended_keeps_its_links_until_it_is_removed() -> None:
    def scenario(runner: ServiceRunner) -> None:
        node = runner.add_source("cam", counting(3), "src")
        sink = sink_of(runner)
        node.finished.wait(30)
        wait_for(lambda: len(sink.of("cam")) == 3, 30, "its three frames")
        # ended by itself: no source_removed and no end of its link yet
        assert all(kind == "item" for kind, _, _ in sink.of("cam"))
        assert "cam" in runner.source_ids()
        assert runner.remove_source("cam", "src", timeout_s=30) is True
        assert sink.of("cam")[-1] == ("message", "cam", "source_removed")
        assert "cam" not in runner.nodes()

    serve(scenario)


def test_a_source_ended_by_itself_is_ended_by_the_stop() -> None:
    seen: dict[str, Any] = {}

    def scenario(runner: ServiceRunner) -> None:
        seen["node"] = node = runner.add_source("cam", counting(2), "src")
        node.finished.wait(30)
        wait_for(lambda: len(sink_of(runner).of("cam")) == 2, 30, "its frames")

    runner = serve(scenario)  # returns only once every link ended: the parked one too
    assert sink_of(runner).of("cam") == [("item", "cam", 0), ("item", "cam", 1)]


def test_a_failed_source_is_said_and_the_service_goes_on(caplog) -> None:
    def scenario(runner: ServiceRunner) -> None:
        cfg = stubs.FailingSource.Config(fail_after=2)
        spec = NodeSpec("bad", stubs.FailingSource, cfg, None)
        node = runner.add_source("bad", spec, "src")
        wait_for(lambda: node.error is not None, 30, "the failure")
        assert node.error == "decoder broke"
        sink = sink_of(runner)
        count = len(sink.of("src"))
        wait_for(lambda: len(sink.of("src")) > count + 3, 30, "the others going on")
        assert runner.remove_source("bad", "src", timeout_s=30) is True

    serve(scenario)
    assert "bad: decoder broke; the stream stays down until it is removed" in caplog.text


def test_a_source_cannot_be_added_to_a_stopping_service() -> None:
    runner = ServiceRunner(graph.build(config.parse(LOGGED, "t.toml")))
    runner.request_stop("test")
    with pytest.raises(RuntimeError, match="stopping"):
        runner.add_source("cam", counting(3), "src")


def test_a_removal_that_does_not_drain_in_time_says_so() -> None:
    slow = LOGGED.replace('type = "test-log"', 'type = "test-collect"\ndelay_s = 0.2')

    def scenario(runner: ServiceRunner) -> None:
        runner.add_source("cam", counting(1_000_000), "src")
        sink = cast(stubs.Collect, runner.nodes()["sink"].stage)
        wait_for(lambda: any(item.source_id == "cam" for item in sink.items), 30, "a frame of cam")
        # the sink takes 0.2 s a frame and a full queue is ahead of the removal message
        assert runner.remove_source("cam", "src", timeout_s=0.05) is False

    serve(scenario, slow)


class Opening:
    """A source (a SourceStatus) whose open waits until released."""

    name = source_id = "cam"
    reconnects = 0
    last_error = None

    def __init__(self, uri: str, fail: BaseException | None = None) -> None:
        self.config = SimpleNamespace(uri=uri)
        self.display_uri = uri  # as given: open_within masks what it shows
        self.release = threading.Event()
        self.closed = threading.Event()
        self.fail = fail

    def open(self, context: Any) -> None:
        self.release.wait(30)
        if self.fail is not None:
            raise self.fail

    def close(self) -> None:
        self.closed.set()


def test_an_open_that_does_not_answer_is_abandoned_and_closed_if_it_comes_back() -> None:
    stage = Opening("rtsp://admin:hunter2@cam.local/s")
    with pytest.raises(PipelineError) as caught:
        open_within(stage, StageContext(name="cam"), 0.1)
    message = str(caught.value)
    assert "no answer within 0.1 s (open_timeout_s)" in message
    assert "hunter2" not in message and "cam.local" in message
    assert not stage.closed.is_set()
    stage.release.set()
    assert stage.closed.wait(10), "the abandoned open's result was not closed"


def test_an_open_that_answers_in_time_is_kept_and_its_error_raised() -> None:
    stage = Opening("file.mp4")
    stage.release.set()
    open_within(stage, StageContext(name="cam"), 10)
    assert not stage.closed.is_set()
    failing = Opening("file.mp4", fail=ValueError("no such file"))
    failing.release.set()
    with pytest.raises(ValueError, match="no such file"):
        open_within(failing, StageContext(name="cam"), 10)
    assert not failing.closed.is_set()  # nothing was opened


def test_an_open_that_fails_after_it_was_abandoned_closes_nothing() -> None:
    stage = Opening("file.mp4", fail=ValueError("late failure"))
    with pytest.raises(PipelineError):
        open_within(stage, StageContext(name="cam"), 0.05)
    opener = next(t for t in threading.enumerate() if t.name == "open cam")
    assert opener.daemon, "a hung open must not hold the process at its exit"
    stage.release.set()
    opener.join(30)  # the abandoned open came back with its error
    assert not opener.is_alive() and not stage.closed.is_set()


class Recording(stubs.CountingSource):
    """A source that keeps the context it was opened with."""

    contexts: list[Any] = []

    def open(self, context: Any) -> None:
        super().open(context)
        Recording.contexts.append(context)


def test_an_added_source_is_opened_with_the_run_s_sources_and_a_default_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from vapipe.serve import runner as service_runner

    timeouts: list[float] = []
    real = service_runner.open_within
    monkeypatch.setattr(
        service_runner, "open_within",
        lambda stage, context, timeout_s: (timeouts.append(timeout_s), real(stage, context, 5))[1],
    )  # fmt: skip
    Recording.contexts = []

    def scenario(runner: ServiceRunner) -> None:
        cfg = stubs.CountingSource.Config(count=1_000_000, delay_s=0.01)
        started = time.monotonic()
        node = runner.add_source("cam", NodeSpec("cam", Recording, cfg, None), "src")
        took = time.monotonic() - started
        assert 0 <= node.open_s <= took
        assert [link.name for link in node.outputs] == ["cam ! sink"]
        runner.add_source("cam2", NodeSpec("cam2", Recording, cfg, None), "src", 3.0)
        assert runner.remove_source("cam", "src", timeout_s=30)
        assert runner.remove_source("cam2", "src", timeout_s=30)
        inbox = runner.nodes()["sink"].inbox
        assert [link.name for link in inbox.links] == ["src ! sink"]  # theirs are retired

    serve(scenario)
    assert timeouts == [10.0, 3.0]  # OPEN_TIMEOUT_S unless the source has its own
    assert [c.source_ids for c in Recording.contexts] == [["src", "cam"], ["src", "cam", "cam2"]]
    assert [c.sources_in_run for c in Recording.contexts] == [2, 3]


def test_an_added_source_is_linked_as_its_template_is_and_nowhere_else() -> None:
    # Node names on either side of the template's in sort order: a link is made for the
    # template's own edges only.
    chain = """\
links = ["src ! alpha ! work ! sink"]
[nodes.src]
type = "test-count"
count = 1000000
delay_s = 0.01
[nodes.alpha]
type = "test-collect"
[nodes.work]
type = "test-collect"
[nodes.sink]
type = "test-log"
"""

    def scenario(runner: ServiceRunner) -> None:
        node = runner.add_source("cam", counting(1_000_000, 0.01), "src")
        assert [link.name for link in node.outputs] == ["cam ! alpha"]
        assert runner.remove_source("cam", "src", timeout_s=30)

    serve(scenario, chain)


def test_a_service_whose_streams_were_all_removed_takes_the_next_one() -> None:
    def scenario(runner: ServiceRunner) -> None:
        assert runner.remove_source("src", "src", timeout_s=30)  # the template's own
        runner.add_source("cam", counting(1_000_000, 0.005), "src")
        wait_for(lambda: len(sink_of(runner).of("cam")) >= 3, 30, "the next stream's frames")
        assert runner.remove_source("cam", "src", timeout_s=30)

    serve(scenario)


def test_source_removed_names_the_source_s_uri() -> None:
    def scenario(runner: ServiceRunner) -> None:
        runner.add_source("cam", counting(2), "src")
        assert runner.remove_source("cam", "src", timeout_s=30)

    runner = serve(scenario)
    removed = [m for m in sink_of(runner).messages if m.kind == "source_removed"]
    assert [m.data for m in removed] == [{"uri": ""}]  # the stub has no URI


DRAINING = """\
links = ["src ! sink"]
[nodes.src]
type = "test-count"
count = 1
[nodes.sink]
type = "test-collect"
delay_s = 0.2
"""


def test_a_removal_waits_for_the_drain_until_its_timeout_and_no_longer() -> None:
    # The source ends at once (its 4 frames fit in the queue); the sink takes 0.8 s to reach
    # its source_removed.
    def scenario(runner: ServiceRunner) -> None:
        runner.add_source("cam", counting(4), "src")
        assert runner.remove_source("cam", "src", timeout_s=0.3) is False
        runner.add_source("cam2", counting(4), "src")
        assert runner.remove_source("cam2", "src", timeout_s=30) is True

    serve(scenario, DRAINING)


def test_only_source_removed_from_every_last_stage_is_a_drain_receipt() -> None:
    runner = ServiceRunner(graph.build(config.parse(TEMPLATE, "t.toml")))
    drained = threading.Event()
    runner._receipts["cam"] = ({"sink", "video"}, drained)

    def tell(leaf: str, kind: str, source: str = "cam") -> None:
        runner._received(leaf, Message(source_id=source, kind=kind, time=0.0))

    for kind in ("source_down", "source_up", "eos"):  # kinds on either side of the name
        tell("sink", kind)
        tell("video", kind)
    tell("sink", "source_removed", source="other")
    assert not drained.is_set()
    tell("sink", "source_removed")
    assert not drained.is_set(), "the video sink has not finished yet"
    tell("video", "source_removed")
    assert drained.is_set()
