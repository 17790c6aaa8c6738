"""The Python API (vapipe/api.py, docs/python.md): the documented examples run and type-check,
the events iterator sees what the events sink writes, stop() drains, user stages work from a
script, and failures are one line naming the stage."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest

import vapipe
from vapipe.api import Outcome, _Handoff, _restorable, _shard_log_level, _tap_class, toml_value
from vapipe.pipeline.errors import ConfigError, PipelineError
from vapipe.pipeline.frame import Frame
from vapipe.pipeline.registry import register
from vapipe.pipeline.stage import Stage, StageConfig

REPO = Path(__file__).resolve().parents[1]
DOCS = {name: (REPO / name).read_text(encoding="utf-8") for name in ("docs/python.md", "README.md")}
EXAMPLES = [
    (name, index, block)
    for name, text in DOCS.items()
    for index, block in enumerate(re.findall(r"<!-- tested -->\n```python\n(.*?)```", text, re.S))
]  # fmt: skip


def graph(*, frames_path: Path, sink: bool = True, extra: str = "", shards: int = 1) -> str:
    """A small graph on the people clip; ``extra`` is a stage linked after nms."""
    tail = f" ! {extra}" if extra else ""
    links = [f"cam ! pre ! det ! nms{tail}"] + (["nms ! events"] if sink else [])
    text = f"links = {json.dumps(links)}\n[pipeline]\nshards = {shards}\n"
    text += '[nodes.cam]\ntype = "source"\nuri = "sample:people"\n'
    text += '[nodes.pre]\ntype = "preprocess"\nbackend = "numpy"\n'
    text += '[nodes.det]\ntype = "infer"\nmodel = "yolox-nano"\n[nodes.nms]\ntype = "nms"\n'
    if sink:
        text += f'[nodes.events]\ntype = "events"\npath = "{frames_path}"\n'
    if extra:
        text += f'[nodes.{extra}]\ntype = "{extra}"\n'
    return text


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- the documented examples --------------------------------------------------------------


def test_the_docs_have_examples_of_each_part() -> None:
    assert len([e for e in EXAMPLES if e[0] == "docs/python.md"]) >= 4
    assert any(e[0] == "README.md" for e in EXAMPLES)


@pytest.mark.parametrize(("doc", "index", "code"), EXAMPLES, ids=lambda v: str(v)[:20])
def test_a_documented_example_runs(tmp_path: Path, doc: str, index: int, code: str) -> None:
    script = tmp_path / "example.py"
    script.write_text(code.replace('"configs/', f'"{REPO}/configs/'), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{doc} example {index}: {result.stderr[-2000:]}"
    assert result.stdout.strip(), "an example prints what it found"


def test_mypy_checks_the_documented_examples(tmp_path: Path) -> None:
    files = []
    for doc, index, code in EXAMPLES:
        path = tmp_path / f"{Path(doc).stem.lower()}_{index}.py"
        path.write_text(code, encoding="utf-8")
        files.append(str(path))
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nplugins = pydantic.mypy\nwarn_unused_ignores = True\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental", *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]


def test_mypy_finds_a_wrong_key_type_in_an_example(tmp_path: Path) -> None:
    """The check has teeth: the API's types reach a user's code (py.typed)."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import vapipe\n"
        "outcome = vapipe.Pipeline.from_string('x').run()\n"
        "code: str = outcome.exit_code\n"
        "for event in vapipe.Pipeline.from_string('x').events():\n"
        "    seq: str = event['seq']\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", str(bad)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "bad.py:3: error" in result.stdout and "bad.py:5: error" in result.stdout


# -- events --------------------------------------------------------------------------------


def test_the_iterator_yields_what_the_events_sink_writes_in_its_order(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=path), max_frames=12)
    seen = list(pipeline.events())
    assert seen == lines(path)
    assert [e["seq"] for e in seen if e["event"] == "frame"] == list(range(12))
    assert pipeline.outcome is not None and pipeline.outcome.ok is True
    assert pipeline.outcome.interrupted is False
    assert pipeline.outcome.stats["stages"]["events"]["lines"] == len(seen)


