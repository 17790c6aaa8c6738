"""The README and the docs site hold true: every shell block says how it is tested (a marker
line above it, one of MARKERS), every shell block marked ``<!-- tested -->`` runs line by line
against the shared assets and exits 0, the README's two opening commands are what CI runs,
the Docker and benchmark lines name real files and flags, every whole config shown parses and
builds, the command line reference is what the parser prints, the README stays short, and
the site builds with ``mkdocs build --strict`` (a broken link or a missing page fails it).
The Python blocks run in tests/test_python_api.py."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.docs_blocks import PAGES, REPO, commands, marked_blocks
from tools.readme_command import command as readme_command
from vapipe.pipeline import config as config_module
from vapipe.pipeline import graph as graph_module

TEXTS = {str(page.relative_to(REPO)): page.read_text(encoding="utf-8") for page in PAGES}
COMMANDS = [
    pytest.param(line, id=f"{name}-{index}")
    for name, text in TEXTS.items()
    for block in re.findall(r"<!-- tested -->\n```sh\n(.*?)```", text, re.DOTALL)
    for index, line in enumerate(line for line in block.splitlines() if line.strip())
]
TOML = [
    pytest.param(block, id=f"{name}-{index}")
    for name, text in TEXTS.items()
    for index, block in enumerate(re.findall(r"```toml\n(.*?)```", text, re.DOTALL))
]


MARKERS = {
    "tested": "run line by line here (test_a_tested_command_runs)",
    "tested: service": "the service started, each curl line run (tests/e2e/test_docs_service.py)",
    "tested: ci": "the README's two commands, run by .ci/run as written",
    "tested: rtsp": "run against a local RTSP server (tests/e2e/test_docs_rtsp.py)",
    "tested: live": "run, its RTSP address played by PyAV (tests/e2e/test_docs_live.py)",
    "checked: docker": "no container engine here: files, images and arguments checked",
    "checked: pip": "every package named is resolved on the registry (tests/test_docs_pip.py)",
    "checked: bench": "the wheel built as tests/test_packaging.py does; the flags parsed",
}
"""How each shell block of the docs is exercised: the marker line above it names one."""


def whole(text: str) -> bool:
    """A whole config (every node its links name has a table), not a fragment of one."""
    links = tomllib.loads(text).get("links")
    named = {part.strip() for chain in links or () for part in chain.split("!")}
    return bool(links) and all(f"[nodes.{node}]" in text for node in named)


CONFIGS = [param for param in TOML if whole(param.values[0])]


def test_there_are_tested_blocks_and_configs() -> None:
    assert len(COMMANDS) >= 6
    assert any(p.id.startswith("README.md") for p in COMMANDS)
    assert len(CONFIGS) >= 1 and any(p.id.startswith("README.md") for p in CONFIGS)
    assert len(TOML) >= 8


@pytest.mark.parametrize("command", COMMANDS)
def test_a_tested_command_runs(tmp_path: Path, command: str) -> None:
    words = shlex.split(command)
    # The README writes the venv's own (it works before `activate`); the docs the bare name.
    words[0] = words[0].removeprefix(".venv/bin/")
    assert words[0] == "run-pipeline", "tested blocks hold run-pipeline commands"
    args = [str(REPO / w) if w.startswith("configs/") else w for w in words[1:]]
    result = subprocess.run(
        [sys.executable, "-m", "vapipe", *args], cwd=tmp_path, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{command}: {result.stderr[-1500:]}"


@pytest.mark.parametrize("text", TOML)
def test_a_toml_block_shown_is_toml(text: str) -> None:
    assert isinstance(tomllib.loads(text), dict)


@pytest.mark.parametrize("text", CONFIGS)
def test_a_config_shown_parses_and_builds(text: str) -> None:
    spec = config_module.parse(text, file="<docs>")
    graph = graph_module.build(spec)
    assert graph.sources and len(graph.order) == len(spec.nodes)


def test_a_broken_config_in_the_docs_would_fail() -> None:
    with pytest.raises(Exception, match="undefined node 'nope'"):
        graph_module.build(config_module.parse('links = ["cam ! nope"]\n[nodes.cam]\n'
                                               'type = "source"\nuri = "x.mp4"\n'))  # fmt: skip


def test_every_shell_block_says_how_it_is_tested() -> None:
    for name, text in TEXTS.items():
        for marker in re.findall(r"(?:<!-- ([^\n]*?) -->\n)?```(?:sh|bash|shell|console)\n", text):
            assert marker in MARKERS, f"{name}: a shell block marked {marker!r}, not one of MARKERS"
    for marker in MARKERS:
        assert marked_blocks(marker), f"no block is marked {marker!r}: drop it from MARKERS"


def test_the_readme_commands_are_what_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    for which in ("install", "test"):
        assert f'bash -euo pipefail -c "$(python3 tools/readme_command.py {which})"' in ci
    readme = TEXTS["README.md"]
    assert readme_command("install", readme).endswith("run-pipeline configs/file.toml")
    assert readme_command("test", readme).endswith(".venv/bin/pytest")
    ci_blocks = marked_blocks("tested: ci")
    assert [b.strip() for n, b in ci_blocks if n == "README.md"] == [
        readme_command("install"), readme_command("test")
    ]  # fmt: skip
    for name, block in ci_blocks:  # the copies on the docs site say what the README says
        assert block.strip() in (readme_command("install"), readme_command("test")), name


def test_a_docker_block_names_real_files_images_and_arguments() -> None:
    blocks = marked_blocks("checked: docker")
    built: set[str] = set()
    for name, block in blocks:
        for words in filter(None, commands(block)):
            words = words[words.index("docker") :]  # after any VAR=$(...) before it
            assert words[0] == "docker", f"{name}: {words}"
            if words[1] == "build":
                assert (REPO / words[words.index("-f") + 1]).is_file(), f"{name}: {words}"
                built.add(words[words.index("-t") + 1])
            elif words[1] == "compose":
                assert (REPO / words[words.index("-f") + 1]).is_file(), f"{name}: {words}"
            else:
                assert words[1] == "run", f"{name}: {words}"
                (image,) = [w for w in words if w in built]
                argument = words[words.index(image) + 1]
                if argument.endswith(".toml"):  # the image runs run-pipeline CONFIG
                    graph_module.build(config_module.load(REPO / argument))
                else:
                    assert argument in ("doctor", "stages", "models", "fetch", "serve")
    assert len(built) >= 2


def test_a_bench_block_runs_the_wheel_line_and_parses_its_flags() -> None:
    from bench.headline import parser

    blocks = marked_blocks("checked: bench")
    lines = [w for _, block in blocks for w in commands(block) if w]
    headline = [w for w in lines if w[:2] == ["python", "bench/headline.py"]]
    assert headline and len(headline) == len(blocks)
    for words in headline:
        parser().parse_args(words[2:])
    wheel = [w for w in lines if w[:2] == ["pip", "wheel"]]
    assert wheel and "--no-deps" in wheel[0]  # tests/test_packaging.py builds it so


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    readme = TEXTS["README.md"]
    assert len(readme.splitlines()) <= 200
    first_blocks = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)[:2]
    assert "run-pipeline configs/file.toml" in first_blocks[0]
    assert first_blocks[1].strip().endswith(".venv/bin/pytest")


def test_every_picture_the_readme_and_docs_show_is_there() -> None:
    for name, text in TEXTS.items():
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
            assert (REPO / name).parent.joinpath(target).is_file(), f"{name}: {target}"


def test_the_command_line_reference_is_what_the_parser_prints() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "cli_reference.py"), "--check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is a dev dependency (pyproject.toml)"
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "python-api" / "index.html").read_text().count("doc-heading") > 20


def test_getting_started_names_every_ready_config_and_none_share_an_output() -> None:
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    shipped = sorted(path.name for path in (REPO / "configs").glob("*.toml"))
    assert [name for name in shipped if f"`configs/{name}`" not in text] == []
    written: dict[str, str] = {}
    for name in shipped:
        nodes = tomllib.loads((REPO / "configs" / name).read_text())["nodes"]
        for node in nodes.values():
            path = node.get("path")
            if isinstance(path, str) and path.startswith("out/"):
                assert path not in written, f"{name} and {written[path]} both write {path}"
                written[path] = name
