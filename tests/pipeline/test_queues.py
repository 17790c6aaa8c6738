"""Bounded queues: blocking loses nothing, leaky policies drop the right end and count it."""

from __future__ import annotations

import threading
import time

import pytest

from tests.pipeline.stubs import Item
from vapipe.pipeline.queues import EOS, Aborted, Inbox, Leaky


def drain(inbox: Inbox) -> list[int]:
    seen = []
    while (item := inbox.get()) is not EOS:
        seen.append(item.seq)
    return seen


def test_blocking_queue_loses_nothing_and_keeps_order() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=2, leaky=Leaky.NO)

    def produce() -> None:
        for seq in range(200):
            link.put(Item("s", seq))
        link.put_eos()

    producer = threading.Thread(target=produce)
    producer.start()
    seen = []
    while (item := inbox.get()) is not EOS:
        seen.append(item.seq)
        if item.seq % 50 == 0:
            time.sleep(0.01)  # a slow consumer: the producer must block, not drop
    producer.join(5)
    assert seen == list(range(200))
    assert link.stats.dropped == 0
    assert link.stats.high_water == 2, "the bound was not respected"


@pytest.mark.parametrize(
    ("leaky", "kept", "dropped"),
    [(Leaky.UPSTREAM, [0, 1, 2], [3, 4, 5]), (Leaky.DOWNSTREAM, [3, 4, 5], [0, 1, 2])],
)
def test_leaky_policies_drop_the_right_end(
    leaky: Leaky, kept: list[int], dropped: list[int]
) -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=3, leaky=leaky)
    results = [link.put(Item("cam", seq)) for seq in range(6)]
    link.put_eos()  # end-of-stream is never dropped, even into a full queue
    assert drain(inbox) == kept
    assert link.stats.dropped == len(dropped)
    assert link.stats.dropped_by_source == {"cam": len(dropped)}
    if leaky is Leaky.UPSTREAM:
        assert results == [True, True, True, False, False, False]


def test_fan_in_ends_only_after_every_link_ended() -> None:
    inbox = Inbox("c")
    first = inbox.add_link("a ! c", size=4)
    second = inbox.add_link("b ! c", size=4)
    first.put(Item("a", 0))
    first.put_eos()
    assert inbox.get().source_id == "a"
    second.put(Item("b", 0))
    assert inbox.get().source_id == "b", "EOS of one link ended the whole inbox"
    second.put_eos()
    assert inbox.get() is EOS


def test_get_batch_waits_at_most_the_timeout_and_returns_partial_batch_at_eos() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=16)
    for seq in range(3):
        link.put(Item("s", seq))
    started = time.monotonic()
    items, ended = inbox.get_batch(8, timeout_s=0.1)
    waited = time.monotonic() - started
    assert [i.seq for i in items] == [0, 1, 2] and not ended
    # The lower bound is the property; the upper one only catches "waited for ever".
    assert 0.09 <= waited < 30, f"waited {waited:.3f} s for a 0.1 s timeout"
    link.put(Item("s", 3))
    link.put_eos()
    items, ended = inbox.get_batch(8, timeout_s=5.0)
    assert [i.seq for i in items] == [3] and ended


def test_abort_unblocks_a_blocked_producer() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=1)
    link.put(Item("s", 0))
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            link.put(Item("s", 1))
        except Aborted as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    wait_until_waiting(link._not_full)
    assert producer.is_alive(), "put on a full blocking queue returned"
    inbox.abort()
    producer.join(2)
    assert not producer.is_alive() and len(errors) == 1


def test_discard_drops_and_unblocks() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=1)
    link.put(Item("s", 0))
    done = threading.Event()
    threading.Thread(target=lambda: (link.put(Item("s", 1)), done.set())).start()
    wait_until_waiting(link._not_full)
    inbox.discard()
    assert done.wait(2), "a producer stayed blocked after the consumer failed"
    assert link.put(Item("s", 2)) is False


def test_abort_unblocks_a_blocked_consumer_and_leaves_queued_items() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=4)
    outcome: list[object] = []

    def consume() -> None:
        try:
            outcome.append(inbox.get())
        except Aborted as exc:
            outcome.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_until_waiting(inbox.not_empty)
    inbox.abort()
    consumer.join(5)
    assert not consumer.is_alive() and isinstance(outcome[0], Aborted)
    link.put_eos()
    with pytest.raises(Aborted):
        inbox.get()  # a hard stop does not drain what is queued
    with pytest.raises(Aborted):
        inbox.get_batch(4, 1.0)


