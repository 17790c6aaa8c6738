"""Live-event subscribers: each gets what it asked for, in order; a slow one loses its oldest
events, counted, and no publisher ever waits."""

from __future__ import annotations

from vapipe.pipeline.event_hub import EventHub, Subscriber


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
