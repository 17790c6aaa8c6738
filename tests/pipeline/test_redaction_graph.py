"""A graph with a redact node: every node that lets pictures out (video, snapshots, clips,
a live stream, Home Assistant's camera, the service's previews) must come after one on
every path from a source, else the config is refused naming it and the bare source; the
nodes behind one are told so (clips then encode the redacted frames, not the packets)."""

from __future__ import annotations

import re

import pytest

from tests.pipeline import stubs  # noqa: F401  (registers test-* stages)
from vapipe.pipeline import config, graph
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.wiring import bind_all
from vapipe.serve.streams import TAP, with_tap
from vapipe.stages.sinks.clips import ClipsConfig, ClipsSink

REDACT = '[nodes.redact]\ntype = "redact"\nclasses = ["person"]\n'
VIDEO = '[nodes.video]\ntype = "video"\npath = "out/{source_id}.mp4"\n'
CLIPS = '[nodes.clips]\ntype = "clips"\n'
EVENTS = '[nodes.ev]\ntype = "events"\npath = "-"\n'
MQTT = '[nodes.mq]\ntype = "mqtt"\nhome_assistant = true\n'


def spec_of(links: str, *tables: str) -> config.ConfigSpec:
    used = [name for name in ("cam", "cam2") if f'"{name} !' in links]
    sources = "".join(f'[nodes.{name}]\ntype = "test-count"\n' for name in used)
    return config.parse(f"links = [{links}]\n{sources}" + "".join(tables), "g.toml")


def refused(links: str, *tables: str) -> str:
    with pytest.raises(ConfigError) as caught:
        graph.build(spec_of(links, *tables))
    return re.sub(r"^g\.toml(:\d+)?: ", "", str(caught.value))


def test_a_picture_writer_not_behind_the_redact_node_is_refused() -> None:
    said = refused('"cam ! redact ! ev", "cam ! video"', REDACT, VIDEO, EVENTS)
    assert said.startswith(
        "node 'video': writes pictures, but the way from source 'cam' to it passes no redact "
        "node (redact): its pictures would leave unredacted"
    )
    # a redact node after the sink: the sink still sees the originals
    said = refused('"cam ! clips ! redact ! video"', REDACT, VIDEO, CLIPS)
    assert said.startswith("node 'clips': writes pictures")
    # one source's way through it, another's around it
    said = refused('"cam ! redact ! video", "cam2 ! video"', REDACT, VIDEO)
    assert "from source 'cam2'" in said


def test_event_sinks_need_no_redaction_but_a_camera_for_home_assistant_does() -> None:
    assert graph.build(spec_of('"cam ! redact ! video", "cam ! ev"', REDACT, VIDEO, EVENTS))
    said = refused('"cam ! redact ! video", "cam ! mq"', REDACT, VIDEO, MQTT)
    assert said.startswith("node 'mq': writes pictures")
    no_camera = '[nodes.mq]\ntype = "mqtt"\nhome_assistant = { camera_s = 0 }\n'
    assert graph.build(spec_of('"cam ! redact ! video", "cam ! mq"', REDACT, VIDEO, no_camera))


def test_without_a_redact_node_nothing_is_checked_or_marked() -> None:
    built = graph.build(spec_of('"cam ! video"', VIDEO))
    assert built.redacted == frozenset()


def test_the_nodes_behind_it_are_marked_and_clips_switch_to_frames() -> None:
    built = graph.build(
        spec_of('"cam ! redact ! clips ! video", "cam2 ! redact"', REDACT, CLIPS, VIDEO)
    )
    assert built.redacted == {"redact", "clips", "video"}
    clips = ClipsSink("clips", ClipsConfig())
    assert clips.takes_packets and not clips.reads_pixels
    bind_all(built, {"cam": stubs_stage(), "cam2": stubs_stage(), "redact": stubs_stage(),
                     "clips": clips, "video": stubs_stage()})  # fmt: skip
    assert clips.from_frames and not clips.takes_packets and clips.reads_pixels


def test_the_service_taps_behind_the_redact_node() -> None:
    spec = spec_of('"cam ! redact ! video", "cam ! ev"', REDACT, VIDEO, EVENTS)
    tapped = graph.build(with_tap(spec))
    assert tapped.predecessors(TAP) == ["redact"]
    # without one: behind the last node that feeds others, as before
    plain = graph.build(with_tap(spec_of('"cam ! ev"', EVENTS)))
    assert plain.predecessors(TAP) == ["cam"]


def stubs_stage():  # type: ignore[no-untyped-def]
    """A stage that binds nothing and is told nothing it acts on."""
    from vapipe.pipeline.stage import Stage, StageConfig

    return Stage("x", StageConfig())
