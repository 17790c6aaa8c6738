"""Hiding regions of a picture: only the region changes, a fill is exact, blur and pixelate
leave ``cells`` cells across the shorter side whatever the region's size, polygons are
hidden through their mask, and regions outside the frame are clipped or refused."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from vapipe.stages.media.redaction import (
    Method,
    clip_box,
    grown,
    hidden,
    hide_box,
    hide_polygon,
)


def texture(height: int = 120, width: int = 160, seed: int = 0) -> np.ndarray:
    """Fine detail everywhere (what a face has and a redaction must not keep)."""
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)


def detail(patch: np.ndarray) -> float:
    """The mean difference between neighbouring pixels: high for texture, ~0 when smooth."""
    patch = patch.astype(np.float32)
    return float(np.abs(np.diff(patch, axis=1)).mean() + np.abs(np.diff(patch, axis=0)).mean())


def test_clip_box_covers_the_box_in_whole_pixels_inside_the_frame() -> None:
    assert clip_box(np.array([10.2, 5.7, 20.1, 9.0]), 100, 50) == (10, 5, 21, 9)
    assert clip_box(np.array([-5, -5, 10, 10]), 100, 50) == (0, 0, 10, 10)
    assert clip_box(np.array([90, 40, 130, 80]), 100, 50) == (90, 40, 100, 50)
    assert clip_box(np.array([100, 10, 120, 20]), 100, 50) is None  # right of the frame
    assert clip_box(np.array([10, 10, 10, 20]), 100, 50) is None  # no width
    assert clip_box(np.array([10, 10, 20, 10]), 100, 50) is None  # no height
    assert clip_box(np.array([10, -30, 20, -10]), 100, 50) is None  # above the frame
    assert clip_box(np.array([10, 10, 11, 11]), 100, 50) == (10, 10, 11, 11)  # one pixel


def test_grown_adds_a_fraction_of_each_side() -> None:
    assert grown(np.array([10, 20, 30, 60]), 0.1).tolist() == [8, 16, 32, 64]
    assert grown(np.array([10, 20, 30, 60]), 0.0).tolist() == [10, 20, 30, 60]


def test_fill_is_exactly_the_colour_and_only_in_the_box() -> None:
    image = texture()
    before = image.copy()
    assert hide_box(image, np.array([10, 20, 50, 60]), "fill", 6, (1, 2, 3))
    assert (image[20:60, 10:50] == (1, 2, 3)).all()
    outside = np.ones(image.shape[:2], bool)
    outside[20:60, 10:50] = False
    assert (image[outside] == before[outside]).all()


@pytest.mark.parametrize("method", ["blur", "pixelate"])
def test_blur_and_pixelate_take_the_detail_away_and_keep_the_colour(method: str) -> None:
    image = texture()
    before = image.copy()
    assert hide_box(image, np.array([20, 20, 100, 100]), method, 6, (0, 0, 0))  # type: ignore[arg-type]
    region, original = image[20:100, 20:100], before[20:100, 20:100]
    assert detail(region) < detail(original) / 4
    # the region's overall colour stays (a wash of it, not a black box)
    assert np.abs(region.mean(axis=(0, 1)) - original.mean(axis=(0, 1))).max() < 6
    assert (image[:20] == before[:20]).all() and (image[100:] == before[100:]).all()


@pytest.mark.parametrize("side", [24, 96])
def test_pixelate_leaves_cells_across_the_shorter_side_whatever_the_size(side: int) -> None:
    patch = texture(side, side * 2)
    out = hidden(patch, "pixelate", 4, (0, 0, 0))
    assert out.shape == patch.shape
    # 4 cells down, 8 across: each row of cells is one colour per cell
    assert len(np.unique(out[:, 0, 0].tolist())) <= 4 + 1
    assert len({tuple(row) for row in out[0, :, :]}) <= 8 + 1
    assert len({tuple(row) for row in out[0, :, :]}) >= 6  # not one flat colour


def test_fewer_cells_hide_more() -> None:
    patch = texture(96, 96)
    assert detail(hidden(patch, "blur", 3, (0, 0, 0))) < detail(
        hidden(patch, "blur", 12, (0, 0, 0))
    )


def test_a_polygon_is_hidden_through_its_mask_only() -> None:
    image = texture()
    before = image.copy()
    triangle = np.array([[10, 10], [110, 10], [10, 110]], np.float32)
    assert hide_polygon(image, triangle, "fill", 6, (9, 9, 9))
    assert (image[15, 15] == 9).all()  # inside
    assert (image[100, 100] == before[100, 100]).all()  # inside the bounding box, outside it
    assert (image[105, 60] == before[105, 60]).all()


def test_regions_outside_the_frame_change_nothing() -> None:
    image = texture()
    before = image.copy()
    assert not hide_box(image, np.array([200, 10, 240, 50]), "fill", 6, (0, 0, 0))
    far = np.array([[300, 300], [400, 300], [400, 400]], np.float32)
    assert not hide_polygon(image, far, "fill", 6, (0, 0, 0))
    assert (image == before).all()


def test_pixelate_cells_follow_the_shorter_side_exactly() -> None:
    # 30 x 70, 4 cells down: cells of 7.5 pixels, so 70 / 7.5 -> 9 across (not 10 of 7)
    out = hidden(texture(30, 70), "pixelate", 4, (0, 0, 0))
    columns = [tuple(out[0, x]) for x in range(70)]
    runs = 1 + sum(a != b for a, b in itertools.pairwise(columns))
    rows = [tuple(out[y, 0]) for y in range(30)]
    assert runs == 9 and 1 + sum(a != b for a, b in itertools.pairwise(rows)) == 4


def test_blur_is_smooth_where_pixelate_is_blocks() -> None:
    patch = texture(60, 60)
    blocks, smooth = hidden(patch, "pixelate", 4, (0, 0, 0)), hidden(patch, "blur", 4, (0, 0, 0))
    # pixelate: 4 flat cells along a row; blur: a gradient, nearly every pixel its own value
    assert len({tuple(p) for p in blocks[30]}) <= 4
    assert len({tuple(p) for p in smooth[30]}) > 20
    # and neither keeps the texture's pixel-to-pixel detail
    assert detail(smooth) < detail(patch) / 4


def test_a_region_smaller_than_the_cells_is_still_changed() -> None:
    patch = texture(4, 12)
    methods: tuple[Method, ...] = ("pixelate", "blur")
    for method in methods:
        out = hidden(patch, method, 6, (0, 0, 0))
        assert out.shape == patch.shape
        assert detail(out) < detail(patch) / 2  # cells of two pixels at least, not one
