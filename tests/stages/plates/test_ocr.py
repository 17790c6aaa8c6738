"""PP-OCR's pieces: the detector's map made into boxes, lines joined, a box cut out straight,
the recogniser's input and output, and its character list."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from vapipe.pipeline.errors import ConfigError
from vapipe.stages.plates import ocr


def blob_map(*rects: tuple[int, int, int, int, float], size: tuple[int, int] = (100, 200)):
    prob = np.zeros(size, np.float32)
    for x1, y1, x2, y2, value in rects:
        prob[y1:y2, x1:x2] = value
    return prob


def test_a_region_becomes_its_rectangle_grown_by_unclip() -> None:
    (found,) = ocr.text_boxes(blob_map((50, 40, 110, 50, 0.9)), ocr.DbRules(unclip=1.6))
    assert found.score == pytest.approx(0.9, abs=1e-4)
    (x1, y1), (x2, y2) = found.corners.min(axis=0), found.corners.max(axis=0)
    # minAreaRect of the pixel centres: 59 x 9; grown by 59 * 9 * 1.6 / (2 * 68) = 6.25.
    grow = 59 * 9 * 1.6 / (2 * 68)
    assert (x2 - x1) == pytest.approx(59 + 2 * grow, abs=0.05)
    assert (y2 - y1) == pytest.approx(9 + 2 * grow, abs=0.05)
    assert (x1 + x2) / 2 == pytest.approx(79.5, abs=0.05)


def test_weak_thin_and_faint_regions_are_dropped() -> None:
    rules = ocr.DbRules(thresh=0.3, box_thresh=0.5, min_side=3)
    prob = blob_map((10, 10, 60, 20, 0.45), (10, 40, 60, 42, 0.9), (10, 70, 60, 80, 0.2))
    assert ocr.text_boxes(prob, rules) == []
    kept = ocr.text_boxes(prob, ocr.DbRules(thresh=0.3, box_thresh=0.4, min_side=3))
    assert len(kept) == 1  # the 0.45 one, once box_thresh allows it


def test_the_score_is_the_regions_mean_not_its_box() -> None:
    prob = blob_map((20, 20, 80, 30, 0.6))
    prob[24, 30:40] = 1.0
    (found,) = ocr.text_boxes(prob, ocr.DbRules())
    assert found.score == pytest.approx((0.6 * 600 + 0.4 * 10) / 600, abs=1e-4)


def box(x1: float, y1: float, x2: float, y2: float) -> np.ndarray:
    return np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]], np.float32)


def region(x1: float, y1: float, x2: float, y2: float, score: float = 0.9) -> ocr.TextBox:
    return ocr.TextBox(box(x1, y1, x2, y2), score)


def test_words_of_one_line_are_joined_and_other_lines_are_not() -> None:
    lines = ocr.joined_lines(
        [region(10, 10, 40, 30), region(52, 12, 90, 31, 0.7), region(10, 60, 40, 80)]
    )
    assert len(lines) == 2
    first = min(lines, key=lambda b: b.corners[:, 1].min())
    joined = first.corners
    assert first.score == 0.7
    assert joined[:, 0].min() == pytest.approx(10, abs=1) and joined[:, 0].max() == pytest.approx(
        90, abs=1
    )
    # Too far apart (more than 1.2 heights): two texts, not one.
    assert len(ocr.joined_lines([region(10, 10, 40, 30), region(70, 10, 100, 30)])) == 2
    assert len(ocr.joined_lines([region(10, 10, 40, 30), region(63, 10, 100, 30)])) == 1
    # Half a height apart vertically: another line.
    assert len(ocr.joined_lines([region(10, 10, 40, 30), region(45, 21, 80, 41)])) == 2
    assert ocr.joined_lines([]) == []


def test_corners_are_ordered_clockwise_from_the_top_left() -> None:
    shuffled = np.array([[90, 40], [10, 10], [10, 40], [90, 10]], np.float32)
    assert ocr.ordered(shuffled).tolist() == [[10, 10], [90, 10], [90, 40], [10, 40]]


def test_a_box_is_cut_out_straight_at_the_recognisers_height() -> None:
    image = np.zeros((100, 200, 3), np.uint8)
    image[20:40, 30:130] = 255  # a white band 100 x 20
    line = ocr.straightened(image, box(30, 20, 130, 40), max_width=320)
    assert line.shape == (48, 240, 3)  # 48 high, 100 / 20 * 48 wide
    assert line.mean() > 240
    assert ocr.straightened(image, box(30, 20, 130, 40), max_width=100).shape == (48, 100, 3)


def test_the_recognisers_input_is_scaled_and_padded_right() -> None:
    crop = np.full((48, 10, 3), 255, np.uint8)
    crop[:, :, 0] = 0
    batch = ocr.rec_batch([crop], 16)
    assert batch.shape == (1, 3, 48, 16)
    assert batch[0, 0, 0, 0] == -1.0 and batch[0, 1, 0, 0] == 1.0
    assert (batch[0, :, :, 10:] == 0).all()


def test_ctc_merges_repeats_and_drops_blanks() -> None:
    chars = ["", "A", "B", " "]
    columns = [1, 1, 0, 1, 2, 2, 0, 3, 0]  # A A _ A B B _ ' ' _
    probs = np.full((len(columns), 4), 0.01, np.float32)
    for at, index in enumerate(columns):
        probs[at, index] = 0.9 - 0.1 * (at == 4)
    text, scores = ocr.ctc_read(probs, chars)
    assert text == "AAB "
    assert scores == pytest.approx((0.9, 0.9, 0.8, 0.9))


def test_the_character_list_fits_the_models_classes(tmp_path: Path) -> None:
    assert ocr.characters("A\nB", 4, "m.onnx", None) == ["", "A", "B", " "]
    assert ocr.characters("A\nB\n ", 4, "m.onnx", None) == ["", "A", "B", " "]
    listed = tmp_path / "chars.txt"
    listed.write_text("0\n1\n2", encoding="utf-8")
    assert ocr.characters(None, 5, "m.onnx", str(listed)) == ["", "0", "1", "2", " "]
    with pytest.raises(ConfigError, match=r"lists 3 characters; model m.onnx reads 9 classes"):
        ocr.characters(None, 9, "m.onnx", str(listed))
    with pytest.raises(ConfigError, match="no character list in its metadata"):
        ocr.characters(None, 9, "m.onnx", None)
    with pytest.raises(ConfigError, match="cannot read the character list"):
        ocr.characters(None, 9, "m.onnx", str(tmp_path / "none.txt"))


def test_the_rapidocr_models_are_found_or_named(monkeypatch: pytest.MonkeyPatch) -> None:
    det = ocr.rapidocr_model("det", "model")
    assert det.endswith("PP-OCRv6_det_small.onnx") and Path(det).is_file()
    monkeypatch.setattr(ocr.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"pip install 'vapipe\[ocr\]'") as caught:
        ocr.rapidocr_model("rec", "rec_model")
    assert caught.value.key == "rec_model"


def test_a_real_line_of_text_reads() -> None:
    """The shipped models on a rendered plate (no mock: the whole chain of this module)."""
    import onnxruntime as ort

    image = np.full((60, 220, 3), 235, np.uint8)
    cv2.putText(image, "KX-4921", (12, 44), cv2.FONT_HERSHEY_DUPLEX, 1.2, (20, 20, 20), 2)
    rec = ort.InferenceSession(ocr.rapidocr_model("rec", "rec_model"))
    listed = rec.get_modelmeta().custom_metadata_map["character"]
    chars = ocr.characters(listed, rec.get_outputs()[0].shape[-1], "rec", None)
    line = ocr.straightened(image, box(4, 8, 216, 54), 320)
    output = rec.run(None, {rec.get_inputs()[0].name: ocr.rec_batch([line], 320)})[0][0]
    text, scores = ocr.ctc_read(output, chars)
    assert text == "KX-4921" and min(scores) > 0.8


def test_paddleocrs_db_settings_are_the_defaults() -> None:
    rules = ocr.DbRules()
    assert (rules.thresh, rules.box_thresh, rules.unclip, rules.min_side) == (0.3, 0.5, 1.6, 3.0)


def test_the_thresholds_are_strict_above_and_inclusive_at_the_box_score() -> None:
    at_thresh = blob_map((20, 20, 80, 30, 0.3))
    assert ocr.text_boxes(at_thresh, ocr.DbRules(thresh=0.3, box_thresh=0.1)) == []
    at_box = blob_map((20, 20, 80, 30, 0.5))
    assert len(ocr.text_boxes(at_box, ocr.DbRules(thresh=0.3, box_thresh=0.5))) == 1


@pytest.mark.parametrize("faint_first", [True, False])
def test_a_faint_region_does_not_stop_the_search(faint_first: bool) -> None:
    faint, strong = (20, 10, 80, 20, 0.35), (20, 60, 80, 70, 0.9)
    prob = blob_map(*((faint, strong) if faint_first else (strong, faint)))
    (found,) = ocr.text_boxes(prob, ocr.DbRules())
    assert found.score == pytest.approx(0.9, abs=1e-4)


def test_three_words_on_a_line_make_one_line_in_any_order() -> None:
    words = [region(10, 10, 40, 30), region(50, 10, 80, 30), region(90, 10, 120, 30)]
    for order in (words, words[::-1], [words[1], words[2], words[0]]):
        (line,) = ocr.joined_lines(order)
        assert line.corners[:, 0].min() == pytest.approx(10, abs=1)
        assert line.corners[:, 0].max() == pytest.approx(120, abs=1)


def test_a_line_is_judged_by_the_taller_word_and_the_centres() -> None:
    short, tall = region(10, 10, 40, 30), region(70, 0, 100, 40)  # 30 apart: over 1.2 x 20
    assert len(ocr.joined_lines([short, tall])) == 1  # within 1.2 x 40
    assert len(ocr.joined_lines([tall, short])) == 1
    assert len(ocr.joined_lines([region(10, 10, 40, 30), region(45, 19, 80, 39)])) == 1
    assert len(ocr.joined_lines([region(10, 10, 40, 30), region(45, 21, 80, 41)])) == 2
    assert len(ocr.joined_lines([region(110, 10, 140, 30), region(10, 10, 40, 30)])) == 2


def test_a_list_longer_than_the_models_classes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        ocr.characters("A\nB\nC\nD", 4, "m.onnx", None)
    assert "m.onnx's metadata lists 4 characters" in caught.value.message
    assert "2 characters expected" in caught.value.message
    listed = tmp_path / "chars.txt"
    listed.write_text("A\nB\nC\nD", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{listed} lists 4 characters"):
        ocr.characters(None, 4, "m.onnx", str(listed))
