"""Live-event subscribers: each gets what it asked for, in order; a slow one loses its oldest
events, counted, and no publisher ever waits."""

from __future__ import annotations

from vapipe.serve.event_hub import EventHub, Subscriber


def record(source: str, kind: str, seq: int) -> dict:
    return {"event": kind, "source_id": source, "seq": seq}


def test_each_subscriber_gets_what_it_asked_for_in_order() -> None:
    hub = EventHub()
    everything = hub.subscribe(Subscriber())
    crossings = hub.subscribe(Subscriber(source="a", kinds=frozenset({"line_cross"})))
    assert hub.listening
    for seq in range(3):
        hub.publish(record("a", "frame", seq))
        hub.publish(record("a", "line_cross", seq))
        hub.publish(record("b", "line_cross", seq))
    items, dropped = everything.take()
    assert len(items) == 9 and dropped == 0
    items, dropped = crossings.take()
    assert [(i["source_id"], i["event"], i["seq"]) for i in items] == [
        ("a", "line_cross", 0), ("a", "line_cross", 1), ("a", "line_cross", 2),
    ]  # fmt: skip
    hub.unsubscribe(everything)
    hub.unsubscribe(crossings)
    assert not hub.listening


def test_a_slow_subscriber_loses_its_oldest_events_counted() -> None:
    hub = EventHub()
    slow = hub.subscribe(Subscriber(size=4))
    fast = hub.subscribe(Subscriber(size=100))
    for seq in range(10):
        hub.publish(record("a", "frame", seq))
    items, dropped = slow.take()
    assert [i["seq"] for i in items] == [6, 7, 8, 9] and dropped == 6
    assert hub.dropped_total == 6
    assert [i["seq"] for i in fast.take()[0]] == list(range(10))
    assert slow.take() == ([], 0), "a take reports each loss once"


def test_the_first_subscriber_and_the_last_leaving_are_told_once_each() -> None:
    hub = EventHub()
    told: list[bool] = []
    hub.on_listening = told.append
    one, two = hub.subscribe(Subscriber()), hub.subscribe(Subscriber())
    assert told == [True]
    hub.unsubscribe(one)
    assert told == [True] and hub.listening
    hub.unsubscribe(Subscriber())  # never subscribed (though equal to two): nothing changes
    assert told == [True] and hub.listening
    hub.unsubscribe(two)
    assert told == [True, False] and not hub.listening
    hub.unsubscribe(two)  # twice: told once
    assert told == [True, False]
    hub.subscribe(Subscriber())
    assert told == [True, False, True]


def test_an_unsubscribed_reader_gets_nothing_more_and_a_wake_is_per_take() -> None:
    hub = EventHub()
    gone, kept = hub.subscribe(Subscriber()), hub.subscribe(Subscriber(kinds=frozenset({"x"})))
    hub.unsubscribe(gone)
    hub.publish(record("a", "frame", 0))
    assert gone.take() == ([], 0) and not gone.wake.is_set()
    assert not kept.wake.is_set(), "woken for an event it does not want"
    hub.publish(record("a", "x", 1))
    assert kept.wake.is_set()
    assert [i["seq"] for i in kept.take()[0]] == [1] and not kept.wake.is_set()


def test_a_buffer_holds_exactly_its_size_before_dropping() -> None:
    hub = EventHub()
    reader = hub.subscribe(Subscriber(size=3, source="a"))
    for seq in range(3):
        hub.publish(record("a", "frame", seq))
    hub.publish(record("b", "frame", 9))  # another source: neither kept nor counted
    assert reader.dropped == 0 and hub.dropped_total == 0
    hub.publish(record("a", "frame", 3))
    assert reader.take() == ([record("a", "frame", s) for s in (1, 2, 3)], 1)


def test_each_subscriber_is_matched_on_its_own() -> None:
    hub = EventHub()
    # Equal as dataclasses, two readers all the same: leaving is by identity.
    twin_a, twin_b = hub.subscribe(Subscriber()), hub.subscribe(Subscriber())
    other_source = hub.subscribe(Subscriber(source="b"))
    built = hub.subscribe(Subscriber(source="".join(["c", "am"])))  # equal, not identical
    hub.unsubscribe(twin_a)
    assert hub.listening and Subscriber().size == 1000
    hub.publish(record("a", "frame", 0))  # "a" < "b": not b's
    hub.publish(record("cam", "frame", 1))
    assert [i["seq"] for i in twin_b.take()[0]] == [0, 1], "a reader's filter stopped the next"
    assert other_source.take() == ([], 0)
    assert [i["seq"] for i in built.take()[0]] == [1]
    assert twin_a.take() == ([], 0)
