"""doctor's AMD GPU lines from the kernel's KFD topology, on fake sysfs trees of four Ryzen
iGPUs (no AMD GPU on any machine here): the ISA read from ``gfx_target_version``, the GPUs
it names, and the override advice, with no 9.0.0 anywhere but as a warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from vapipe.cli import doctor
from vapipe.pipeline import amd_gpus

CPU_NODE = "cpu_cores_count 8\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n"


def fake_sysfs(root: Path, version: int, device_id: int) -> Path:
    """A KFD topology as amdgpu writes it: node 0 the CPU, node 1 the GPU."""
    nodes = root / amd_gpus.TOPOLOGY
    (nodes / "0").mkdir(parents=True)
    (nodes / "0" / "properties").write_text(CPU_NODE)
    (nodes / "1").mkdir()
    (nodes / "1" / "properties").write_text(
        f"cpu_cores_count 0\nsimd_count 24\ngfx_target_version {version}\n"
        f"vendor_id 4098\ndevice_id {device_id}\nlocation_id 768\n"
    )
    return root


@pytest.mark.parametrize(
    ("version", "device_id", "target", "gpus", "advice"),
    [
        (90012, 0x1638, "gfx90c", "Vega 6/7/8", "not supported by ROCm"),
        (110003, 0x15BF, "gfx1103", "780M", "HSA_OVERRIDE_GFX_VERSION=11.0.0"),
        (110500, 0x150E, "gfx1150", "890M", "no override"),
        (110501, 0x1586, "gfx1151", "8060S", "no override"),
    ],
)
def test_each_ryzen_igpu_is_named_with_its_advice(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    version: int,
    device_id: int,
    target: str,
    gpus: str,
    advice: str,
) -> None:
    root = fake_sysfs(tmp_path, version, device_id)
    (found,) = amd_gpus.gpus(root)
    assert (found.target, found.device_id, found.node) == (target, device_id, "1")
    lines: list[str] = []
    for section in ("_onnxruntime", "_opencl", "_pyav", "_torch", "_plugins"):  # not ours: slow
        monkeypatch.setattr(doctor, section, lambda out: None)
    assert doctor.report(lines.append, root) == 0
    at = lines.index(next(line for line in lines if line.startswith("AMD GPUs")))
    assert lines[at + 1].startswith(f"  {target} (PCI 1002:{device_id:04x}, KFD node 1): ")
    assert gpus in lines[at + 1]
    assert advice in lines[at + 2] and "[" in lines[at + 2]  # its source, in brackets
    if target != "gfx90c":  # there 9.0.0 is named only as what crashed it
        assert "9.0.0" not in lines[at + 2]


def test_isa_names_from_kfd_versions() -> None:
    assert [amd_gpus.target_name(v) for v in (90012, 110003, 110500, 110501, 100300, 120001)] == [
        "gfx90c", "gfx1103", "gfx1150", "gfx1151", "gfx1030", "gfx1201"
    ]  # fmt: skip


def test_no_kfd_or_an_unknown_target(tmp_path: Path) -> None:
    assert amd_gpus.report_lines(tmp_path) == []  # no amdgpu compute: doctor says nothing
    lines = amd_gpus.report_lines(fake_sysfs(tmp_path / "x", 100306, 0x164E))
    assert lines[0].startswith("  gfx1036 ") and "not in this project's table" in lines[0]
    assert "compatibility matrix" in lines[1]


def test_a_9_0_0_override_on_vega_is_warned_about(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, 90012, 0x1638)
    lines = amd_gpus.report_lines(root, "9.0.0")
    assert "HSA_OVERRIDE_GFX_VERSION=9.0.0 is set" in lines[-2]
    assert lines[-1].startswith("    warning: 9.0.0 has crashed gfx90c")
    assert "warning" not in "".join(amd_gpus.report_lines(root, "11.0.0"))


def test_the_9_0_0_advice_is_gone_from_the_project() -> None:
    repo = Path(__file__).resolve().parents[2]
    texts = [p for p in [*repo.glob("docs/**/*.md"), repo / "README.md",
                         *repo.glob("docker/*/Dockerfile")]]  # fmt: skip
    for path in texts:
        for line in path.read_text(encoding="utf-8").splitlines():
            if "9.0.0" in line:
                assert "crash" in line, f"{path}: {line}"


def test_the_docs_page_holds_the_table_doctor_prints() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "ryzen.md").read_text()
    for target, known in amd_gpus.TARGETS.items():
        assert f"| `{target}` | {known.gpus} | {known.advice} | {known.source} |" in page


def test_only_amd_gpu_nodes_count_and_a_node_without_properties_is_passed(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, 110003, 0x15BF)
    nodes = root / amd_gpus.TOPOLOGY
    (nodes / "0" / "properties").unlink()  # a node being torn down: no properties now
    for name, props in {"2": "gfx_target_version 0\nvendor_id 4098\n",  # AMD's CPU
                        "3": "gfx_target_version 110003\nvendor_id 32902\n",  # not AMD's
                        "4": "gfx_target_version 110003\nvendor_id 1\n"}.items():  # fmt: skip
        (nodes / name).mkdir()
        (nodes / name / "properties").write_text(props)
    assert [(g.node, g.target) for g in amd_gpus.gpus(root)] == [("1", "gfx1103")]


def test_the_9_0_0_warning_is_for_vega_only(tmp_path: Path) -> None:
    root = fake_sysfs(tmp_path, 110003, 0x15BF)
    assert not any("warning" in line for line in amd_gpus.report_lines(root, "9.0.0"))
