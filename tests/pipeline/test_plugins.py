"""Stage plugins: found through the ``vapipe.stages`` entry-point group, never hiding the
built-ins, and reported by name when they fail to load."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np

from tests.e2e.helpers import cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "tests" / "plugins" / "vapipe_blur.py"

PIPELINE = """\
links = ["cam ! pre ! det ! nms ! {chain}video"]
[nodes.cam]
type = "source"
uri = "sample:dog"
[nodes.pre]
type = "preprocess"
[nodes.det]
type = "infer"
model = "yolox-nano"
[nodes.nms]
type = "nms"
conf = 0.5
{blur}[nodes.video]
type = "video"
path = "{out}"
"""


def install(site: Path, dist: str, entries: dict[str, str]) -> None:
    """A distribution's metadata, as pip leaves it, declaring ``entries`` in our group."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[vapipe.stages]\n{lines}")


def run(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI with ``site`` (the plugins' install) on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return cli(*args, cwd=cwd, env=env)


def frame_of(path: Path) -> np.ndarray:
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="bgr24")


def test_example_plugin_registers_and_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(EXAMPLE, site / "vapipe_blur.py")
    install(site, "vapipe_blur", {"blur": "vapipe_blur"})

    listed = run(site, "stages", "blur", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "[blur]  Blurs the boxes of the chosen classes" in listed.stdout
    assert 'classes (array of string) = ["person"]: Class names whose boxes' in listed.stdout

    blur = '[nodes.blur]\ntype = "blur"\nclasses = ["dog"]\n'
    for name, chain, node in (("plain", "", ""), ("blurred", "blur ! ", blur)):
        config = tmp_path / f"{name}.toml"
        config.write_text(PIPELINE.format(chain=chain, blur=node, out=f"out/{name}.mp4"))
        result = run(site, str(config), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
    plain = frame_of(tmp_path / "out" / "plain.mp4").astype(np.float32)
    blurred = frame_of(tmp_path / "out" / "blurred.mp4").astype(np.float32)
    # The dog sits in the lower left of dog.jpg; the sky in the upper right has no dog box.
    dog, sky = (slice(300, 500), slice(150, 300)), (slice(20, 80), slice(600, 740))
    detail = [np.abs(np.diff(image[dog], axis=1)).mean() for image in (plain, blurred)]
    assert detail[1] < 0.6 * detail[0], f"the dog was not blurred: {detail}"
    assert np.abs(plain[sky] - blurred[sky]).mean() < 2.0, "pixels outside the boxes changed"


def test_broken_plugin_is_named_and_builtins_stay(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "broken_plugin.py").write_text("import does_not_exist_anywhere\n")
    install(site, "broken_plugin", {"broken": "broken_plugin"})

    listed = run(site, "stages", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    types = re.findall(r"^\[([\w-]+)\]", listed.stdout, re.MULTILINE)
    assert {"source", "preprocess", "infer", "nms", "video", "events"} <= set(types)
    assert (
        "plugin 'broken' failed to load: broken_plugin: ModuleNotFoundError: "
        "No module named 'does_not_exist_anywhere'" in listed.stdout
    )
    doctor = run(site, "doctor", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    assert "broken (broken_plugin): FAILED: broken_plugin: ModuleNotFoundError" in doctor.stdout


def test_the_guide_shows_the_tested_example() -> None:
    guide = (REPO / "docs" / "writing-a-stage.md").read_text(encoding="utf-8")
    code = EXAMPLE.read_text(encoding="utf-8")
    body = code.split("\n\n", 1)[1]  # without the module docstring
    assert body.strip() in guide, "docs/writing-a-stage.md differs from tests/plugins"


def test_each_builtin_type_is_registered_by_the_module_the_registry_names() -> None:
    from vapipe.pipeline import registry

    registry.load()
    builtins = {
        name: cls.__module__
        for name, cls in registry.types().items()
        if cls.__module__.startswith("vapipe.stages.")
    }
    assert builtins == registry.BUILTIN_TYPES


def test_a_config_imports_only_the_stages_it_names() -> None:
    config = 'links = ["cam ! events"]\n[nodes.cam]\ntype = "source"\nuri = "a.mp4"\n'
    config += '[nodes.events]\ntype = "events"\n'
    code = (
        "import sys\n"
        "from vapipe.pipeline.config import parse\n"
        f"parse({config!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('vapipe.stages.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    loaded = set(eval(done.stdout))
    assert {"vapipe.stages.source.stage", "vapipe.stages.sinks.events"} <= loaded
    others = {m for m in registry_modules() if m not in loaded}
    assert others == set(registry_modules()) - {
        "vapipe.stages.source.stage",
        "vapipe.stages.sinks.events",
    }, loaded


def registry_modules() -> list[str]:
    from vapipe.pipeline import registry

    return list(registry.BUILTIN_TYPES.values())
