"""The README's commands work: every shell block marked ``<!-- tested -->`` is run line by
line against the shared assets, each must exit 0."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"<!-- tested -->\n```sh\n(.*?)```", README, re.DOTALL)
COMMANDS = [line for block in BLOCKS for line in block.splitlines() if line.strip()]


def test_there_are_tested_blocks() -> None:
    assert len(COMMANDS) >= 5


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs(tmp_path: Path, command: str) -> None:
    words = shlex.split(command)
    assert words[0] == "run-pipeline", "tested blocks hold run-pipeline commands"
    args = [str(REPO / w) if w.startswith("configs/") else w for w in words[1:]]
    result = subprocess.run(
        [sys.executable, "-m", "vapipe", *args], cwd=tmp_path, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{command}: {result.stderr[-1500:]}"
