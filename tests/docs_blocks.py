"""The shell blocks of the README and the docs site, by the marker line above each (see
MARKERS in tests/test_docs.py): one reader for every test that runs or checks them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def marked_blocks(marker: str) -> list[tuple[str, str]]:
    """(page, block text) of every ``sh`` block under the line ``<!-- marker -->``."""
    pattern = re.compile(rf"<!-- {re.escape(marker)} -->\n```sh\n(.*?)```", re.DOTALL)
    return [
        (str(page.relative_to(REPO)), block)
        for page in PAGES
        for block in pattern.findall(page.read_text(encoding="utf-8"))
    ]


def block_params(marker: str) -> list[object]:
    """The same blocks as pytest parameters, each named by its page and index there."""
    blocks = marked_blocks(marker)
    return [
        pytest.param(block, id=f"{page}-{sum(p == page for p, _ in blocks[:i])}")
        for i, (page, block) in enumerate(blocks)
    ]


def commands(block: str) -> list[list[str]]:
    """A block's commands as words: continued lines joined, comments dropped (a line that
    is only a comment gives an empty list)."""
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]
