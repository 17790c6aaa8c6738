"""The model and sample-media manifest (installed as ``vapipe.models``) and converters."""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def manifest() -> dict[str, dict[str, dict[str, Any]]]:
    """``{"models": {name: entry}, "media": {name: entry}}`` from manifest.toml."""
    text = files(__name__).joinpath("manifest.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)
