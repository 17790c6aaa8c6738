"""Bad input to a node that runs a model on objects: one line naming the node and the file,
exit 2, before any frame."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.conftest import ASSETS
from tests.e2e.helpers import cli

BASE = """
links = ["cam ! pre ! det ! nms ! track ! face ! who ! events"]
[nodes.cam]
type = "source"
uri = "{media}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
[nodes.track]
type = "track"
[nodes.face]
type = "detect_inside"
model = "yunet"
input_size = [96, 96]
[nodes.events]
type = "events"
path = "out/events.jsonl"
[nodes.who]
"""


def refused(tmp_path: Path, who: str) -> str:
    config = tmp_path / "bad.toml"
    config.write_text(BASE.format(media=ASSETS / "media" / "people.mp4") + who)
    result = cli(str(config), "--max-frames", "2", "--no-progress", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("error")]
    assert len(lines) == 1, result.stderr[-2000:]
    assert (
        not (tmp_path / "out" / "events.jsonl").exists()
        or not (tmp_path / "out" / "events.jsonl").read_text().strip()
    )
    return lines[0]


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ('type = "classify"\nmodel = "yolox-nano"', "not a score per class"),
        ('type = "embed"\nmodel = "yolox-nano"', "not a vector per picture"),
        (
            'type = "classify"\nmodel = "mobilefacenet"\nlabels_file = "nope.txt"',
            "nope.txt: no such file",
        ),
        (
            'type = "embed"\nmodel = "mobilefacenet"\non = "nobody"',
            "node 'nobody', which does not exist",
        ),
    ],
    ids=["detector-as-classifier", "detector-as-embedding", "labels-file", "unknown-on"],
)
def test_a_model_or_file_that_does_not_fit_is_one_line(
    tmp_path: Path, who: str, expected: str
) -> None:
    line = refused(tmp_path, who)
    assert "'who'" in line and expected in line, line


def test_an_empty_gallery_and_a_picture_without_a_face_are_named(tmp_path: Path) -> None:
    (tmp_path / "gallery" / "alice").mkdir(parents=True)
    who = 'type = "embed"\nmodel = "mobilefacenet"\non = "face"\ngallery = "gallery"'
    line = refused(tmp_path, who)
    assert "'who'" in line and "has no pictures" in line, line
    cv2.imwrite(
        str(tmp_path / "gallery" / "alice" / "wall.jpg"), np.full((120, 120, 3), 128, np.uint8)
    )
    line = refused(tmp_path, who)
    assert "wall.jpg" in line and "finds no face" in line, line


@pytest.mark.parametrize(
    ("who", "expected"),
    [
        ('type = "classify"\nmodel = "person-reid"\non_classes = ["person"]',
         "key 'model': model person-reidentification-retail-0288.onnx names no classes: it "
         "looks like an embedding model: a vector of 256 values (for an embed node)"),
        ('type = "embed"\nmodel = "yolox-nano"',
         "it looks like a yolox detector (for an infer or a detect_inside node)"),
        ('type = "embed"\nmodel = "person-reid"\non_classes = ["persn"]',
         "key 'on_classes': 'persn' is not a class of the detector's model yolox_nano.onnx "
         "(did you mean 'person'?)"),
        ('type = "embed"\nmodel = "notes.onnx"',
         "key 'model': notes.onnx: not an ONNX model (Error parsing message"),
        ('type = "embed"\nmodel = "person-reid"\ngallery = "gallery.jpg"',
         "key 'gallery': gallery.jpg: is a file, not a folder of name folders"),
    ],
    ids=["embedding-as-classifier", "detector-as-embedding", "class-typo", "not-onnx",
         "gallery-is-a-file"],
)  # fmt: skip
def test_the_wrong_kind_of_model_a_typo_or_a_file_is_named(
    tmp_path: Path, who: str, expected: str
) -> None:
    (tmp_path / "notes.onnx").write_text("these are my notes, not a model\n")
    (tmp_path / "gallery.jpg").write_bytes(b"\xff\xd8")
    line = refused(tmp_path, who)
    assert "node 'who'" in line and expected in line, line


def test_a_detector_file_that_is_not_onnx_is_named(tmp_path: Path) -> None:
    (tmp_path / "det.onnx").write_bytes(bytes(range(256)) * 20)
    config = tmp_path / "det.toml"
    graph = BASE.format(media=ASSETS / "media" / "people.mp4")
    graph = graph.replace('model = "yolox-nano"', 'model = "det.onnx"')
    config.write_text(graph + 'type = "embed"\nmodel = "person-reid"')
    result = cli(str(config), "--max-frames", "2", "--no-progress", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "error: node 'det' key 'model': det.onnx: not an ONNX model" in result.stderr
