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
