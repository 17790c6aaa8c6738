"""``as_batch``: the infer node takes a preprocess node's batch as it is (no copy) only where
its frames are consecutive views of one buffer; anything else is stacked, never misread."""

from __future__ import annotations

import numpy as np
import pytest

from vapipe.stages.infer.stage import as_batch


def test_the_same_view_twice_is_stacked_not_taken_as_the_batch() -> None:
    batch = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5).copy()
    twice = as_batch([batch[1], batch[1]])
    assert twice is not batch
    np.testing.assert_array_equal(twice, batch[[1, 1]])
    later = as_batch([batch[0], batch[0]])
    assert later is not batch
    np.testing.assert_array_equal(later, batch[[0, 0]])


torch = pytest.importorskip("torch")


def test_device_views_of_adjacent_but_separate_buffers_are_stacked() -> None:
    """Two allocations that happen to lie back to back are not one batch: a view across them
    would read past the first one's storage."""
    shape = (3, 4, 5)
    size = int(np.prod(shape))
    memory = np.arange(3 * size, dtype=np.float32)
    low = torch.from_numpy(memory[:size]).view(shape)  # a storage of its own
    high = torch.from_numpy(memory[size : 2 * size]).view(shape)  # the next bytes, another one
    assert high.data_ptr() == low.data_ptr() + size * 4
    stacked = as_batch([low, high])
    assert torch.equal(stacked, torch.stack([low, high]))
    assert stacked.data_ptr() not in (low.data_ptr(), high.data_ptr())
    # A view into a larger storage that begins before the first tensor's own.
    first = torch.from_numpy(memory[size : 2 * size]).view(shape)
    wide = torch.from_numpy(memory)[2 * size :].view(shape)
    assert wide.data_ptr() == first.data_ptr() + size * 4
    assert torch.equal(as_batch([first, wide]), torch.stack([first, wide]))
    # One storage, consecutive: one view, no copy.
    whole = torch.from_numpy(memory).view(3, *shape)
    view = as_batch([whole[1], whole[2]])
    assert view.data_ptr() == whole[1].data_ptr() and torch.equal(view, whole[1:])