def test_without_empty_frames_only_frames_with_detections_come(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    text = graph(frames_path=path) + "empty_frames = false\n"
    pipeline = vapipe.Pipeline.from_string(text, max_frames=12)
    seen = list(pipeline.events(empty_frames=False))
    assert seen == lines(path) and seen
    assert all(e["detections"] for e in seen if e["event"] == "frame")


def test_a_graph_without_an_events_sink_still_has_its_events(tmp_path: Path) -> None:
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=tmp_path, sink=False), max_frames=5)
    seen = list(pipeline.events())
    assert [(e["event"], e["source_id"], e["seq"]) for e in seen] == [
        ("frame", "cam", i) for i in range(5)
    ]
    assert "python-events" not in pipeline.nodes  # the tap is the run's, not the graph's


def test_in_shards_each_source_s_events_are_the_sink_s(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    text = (
        graph(frames_path=path, shards=2).replace(
            'links = ["cam ! pre', 'links = ["cam2 ! pre", "cam ! pre'
        )
        + '[nodes.cam2]\ntype = "source"\nuri = "sample:traffic"\n'
    )
    pipeline = vapipe.Pipeline.from_string(text, max_frames=8)
    seen = list(pipeline.events())
    written = lines(path)
    for source in ("cam", "cam2"):
        mine = [e for e in seen if e["source_id"] == source]
        assert mine == [e for e in written if e["source_id"] == source]
        assert [e["seq"] for e in mine if e["event"] == "frame"] == list(range(8))
    assert pipeline.outcome is not None and len(pipeline.outcome.stats["shards"]) == 2


def test_leaving_the_loop_early_stops_the_run_and_drains_it(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=path))
    for event in pipeline.events():
        if event["seq"] == 3:
            break
    outcome = pipeline.outcome
    assert outcome is not None and outcome.interrupted and outcome.error is None
    written = lines(path)  # whole lines, in order, and far fewer than the clip's 460 frames
    assert [e["seq"] for e in written] == list(range(len(written))) and len(written) < 460


# -- stop, Ctrl-C, errors -------------------------------------------------------------------


def test_stop_from_another_thread_drains_as_ctrl_c_does(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=path))
    seen = []
    for event in pipeline.events():
        seen.append(event)
        if event["seq"] == 2:
            stopper = threading.Thread(target=pipeline.stop)
            stopper.start()
            stopper.join()
    assert seen == lines(path)  # everything queued at the stop arrived, in both
    assert seen[-1]["seq"] >= 2 and len(seen) < 460
    assert pipeline.outcome is not None and pipeline.outcome.exit_code == 130
    assert pipeline.outcome.interrupted is True and pipeline.outcome.ok is False


@register("test-api-ctrl-c")
class _CtrlC(Stage):
    """Sends this process SIGINT at seq 3, as a user's Ctrl-C would."""

    reads_pixels = False

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.seq == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return (frame,)


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
def test_ctrl_c_during_run_drains_and_the_handler_is_given_back(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    path = tmp_path / "events.jsonl"
    outcome = vapipe.Pipeline.from_string(graph(frames_path=path, extra="test-api-ctrl-c")).run()
    assert outcome.interrupted and outcome.error is None
    assert 4 <= len(lines(path)) < 460
    assert signal.getsignal(signal.SIGINT) is before


@register("test-api-boom")
class _Boom(Stage):
    reads_pixels = False

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.seq == 2:
            raise ValueError("the user's code\nfailed here")
        return (frame,)


def test_an_exception_in_a_user_stage_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=path, extra="test-api-boom"))
    outcome = pipeline.run()
    assert outcome.exit_code == 1 and outcome.ok is False and outcome.interrupted is False
    assert outcome.error is not None and "\n" not in outcome.error
    assert outcome.error == (
        "stage 'test-api-boom' (source 'cam', seq 2): the user's code\\nfailed here"
    )
    with pytest.raises(PipelineError) as raised:
        outcome.raise_for_error()
    assert str(raised.value) == outcome.error
    seen: list[Any] = []
    with pytest.raises(PipelineError, match=r"^stage 'test-api-boom' \(source 'cam', seq 2\)"):
        seen.extend(pipeline.events())
    assert seen and seen == lines(path)  # the events before the failure arrived first


