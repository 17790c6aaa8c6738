"""The install lines of the docs name packages that exist: every package that a block marked
``<!-- checked: pip -->`` installs is resolved on the package registry by pip itself
(``pip install --dry-run --no-deps``, a wheel for this Python and platform), so a renamed or
withdrawn build fails here. It needs the registry: skipped where pip cannot reach it, except
under CI=true (CI reaches the package registries)."""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.docs_blocks import marked_blocks

TAKES_VALUE = {"--config-settings", "-e", "--target", "-t", "-r", "-c", "--index-url"}


def packages_installed(block: str) -> list[str]:
    """The packages that the block's ``pip install`` commands name (not ``-e .`` or files)."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if len(words) < 2 or not words[0].endswith("pip") or words[1] != "install":
                continue
            arguments = words[2:]
            for index, word in enumerate(arguments):
                taken = index and arguments[index - 1] in TAKES_VALUE
                if not word.startswith("-") and not taken and not re.match(r"[./]", word):
                    found.append(word)
    return found


PACKAGES = sorted(
    {name for _, block in marked_blocks("checked: pip") for name in packages_installed(block)}
)


def dry_run(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
         "--only-binary=:all:", "--disable-pip-version-check", "-q", name],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


@functools.cache
def registry_reached() -> bool:
    return dry_run("pip").returncode == 0


def test_the_packages_are_read_from_the_blocks() -> None:
    block = ("pip install --config-settings editable_mode=strict -e . && pip uninstall -y a"
             " && pip install b   # c\n.venv/bin/pip install d e\nmkdir -p f\n")  # fmt: skip
    assert packages_installed(block) == ["b", "d", "e"]
    assert {"onnxruntime-migraphx", "onnxruntime-gpu", "intel-opencl-rt"} <= set(PACKAGES)


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_the_docs_install_exists_for_this_python(name: str) -> None:
    if not registry_reached():
        if os.environ.get("CI") == "true":
            pytest.fail("pip cannot reach the package registry under CI")
        pytest.skip("pip cannot reach the package registry here")
    done = dry_run(name)
    assert done.returncode == 0, f"docs install {name}: {done.stderr.strip()[-800:]}"
