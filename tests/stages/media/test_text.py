"""Labels in any script: ASCII as OpenCV draws it, other text with a Unicode font, and what
no font draws as its ASCII letter or '?', said once."""

from __future__ import annotations

import logging

import cv2
import numpy as np
import pytest

from vapipe.stages.media import text


def canvas() -> np.ndarray:
    return np.full((40, 200, 3), 40, np.uint8)


def drawn(label: str) -> np.ndarray:
    image = canvas()
    text.put_text(image, label, (4, 28), 0.5, (255, 255, 255))
    return image


needs_font = pytest.mark.skipif(
    text.unicode_font(18) is None, reason="no Unicode font here (fonts-dejavu-core)"
)


def test_ascii_is_drawn_exactly_as_opencv_draws_it() -> None:
    expected = canvas()
    cv2.putText(expected, "car 0.91", (4, 28), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255),
                1, cv2.LINE_AA)  # fmt: skip
    assert np.array_equal(drawn("car 0.91"), expected)
    assert text.text_size("car 0.91", 0.5) == cv2.getTextSize(
        "car 0.91", cv2.FONT_HERSHEY_SIMPLEX, 0.5, 1
    )


@needs_font
def test_letters_past_ascii_are_drawn_as_themselves(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="vapipe.stages.media.text"):
        accented, plain = drawn("Zoë Łukasz"), drawn("Zoe Lukasz")
    assert not caplog.records, "a font that has the letters draws them without a word"
    assert (accented > 40).any() and not np.array_equal(accented, plain)
    (width, height), _ = text.text_size("Zoë", 0.5)
    assert 15 < width < 60 and 6 < height < 20  # about the size of OpenCV's letters


@needs_font
def test_an_emoji_no_font_has_is_a_question_mark_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="vapipe.stages.media.text"):
        first = drawn("\U0001f697 car #7")
        drawn("\U0001f697 car #7")
    assert np.array_equal(first, drawn("? car #7"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "is drawn as '? car #7'" in said[0] and "no glyph" in said[0]


def test_without_a_unicode_font_letters_lose_their_accents_and_it_is_said(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("VAPIPE_FONT", "/nonexistent/font.ttf")
    text.unicode_font.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="vapipe.stages.media.text"):
            image = drawn("Renée 张")
        assert np.array_equal(image, drawn("Renee ?"))
        said = " ".join(r.getMessage() for r in caplog.records)
        assert "VAPIPE_FONT=/nonexistent/font.ttf is not a font" in said
        assert "'Renée 张' is drawn as 'Renee ?'" in said and "set VAPIPE_FONT" in said
    finally:
        monkeypatch.delenv("VAPIPE_FONT")
        text.unicode_font.cache_clear()


@needs_font
@pytest.mark.parametrize("origin", [(-30, 5), (190, 39), (-500, -500), (4, 60)])
def test_text_partly_or_wholly_off_the_frame_is_clipped(origin: tuple[int, int]) -> None:
    image = canvas()
    text.put_text(image, "Zoë", origin, 0.5, (255, 255, 255))  # no error
    inside = 0 <= origin[0] < 200 and 0 <= origin[1] < 40 + 15
    assert (image > 40).any() == (inside or origin == (-30, 5)), origin


@needs_font
@pytest.mark.parametrize("origin", [(4, 28), (-6, 9), (170, 38)])  # whole, clipped left/top, right
@pytest.mark.parametrize("label", ["Zoë Łukasz", "jë"])  # "j" reaches left of and below its origin
def test_text_past_ascii_is_pillow_s_drawing_blended_in_the_ink(
    origin: tuple[int, int], label: str
) -> None:
    from PIL import Image, ImageDraw

    ink = (40, 180, 250)  # BGR
    image = canvas()
    text.put_text(image, label, origin, 0.5, ink)
    font = text.unicode_font(round(0.5 * text.PIXELS_PER_SCALE))
    reference = Image.new("RGB", (200, 40), (40, 40, 40))
    ImageDraw.Draw(reference).text(origin, label, font=font, fill=ink[::-1], anchor="ls")
    expected = np.asarray(reference)[..., ::-1].astype(int)
    differ = np.abs(image.astype(int) - expected)
    # Pillow blends as we do: equal here; a level off at a pixel or two is rounding elsewhere
    assert differ.max() <= 1 and np.count_nonzero(differ) <= 2, np.count_nonzero(differ)
    assert (image != 40).any()
    left, top, right, bottom = font.getbbox(label, anchor="ls")
    assert text.text_size(label, 0.5) == ((right - left, -top), max(bottom, 0))


def test_nothing_is_drawn_for_text_wholly_outside_or_empty() -> None:
    image = canvas()
    text.put_text(image, "ë", (500, 500), 0.5, (255, 255, 255))
    text.put_text(image, "\u200b", (4, 28), 0.5, (255, 255, 255))  # a zero-width space
    assert (image == 40).all()
