"""bench/ holds benchmarks that share one harness: every script is listed in bench/README.md
with its command and uses bench/harness.py, every result file is one a listed benchmark
writes or a measurement a design note quotes, and the harness alternates its sides and takes
medians (a deliberate change to either fails here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import harness

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
README = (BENCH / "README.md").read_text(encoding="utf-8")
HELPERS = {"__init__.py", "harness.py", "naive.py", "run_sampler.py", "standalone_gpu.py",
           "decode_ceiling.py", "streams_bench.py"}  # fmt: skip
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if p.name not in HELPERS)


def test_every_module_is_a_listed_script_or_a_listed_helper() -> None:
    for name in sorted(p.name for p in BENCH.glob("*.py")):
        if name == "__init__.py":
            continue
        if name in HELPERS:
            assert f"`{name}`" in README, f"bench/README.md does not name the helper {name}"
        else:
            assert f"python bench/{name}" in README, f"bench/README.md has no command for {name}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_uses_the_harness(name: str) -> None:
    text = (BENCH / name).read_text(encoding="utf-8")
    assert re.search(r"^from bench import .*harness|^\s+harness,$", text, re.M), name
    assert "statistics.median" not in text, f"{name} takes medians of its own"


def test_every_result_file_is_written_by_a_listed_benchmark_or_quoted_by_a_note() -> None:
    results = sorted(
        str(p.relative_to(BENCH)) for p in (BENCH / "results").rglob("*") if p.is_file()
    )
    assert results
    for path in results:
        name = path.removeprefix("results/")
        stem = name.rsplit(".", 1)[0]
        listed = f"results/{name}" in README or f"results/{stem}." in README
        assert listed, f"bench/{path} is neither a listed benchmark's result nor quoted"


def test_alternate_takes_the_sides_in_turn_and_keeps_each_sides_runs() -> None:
    order: list[str] = []

    def side(name: str, value: float):  # type: ignore[no-untyped-def]
        def run() -> float:
            order.append(name)
            return value + len(order)

        return run

    runs = harness.alternate({"a": side("a", 0.0), "b": side("b", 100.0)}, 3, say=lambda _: None)
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert runs == {"a": [1.0, 3.0, 5.0], "b": [102.0, 104.0, 106.0]}
    with pytest.raises(ValueError, match="at least 1"):
        harness.alternate({"a": side("a", 0.0)}, 0)


def test_medians_summaries_and_ratios() -> None:
    assert harness.median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert harness.summary([1.234, 5.678, 3.0]) == {"runs": [1.23, 5.68, 3.0], "median": 3.0}
    assert harness.ratio(3.0, 2.0) == 1.5 and harness.ratio(1.0, 0.0) is None
    with pytest.raises(ValueError, match="no runs"):
        harness.median([])


def test_a_record_says_what_how_when_and_where(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "result.json"
    written = harness.record(path, {"fps": {"median": 2.0}, "machine": {"gpu": "none"}}, "x")
    read = json.loads(path.read_text(encoding="utf-8"))
    assert read == json.loads(json.dumps(written, default=str))
    assert list(read)[:5] == ["benchmark", "command", "date", "commit", "machine"]
    assert read["benchmark"] == "x" and read["fps"] == {"median": 2.0}
    assert read["machine"]["gpu"] == "none" and read["machine"]["python"]
    assert read["command"].startswith("python ")
    named = harness.record(path, {"benchmark": "its own", "date": "not this"}, "x")
    assert named["benchmark"] == "its own" and named["date"] != "not this"


def test_a_table_is_markdown() -> None:
    assert harness.table(["a", "b"], [[1, 2]]) == "| a | b |\n| --- | --- |\n| 1 | 2 |"
