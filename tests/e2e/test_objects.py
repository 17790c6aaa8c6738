"""A model on the objects the tracker carries, through the real pipeline on the sample clips:
its scores equal ONNX Runtime's on the same crops, its results reach every event, the counts,
the history and the video, and the per-object rules bound its model calls."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import av
import numpy as np
import onnxruntime as ort
import pytest

from tests.conftest import ASSETS, skip_without_opencl
from tests.e2e.helpers import cli, read_events
from tests.object_models import LABELS, SIZE, brightness_classifier
from vapipe.pipeline.detections import Detections
from vapipe.pipeline.frame import Frame, StreamInfo
from vapipe.stages.crops.warp import CropRule, crop_box, cut, warp_matrix, window_of
from vapipe.stages.events.store import EventStore, Query
from vapipe.stages.objects.classify import ClassifyStage
from vapipe.stages.objects.config import ClassifyConfig
from vapipe.stages.objects.stage import COUNTERS

TRAFFIC = ASSETS / "media" / "traffic.mp4"
VEHICLES = '["car", "truck", "bus"]'


def traffic_config(tmp_path: Path, model: Path, extra: str = "") -> Path:
    config = tmp_path / "kinds.toml"
    config.write_text(
        f"""
links = ["cam ! pre ! det ! nms ! track ! kind ! analytics ! events",
         "analytics ! history", "analytics ! video"]
[nodes.cam]
type = "source"
uri = "{TRAFFIC}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
conf = 0.2
classes = [2, 5, 7]
[nodes.track]
type = "track"
lost_s = 1.0
high_score = 0.3
[nodes.kind]
type = "classify"
model = "{model}"
on_classes = {VEHICLES}
{extra}
[nodes.analytics]
type = "analytics"
lines = [{{ name = "road", start = [320, 20], end = [320, 340] }}]
[nodes.events]
type = "events"
path = "out/events.jsonl"
[nodes.history]
type = "history"
path = "out/events.db"
[nodes.video]
type = "video"
path = "out/video.mp4"
"""
    )
    return config


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return brightness_classifier(tmp_path_factory.mktemp("models") / "brightness.onnx")


@pytest.fixture(scope="module")
def traffic_run(
    tmp_path_factory: pytest.TempPathFactory, classifier: Path
) -> tuple[Path, dict[str, Any]]:
    tmp_path = tmp_path_factory.mktemp("traffic")
    config = traffic_config(tmp_path, classifier)
    result = cli(str(config), "--stats", "stats.json", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp_path, json.loads((tmp_path / "stats.json").read_text())


def test_results_reach_frame_and_line_events_the_counts_and_the_history(
    traffic_run: tuple[Path, dict[str, Any]],
) -> None:
    tmp_path, stats = traffic_run
    events = read_events(tmp_path / "out" / "events.jsonl")
    labelled = [
        d
        for e in events
        if e["event"] == "frame"
        for d in e.get("detections", [])
        if "attributes" in d
    ]
    assert labelled, "no detection carried the classifier's result"
    assert {d["attributes"]["kind"]["label"] for d in labelled} <= set(LABELS)
    assert all(d["class_name"] in ("car", "truck", "bus") for d in labelled)
    crossings = [e for e in events if e["event"] == "line_cross"]
    carrying = [e for e in crossings if "attributes" in e]
    assert len(carrying) >= len(crossings) // 2 > 0
    # The last frame's counts split the crossings by label, as the events did.
    last = [e for e in events if e["event"] == "frame"][-1]["analytics"]["lines"]["road"]
    by_label: dict[str, int] = {}
    for event in carrying:
        label = event["attributes"]["kind"]["label"]
        by_label[label] = by_label.get(label, 0) + 1
    counted = {label: sum(d.values()) for label, d in last["by_attribute"]["kind"].items()}
    assert counted == by_label
    store = EventStore(tmp_path / "out" / "events.db", readonly=True)
    try:
        for label in by_label:
            page, _ = store.history(Query(type="line_cross", attribute=label, limit=1000))
            assert len(page) == by_label[label]
            assert all(e["attributes"]["kind"]["label"] == label for e in page)
            page, _ = store.history(Query(attribute=f"kind:{label}", limit=1000))
            assert len(page) >= by_label[label]
        page, _ = store.history(Query(attribute=f"other:{next(iter(by_label))}", limit=1000))
        assert page == []
    finally:
        store.close()
    kind = stats["stages"]["kind"]
    assert set(COUNTERS) <= set(kind)
    assert kind["model_calls"] < kind["crops"], "crops of several objects go in one call"
    # A still crowd costs nothing: no object had more calls than its rounds allow.
    assert kind["most_calls_per_object"] <= kind["attempts_per_round"] * 8
    assert (tmp_path / "out" / "video.mp4").stat().st_size > 0


def frames_with_boxes(events: list[dict[str, Any]], count: int) -> list[Frame]:
    """The clip's first ``count`` frames, each with the tracked boxes its frame event gave."""
    boxes = {e["seq"]: e.get("detections", []) for e in events if e["event"] == "frame"}
    frames = []
    with av.open(str(TRAFFIC)) as container:
        for seq, picture in enumerate(container.decode(video=0)):
            if seq >= count:
                break
            image = picture.to_ndarray(format="bgr24")
            found = boxes.get(seq, [])
            stream = StreamInfo("cam", str(TRAFFIC), image.shape[1], image.shape[0], None)
            dets = Detections(
                np.array([d["xyxy"] for d in found], np.float32).reshape(-1, 4),
                np.array([d["score"] for d in found], np.float32),
                np.array([d["class_id"] for d in found], np.int32),
                ("person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck"),
                np.array([d["track_id"] for d in found], np.int64),
            )
            frames.append(Frame("cam", seq, seq / 24.0, 0.0, image, stream, detections=dets))
    return frames


