"""Plates read through the real pipeline on generated scenes (bench/plates/scenes.py: plates
on real car cut-outs driven across the real road): configs/plates.toml as shipped, the
plate-only camera, known plates, the plate's snapshot, the history searched by plate, and bad
input."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest

from bench.plates import scenes
from tests.conftest import ASSETS
from tests.e2e.helpers import REPO, cli, read_events
from vapipe.stages.events.store import EventStore, Query

CONFIG = REPO / "configs" / "plates.toml"
SEED = 1000  # a tuning seed: three cars, plates 30, 35 and 37 px high


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[scenes.Scene, Path]:
    folder = tmp_path_factory.mktemp("plates")
    generated = scenes.plate_scene(SEED)
    return generated, scenes.render(generated, ASSETS / "media", folder)


def one_off(plate: str) -> str:
    """The plate with its last character changed (a known-plates list with a typo)."""
    return plate[:-1] + ("1" if plate[-1] != "1" else "2")


def test_the_shipped_config_reads_every_plate_names_the_known_and_finds_them_again(
    tmp_path: Path, scene: tuple[scenes.Scene, Path]
) -> None:
    generated, clip = scene
    truth = [car.plate for car in generated.cars]
    known = one_off(truth[1])
    result = cli(
        str(CONFIG), "--set", f"cam.uri={clip}",
        "--set", f'plates.known_plates={{ "{known}" = "Alice" }}', cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = read_events(tmp_path / "out" / "plates.jsonl")
    plates = [e for e in events if e["event"] == "plate"]
    assert [e["plate"] for e in plates] == truth
    assert [e.get("name") for e in plates] == [None, "Alice", None]
    assert plates[1]["known_plate"] == known and plates[1]["known"] is True
    assert len({e["track_id"] for e in plates}) == 3
    # The plate's own picture: a snapshot cropped to the plate, wider than high.
    for event in plates:
        crop = cv2.imread(str(tmp_path / "out" / "plates-media" / event["snapshot_crop"]))
        assert crop is not None and crop.shape[1] > 1.5 * crop.shape[0]
        x1, y1, x2, y2 = event["box"]
        assert 2.5 < (x2 - x1) / (y2 - y1) < 8
    # Every frame after the plate held carries it on the vehicle, and the crossings too.
    for event in plates:
        later = [
            d for e in events if e["event"] == "frame" and e["seq"] >= event["seq"]
            for d in e["detections"] if d.get("track_id") == event["track_id"]
        ]  # fmt: skip
        assert later and all(d["attributes"]["plates"]["plate"] == event["plate"] for d in later)
    crossings = [e for e in events if e["event"] == "line_cross"]
    assert crossings and all(e["attributes"]["plates"]["plate"] in truth for e in crossings)
    # The history, searched as a user types a plate (case, dashes), and near misses.
    store = EventStore(tmp_path / "out" / "plates.db", readonly=True)
    try:
        wanted = generated.cars[2].text.lower()
        found, _ = store.history(Query(plate=wanted))
        assert {e["event"] for e in found} >= {"plate"}
        assert all(truth[2] in (e.get("plate"), e.get("attributes", {}).get("plates", {}).get(
            "plate")) for e in found)  # fmt: skip
        assert len(found) == 1 + sum(
            e["attributes"]["plates"]["plate"] == truth[2] for e in crossings
        )
        assert store.history(Query(plate=one_off(truth[2])))[0] == []
        near, _ = store.history(Query(plate=one_off(truth[2]), plate_distance=1))
        assert [e["id"] for e in near] == [e["id"] for e in found]
        every, _ = store.history(Query(type="plate"))
        assert sorted(e["plate"] for e in every) == sorted(truth)
    finally:
        store.close()


def test_a_camera_that_sees_only_plates_needs_no_detector(
    tmp_path: Path, scene: tuple[scenes.Scene, Path]
) -> None:
    generated, clip = scene
    config = tmp_path / "gate.toml"
    config.write_text(
        'links = ["cam ! plates ! events"]\n'
        f'[nodes.cam]\ntype = "source"\nuri = "{clip}"\n'
        '[nodes.plates]\ntype = "plates"\non_frame = true\ninput_size = [640, 384]\n'
        "min_attempts = 3\n"
        '[nodes.events]\ntype = "events"\npath = "gate.jsonl"\n',
        encoding="utf-8",
    )
    result = cli(str(config), "--stats", str(tmp_path / "stats.json"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    plates = [e for e in read_events(tmp_path / "gate.jsonl") if e["event"] == "plate"]
    assert [e["plate"] for e in plates] == [car.plate for car in generated.cars]
    assert [e["sighting"] for e in plates] == [1, 2, 3]
    assert all("track_id" not in e for e in plates)


def test_a_bad_known_plates_line_is_named(tmp_path: Path, scene: tuple[scenes.Scene, Path]) -> None:
    known = tmp_path / "known.txt"
    known.write_text("KX-4921 Alice\nK!X4 is no plate\n", encoding="utf-8")
    result = cli(str(CONFIG), "--set", f"plates.known={known}", "--max-frames", "2",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    assert f"{known}:2" in result.stderr and "not plate-shaped" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_character_list_that_does_not_fit_the_model_is_named(tmp_path: Path) -> None:
    chars = tmp_path / "chars.txt"
    chars.write_text("\n".join("0123456789"), encoding="utf-8")
    result = cli(str(CONFIG), "--set", f"plates.characters={chars}", "--max-frames", "2",
                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert "lists 10 characters" in result.stderr and "plates" in result.stderr
    assert "Traceback" not in result.stderr
