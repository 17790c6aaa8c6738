"""AMD GPUs as the kernel lists them (KFD's topology in sysfs, no ROCm needed), and what ROCm
and MIGraphX make of each target: whether it is supported, and which
``HSA_OVERRIDE_GFX_VERSION`` (if any) to set. ``run-pipeline doctor`` prints it; the table's
sources are docs/ryzen.md's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TOPOLOGY = "sys/class/kfd/kfd/topology/nodes"
AMD_VENDOR = 0x1002


@dataclass(frozen=True)
class Target:
    gpus: str
    """Which GPUs have this ISA."""
    advice: str
    """Supported or not, and the override to set (or that none is needed)."""
    source: str


MIGRAPHX = "ROCm docs, Install MIGraphX (rocm.docs.amd.com/projects/ai-ecosystem)"
TARGETS = {
    "gfx90c": Target(
        "Radeon Vega 6/7/8 (Ryzen 4000/5000 APUs: Renoir, Lucienne, Cezanne, Barcelo)",
        "not supported by ROCm or MIGraphX, and no override: HSA_OVERRIDE_GFX_VERSION=9.0.0 "
        "crashed a Cezanne GPU outright; run the model on the CPU (providers = \"cpu\")",
        "ROCm/legacy-rocm-build#5121",
    ),
    "gfx1103": Target(
        "Radeon 740M/760M/780M (Ryzen 7040/8040: Phoenix, Hawk Point)",
        "supported by MIGraphX 2.19 (no override needed there); an older ROCm needs "
        "HSA_OVERRIDE_GFX_VERSION=11.0.0, which may run kernels that need more registers "
        "than the chip has, at FP16 most: keep fp16 = false with it",
        f"{MIGRAPHX}; Frigate's ROCm docs (11.0.0); ROCm/legacy-rocm-build#4557",
    ),
    "gfx1150": Target(
        "Radeon 880M/890M (Ryzen AI 300: Strix Point)",
        "supported by MIGraphX 2.18 and later: no override", MIGRAPHX,
    ),
    "gfx1151": Target(
        "Radeon 8050S/8060S (Ryzen AI Max: Strix Halo)",
        "supported by MIGraphX 2.18 and later: no override", MIGRAPHX,
    ),
    "gfx1152": Target("Radeon 840M/860M (Ryzen AI 300: Krackan Point)",
                      "supported by MIGraphX 2.18 and later: no override", MIGRAPHX),
    "gfx1153": Target("Ryzen AI 400 iGPUs (Gorgon Point)",
                      "supported by MIGraphX 2.18 and later: no override", MIGRAPHX),
    **{
        target: Target(gpus, "supported by MIGraphX: no override", MIGRAPHX)
        for target, gpus in (
            ("gfx1100", "Radeon RX 7900 XTX/XT/GRE, PRO W7900/W7800"),
            ("gfx1101", "Radeon RX 7800 XT/7700 XT, PRO W7700"),
            ("gfx1102", "Radeon RX 7600"),
            ("gfx1200", "Radeon RX 9060 XT"),
            ("gfx1201", "Radeon RX 9070 XT/9070"),
        )
    },
}  # fmt: skip
"""What is known of each target, with its source (docs/ryzen.md has the same table)."""


@dataclass(frozen=True)
class Gpu:
    node: str
    target: str
    device_id: int


def target_name(version: int) -> str:
    """KFD's ``gfx_target_version`` (major * 10000 + minor * 100 + stepping) as an ISA name:
    90012 is gfx90c, 110003 gfx1103."""
    major, minor, stepping = version // 10000, version // 100 % 100, version % 100
    return f"gfx{major}{minor:x}{stepping:x}"


def gpus(root: Path = Path("/")) -> list[Gpu]:
    """The AMD GPUs KFD lists under ``root`` (its CPU nodes have target version 0)."""
    found = []
    for node in sorted((root / TOPOLOGY).glob("*"), key=lambda p: p.name):
        try:
            text = (node / "properties").read_text()
        except OSError:
            continue
        facts = dict(line.split(maxsplit=1) for line in text.splitlines() if " " in line)
        version = int(facts.get("gfx_target_version", "0"))
        if version and int(facts.get("vendor_id", AMD_VENDOR)) == AMD_VENDOR:
            found.append(Gpu(node.name, target_name(version), int(facts.get("device_id", "0"))))
    return found


def report_lines(root: Path = Path("/"), override: str | None = None) -> list[str]:
    """doctor's lines for the AMD GPUs here: each target, what runs on it and the override
    to set; ``override`` is ``HSA_OVERRIDE_GFX_VERSION`` as set now."""
    found = gpus(root)
    if not found:
        return []
    lines = []
    for gpu in found:
        known = TARGETS.get(gpu.target)
        lines.append(f"  {gpu.target} (PCI 1002:{gpu.device_id:04x}, KFD node {gpu.node}): "
                     + (f"{known.gpus}" if known else "not in this project's table"))  # fmt: skip
        if known:
            lines.append(f"    {known.advice} [{known.source}]")
        else:
            lines.append("    see ROCm's compatibility matrix for this target")
    if override:
        lines.append(f"  HSA_OVERRIDE_GFX_VERSION={override} is set: ROCm uses that ISA's code")
        if override == "9.0.0" and any(g.target == "gfx90c" for g in found):
            lines.append("    warning: 9.0.0 has crashed gfx90c GPUs; unset it")
    return lines
