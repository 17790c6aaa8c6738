"""Print one of the README's two opening commands, as written, for .ci/run to run.

``python3 tools/readme_command.py install`` prints the first shell block (install and run the
default pipeline), ``test`` the second (install the dev tools and run the tests). CI runs
what the README says rather than a copy of it, so the two cannot drift apart."""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
WHICH = ("install", "test")


def command(which: str, text: str | None = None) -> str:
    """The README's ``which`` command: its first (install) or second (test) shell block."""
    blocks = re.findall(r"```sh\n(.*?)```", text or README.read_text(encoding="utf-8"), re.S)
    return blocks[WHICH.index(which)].strip()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in WHICH:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(WHICH)}")
    print(command(sys.argv[1]))
