"""The plates node on frames, with the shipped models: lines cut by a border left unread,
plate-shaped reads kept, a vehicle's reads voted into one event, the plate following the
vehicle, and the plate-only camera's sightings."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from pydantic import ValidationError

from bench.plates import scenes
from tests.conftest import ASSETS
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.pipeline.object_results import Plate
from vapipe.stages.plates.config import PlatesConfig
from vapipe.stages.plates.ocr import TextBox
from vapipe.stages.plates.reader import best_reads, cut_off
from vapipe.stages.plates.stage import PlatesStage
from vapipe.stages.plates.text import PlateShape

WIDTH, HEIGHT = 640, 360
NAMES = ("person", "bicycle", "car")


def box(x1: float, y1: float, x2: float, y2: float) -> np.ndarray:
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


def test_a_line_near_a_border_or_the_crops_side_is_cut_off() -> None:
    # The slack: a third of the line's height (30 px: 10 px), at least 2 px.
    assert not cut_off(box(100, 100, 200, 130), WIDTH, HEIGHT, None)
    assert cut_off(box(9.9, 100, 200, 130), WIDTH, HEIGHT, None)
    assert not cut_off(box(10.1, 100, 200, 130), WIDTH, HEIGHT, None)
    assert cut_off(box(100, 100, 629.1, 130), WIDTH, HEIGHT, None)
    assert not cut_off(box(100, 100, 628.9, 130), WIDTH, HEIGHT, None)
    assert cut_off(box(100, 0.5, 200, 30), WIDTH, HEIGHT, None)
    assert cut_off(box(100, 330, 200, 358.5), WIDTH, HEIGHT, None)
    assert not cut_off(box(300, 1.5, 400, 40), WIDTH, HEIGHT, None)
    assert not cut_off(box(300, 320, 400, 357.5), WIDTH, HEIGHT, None)
    assert cut_off(box(100, 100, 200, 130), WIDTH, HEIGHT, (90.1, 400))
    assert not cut_off(box(100, 100, 200, 130), WIDTH, HEIGHT, (89.9, 400))
    assert cut_off(box(100, 100, 200, 130), WIDTH, HEIGHT, (20, 209.9))
    assert not cut_off(box(100, 100, 200, 130), WIDTH, HEIGHT, (20, 210.1))
    assert not cut_off(box(100, 100, 200, 101), WIDTH, HEIGHT, (97.9, 220))  # at least 2 px


def line(x1: float, y1: float, x2: float, y2: float) -> TextBox:
    return TextBox(box(x1, y1, x2, y2), 0.9)


def printed(text: str, at: tuple[int, int] = (200, 150), scale: float = 1.3) -> np.ndarray:
    image = np.full((HEIGHT, WIDTH, 3), 120, np.uint8)
    (w, h), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_DUPLEX, scale, 2)
    x, y = at
    cv2.rectangle(image, (x - 10, y - h - 10), (x + w + 10, y + 12), (235, 235, 235), -1)
    cv2.putText(image, text, (x, y), cv2.FONT_HERSHEY_DUPLEX, scale, (20, 20, 20), 2)
    return image


@pytest.fixture(scope="module")
def node() -> PlatesStage:
    stage = PlatesStage("plates", PlatesConfig())
    stage.loaded_model()
    return stage


def test_the_best_plate_shaped_line_of_each_crop_is_kept(node: PlatesStage) -> None:
    assert node.recogniser is not None
    image = printed("KX-4921")
    (w, h), _ = cv2.getTextSize("KX-4921", cv2.FONT_HERSHEY_DUPLEX, 1.3, 2)
    plate = line(192, 150 - h - 8, 208 + w, 160)
    noise = line(20, 300, 120, 330)  # grey: reads as nothing plate-shaped
    found = best_reads([image, image], [[noise, plate], [noise]], node.recogniser, PlateShape())
    assert found[0] is not None and found[0].read.text == "KX4921"
    assert found[0].raw == "KX-4921" and len(found[0].read.scores) == 6
    assert found[1] is None
    assert best_reads([image], [[plate]], node.recogniser, PlateShape(), [(200, 600)]) == [None]
    assert best_reads([image], [[plate]], node.recogniser, PlateShape(8, 10)) == [None]
    sign = printed("HELLO!")
    (w, h), _ = cv2.getTextSize("HELLO!", cv2.FONT_HERSHEY_DUPLEX, 1.3, 2)
    assert best_reads([sign], [[line(192, 150 - h - 8, 208 + w, 160)]], node.recogniser,
                      PlateShape()) == [None]  # fmt: skip


def test_vehicle_crops_read_exactly(node: PlatesStage) -> None:
    made = [scenes.plate_crop(ASSETS / "media", 100 + k, height)
            for k, height in enumerate((22, 28, 34, 40, 46))]  # fmt: skip
    found = node.read_pictures([picture for picture, _ in made])
    assert [f.read.text if f else None for f in found] == [car.plate for _, car in made]


def vehicle_frame(image: np.ndarray, pts: float, xyxy: list[float], track: int) -> Frame:
    dets = Detections(
        np.array([xyxy], np.float32), np.array([0.9], np.float32), np.array([2], np.int32),
        NAMES, track_id=np.array([track], np.int64),
    )  # fmt: skip
    info = StreamInfo("cam", "x", WIDTH, HEIGHT, None)
    return Frame("cam", round(pts * 10), pts, 0.0, image.copy(), info, detections=dets)


def test_a_vehicles_reads_make_one_plate_event_and_the_plate_follows_it(node: PlatesStage) -> None:
    stage = PlatesStage("plates", PlatesConfig(min_attempts=2, retry_s=0.15))
    stage.model, stage.recogniser = node.model, node.recogniser  # loaded once
    image = printed("KX-4921")
    frames = [vehicle_frame(image, k * 0.1, [150, 60, 520, 220], 7) for k in range(8)]
    stage.process_batch(frames[:4])
    stage.process_batch(frames[4:])
    events = [(f.seq, e) for f in frames for e in f.events]
    assert len(events) == 1
    seq, event = events[0]
    assert seq == 2  # reads at 0.0 and 0.2 (retry_s apart): it holds on the second
    assert event["plate"] == "KX4921" and event["track_id"] == 7 and event["class_name"] == "car"
    assert event["known"] is False and "name" not in event
    x1, y1, x2, y2 = event["box"]
    assert 180 < x1 < 210 and 300 < x2 < 400 and 100 < y1 < y2 < 170
    held = [f.detections.attributes[0]["plates"] for f in frames[2:]]
    assert all(isinstance(p, Plate) and p.text == "KX4921" for p in held)
    assert frames[1].detections.attributes is None, "nothing before it held"
    assert stage.counts["plates"] == 1 and stage.counts["crops"] == 2


def test_a_known_plate_is_named_on_the_event_and_the_vehicle(node: PlatesStage) -> None:
    config = PlatesConfig(min_attempts=1, known_plates={"KX-4927": "Alice"})
    stage = PlatesStage("plates", config)
    stage.model, stage.recogniser = node.model, node.recogniser
    frame = vehicle_frame(printed("KX-4921"), 0.0, [150, 60, 520, 220], 3)
    stage.process_batch([frame])
    (event,) = frame.events
    assert (event["name"], event["known_plate"], event["known"]) == ("Alice", "KX4927", True)
    assert frame.detections.attributes[0]["plates"].name == "Alice"
    assert stage.counts["known"] == 1


def test_the_plate_only_camera_reads_every_every_s_and_makes_sightings(node: PlatesStage) -> None:
    config = PlatesConfig(on_frame=True, every_s=0.2, min_attempts=2, gone_s=0.5)
    stage = PlatesStage("gate", config)
    stage.model, stage.recogniser = node.model, node.recogniser
    plate, other = printed("KX-4921"), printed("7HJK 582", (150, 250))
    info = StreamInfo("cam", "x", WIDTH, HEIGHT, None)
    pictures = [plate] * 5 + [other] * 5 + [plate] * 6
    frames = [Frame("cam", k, k * 0.1, 0.0, p.copy(), info) for k, p in enumerate(pictures)]
    for start in range(0, len(frames), 3):
        stage.process_batch(frames[start : start + 3])
    events = [(f.seq, e) for f in frames for e in f.events]
    assert [(seq, e["plate"], e["sighting"]) for seq, e in events] == [
        (2, "KX4921", 1),
        (8, "7HJK582", 2),
        (12, "KX4921", 3),  # unread from 0.4 to 1.0, past gone_s: a new sighting
    ]
    assert stage.counts["crops"] == 8  # frames 0, 2, 4, ... 14
    assert all("track_id" not in e for _, e in events)


def test_which_nodes_it_needs_and_its_keys() -> None:
    assert PlatesStage.upstream_needed(PlatesConfig()) == ("track",)
    assert PlatesStage.upstream_needed(PlatesConfig(on_frame=True)) == ()
    with pytest.raises(ValidationError, match="min_chars"):
        PlatesConfig(min_chars=8, max_chars=6)
    paths = PlatesConfig().models()
    assert Path(paths["model"]).name == "PP-OCRv6_det_small.onnx"
    assert Path(paths["rec_model"]).name == "PP-OCRv6_rec_small.onnx"
    assert PlatesConfig(model="a.onnx", rec_model="b.onnx").models() == {
        "model": "a.onnx", "rec_model": "b.onnx"}  # fmt: skip