def wait_until_waiting(condition: threading.Condition, timeout: float = 10.0) -> None:
    """Until a thread is blocked on ``condition`` (CPython keeps its waiters in _waiters)."""
    deadline = time.monotonic() + timeout
    while not condition._waiters:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "no thread ever blocked on the condition"
        time.sleep(0.001)


def test_an_ended_transient_link_leaves_the_inbox_but_keeps_its_counts() -> None:
    inbox = Inbox("pre")
    kept = inbox.add_link("cam ! pre", 4, Leaky.NO)
    added = inbox.add_link("b ! pre", 1, Leaky.DOWNSTREAM, transient=True)
    added.put("b0")
    added.put("b1")  # the first is dropped: the link holds one
    added.put_eos()
    kept.put("c0")
    assert [inbox.get(), inbox.get()] in (["b1", "c0"], ["c0", "b1"])
    kept.put_eos()
    assert inbox.get() is EOS  # the next look with nothing ready drops the ended link
    assert inbox.links == [kept] and inbox.retired == [added]
    assert inbox.retired[0].stats.dropped == 1


@pytest.mark.parametrize("leaky", [Leaky.NO, Leaky.UPSTREAM, Leaky.DOWNSTREAM])
def test_put_many_queues_and_drops_exactly_as_put_one_by_one(leaky: Leaky) -> None:
    if leaky is Leaky.NO:  # a blocking link's consumer takes items while the producer waits
        inbox = Inbox("c")
        link = inbox.add_link("p ! c", size=3, leaky=leaky)
        producer = threading.Thread(
            target=lambda: (link.put_many([Item("cam", seq) for seq in range(8)]), link.put_eos())
        )
        producer.start()
        assert drain(inbox) == list(range(8))
        producer.join(5)
        assert link.stats.dropped == 0 and link.stats.high_water == 3
        return
    outcomes = []
    for put_many in (False, True):
        inbox = Inbox("c")
        link = inbox.add_link("p ! c", size=3, leaky=leaky)
        items = [Item("cam", seq) for seq in range(7)]
        queued = link.put_many(items) if put_many else sum(link.put(item) for item in items)
        link.put_eos()
        outcomes.append((queued, drain(inbox), link.stats.dropped, link.stats.high_water))
    assert outcomes[0] == outcomes[1]
    queued, kept, dropped, high_water = outcomes[1]
    assert kept == ([0, 1, 2] if leaky is Leaky.UPSTREAM else [4, 5, 6]) and dropped == 4
    assert high_water == 3 and queued == (3 if leaky is Leaky.UPSTREAM else 7)


def test_put_many_wakes_a_waiting_consumer_once_for_all_and_stops_when_discarded() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=2)
    got: list[list[int]] = []
    consumer = threading.Thread(
        target=lambda: got.append([i.seq for i in inbox.get_batch(8, 0)[0]])
    )
    consumer.start()
    wait_until_waiting(inbox.not_empty)
    assert link.put_many([Item("s", 0), Item("s", 1)]) == 2
    consumer.join(5)
    assert got == [[0, 1]], "the consumer woke before both were queued"
    single = inbox.add_link("q ! c", size=2)
    assert single.put_many([Item("s", 9)]) == 1  # one item: put's own path
    inbox.discard()
    assert link.put_many([Item("s", 2), Item("s", 3)]) == 0


def test_put_many_into_a_full_blocking_link_gives_up_when_aborted_or_discarded() -> None:
    for end in ("abort", "discard"):
        inbox = Inbox("c")
        link = inbox.add_link("p ! c", size=1)
        outcome: list[object] = []

        def produce(link=link, outcome=outcome) -> None:  # type: ignore[no-untyped-def]
            try:
                outcome.append(link.put_many([Item("s", 0), Item("s", 1), Item("s", 2)]))
            except Aborted:
                outcome.append("aborted")

        producer = threading.Thread(target=produce)
        producer.start()
        wait_until_waiting(link._not_full)
        getattr(inbox, end)()
        producer.join(5)
        assert outcome == (["aborted"] if end == "abort" else [1]), end


def test_put_many_of_nothing_queues_nothing() -> None:
    inbox = Inbox("c")
    link = inbox.add_link("p ! c", size=2)
    assert link.put_many([]) == 0 and len(link) == 0 and link.stats.high_water == 0
