"""Each worked example of docs/writing-a-stage.md (a stage, a sink, a backend, a kind of object
node) is the file in tests/plugins/ that this test installs as a plugin (a distribution's
metadata naming it in the entry-point group, as pip leaves it) and runs through the real CLI
on the sample media: what the guide shows is what works."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.helpers import cli

REPO = Path(__file__).resolve().parents[1]
PLUGINS = REPO / "tests" / "plugins"
GUIDE = (REPO / "docs" / "writing-a-stage.md").read_text(encoding="utf-8")
EXAMPLES = {
    "vapipe_blur.py": ("vapipe.stages", "blur"),
    "vapipe_counts_csv.py": ("vapipe.stages", "counts_csv"),
    "vapipe_opencv_backend.py": ("vapipe.backends", "opencv"),
    "vapipe_brightness_kind.py": ("vapipe.stages", "brightness"),
}

DETECT = """\
[nodes.cam]
type = "source"
uri = "{uri}"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
{backend}[nodes.nms]
type = "nms"
conf = 0.3
"""


def installed(tmp_path: Path, *files: str) -> Path:
    """A folder to put on PYTHONPATH with the examples and their distributions' metadata."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    for name in files:
        shutil.copy(PLUGINS / name, site / name)
        group, entry = EXAMPLES[name]
        module = name.removesuffix(".py")
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[{group}]\n{entry} = {module}\n")
    return site


def run(site: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    result = cli(str(config), "--no-progress", *args, cwd=config.parent, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_guide_shows_each_example_as_tested(name: str) -> None:
    code = (PLUGINS / name).read_text(encoding="utf-8").strip()
    if code.startswith('"""'):  # the module's docstring: the guide's prose says it
        code = code.split("\n\n", 1)[1]
    assert f"```python\n{code}\n```" in GUIDE, f"docs/writing-a-stage.md differs from {name}"


def test_the_sink_writes_a_line_per_frame_and_refuses_to_write_over_an_input(
    tmp_path: Path,
) -> None:
    site = installed(tmp_path, "vapipe_counts_csv.py")
    config = tmp_path / "counts.toml"
    sink = '[nodes.counts]\ntype = "counts_csv"\nclasses = ["car", "truck"]\n'
    config.write_text(
        'links = ["cam ! pre ! det ! nms ! counts"]\n'
        + DETECT.format(uri="sample:traffic", backend="") + sink
    )  # fmt: skip
    run(site, config, "--max-frames", "24")
    lines = (tmp_path / "out" / "counts.csv").read_text().splitlines()
    assert lines[0] == "source_id,seq,pts,car,truck" and len(lines) == 25
    rows = [line.split(",") for line in lines[1:]]
    assert [int(row[1]) for row in rows] == list(range(24))
    assert sum(int(row[3]) for row in rows) > 24, "no cars counted on the traffic clip"
    clip = tmp_path / "clip.mp4"
    shutil.copy(REPO.parent / "shared" / "media" / "traffic.mp4", clip)
    over = config.read_text().replace("sample:traffic", str(clip))
    config.write_text(over + f'path = "{clip}"\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    refused = cli(str(config), "--no-progress", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "counts" in refused.stderr, refused.stderr[-500:]


def test_the_backend_finds_what_onnxruntime_finds(tmp_path: Path) -> None:
    site = installed(tmp_path, "vapipe_opencv_backend.py")
    found = {}
    for name, backend in (("ort", 'backend = "onnxruntime"\n'), ("cv", 'backend = "opencv"\n')):
        config = tmp_path / f"{name}.toml"
        events = f'[nodes.events]\ntype = "events"\npath = "out/{name}.jsonl"\n'
        config.write_text(
            'links = ["cam ! pre ! det ! nms ! events"]\n'
            + DETECT.format(uri="sample:dog", backend=backend) + events
        )  # fmt: skip
        result = run(site, config, "--stats", f"{name}.json")
        found[name] = json.loads((tmp_path / "out" / f"{name}.jsonl").read_text().splitlines()[0])
        provider = json.loads((tmp_path / f"{name}.json").read_text())["stages"]["det"]["provider"]
        assert provider == ("opencv:cpu" if name == "cv" else "CPUExecutionProvider"), result.stderr
    ours, theirs = found["cv"]["detections"], found["ort"]["detections"]
    assert len(ours) == len(theirs) >= 3  # dog, bicycle, truck
    for a, b in zip(ours, theirs, strict=True):
        assert a["class_name"] == b["class_name"]
        assert max(abs(p - q) for p, q in zip(a["xyxy"], b["xyxy"], strict=True)) < 0.5
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        'links = ["cam ! pre ! det ! nms"]\n'
        + DETECT.format(uri="sample:dog", backend='backend = { type = "opencv", device = "x" }\n')
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    refused = cli(str(wrong), "--no-progress", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "device" in refused.stderr, refused.stderr[-500:]


def test_the_kind_labels_each_tracked_car_light_or_dark(tmp_path: Path) -> None:
    from tests.object_models import brightness_classifier

    model = brightness_classifier(tmp_path / "brightness.onnx")
    site = installed(tmp_path, "vapipe_brightness_kind.py")
    config = tmp_path / "kind.toml"
    rest = f"""classes = [2]
[nodes.track]
type = "track"
[nodes.bright]
type = "brightness"
model = "{model}"
on_classes = ["car"]
max_batch = 8
[nodes.events]
type = "events"
path = "out/events.jsonl"
"""
    config.write_text(
        'links = ["cam ! pre ! det ! nms ! track ! bright ! events"]\n'
        + DETECT.format(uri="sample:traffic", backend="") + rest
    )  # fmt: skip
    run(site, config, "--max-frames", "60")
    frames = [json.loads(line) for line in (tmp_path / "out/events.jsonl").read_text().splitlines()]
    labels = [
        d["attributes"]["bright"]
        for event in frames
        for d in event.get("detections", [])
        if "attributes" in d
    ]
    assert labels, "no car got a label"
    assert {value["label"] for value in labels} <= {"light", "dark"}
    assert all(0.5 <= value["score"] <= 1.0 for value in labels)
