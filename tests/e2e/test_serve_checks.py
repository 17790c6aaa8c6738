"""A stream added over HTTP is checked as the config is, against the graph it joins: its input
is nobody's output, its outputs destroy no input, no fixed output is shared by several streams,
in one process and in shards, and a refusal never stops the running service."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import asset
from tests.e2e.helpers import wait_for
from tests.e2e.serve_helpers import per_source_outputs, serve


@pytest.mark.parametrize("shards", [1, 2])
def test_an_added_stream_cannot_destroy_an_input_or_share_an_output(
    tmp_path: Path, shards: int
) -> None:
    people = asset("media", "people.mp4")
    (tmp_path / "out").mkdir()
    victim = tmp_path / "out" / "victim.mp4"
    shutil.copyfile(people, victim)
    before = victim.read_bytes()
    overrides = (*per_source_outputs(), f"pipeline.shards={shards}")
    with serve(tmp_path, *overrides) as served, served.client() as http:
        wait_for(lambda: http.get("/readyz").status_code == 200, 180, "the service ready")

        # Its input is what its own output path would be (out/{source_id}.mp4).
        refused = http.post("/api/streams", json={"id": "victim", "uri": "out/victim.mp4"})
        assert refused.status_code == 409, refused.text
        assert (
            "victim.mp4 is the input of node 'victim': writing it would destroy it"
            in (refused.json()["error"])
        ), refused.text

        # Its input is the output of a stream added before it.
        added = http.post("/api/streams", json={"id": "b", "uri": str(people)})
        assert added.status_code == 201, added.text
        wait_for(lambda: (tmp_path / "out" / "b.partial.mp4").exists(), 120, "b's video")
        onto_b = http.post("/api/streams", json={"id": "c", "uri": "out/b.partial.mp4"})
        assert onto_b.status_code == 409, onto_b.text
        assert onto_b.json()["error"].endswith(
            "node 'video' key 'path': out/b.partial.mp4 is the input of node 'c': "
            "writing it would destroy it"
        ), onto_b.text

        streams = http.get("/api/streams").json()
        assert {s["id"] for s in streams} == {"cam", "b"}
        assert all(s["error"] is None for s in streams), streams
        assert served.stop() == 130
    assert victim.read_bytes() == before


@pytest.mark.parametrize("shards", [1, 2])
def test_a_fixed_output_path_refuses_a_second_stream_naming_the_fix(
    tmp_path: Path, shards: int
) -> None:
    people = asset("media", "people.mp4")
    overrides = ("cam.loop=true", f"pipeline.shards={shards}")  # out/annotated.mp4 as it is
    with serve(tmp_path, *overrides) as served, served.client() as http:
        wait_for(lambda: http.get("/readyz").status_code == 200, 180, "the service ready")
        refused = http.post("/api/streams", json={"id": "b", "uri": str(people)})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"].endswith(
            "node 'video' key 'path': 2 sources would write to out/annotated.mp4: "
            "put {source_id} in path (e.g. out/{source_id}.mp4)"
        ), refused.text
        # The service runs on, its own stream untouched.
        frames = http.get("/api/streams/cam").json()["frames"]
        wait_for(lambda: http.get("/api/streams/cam").json()["frames"] > frames, 60, "frames")
        assert served.stop() == 130
