"""The Docker files, without a Docker engine: hadolint passes, every file and folder they
copy exists, every command they run is one the CLI knows, and compose's parts fit."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = sorted((REPO / "docker").glob("*/Dockerfile"))


def test_there_are_cpu_rocm_and_camera_images() -> None:
    assert {p.parent.name for p in DOCKERFILES} == {"cpu", "rocm", "camera"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_hadolint_passes(dockerfile: Path) -> None:
    binary = shutil.which("hadolint") or str(Path(__import__("sys").executable).parent / "hadolint")
    result = subprocess.run(
        [binary, "--config", str(REPO / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_copied_paths_exist_and_commands_are_real(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    for sources in re.findall(r"^COPY\s+(.+?)\s+\S+$", text, re.MULTILINE):
        for source in sources.split():
            assert (REPO / source).exists(), f"{dockerfile}: COPY {source}: no such path"
    assert re.search(r"^USER \d+", text, re.MULTILINE), "runs as root"
    assert "HEALTHCHECK" in text
    if "run-pipeline" in text:
        entry = re.search(r'^CMD \["(.+?)"\]', text, re.MULTILINE)
        assert entry and (REPO / entry.group(1)).is_file(), "the default config is missing"
        for command in re.findall(r'CMD \["run-pipeline", "(\w+)"', text):
            assert command in ("doctor", "stages", "models", "fetch")


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for heavy in (".venv", ".git", "out", "assets"):
        assert heavy in ignored


def test_rocm_image_is_usable_on_amd_gpus() -> None:
    text = (REPO / "docker" / "rocm" / "Dockerfile").read_text()
    pinned = re.search(r"ARG ROCM_VERSION=(\d+)\.\d+\.\d+", text)
    assert pinned, "the ROCm base is not pinned"
    # Every Python dependency pinned by version and hash; the MIGraphX build, made for HIP 7
    # (ROCm 7.x), in place of the plain onnxruntime; the project's own dependencies all there.
    lock = (REPO / "docker" / "rocm" / "requirements.lock").read_text()
    pins = dict(re.findall(r"^([a-z0-9._-]+)==(\S+) \\$", lock, re.MULTILINE))
    hashed = re.findall(r"^[a-z0-9._-]+==\S+ \\\n\s+--hash=sha256:[0-9a-f]{64}", lock, re.M)
    assert pins and len(hashed) == len(pins), "a dependency without its hash"
    assert "onnxruntime-migraphx" in pins and "onnxruntime" not in pins
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["mqtt"]]
    for requirement in wanted:
        name = re.split(r"[<>=;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        assert name == "onnxruntime" or name in pins, f"{name} is not in the lock"
    assert "--require-hashes -r requirements.lock" in text
    assert pinned.group(1) == "7" and "libamdhip64.so.7" in lock
    assert "rocm-opencl-runtime" in text and "--groups video" in text and "render" in text
    guide = (REPO / "docs" / "docker.md").read_text()
    for flag in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add video",
                 "--group-add render", "HSA_OVERRIDE_GFX_VERSION"):  # fmt: skip
        assert flag in guide, f"docs/docker.md lacks {flag}"


def test_compose_demo_wires_camera_pipeline_and_broker() -> None:
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"camera", "broker", "pipeline"}
    for service in ("camera", "pipeline"):
        build = services[service]["build"]
        assert (REPO / "docker" / build["context"] / build["dockerfile"]).is_file()
    pipeline = services["pipeline"]
    # The pipeline runs as a service: its page published, a token required, healthz checked.
    command = pipeline["command"]
    assert command[0] == "serve" and command[command.index("--host") + 1] == "0.0.0.0"
    assert pipeline["environment"]["VAPIPE_TOKEN"].startswith("${VAPIPE_TOKEN:?")
    port = command[command.index("--port") + 1]
    assert any(published.endswith(f":{port}") for published in pipeline["ports"])
    assert "/healthz" in " ".join(pipeline["healthcheck"]["test"])
    config = REPO / command[1]
    assert config.is_file()
    text = config.read_text()
    assert "${VAPIPE_RTSP_URL}" in text and "VAPIPE_MQTT_HOST" in text
    assert pipeline["environment"]["VAPIPE_RTSP_URL"].startswith("rtsp://camera:8554/")
    assert pipeline["environment"]["VAPIPE_MQTT_HOST"] == "broker"
