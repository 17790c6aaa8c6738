"""A config key's bounds, as the media and history sinks' tests check them."""

from __future__ import annotations

from collections.abc import Iterable

import pydantic
import pytest


def assert_bounds(
    config: type[pydantic.BaseModel], key: str, good: Iterable[object], bad: Iterable[object]
) -> None:
    """Each of ``good`` is taken for ``key`` as given; each of ``bad`` is refused, naming it."""
    for value in good:
        assert getattr(config.model_validate({key: value}), key) == value
    for value in bad:
        with pytest.raises(pydantic.ValidationError, match=key):
            config.model_validate({key: value})
