"""``[pipeline] python_cpus``: the runtime's threads on the cores asked for, nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from tests.pipeline.stubs import Collect
from vapipe.pipeline import config, graph
from vapipe.pipeline.affinity import pinned, runtime_cores
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.registry import register
from vapipe.pipeline.runner import Runner

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")


@register("test-cores")
class CoresSeen(Collect):
    """Records the cores of the thread each item is processed on."""

    def __init__(self, name: str, config: Any) -> None:
        super().__init__(name, config)
        self.cores: set[frozenset[int]] = set()

    def process(self, item: Any) -> Any:
        self.cores.add(frozenset(os.sched_getaffinity(0)))
        return super().process(item)


@pytest.fixture
def eight_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that may use cores 2-9 (none of the calls here sets an affinity)."""

    def allowed(pid: int) -> set[int]:
        assert pid == 0  # this process's (thread's) own, not another's
        return set(range(2, 10))

    monkeypatch.setattr(os, "sched_getaffinity", allowed)


def test_a_count_takes_that_many_of_the_allowed_cores_each_shard_its_own(eight_cores: None) -> None:
    assert runtime_cores(3) == {2, 3, 4}
    assert runtime_cores(3, shard=1) == {5, 6, 7}
    assert runtime_cores(3, shard=2) == {8, 9, 2}  # in turn, past the last core
    assert runtime_cores(1, shard=7) == {9}
    assert runtime_cores(3, shard=7) == {7, 8, 9}  # the 22nd-24th core: round the 8 twice


def test_unset_or_every_core_pins_nothing(eight_cores: None) -> None:
    assert runtime_cores(None) is None
    assert runtime_cores(8) is None
    assert runtime_cores(12) is None  # more than there are: every core, nothing pinned
    assert runtime_cores(7) == set(range(2, 9))


def test_a_list_names_the_cores_and_one_not_allowed_is_a_config_error(eight_cores: None) -> None:
    assert runtime_cores([9, 2]) == {2, 9}
    with pytest.raises(ConfigError) as raised:
        runtime_cores([2, 11, 1])
    assert str(raised.value).startswith("pipeline.python_cpus: core 1, 11 is not one")
    assert "(2, 3, 4, 5, 6, 7, 8, 9)" in str(raised.value)


def test_pinned_moves_only_the_thread_that_runs_it() -> None:
    every = frozenset(os.sched_getaffinity(0))
    one = frozenset({min(every)})
    seen: list[frozenset[int]] = []
    thread = threading.Thread(
        target=pinned(lambda x: seen.append(frozenset(os.sched_getaffinity(0))) or x, one),
        args=(1,),
    )
    thread.start()
    thread.join()
    assert seen == [one]
    assert frozenset(os.sched_getaffinity(0)) == every  # this thread: as it was
    assert pinned(len, None) is len


def built(pipeline: str, count: int, sink: str) -> Any:
    """A counting source of ``count`` items into a ``sink`` node, ``pipeline`` its table."""
    text = f"""\
links = ["src ! sink"]
[pipeline]
{pipeline}
[nodes.src]
type = "test-count"
count = {count}
[nodes.sink]
type = "{sink}"
"""
    return graph.build(config.parse(text, "t.toml"))


def run(cores: str) -> tuple[Runner, int]:
    runner = Runner(built(cores, 5, "test-cores"))
    return runner, runner.run(handle_signals=False).exit_code


def test_a_run_pins_its_stage_threads_and_leaves_the_main_thread() -> None:
    every = frozenset(os.sched_getaffinity(0))
    first = min(every)
    runner, code = run(f"python_cpus = [{first}]")
    assert code == 0
    stage = runner.stages["sink"]
    assert isinstance(stage, CoresSeen)
    assert stage.cores == {frozenset({first})} and len(stage.items) == 5
    assert frozenset(os.sched_getaffinity(0)) == every
    assert runner.stats()["python_cpus"] == [first]  # what was picked, in the stats
    runner, code = run("")
    assert code == 0 and runner.stages["sink"].cores == {every}  # type: ignore[attr-defined]
    assert "python_cpus" not in runner.stats()


@pytest.mark.parametrize("value", ["0", "[]", "[1, 1]", "[-1]", '"two"'])
def test_bad_values_are_refused_at_load(value: str) -> None:
    with pytest.raises(ConfigError, match="python_cpus"):
        config.parse(
            f'links = ["a ! b"]\n[pipeline]\npython_cpus = {value}\n'
            '[nodes.a]\ntype = "test-count"\n[nodes.b]\ntype = "test-collect"\n',
            "t.toml",
        )


def test_the_cli_names_a_core_the_machine_lacks(tmp_path: Any) -> None:
    path = tmp_path / "g.toml"
    path.write_text(
        'links = ["src ! out"]\n[pipeline]\npython_cpus = [4096]\n'
        '[nodes.src]\ntype = "source"\nuri = "sample:people"\n'
        f'[nodes.out]\ntype = "events"\npath = "{tmp_path / "e.jsonl"}"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "vapipe", str(path), "--max-frames", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "pipeline.python_cpus: core 4096 is not one this process may use" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_stream_added_to_a_running_service_runs_on_the_same_cores() -> None:
    from tests.pipeline import stubs
    from vapipe.pipeline.config import NodeSpec
    from vapipe.serve.runner import ServiceRunner

    seen: list[frozenset[int]] = []

    class CoresSource(stubs.CountingSource):
        def frames(self) -> Any:
            seen.append(frozenset(os.sched_getaffinity(0)))
            return super().frames()

    first = min(os.sched_getaffinity(0))
    runner = ServiceRunner(built(f"python_cpus = [{first}]", 3, "test-collect"))

    def add(running: Any) -> None:
        spec = NodeSpec("cam", CoresSource, stubs.CountingSource.Config(count=3), None)
        runner.add_source("cam", spec, "src")
        runner.request_stop("test")

    assert runner.run(handle_signals=False, on_started=add).exit_code in (0, 130)
    assert seen == [frozenset({first})]
