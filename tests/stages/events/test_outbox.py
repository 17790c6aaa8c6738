"""The outbox every network event sink queues into: bounded, never blocking the video path,
the oldest dropped and counted; what was taken and not delivered goes back in order; the
sinks' stats count drops and what is left whether the outbox is empty or not."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from vapipe.stages.events.outbox import Outbox, Reachability
from vapipe.stages.events.records import EVENT_TYPES
from vapipe.stages.sinks.mqtt import MqttSink
from vapipe.stages.sinks.outbox_sink import OutboxConfig, OutboxSink
from vapipe.stages.sinks.webhook import WebhookSink


def test_take_returns_up_to_most_in_order_and_leaves_the_rest() -> None:
    outbox = Outbox(10)
    for item in "abcde":
        outbox.put(item)
    assert outbox.take(2, wait_s=0) == ["a", "b"]
    assert len(outbox) == 3 and outbox.high_water == 5 and outbox.dropped == 0
    assert outbox.take(5, wait_s=0) == ["c", "d", "e"]
    assert outbox.take(5, wait_s=0) == [] and len(outbox) == 0


def test_a_full_outbox_keeps_exactly_its_size() -> None:
    outbox = Outbox(2)
    outbox.put(1)
    outbox.put(2)
    assert outbox.dropped == 0, "dropped before it was full"
    outbox.put(3)
    assert outbox.dropped == 1 and len(outbox) == 2 and outbox.take(9, wait_s=0) == [2, 3]


def test_give_back_returns_items_to_the_front_in_order() -> None:
    outbox = Outbox(5)
    outbox.put("d")
    outbox.give_back(["a", "b", "c"])
    assert outbox.dropped == 0
    assert outbox.take(9, wait_s=0) == ["a", "b", "c", "d"]


def test_give_back_beyond_the_room_drops_the_oldest_given_and_counts_them() -> None:
    outbox = Outbox(3)
    outbox.put("d")
    outbox.give_back(["a", "b", "c"])  # room for two: "a" is the oldest
    assert outbox.dropped == 1
    assert outbox.take(9, wait_s=0) == ["b", "c", "d"]
    outbox.put("x")
    outbox.put("y")
    outbox.put("z")
    outbox.give_back(["p", "q"])  # no room at all
    assert outbox.dropped == 3 and outbox.take(9, wait_s=0) == ["x", "y", "z"]


def test_take_waits_for_the_first_item_and_fills_until_most() -> None:
    outbox = Outbox(10)
    got: list[list[str]] = []
    taker = threading.Thread(target=lambda: got.append(outbox.take(3, wait_s=60, fill_s=60)))
    taker.start()
    for item in "xyz":
        outbox.put(item)
    taker.join(30)
    assert not taker.is_alive() and got == [["x", "y", "z"]]


def test_close_wakes_a_waiting_take_with_nothing() -> None:
    outbox = Outbox(10)
    got: list[list[str]] = []
    taker = threading.Thread(target=lambda: got.append(outbox.take(3, wait_s=60, fill_s=60)))
    taker.start()
    while not taker.is_alive():
        time.sleep(0.01)
    outbox.close()
    taker.join(30)
    assert not taker.is_alive() and got == [[]] and outbox.closed


def test_a_closed_outbox_hands_over_what_it_holds_without_waiting_to_fill() -> None:
    outbox = Outbox(10)
    outbox.put("a")
    outbox.close()
    assert outbox.take(5, wait_s=60, fill_s=60) == ["a"]


def test_wait_empty_says_whether_it_emptied() -> None:
    outbox = Outbox(10)
    assert outbox.wait_empty(0) is True
    outbox.put("a")
    assert outbox.wait_empty(0.05) is False
    threading.Timer(0.05, lambda: outbox.take(1, wait_s=0)).start()
    assert outbox.wait_empty(30) is True


def test_a_second_outage_is_warned_again_and_counted(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    reach = Reachability("hook", "http://x", warn_after_s=5)
    with caplog.at_level(logging.INFO, logger="vapipe.stages.events.outbox"):
        for start in (100.0, 200.0):
            for step in range(7):
                now[0] = start + step
                reach.failing("refused", waiting=step)
            now[0] = start + 8
            reach.reachable()
        now[0] = 300.0
        reach.failing("refused", waiting=1)
        now[0] = 304.9
        reach.failing("refused", waiting=1)  # not yet warn_after_s
        reach.reachable()
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        said
        == [
            (logging.WARNING, "hook: http://x unreachable for 5 s (refused); 5 events waiting"),
            (logging.INFO, "hook: http://x reachable again after 8.0 s"),
        ]
        * 2
    )
    assert reach.outages == 2 and reach.down_since is None and not reach.warned


# (now, down since, reason, events waiting, seconds down): the second also early in the
# clock, where `now % since` would pass for `now - since` no more.
OUTAGES = [(50.0, 40.0, "timed out", 3, 10), (9.0, 2.0, "refused", 1, 7)]


@pytest.mark.parametrize(("now", "since", "reason", "waiting", "seconds"), OUTAGES)
def test_an_outage_counts_from_when_the_first_attempt_began(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
    now: float, since: float, reason: str, waiting: int, seconds: int,
) -> None:  # fmt: skip
    monkeypatch.setattr(time, "monotonic", lambda: now)
    reach = Reachability("mq", "broker", warn_after_s=5)
    with caplog.at_level(logging.INFO, logger="vapipe.stages.events.outbox"):
        reach.failing(reason, waiting=waiting, since=since)
        assert reach.down_since == since and reach.outages == 1
        reach.reachable()
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"mq: broker unreachable for {seconds} s ({reason}); {waiting} events waiting",
                    f"mq: broker reachable again after {seconds}.0 s"]  # fmt: skip


@pytest.mark.parametrize("sink_type", [WebhookSink, MqttSink])
def test_stats_count_drops_when_the_outbox_is_empty(sink_type: type[OutboxSink]) -> None:
    # An empty outbox is falsy (it has a length): its drops must still be counted.
    sink = object.__new__(sink_type)
    sink.config = SimpleNamespace(qos=1)  # type: ignore[assignment]  # what MQTT's reads
    sink.published = sink.acked = 0  # type: ignore[attr-defined]
    sink.outbox = Outbox(2)
    for item in range(5):
        sink.outbox.put(item)
    sink.outbox.take(9, wait_s=0)
    stats = sink.stats()
    assert stats["dropped"] == 3 and stats["undelivered"] == 0
    sink.outbox.put("left")
    assert sink.stats()["undelivered"] == 1


def test_event_types_filter_what_is_queued(caplog: pytest.LogCaptureFixture) -> None:
    sink = object.__new__(OutboxSink)
    with caplog.at_level(logging.WARNING):
        sink.config = OutboxConfig(event_types=["line_cross", "my_plugin_event"])
    assert "no built-in stage emits 'my_plugin_event'" in caplog.text
    assert "line_cross" not in caplog.text.split("known:")[0]
    sink.outbox = Outbox(10)
    for event in ("frame", "line_cross", "zone_enter", "my_plugin_event"):
        sink.accept({"event": event})
    assert [r["event"] for r in sink.outbox.take(9, wait_s=0)] == ["line_cross", "my_plugin_event"]
    sink.config = OutboxConfig()
    sink.accept({"event": "frame"})
    assert len(sink.outbox) == 1 and "zone_dwell" in EVENT_TYPES


def test_the_outbox_settings_keep_their_documented_defaults_and_bounds() -> None:
    config = OutboxConfig()
    assert (config.outbox_size, config.drain_s, config.event_types) == (10_000, 5.0, None)
    assert OutboxConfig(outbox_size=1, drain_s=0).outbox_size == 1
    assert OutboxConfig(outbox_size=10_000_000).outbox_size == 10_000_000
    for bad in ({"outbox_size": 0}, {"outbox_size": 10_000_001}, {"drain_s": -0.1}):
        with pytest.raises(ValidationError):
            OutboxConfig(**bad)


class SteppedClock:
    """Time that moves only when the outbox waits or sleeps; each wait recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(round(seconds, 6))
        self.now += seconds