class _CountConfig(StageConfig):
    every: int = 2


@register("test-api-every")
class _Every(Stage):
    """A user stage with a config of its own: an event every ``every`` frames."""

    Config = _CountConfig
    config: _CountConfig
    reads_pixels = False

    def process(self, frame: Frame) -> tuple[Frame]:
        if frame.seq % self.config.every == 0:
            frame.events.append({"event": "tick", "n": frame.seq // self.config.every})
        return (frame,)


def test_a_stage_registered_in_user_code_runs_with_its_config(tmp_path: Path) -> None:
    # No events sink: the events are those of the last node, the user's stage.
    text = graph(frames_path=tmp_path, sink=False, extra="test-api-every") + "every = 3\n"
    pipeline = vapipe.Pipeline.from_string(text, max_frames=10)
    ticks = [e for e in pipeline.events() if e["event"] == "tick"]
    assert [(e["seq"], e.get("n")) for e in ticks] == [(0, 0), (3, 1), (6, 2), (9, 3)]
    assert all(e["id"] == f"cam/{e['seq']}/tick/-/-" for e in ticks)


# -- building ------------------------------------------------------------------------------


def test_overrides_are_applied_as_set_would(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    pipeline = vapipe.Pipeline.from_toml(
        REPO / "configs" / "file.toml",
        overrides={"cam.uri": "sample:traffic", "det.max_batch": 4, "events.path": str(path)},
    )
    assert pipeline.spec.nodes["cam"].config.uri == "sample:traffic"
    assert pipeline.spec.nodes["det"].config.max_batch == 4
    assert pipeline.overrides == (
        'cam.uri="sample:traffic"',
        "det.max_batch=4",
        f"events.path={json.dumps(str(path))}",
    )


def test_a_bad_override_or_config_raises_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        vapipe.Pipeline.from_toml(REPO / "configs" / "file.toml", {"det.max_bach": 4})
    assert "node 'det' key 'max_bach'" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(ConfigError, match=r"^<string>:"):
        vapipe.Pipeline.from_string("links = [")
    with pytest.raises(ConfigError, match=r"^mine\.toml: no \[nodes"):
        vapipe.Pipeline.from_string("[pipeline]\n", name="mine.toml")
    with pytest.raises(ConfigError, match="config file not found"):
        vapipe.Pipeline.from_toml(tmp_path / "none.toml")
    with pytest.raises(ConfigError, match="max_frames"):
        vapipe.Pipeline.from_string(graph(frames_path=tmp_path / "e"), max_frames=0)


def test_a_missing_model_is_an_outcome_with_exit_2(tmp_path: Path) -> None:
    text = graph(frames_path=tmp_path / "e.jsonl").replace('"yolox-nano"', '"nope.onnx"')
    pipeline = vapipe.Pipeline.from_string(text)
    outcome = pipeline.run()
    assert outcome.exit_code == 2 and outcome.error and "nope.onnx" in outcome.error
    with pytest.raises(PipelineError, match=r"nope\.onnx"):
        list(pipeline.events())


def test_one_run_at_a_time_and_again_after(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=path), max_frames=3)
    events = pipeline.events()
    next(events)
    with pytest.raises(RuntimeError, match="already running"):
        pipeline.run()
    events.close()  # the run stops (or has ended) and has drained
    assert pipeline.outcome is not None and pipeline.outcome.exit_code in (0, 130)
    again = pipeline.run()
    assert again.ok and again is pipeline.outcome and len(lines(path)) == 3


@pytest.mark.parametrize(
    "value",
    ["plain", 'a "quoted"\nline', 3, -2.5, True, False, [1, "a"], {"k": [0.5, 2]}, 1e300],
)
def test_an_override_value_reaches_the_config_as_it_was_given(value: Any) -> None:
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value


def test_an_override_value_that_toml_cannot_hold_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="object"):
        toml_value(object())


def test_the_handoff_gives_up_on_a_reader_that_left() -> None:
    handoff = _Handoff()
    for index in range(300):  # past its 256: the reader left, so nothing waits
        if index == 256:
            handoff.abandoned.set()
        handoff.put({"event": "frame", "seq": index})
    assert handoff.items.qsize() == 256


def test_the_api_is_exported_lazily_from_vapipe() -> None:
    assert vapipe.Pipeline.__module__ == "vapipe.api"
    assert {"Event", "Outcome", "Pipeline", "ConfigError"} <= set(vapipe.__all__)
    assert vapipe.ConfigError is ConfigError and vapipe.PipelineError is PipelineError
    with pytest.raises(AttributeError, match="nothing_here"):
        vapipe.nothing_here  # noqa: B018
    fresh = subprocess.run(
        [sys.executable, "-c", "import sys, vapipe; print('vapipe.api' in sys.modules)"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert fresh.stdout.strip() == "False"


def test_shards_log_at_the_level_of_the_callers_vapipe_logger() -> None:
    logger = logging.getLogger("vapipe")
    before = logger.level
    try:
        for level, name in [(logging.DEBUG, "debug"), (logging.INFO, "info"), (25, "warning"),
                            (logging.WARNING, "warning"), (logging.ERROR, "error"),
                            (logging.CRITICAL, "error")]:  # fmt: skip
            logger.setLevel(level)
            assert _shard_log_level() == name, level
    finally:
        logger.setLevel(before)


def test_a_handler_set_outside_python_is_restored_as_python_s_own() -> None:
    assert _restorable(None) is signal.default_int_handler
    assert _restorable(signal.SIG_IGN) is signal.SIG_IGN
    assert _restorable(print) is print


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_an_infinite_override_value_keeps_its_sign(value: float) -> None:
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value
    assert math.isnan(tomllib.loads(f"v = {toml_value(float('nan'))}")["v"])


def test_one_frame_is_a_run_and_an_outcome_cannot_be_changed(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    outcome = vapipe.Pipeline.from_string(graph(frames_path=path), max_frames=1).run()
    assert outcome.ok and [e["seq"] for e in lines(path)] == [0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.exit_code = 0  # type: ignore[misc]


def test_without_a_sink_the_events_are_the_last_node_s(tmp_path: Path) -> None:
    """The tap reads the graph's last node (nms here), not an earlier one: the same boxes as
    an events sink behind nms writes."""
    path = tmp_path / "e.jsonl"
    with_sink = list(vapipe.Pipeline.from_string(graph(frames_path=path), max_frames=4).events())
    text = graph(frames_path=path, sink=False)
    without = list(vapipe.Pipeline.from_string(text, max_frames=4).events())
    assert [e["detections"] for e in without] == [e["detections"] for e in with_sink]
    assert any(e["detections"] for e in without)


def test_a_model_that_cannot_be_found_offline_never_starts_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAPIPE_ASSETS", str(tmp_path / "none"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("VAPIPE_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    pipeline = vapipe.Pipeline.from_string(graph(frames_path=tmp_path / "e.jsonl"))
    outcome = pipeline.run()
    assert outcome.exit_code == 2 and outcome.stats == {}
    assert outcome.error is not None and "yolox" in outcome.error and "\n" not in outcome.error
    with pytest.raises(PipelineError, match="yolox"):
        list(pipeline.events())
    assert not (tmp_path / "e.jsonl").exists()


@register("test-api-pixels")
class _Pixels(Stage):
    """Notes whether each frame still has its picture (it does not read pixels itself)."""

    reads_pixels = False
    seen: list[bool] = []

    def process(self, frame: Frame) -> tuple[Frame]:
        type(self).seen.append(bool(frame.image.any()))
        return (frame,)


def test_the_events_tap_keeps_no_picture_alive(tmp_path: Path) -> None:
    """Nothing that reads pixels in the graph: the frames' pictures are let go once the model
    input is made, the events tap's presence notwithstanding."""
    _Pixels.seen.clear()
    text = graph(frames_path=tmp_path, sink=False, extra="test-api-pixels")
    list(vapipe.Pipeline.from_string(text, max_frames=3).events())
    assert _Pixels.seen == [False, False, False]


def test_a_full_handoff_waits_for_its_reader_and_loses_nothing() -> None:
    handoff = _Handoff()
    for index in range(256):
        handoff.put({"event": "frame", "seq": index})
    late = threading.Thread(target=handoff.put, args=({"event": "frame", "seq": 256},))
    late.start()
    late.join(0.5)
    assert late.is_alive()  # the pipeline waits for a slow reader; it drops nothing
    assert handoff.items.get()["seq"] == 0
    late.join()
    assert [handoff.items.get_nowait()["seq"] for _ in range(256)] == list(range(1, 257))


def test_records_from_shards_are_filtered_as_the_events_sink_filters_them() -> None:
    handoff = _Handoff()
    tap = _tap_class(handoff, False)("python-events", StageConfig())
    tap.accept({"event": "frame", "source_id": "a", "seq": 0, "detections": []})
    tap.accept({"event": "line_cross", "source_id": "a", "seq": 0, "line": "l"})
    tap.accept({"event": "frame", "source_id": "a", "seq": 1, "detections": [{"x": 1}]})
    got = [handoff.items.get_nowait() for _ in range(handoff.items.qsize())]
    assert [(e["event"], e["seq"]) for e in got] == [("line_cross", 0), ("frame", 1)]
    keep_all = _tap_class(_Handoff(), True)("python-events", StageConfig())
    keep_all.accept({"event": "frame", "source_id": "a", "seq": 0, "detections": []})
    assert keep_all.handoff.items.qsize() == 1


def test_by_default_frames_without_detections_are_events_too(tmp_path: Path) -> None:
    text = graph(frames_path=tmp_path, sink=False) + "conf = 1.0\n"  # nms keeps nothing
    seen, daemon = [], []
    for event in vapipe.Pipeline.from_string(text, max_frames=3).events():
        seen.append(event)
        daemon += [t.daemon for t in threading.enumerate() if t.name == "vapipe-run"]
    assert [(e["seq"], e["detections"]) for e in seen] == [(0, []), (1, []), (2, [])]
    # The run's thread never keeps the interpreter alive for a loop the caller abandoned.
    assert daemon and all(daemon)
    without = vapipe.Pipeline.from_string(text, max_frames=3).events(empty_frames=False)
    assert list(without) == []


@pytest.mark.parametrize(
    ("code", "ok", "interrupted"),
    [(0, True, False), (1, False, False), (2, False, False), (-11, False, False),
     (129, False, False), (130, False, True), (131, False, False)],
)  # fmt: skip
def test_ok_is_exit_0_and_interrupted_is_exit_130(code: int, ok: bool, interrupted: bool) -> None:
    outcome = Outcome(code, None, {})
    assert outcome.ok is ok and outcome.interrupted is interrupted  # properties, not methods


def test_options_are_keywords_only() -> None:
    text = graph(frames_path=Path("unused"), sink=False)
    with pytest.raises(TypeError):
        vapipe.Pipeline.from_string(text, None, 3)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        vapipe.Pipeline.from_string(text).events(False)  # type: ignore[call-arg]
