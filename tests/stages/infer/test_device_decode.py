"""Head decode and NMS on the torch device keep what the numpy path and the nms node keep.

Run with torch on the CPU here; the same code runs on CUDA and ROCm devices.
"""

from __future__ import annotations

import functools
import subprocess
import sys

import av
import cv2
import numpy as np
import pytest

from tests.conftest import asset
from vapipe.stages.infer.backends.base import batch_ladder
from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
from vapipe.stages.infer.heads import Family, decode
from vapipe.stages.nms import NmsConfig, NmsStage, Selection

torch = pytest.importorskip("torch")

from vapipe.stages.infer.device_decode import (  # noqa: E402
    DeviceDecoder,
    _batched_nms,
    torchvision_batched_nms,
)

MODELS = {
    "yolox_nano.onnx": (Family.YOLOX, 416, "bgr", 1.0),
    "yolov8n.onnx": (Family.YOLOV8, 640, "rgb", 1 / 255),
}


@functools.cache
def raw_outputs(model: str) -> np.ndarray:
    """The model's raw head on the clip frames, from onnxruntime (once per model)."""
    _, size, color, scale = MODELS[model]
    batch = clip_batch(size, color, scale)
    backend = OnnxBackend(
        str(asset("models", model)), name="det", config=OnnxRuntimeConfig(providers=["cpu"]),
        max_batch=1,
    )  # fmt: skip
    return np.concatenate([backend.run(batch[i : i + 1]) for i in range(len(batch))])


def clip_batch(size: int, color: str, scale: float) -> np.ndarray:
    """Eight frames of each shared clip, squeezed to the model's input."""
    tensors = []
    for clip in ("people.mp4", "traffic.mp4", "horses.mp4"):
        with av.open(str(asset("media", clip))) as container:
            for index, frame in enumerate(container.decode(video=0)):
                if index % 10 == 0:
                    image = cv2.resize(frame.to_ndarray(format="bgr24"), (size, size))
                    if color == "rgb":
                        image = image[:, :, ::-1]
                    tensors.append(image.transpose(2, 0, 1).astype(np.float32) * scale)
                if len(tensors) % 8 == 0 and index >= 70:
                    break
    return np.stack(tensors)


def selection(**changes: object) -> tuple[Selection, NmsStage]:
    config = NmsConfig(**changes)  # type: ignore[arg-type]
    return Selection.of("nms", config), NmsStage("nms", config)


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"conf": 0.1, "iou": 0.6},
        {"class_agnostic": True, "max_det": 5},
        {"classes": [0, 2]},
        {"max_candidates": 12},
    ],
)
def test_device_decode_keeps_what_numpy_and_the_nms_node_keep(model: str, settings: dict) -> None:
    family, size, _, _ = MODELS[model]
    raw = raw_outputs(model)
    names = tuple(f"c{i}" for i in range(80))
    chosen, nms = selection(**settings)
    expected = [nms.select(found, None) for found in decode(family, raw, size, size, names)]
    got = DeviceDecoder(family, size, size, names, chosen)(torch.from_numpy(raw))
    assert len(got) == len(expected) == 24
    total = 0
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.suppressed
        final = nms.select(mine, None)  # what the nms node does with them downstream
        assert len(final) == len(theirs)
        # The decoder's own selection is final: the node only maps it to frame pixels.
        assert len(mine) == len(final) <= chosen.max_det
        assert (mine.score >= chosen.conf).all()
        order, reference = np.lexsort(final.xyxy.T), np.lexsort(theirs.xyxy.T)
        np.testing.assert_allclose(final.xyxy[order], theirs.xyxy[reference], atol=1e-3)
        np.testing.assert_allclose(final.score[order], theirs.score[reference], atol=1e-5)
        assert (final.class_id[order] == theirs.class_id[reference]).all()
        total += len(final)
    assert total > 20  # real clips: people, cars and horses were found