class SteppedCondition:
    """The outbox's condition variable on a stepped clock: a wait lasts its whole timeout."""

    def __init__(self, clock: SteppedClock) -> None:
        self.clock = clock

    def __enter__(self) -> SteppedCondition:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def wait(self, timeout: float) -> bool:
        self.clock.sleep(timeout)
        return False

    def notify(self) -> None:
        pass

    def notify_all(self) -> None:
        pass


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> tuple[Outbox, SteppedClock]:
    from vapipe.stages.events import outbox as module

    clock = SteppedClock()
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=clock.monotonic,
                                                        sleep=clock.sleep))  # fmt: skip
    box = Outbox(10)
    box._ready = SteppedCondition(clock)  # type: ignore[assignment]
    return box, clock


def test_take_waits_for_a_first_item_only_when_none_is_there(stepped) -> None:
    box, clock = stepped
    assert box.take(3, wait_s=2.0) == [] and clock.waits == [2.0]
    box.put("a")
    assert box.take(1, wait_s=7.0) == ["a"] and clock.waits == [2.0], "waited with an item there"
    box.close()
    assert box.take(1, wait_s=7.0) == [] and clock.waits == [2.0], "waited on a closed outbox"


def test_take_fills_for_fill_s_then_hands_over_what_it_has(stepped) -> None:
    box, clock = stepped
    box.put("a")
    assert box.take(5, wait_s=0, fill_s=0.5) == ["a"]
    assert clock.waits == [0.5], "the fill wait is fill_s, once"
    for item in "bcdef":
        box.put(item)
    assert box.take(2, wait_s=0, fill_s=0.5) == ["b", "c"]
    assert clock.waits == [0.5], "waited to fill though more than enough was there"
    assert box.take(2, wait_s=0, fill_s=3.0) == ["d", "e"] and clock.waits == [0.5]


def test_wait_empty_gives_up_at_its_timeout(stepped) -> None:
    box, clock = stepped
    box.put("stuck")
    started = clock.now
    assert box.wait_empty(5.0) is False
    assert 5.0 <= clock.now - started < 5.0 + 0.021
    assert set(clock.waits) == {0.02}, "polls every 20 ms"


def test_give_back_with_little_room_counts_each_dropped(stepped) -> None:
    box, _ = stepped
    box.size = 5
    box.put("x")
    box.put("y")
    box.give_back(list("abcd"))  # room for three: "a" goes
    assert box.dropped == 1 and box.take(9, wait_s=0) == ["b", "c", "d", "x", "y"]
    small = Outbox(3)
    assert small.high_water == 0
    small.put("z")
    small.give_back(list("abcde"))  # room for two
    assert small.dropped == 3 and small.take(9, wait_s=0) == ["d", "e", "z"]


def test_network_sinks_take_records_not_pixels() -> None:
    # They run in the parent of a sharded run, fed the shards' records (shards.py,
    # shard.py): a sink marked as reading pixels would keep every frame's image alive.
    assert OutboxSink.writes_records is True and OutboxSink.reads_pixels is False