def test_the_node_scores_equal_onnx_runtime_on_the_same_crops(
    traffic_run: tuple[Path, dict[str, Any]], classifier: Path
) -> None:
    """The oracle: every object's first attempt, batched across frames by the node, against
    ONNX Runtime run directly, crop by crop, with the test's own normalisation."""
    tmp_path, _ = traffic_run
    events = read_events(tmp_path / "out" / "events.jsonl")
    config = ClassifyConfig(
        model=str(classifier), on_classes=["car", "truck", "bus"], attempts=1,
        min_attempts=1, agree=0.01, threshold=0.0, grow=None, max_batch=32,
    )  # fmt: skip
    stage = ClassifyStage("kind", config)
    stage.loaded_model()
    frames = frames_with_boxes(events, 160)
    for start in range(0, len(frames), 8):
        stage.process_batch(frames[start : start + 8])
    session = ort.InferenceSession(str(classifier), providers=["CPUExecutionProvider"])
    rule = CropRule()
    checked = 0
    worst = 0.0
    for frame in frames:
        dets = frame.detections
        assert dets is not None
        for index, track_id in enumerate(
            dets.track_id.tolist() if dets.track_id is not None else []
        ):
            state = stage.memory.objects.get(("cam", track_id))
            if state is None or state.last_try != frame.pts or state.result is None:
                continue  # not the frame this object was tried on
            box = dets.xyxy[index]
            rect = crop_box(box, rule)
            matrix = warp_matrix(rect, (SIZE, SIZE), "letterbox")
            crop = cut(frame.image, matrix, (SIZE, SIZE), window_of(rect, matrix, (SIZE, SIZE)))
            tensor = (crop[..., ::-1].astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
            logits = session.run(None, {"images": np.ascontiguousarray(tensor)})[0][0]
            probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
            assert state.result.label == LABELS[int(probs.argmax())]
            worst = max(worst, abs(state.result.score - float(probs.max())))
            # The label means what it says: the crop's own brightness.
            assert state.result.label == ("light" if tensor.mean() > 0.45 else "dark") or (
                abs(tensor.mean() - 0.45) < 0.03
            )
            checked += 1
    assert checked >= 5, checked
    assert worst <= 1e-4, worst
    assert stage.memory.most_calls == 1  # one attempt per object, as configured
    stage.close()
    # Three attempts a frame apart: the objects of 8 frames share each model call.
    again = ClassifyStage("kind", config.model_copy(update={"attempts": 3, "retry_s": 0.0}))
    again.loaded_model()
    for start in range(0, len(frames), 8):
        again.process_batch(frames[start : start + 8])
    assert again.counts["crops"] >= 2 * again.counts["model_calls"]
    assert again.memory.most_calls <= 3  # never past the attempts of a round
    again.close()


def test_line_events_published_over_mqtt_carry_the_label(tmp_path: Path, classifier: Path) -> None:
    from tests.e2e.helpers import wait_for
    from tests.e2e.mqtt import Subscriber, broker
    from tests.e2e.test_mqtt import with_mqtt

    with broker(tmp_path / "broker") as server:
        subscriber = Subscriber(server.port)
        text = with_mqtt(server.port, 'event_types = ["line_cross"]\n')
        text = text.replace("track ! analytics", "track ! kind ! analytics")
        text += f'\n[nodes.kind]\ntype = "classify"\nmodel = "{classifier}"\n'
        config = tmp_path / "a.toml"
        config.write_text(text)
        result = cli(str(config), "--max-frames", "240", "--no-progress", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        written = [
            e for e in read_events(tmp_path / "out/analytics.jsonl") if e["event"] == "line_cross"
        ]
        wait_for(lambda: len(subscriber.received()) >= len(written), 20, "every crossing")
        received = [payload for _, payload in subscriber.received()]
        subscriber.close()
    assert received == written and written
    labelled = [e for e in received if "kind" in e.get("attributes", {})]
    assert labelled and {e["attributes"]["kind"]["label"] for e in labelled} <= set(LABELS)


def attributes_by_object(events: list[dict[str, Any]]) -> dict[tuple[int, int], dict[str, Any]]:
    """(frame, track id) -> the classifier's result on that frame."""
    return {
        (e["seq"], d["track_id"]): d["attributes"]["kind"]
        for e in events
        if e["event"] == "frame"
        for d in e.get("detections", [])
        if "attributes" in d
    }


def test_crops_cut_by_the_opencl_kernel_give_the_numpy_path_s_results(
    traffic_run: tuple[Path, dict[str, Any]], classifier: Path, tmp_path: Path
) -> None:
    """The same run with ``crops = "opencl"`` (PoCL's CPU device here): the decoded planes of
    each batch's frames uploaded once, every crop cut by one kernel. The model's input is
    within one level of the numpy path's, so every object gets the same label at nearly the
    same score, on the same frames."""
    skip_without_opencl()
    numpy_dir, numpy_stats = traffic_run
    config = traffic_config(tmp_path, classifier, 'crops = "opencl"')
    result = cli(str(config), "--stats", "stats.json", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "crops cut by one OpenCL kernel" in result.stderr
    stats = json.loads((tmp_path / "stats.json").read_text())["stages"]["kind"]
    assert stats["failed"] == numpy_stats["stages"]["kind"]["failed"] == 0
    expected = attributes_by_object(read_events(numpy_dir / "out" / "events.jsonl"))
    got = attributes_by_object(read_events(tmp_path / "out" / "events.jsonl"))
    # How frames batch up can move an attempt by a frame (one that ends a round in the same
    # batch as the object's next frame); nearly all objects hold on the same frames.
    both = got.keys() & expected.keys()
    assert len(both) >= 0.97 * max(len(got), len(expected)) and len(both) > 100
    worst = max(abs(got[key]["score"] - expected[key]["score"]) for key in both)
    assert worst <= 0.01, worst  # one level of input moves this model's score far less
    assert all(got[key]["label"] == expected[key]["label"] for key in both)


def test_a_node_that_never_crops_says_so_and_why(tmp_path: Path) -> None:
    config = tmp_path / "idle.toml"
    config.write_text("""links = ["cam ! pre ! det ! nms ! track ! who ! events"]
[nodes.cam]
type = "source"
uri = "sample:traffic"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
[nodes.track]
type = "track"
[nodes.who]
type = "embed"
model = "person-reid"
on_classes = ["person"]
[nodes.events]
type = "events"
path = "out/events.jsonl"
""")
    result = cli(str(config), "--max-frames", "30", "--no-progress", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stderr.splitlines() if x.startswith("who: made no crop"))
    assert re.fullmatch(r"who: made no crop in the run: objects not of on_classes "
                        r"\['person'\], \d+ times", line), line  # fmt: skip
