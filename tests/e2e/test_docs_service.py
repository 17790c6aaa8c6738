"""The service examples of the docs run as written (issue 52): every shell block marked
``<!-- tested: service -->`` starts the service its first line names (on a free port instead
of 8080) and runs each ``curl`` line against it with the real curl, which must exit 0 with an
HTTP status under 400; a live-events line is read for a moment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs_blocks import block_params, commands
from tests.e2e.serve_helpers import serve

REPO = Path(__file__).resolve().parents[2]
BLOCKS = block_params("tested: service")


def test_the_docs_have_a_tested_service_block() -> None:
    assert any(p.id.startswith("docs/service.md") for p in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS)
def test_a_service_block_runs_as_written(tmp_path: Path, block: str) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.fail("curl is not installed (.ci/run installs it)")
    first, *rest = commands(block)
    assert first[:2] == ["run-pipeline", "serve"], "a service block starts with its service"
    config = REPO / first[2]
    assert rest and all(words[0] == "curl" for words in rest)
    with serve(tmp_path, config=config) as served:
        assert served.url is not None
        for words in rest:
            args = [word.replace("localhost:8080", served.url) for word in words[1:]]
            live = "-sN" in args  # Server-Sent Events never end: read them for a moment
            timed = ["--max-time", "3"] if live else ["--max-time", "120"]
            result = subprocess.run(
                [curl, *timed, "-o", "/dev/null", "-w", "%{http_code}", *args],
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
            status = result.stdout.strip()[-3:]
            line = " ".join(words)
            assert result.returncode in ((0, 28) if live else (0,)), f"{line}: {result.stderr}"
            assert status.isdigit() and int(status) < 400, f"{line}: HTTP {status}"
        assert served.stop() == 130  # stopped by Ctrl-C, as a person would
