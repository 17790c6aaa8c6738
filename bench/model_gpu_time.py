"""GPU time per batch of what the 16 x 1080p graph runs on the GPU: YOLOX-nano at batch 32 per
precision and layout (CUDA graph replays, each one's error against float32 as converted), and
the torch letterbox of 32 NV12 1080p pictures (checked bit for bit against itself on the CPU).

    python bench/model_gpu_time.py --model yolox_nano.onnx --clip people.mp4 \\
        --out bench/results/model_gpu_time.json

Where a 16-stream run on NVDEC spends its GPU (issue 51): the model and the letterbox are
most of the SMs' busy time; ``--site`` times another build's letterbox (an A/B of it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402

BATCH, SIZE = 32, 416


def replayed_ms(torch: Any, module: Any, x: Any, autocast: bool = False, reps: int = 30) -> Any:
    """(ms per replay, output as float32 numpy) of ``module(x)`` captured as a CUDA graph."""
    with torch.inference_mode():
        context = (
            torch.autocast("cuda", dtype=torch.float16)
            if autocast
            else torch.autocast("cuda", enabled=False)
        )
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), context:
            for _ in range(3):
                module(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph), context:
            out = module(x)
        out = out[0] if isinstance(out, list | tuple) else out
        graph.replay()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / reps, out.float().cpu().numpy()


def errors(got: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """YOLOX's (boxes, objectness, classes) against float32."""
    diff = np.abs(got - ref)
    return {
        "relative": float(diff.max() / np.abs(ref).max()),
        "box_px": round(float(diff[..., :4].max()), 4),
        "objectness": round(float(diff[..., 4].max()), 4),
        "class": round(float(diff[..., 5:].max()), 4),
    }


def model_times(model: Path, clip: Path) -> dict[str, Any]:
    import cv2
    import onnx2torch
    import torch

    from vapipe.stages.infer.backends.cuda_graphs import specialise
    from vapipe.stages.infer.backends.fx_rewrites import fuse_silu

    device = torch.device("cuda")
    capture = cv2.VideoCapture(str(clip))
    for _ in range(30):
        capture.read()
    _, image = capture.read()
    picture = cv2.resize(image, (SIZE, SIZE)).astype(np.float32).transpose(2, 0, 1)
    rng = np.random.default_rng(0)
    batch = np.stack(
        [np.clip(picture + rng.normal(0, 8, picture.shape), 0, 255) for _ in range(BATCH)]
    ).astype(np.float32)
    x = torch.from_numpy(batch).to(device)
    last = torch.channels_last

    def converted(half: bool = False, silu: bool = False) -> Any:
        module = onnx2torch.convert(str(model)).to(device).eval()
        if half:
            module = module.half()
        module = specialise(torch, module, x.half() if half else x)
        if silu:
            fuse_silu(module)
        return module

    torch.backends.cudnn.allow_tf32 = False  # what the torch backend runs in float32
    torch.backends.cuda.matmul.allow_tf32 = False
    cases: dict[str, Any] = {}
    ms, ref = replayed_ms(torch, converted(), x)
    cases["float32 as converted"] = {"ms": round(ms, 3)}
    variants: list[tuple[str, Any, Any, bool]] = [
        ("float32, SiLU fused (the backend now)", converted(silu=True), x, False),
        ("float32 channels_last", converted().to(memory_format=last),
         x.contiguous(memory_format=last), False),
    ]  # fmt: skip
    for name, module, given, autocast in variants:
        ms, out = replayed_ms(torch, module, given, autocast)
        cases[name] = {"ms": round(ms, 3), "error": errors(out, ref)}
    for name, flag in (("float32, cudnn.benchmark", "benchmark"), ("TF32", "allow_tf32")):
        setattr(torch.backends.cudnn, flag, True)  # for the capture only
        ms, out = replayed_ms(torch, converted(), x)
        setattr(torch.backends.cudnn, flag, False)
        cases[name] = {"ms": round(ms, 3), "error": errors(out, ref)}
    ms, out = replayed_ms(torch, converted(), x, autocast=True)
    cases["autocast float16"] = {"ms": round(ms, 3), "error": errors(out, ref)}
    ms, out = replayed_ms(torch, converted(half=True), x.half())
    cases["float16"] = {"ms": round(ms, 3), "error": errors(out, ref)}
    module = converted(half=True, silu=True).to(memory_format=last)
    ms, out = replayed_ms(torch, module, x.half().contiguous(memory_format=last))
    cases["float16 channels_last SiLU fused"] = {"ms": round(ms, 3), "error": errors(out, ref)}
    for case in cases.values():
        case["frames_per_s"] = round(BATCH * 1000 / case["ms"])
    return cases


def letterbox_time() -> dict[str, Any]:
    import torch

    from vapipe.pipeline.device_picture import DeviceNV12
    from vapipe.stages.preprocess.cl_kernel import TensorSpec
    from vapipe.stages.preprocess.torch_letterbox import TorchLetterbox

    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    spec = TensorSpec(SIZE, SIZE, "top-left", False, 1.0)
    on_gpu = TorchLetterbox(spec, torch, gpu, max_batch=BATCH)
    on_cpu = TorchLetterbox(spec, torch, cpu, max_batch=BATCH)
    seeded = torch.Generator().manual_seed(3)
    host = [
        torch.randint(0, 256, (1620, 1920), dtype=torch.uint8, generator=seeded)
        for _ in range(BATCH)
    ]
    pictures = [DeviceNV12(t.to(gpu), None, i, None) for i, t in enumerate(host)]
    same = torch.equal(
        on_gpu.result(on_gpu.submit(pictures)).cpu(),
        on_cpu.result(on_cpu.submit([DeviceNV12(t, None, i, None) for i, t in enumerate(host)])),
    )
    for _ in range(3):
        on_gpu.result(on_gpu.submit(pictures))
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(on_gpu.stream)
    for _ in range(20):
        on_gpu.result(on_gpu.submit(pictures))
    end.record(on_gpu.stream)
    end.synchronize()
    return {"ms": round(start.elapsed_time(end) / 20, 3), "gpu_equals_cpu": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True, help="yolox_nano.onnx")
    parser.add_argument("--clip", type=Path, required=True, help="a clip: frame 30 is the input")
    parser.add_argument("--site", help="another build's site folder: time its letterbox only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.site:
        sys.path.insert(0, args.site)
        print(harness.shown({"letterbox_nv12_batch32": letterbox_time()}))
        return
    import torch

    report = {
        "machine": {"gpu": torch.cuda.get_device_name()},
        "model_batch32": model_times(args.model, args.clip),
        "letterbox_nv12_batch32": letterbox_time(),
    }
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
