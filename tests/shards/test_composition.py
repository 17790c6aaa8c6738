"""The shard supervisor is composed of a transport and a mode: a transport of its own (here a
fake one that plays a shard's messages) runs under the real supervisor, records reach the real
sinks, a shard that ends without saying so is restarted, what the transport knows reaches the
stats, and each mode shapes the job, the names and what else the shards say."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.shards.test_shards import CONFIG
from vapipe.pipeline.config import parse
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.graph import build
from vapipe.pipeline.outcome import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from vapipe.serve.event_hub import EventHub
from vapipe.serve.shard_side import ShardService
from vapipe.serve.sharded import ServeMode
from vapipe.shards.roles import Listener, Mode, RunMode, Slot
from vapipe.shards.supervisor import ShardRunner
from vapipe.shards.worker import ShardJob


class Played:
    """A transport whose shards say what they are given to say: per run of each slot, a list
    of messages (a run without ``done`` is a shard that died)."""

    def __init__(self, script: dict[int, list[list[tuple[Any, ...]]]]) -> None:
        self.script = script
        self.jobs: list[ShardJob] = []
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def open(self, graph: Any) -> None:
        self.calls.append("open")

    def close(self) -> None:
        self.calls.append("close")

    def describe(self) -> dict[str, Any]:
        return {"cluster": {"kind": "played"}}

    def run_once(self, slot: Slot, job: ShardJob, mode: Mode, listener: Listener) -> str:
        with self.lock:
            self.jobs.append(job)
        messages = self.script[slot.index][slot.restarts]
        for message in messages:
            done = listener.handle(slot, message)
            if done is not None:
                slot.done = done
                return "done"
        mode.ended(slot)
        return "exit code -9"

    def stop(self, slot: Slot) -> None:
        with self.lock:
            self.calls.append(f"stop {slot.index}")

    def kill(self, slot: Slot) -> None:
        self.calls.append(f"kill {slot.index}")

    def ask_stacks(self, slot: Slot) -> None:
        self.calls.append(f"stacks {slot.index}")


def frame(source: str, seq: int) -> tuple[Any, ...]:
    record = {"event": "frame", "source_id": source, "seq": seq, "pts": seq / 25,
              "time": "2026-12-05T00:00:00.000Z", "detections": []}  # fmt: skip
    return ("frame", "events", source, seq, seq / 25, 1000.0 + seq, [record])


DONE = ("done", 0, None, {})


def graph_in(tmp_path: Path, restarts: int = 1) -> Any:
    text = CONFIG.replace("out/", f"{tmp_path}/").replace('"nms ! video", ', "")
    return build(parse(text, "s.toml", [f"pipeline.shard_restarts={restarts}"]))


def lines(tmp_path: Path) -> list[tuple[str, str, int]]:
    text = (tmp_path / "events.jsonl").read_text(encoding="utf-8")
    return [(r["event"], r["source_id"], r["seq"]) for r in map(json.loads, text.splitlines())]


def test_a_transport_of_its_own_runs_under_the_real_supervisor(tmp_path: Path) -> None:
    played = Played({0: [[frame("a", 0), frame("a", 1), DONE]], 1: [[frame("b", 0), DONE]],
                     2: [[frame("c", 0), DONE]]})  # fmt: skip
    runner = ShardRunner(graph_in(tmp_path), 3, transport=played)
    result = runner.run()
    assert result.exit_code == EXIT_OK, result.error
    assert sorted(lines(tmp_path)) == [("frame", "a", 0), ("frame", "a", 1), ("frame", "b", 0),
                                       ("frame", "c", 0)]  # fmt: skip
    assert played.calls[0] == "open" and played.calls[-1] == "close"
    assert result.stats["cluster"] == {"kind": "played"}
    assert sorted(job.sources for job in played.jobs) == [("a",), ("b",), ("c",)]
    assert all(job.service is None for job in played.jobs)  # a run's mode


def test_a_shard_that_ends_unannounced_is_restarted_after_what_was_delivered(
    tmp_path: Path,
) -> None:
    played = Played({0: [[frame("a", 0), frame("a", 1)], [frame("a", 2), DONE]],
                     1: [[DONE]], 2: [[DONE]]})  # fmt: skip
    result = ShardRunner(graph_in(tmp_path), 3, transport=played).run()
    assert result.exit_code == EXIT_OK, result.error
    assert lines(tmp_path) == [("frame", "a", 0), ("frame", "a", 1), ("source_down", "a", 1),
                               ("source_up", "a", 1), ("frame", "a", 2)]  # fmt: skip
    again = [job for job in played.jobs if job.restart == 1]
    assert [(job.sources, job.resume["a"][0]) for job in again] == [(("a",), 2)]
    assert result.stats["shards"][0]["restarts"] == 1


def test_past_its_restarts_the_run_fails_naming_the_shard(tmp_path: Path) -> None:
    played = Played({0: [[frame("a", 0)]], 1: [[DONE]], 2: [[DONE]]})
    result = ShardRunner(graph_in(tmp_path, restarts=0), 3, transport=played).run()
    assert result.exit_code == EXIT_FAILURE
    assert "shard 0 (a) died (exit code -9); restarted 0 times, no more" in str(result.error)


def test_a_transport_that_cannot_open_is_a_usage_error_and_starts_nothing(
    tmp_path: Path,
) -> None:
    class Unreachable(Played):
        def open(self, graph: Any) -> None:
            raise ConfigError("cannot reach the cluster", key="pipeline.ray_address")

    played = Unreachable({})
    result = ShardRunner(graph_in(tmp_path), 3, transport=played).run()
    assert result.exit_code == EXIT_USAGE and "cannot reach the cluster" in str(result.error)
    assert played.jobs == [] and "close" not in played.calls
    assert "cluster" in result.stats  # what it describes, even so


def test_the_run_mode_runs_the_config_sources_and_nothing_else() -> None:
    mode = RunMode()
    slot = Slot(0, ("a", "b"), None, added={"x": {}})
    assert mode.names_of(slot) == ("a", "b") and mode.wants_control is False
    job = ShardJob(index=0, config="c", config_text="", overrides=(), sources=("a",))
    assert mode.job(slot, job) is job
    with pytest.raises(TypeError, match="no control channel"):
        mode.controlled(slot, object())


def test_the_serve_mode_runs_added_streams_with_their_edits_and_forwards_live_events() -> None:
    hub = EventHub()
    published: list[dict[str, Any]] = []
    hub.publish = published.append  # type: ignore[method-assign]
    graph = build(parse(CONFIG, "s.toml"))
    mode = ServeMode(graph, hub, "a")
    slot = Slot(1, ("b",), None, added={"door": {"id": "door"}})
    assert mode.names_of(slot) == ("b", "door") and mode.config_ids(slot) == {"b"}
    mode.edits = {"door": {"lines": []}, "b": {"zones": []}, "elsewhere": {"lines": []}}
    job = mode.job(slot, ShardJob(index=1, config="c", config_text="", overrides=(),
                                  sources=("b",)))  # fmt: skip
    assert job.service is ShardService and job.added == ({"id": "door"},)
    assert dict(job.edits) == {"door": {"lines": []}, "b": {"zones": []}}
    mode.other(slot, ("live", {"event": "frame"}))
    mode.delivered({"event": "source_down"})
    assert published == [{"event": "frame"}, {"event": "source_down"}]


def test_the_serve_mode_tells_the_supervisors_ledger_of_streams_added_and_removed() -> None:
    graph = build(parse(CONFIG, "s.toml"))
    mode = ServeMode(graph, EventHub(), "a")
    runner = ShardRunner(graph, 2, mode=mode)
    mode.supervisor = runner
    slot = runner.slots[0]
    mode.other(slot, ("added", "door", "rtsp://cam/door"))
    assert "door" in runner.ledger.sources
    mode.other(slot, ("removed", "door"))
    assert "door" not in runner.ledger.sources