def test_plain_torch_nms_matches_torchvision() -> None:
    ops = pytest.importorskip("torchvision.ops")
    kernel = torchvision_batched_nms(torch)
    assert kernel is not None
    rng = np.random.default_rng(11)
    for _ in range(20):
        count = int(rng.integers(1, 3000))
        corners = rng.uniform(0, 400, (count, 2))
        boxes = torch.from_numpy(
            np.concatenate((corners, corners + rng.uniform(5, 120, (count, 2))), axis=1)
        ).float()
        scores = torch.from_numpy(rng.random(count)).float()
        groups = torch.from_numpy(rng.integers(0, 4, count))
        theirs = ops.batched_nms(boxes, scores, groups, 0.5)
        # Past 1,000 boxes torchvision runs one NMS per group, which sorts ties otherwise.
        if count <= 1000:
            assert _batched_nms(boxes, scores, groups, 0.5).tolist() == theirs.tolist()
        assert kernel(boxes, scores, groups, 0.5).tolist() == theirs.tolist()


def test_the_decoder_uses_torchvisions_kernel_without_importing_torchvision() -> None:
    """Importing torchvision costs seconds of start-up; its NMS kernel alone, milliseconds."""
    pytest.importorskip("torchvision")
    code = (
        "import sys, torch\n"
        "from vapipe.stages.infer.device_decode import DeviceDecoder\n"
        "from vapipe.stages.nms import Selection\n"
        "from vapipe.stages.infer.heads import Family\n"
        "s = Selection('nms', 0.25, 0.45, 300, 3000, False, None)\n"
        "d = DeviceDecoder(Family.YOLOV8, 640, 640, ['a'], s)\n"
        "print(d._batched_nms.__name__, 'torchvision' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["batched_nms", "False"]


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("fault", [None, "wrong", "fail"])
def test_the_graphed_decode_keeps_exactly_what_op_by_op_keeps(
    model: str, fault: str | None
) -> None:
    """The fixed-shape part replayed by one graph per output shape (a stand-in for CUDA's
    capture, tests/fakes/graphs.py): the same detections, bit for bit, batch after batch and
    size after size; a replay that differs, or a capture that fails, turns graphs off and the
    detections stay right."""
    from tests.fakes.graphs import StandInGraphs

    family, size, _, _ = MODELS[model]
    raw = torch.from_numpy(raw_outputs(model))
    names = tuple(f"c{i}" for i in range(80))
    chosen, _ = selection(classes=[0, 2, 7, 17])
    plain = DeviceDecoder(family, size, size, names, chosen)
    assert plain.graphs is None  # no model graphs, none here
    # The model's sizes at max_batch 12 (1, 2, 4, 8, 12): batches are padded to them.
    graphed = DeviceDecoder(family, size, size, names, chosen, graph_sizes=batch_ladder(12))
    graphed.graphs = stand_in = StandInGraphs(torch, **({fault: True} if fault else {}))
    for batch in (raw[:8], raw[8:16], raw[16:20], raw[:3], raw[3:7], raw[20:23], raw[:10]):
        mine, theirs = graphed(batch), plain(batch)
        assert len(mine) == len(theirs) == len(batch)
        for a, b in zip(mine, theirs, strict=True):
            assert np.array_equal(a.xyxy, b.xyxy) and np.array_equal(a.score, b.score)
            assert np.array_equal(a.class_id, b.class_id) and a.suppressed
    assert sum(len(found) for found in plain(raw)) > 10
    if fault is None:
        # Batches of 8, 8, 4, 3, 4, 3 and 10 frames: graphs of 8, 4 and 12 rows (3 is padded
        # to 4, 10 to 12).
        assert [shape[0] for shape in stand_in.captured] == [8, 4, 12]
        assert stand_in.replays == 4 and stand_in.enabled
    else:
        assert not stand_in.enabled and stand_in.replays == 0


def test_boxes_of_other_images_and_classes_never_suppress_each_other() -> None:
    """One NMS call for the whole batch keeps images and classes apart by a group id: the same
    box in two images, and in two classes of one image, are all kept (the last class of the
    first image and the first of the second included)."""
    output = torch.zeros((2, 84, 10))  # YOLOv8's head: 4 box values, 80 class scores, anchors
    for image, anchor, class_id, score in ((0, 0, 79, 0.9), (1, 0, 0, 0.8), (1, 1, 16, 0.7),
                                           (1, 2, 16, 0.6)):  # fmt: skip
        output[image, :4, anchor] = torch.tensor([30.0, 30.0, 40.0, 40.0])
        output[image, 4 + class_id, anchor] = score
    chosen, _ = selection()
    found = DeviceDecoder(Family.YOLOV8, 64, 64, [f"c{i}" for i in range(80)], chosen)(output)
    assert [d.class_id.tolist() for d in found] == [[79], [0, 16]]  # the second 16 suppressed
    assert found[1].score.tolist() == pytest.approx([0.8, 0.7])
    assert found[0].xyxy.tolist() == [[10.0, 10.0, 50.0, 50.0]]


def yolov8_head(rows: list[tuple[int, int, int, float, list[float]]], anchors: int = 10) -> object:
    """A YOLOv8 head of two images: (image, anchor, class, score, cx cy w h) per row."""
    output = torch.zeros((2, 84, anchors))
    for image, anchor, class_id, score, box in rows:
        output[image, :4, anchor] = torch.tensor(box)
        output[image, 4 + class_id, anchor] = score
    return output


def test_group_ids_of_two_images_never_meet() -> None:
    """Image 0's class 64 and image 1's class 16 get distinct NMS groups (a group id made
    with another operator than image * classes + class, e.g. xor, gives both 64)."""
    box = [30.0, 30.0, 20.0, 20.0]
    output = yolov8_head([(0, 0, 64, 0.9, box), (1, 0, 16, 0.8, box)])
    chosen, _ = selection()
    found = DeviceDecoder(Family.YOLOV8, 64, 64, [f"c{i}" for i in range(80)], chosen)(output)
    assert [d.class_id.tolist() for d in found] == [[64], [16]]


def test_a_score_at_conf_is_kept_and_a_non_finite_box_is_not() -> None:
    """conf is inclusive (as the nms node's ``>=``); a box with a NaN or infinite coordinate
    is dropped even when its score is finite and high."""
    output = yolov8_head([
        (0, 0, 1, 0.5, [30.0, 30.0, 10.0, 10.0]),           # exactly at conf: kept
        (0, 1, 2, 0.9, [float("nan"), 30.0, 10.0, 10.0]),   # NaN centre: dropped
        (1, 0, 3, 0.9, [30.0, 30.0, float("inf"), 10.0]),   # infinite size: dropped
        (1, 1, 4, 0.49, [10.0, 10.0, 4.0, 4.0]),            # under conf: dropped
    ])  # fmt: skip
    chosen, _ = selection(conf=0.5)
    found = DeviceDecoder(Family.YOLOV8, 64, 64, [f"c{i}" for i in range(80)], chosen)(output)
    assert [d.class_id.tolist() for d in found] == [[1], []]
    assert found[0].score.tolist() == [0.5]


def test_max_candidates_bounds_each_image_of_a_small_batch() -> None:
    """``max_candidates`` keeps each image's best candidates, whatever the batch's size (a
    batch of 2 images, 3 candidates each, 2 kept)."""
    rows = [(image, anchor, anchor, 0.9 - 0.1 * anchor, [10.0 + 20 * anchor, 10.0, 8.0, 8.0])
            for image in (0, 1) for anchor in range(3)]  # fmt: skip
    chosen, _ = selection(max_candidates=2)
    names = [f"c{i}" for i in range(80)]
    found = DeviceDecoder(Family.YOLOV8, 64, 64, names, chosen)(yolov8_head(rows))
    assert [d.class_id.tolist() for d in found] == [[0, 1], [0, 1]]
