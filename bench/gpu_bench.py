"""GPU measurements: the OpenCL letterbox kernel on a GPU, and the torch backend's throughput.

    python bench/gpu_bench.py --out bench/results/gpu.json

Needs an OpenCL GPU platform (NVIDIA: /etc/OpenCL/vendors/nvidia.icd naming
libnvidia-opencl.so.1) and, for the torch part, torch with a GPU plus onnx2torch. Each part
records its own error instead of stopping the others. Kernel times come from OpenCL event
profiling (median of repeated launches). GB/s counts the bytes the kernel must touch: the
source pixels its bilinear taps read (each once) plus the float tensor it writes. Counting whole
1080p frames as read would overstate it: a downscale samples only part of the frame.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from vapipe.pipeline.assets import resolve_media, resolve_model  # noqa: E402
from vapipe.stages.cl_program import select_device  # noqa: E402
from vapipe.stages.model_input import letterbox_for  # noqa: E402
from vapipe.stages.preprocess.cl_kernel import LetterboxProgram, TensorSpec  # noqa: E402
from vapipe.stages.preprocess.opencl import OpenCLLetterbox  # noqa: E402
from vapipe.stages.preprocess.resize_tables import resize_reference, tables  # noqa: E402

CONVENTIONS = {
    "yolox-416": TensorSpec(416, 416, "top-left", False, 1.0),
    "ultralytics-640": TensorSpec(640, 640, "center", True, 1 / 255),
}
H200_PEAK_GBPS = 4800.0  # HBM3e, NVIDIA's datasheet figure


def clip_frames(name: str, count: int, size: tuple[int, int] | None = None) -> list[np.ndarray]:
    with av.open(resolve_media(f"sample:{name}")) as container:
        frames = []
        for picture in container.decode(video=0):
            image = picture.to_ndarray(format="bgr24")
            if size:
                image = cv2.resize(image, size, interpolation=cv2.INTER_LINEAR)
            frames.append(image)
            if len(frames) == count:
                return frames
    return frames


def touched_bytes(src_w: int, src_h: int, conv: TensorSpec) -> int:
    """Bytes one frame's kernel reads (distinct source pixels under the taps) and writes."""
    box = letterbox_for(src_w, src_h, conv.width, conv.height, conv.placement)  # type: ignore[arg-type]
    cols, rows = tables(src_w, src_h, box.resized_w, box.resized_h)
    xs = np.unique(np.clip(np.concatenate((cols.offsets, cols.offsets + 1)), 0, src_w - 1))
    ys = np.unique(np.clip(np.concatenate((rows.offsets, rows.offsets + 1)), 0, src_h - 1))
    return len(xs) * len(ys) * 3 + 3 * conv.width * conv.height * conv.dtype.itemsize


def opencl_part(repeats: int, kind: str) -> dict[str, Any]:
    import pyopencl as cl

    device = select_device(kind)
    program = LetterboxProgram(device, np.dtype(np.float32))
    ctx = program.context
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    hd = clip_frames("people", 32, (1920, 1080))
    result: dict[str, Any] = {"device": program.describe(), "kernels": []}
    mf = cl.mem_flags
    for name, conv in CONVENTIONS.items():
        for batch in (1, 8, 32):
            frames = np.stack(hd[:batch])
            src = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=frames)
            out = cl.Buffer(ctx, mf.WRITE_ONLY, batch * 3 * conv.width * conv.height * 4)
            times = []
            for index in range(repeats + 5):
                event, _ = program.launch(queue, src, (1080, 1920), batch, conv, out)
                event.wait()
                if index >= 5:
                    times.append((event.profile.end - event.profile.start) * 1e-9)
            seconds = harness.median(times)
            moved = batch * touched_bytes(1920, 1080, conv)
            result["kernels"].append(
                {
                    "conventions": name,
                    "frame": "1920x1080",
                    "batch": batch,
                    "kernel_ms": round(seconds * 1e3, 4),
                    "per_frame_us": round(seconds / batch * 1e6, 2),
                    "effective_GBps": round(moved / seconds / 1e9, 1),
                    "fraction_of_peak": round(moved / seconds / 1e9 / H200_PEAK_GBPS, 3),
                }
            )
    # Pinned upload of one 1080p frame, as the pipeline's ring does it.
    pinned = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, hd[0].nbytes)
    host, _ = cl.enqueue_map_buffer(
        queue, pinned, cl.map_flags.WRITE, 0, (hd[0].nbytes,), np.uint8, is_blocking=True
    )
    host[:] = hd[0].reshape(-1)
    device_buffer = cl.Buffer(ctx, mf.READ_ONLY, hd[0].nbytes)
    uploads = []
    for _ in range(repeats):
        event = cl.enqueue_copy(queue, device_buffer, host, is_blocking=False)
        event.wait()
        uploads.append((event.profile.end - event.profile.start) * 1e-9)
    upload_s = harness.median(uploads)
    result["pinned_upload_1080p"] = {
        "ms": round(upload_s * 1e3, 4),
        "GBps": round(hd[0].nbytes / upload_s / 1e9, 1),
    }
    # End to end through the frame-by-frame ring (upload, kernel, download overlapped).
    for name, conv in CONVENTIONS.items():
        ring = OpenCLLetterbox(conv, device=kind, depth=2)
        for image in hd[:4]:
            ring.tensor(image)
        started = time.perf_counter()
        pending = []
        for index in range(256):
            pending.append(ring.submit([hd[index % len(hd)]]))
            if len(pending) == 2:
                ring.result(pending.pop(0))
        for item in pending:
            ring.result(item)
        elapsed = time.perf_counter() - started
        result.setdefault("ring_fps_1080p", {})[name] = round(256 / elapsed, 1)
    # Parity on this device: the kernel against the integer reference (= cv2.resize here).
    worst, differing, total = 0.0, 0, 0
    ring = OpenCLLetterbox(CONVENTIONS["yolox-416"], device=kind)
    for image in [*hd[:4], *clip_frames("traffic", 4), *clip_frames("horses", 4)]:
        got, box = ring.tensor(image)
        resized = resize_reference(image, box.resized_w, box.resized_h)
        expected = got.copy()
        expected[:, : box.resized_h, : box.resized_w] = resized.transpose(2, 0, 1)
        worst = max(worst, float(np.abs(got - expected).max()))
        differing += int((got != expected).sum())
        total += got.size
    result["parity_vs_reference"] = {
        "max_abs_diff": worst,
        "differing_elements": differing,
        "elements": total,
    }
    return result


def torch_part(repeats: int) -> dict[str, Any]:
    import torch

    result: dict[str, Any] = {
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "runs": [],
    }
    for model, size, scale in (("yolox-nano", 416, 255.0), ("yolov8n", 640, 1.0)):
        try:
            result["runs"].extend(torch_model(model, size, scale, repeats))
        except Exception as exc:
            result.setdefault("errors", {})[model] = f"{type(exc).__name__}: {exc}"
    return result


def torch_model(model: str, size: int, scale: float, repeats: int) -> list[dict[str, Any]]:
    import torch

    from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
    from vapipe.stages.infer.backends.pytorch import TorchBackend, TorchConfig

    runs = []
    path = str(resolve_model(model))
    reference = OnnxBackend(
        path, name="ref", config=OnnxRuntimeConfig(providers=["cpu"]), max_batch=2
    )
    sample = np.random.default_rng(0).random((2, 3, size, size), dtype=np.float32) * scale
    expected = reference.run(sample)
    for fp16 in (False, True):
        try:
            backend = TorchBackend(path, name="det", config=TorchConfig(device="cuda", fp16=fp16))
        except Exception as exc:  # e.g. refused by the load-time check against onnxruntime
            runs.append({"model": model, "fp16": fp16, "error": f"{type(exc).__name__}: {exc}"})
            continue
        got = backend.run(sample)
        error = float(np.abs(got - expected).max() / (np.abs(expected).max() or 1))
        for batch in (1, 8, 32):
            data = (
                np.random.default_rng(batch).random((batch, 3, size, size), dtype=np.float32)
                * scale
            )
            for _ in range(3):
                backend.run(data)
            torch.cuda.synchronize()
            rates = []
            for _ in range(repeats):
                started = time.perf_counter()
                for _ in range(5):
                    backend.run(data)
                torch.cuda.synchronize()
                rates.append(5 * batch / (time.perf_counter() - started))
            # The model alone, input already on the GPU: what the device could do.
            on_gpu = torch.from_numpy(data).to("cuda", dtype=backend.dtype)
            with torch.inference_mode():
                for _ in range(3):
                    backend.module(on_gpu)
                torch.cuda.synchronize()
                started = time.perf_counter()
                for _ in range(10):
                    backend.module(on_gpu)
                torch.cuda.synchronize()
            model_only = 10 * batch / (time.perf_counter() - started)
            runs.append(
                {
                    "model": model,
                    "fp16": fp16,
                    "batch": batch,
                    "fps_with_transfers": round(harness.median(rates), 1),
                    "fps_model_only": round(model_only, 1),
                    "max_rel_error_vs_onnxruntime_cpu": round(error, 6),
                }
            )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "bench/results/gpu.json"))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--opencl-device", default="gpu", choices=("gpu", "cpu", "auto"))
    parser.add_argument(
        "--streams",
        help="comma-separated stream counts (1,4,8,16): run the multi-stream pipeline "
        "benchmark (bench/streams_bench.py) instead of the kernel and backend parts",
    )
    parser.add_argument("--work", default="/tmp/vapipe-streams", help="scratch for --streams")
    parser.add_argument("--shards", help='--streams: these shard settings (1,8,"auto")')
    parser.add_argument("--queue-size", type=int, default=64, help="--streams: pipeline queues")
    parser.add_argument("--seconds", type=float, default=10.0, help="--streams: clip length")
    parser.add_argument(
        "--extras", action="store_true", help="--streams: also 16 realtime streams and 4 with video"
    )
    parser.add_argument("--realtime-shards", default="8", help="--extras: shard counts, e.g. 2,8")
    parser.add_argument(
        "--runs",
        help="named runs instead of --streams: 16x8 (16 streams, 8 shards), with suffixes "
        "-eager, -hostdecode, -rt, -video (see bench/streams_bench.py runs_part)",
    )
    parser.add_argument(
        "--no-standalone", action="store_true", help="--runs: skip the backend-alone part"
    )
    args = parser.parse_args()
    if args.runs:
        from bench.streams_bench import runs_part

        report = runs_part(
            args.runs.split(","), Path(args.work), seconds=args.seconds,
            queue_size=args.queue_size, alone=not args.no_standalone,
        )  # fmt: skip
        report["command"] = "python bench/gpu_bench.py " + " ".join(sys.argv[1:])
        report["date"] = time.strftime("%Y-%m-%d %H:%M")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        harness.record(Path(args.out), report)
        return
    if args.streams:
        from bench.streams_bench import streams_part

        counts = [int(n) for n in args.streams.split(",")]
        streams = streams_part(
            counts,
            Path(args.work),
            shards=args.shards.split(",") if args.shards else None,
            queue_size=args.queue_size,
            seconds=args.seconds,
            extras=args.extras,
            realtime_shards=tuple(args.realtime_shards.split(",")),
        )
        streams["command"] = "python bench/gpu_bench.py " + " ".join(sys.argv[1:])
        streams["date"] = time.strftime("%Y-%m-%d %H:%M")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        harness.record(Path(args.out), streams)
        return
    report: dict[str, Any] = {
        "command": "python bench/gpu_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "python": platform.python_version(),
        "peak_memory_bandwidth_GBps": H200_PEAK_GBPS,
    }
    parts = (
        ("opencl", lambda: opencl_part(args.repeats, args.opencl_device)),
        ("torch", lambda: torch_part(args.repeats)),
    )
    for name, part in parts:
        try:
            report[name] = part()
        except Exception as exc:
            report[name] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-3000:],
            }
        print(json.dumps({name: report[name]}, indent=1), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    harness.record(Path(args.out), report)


if __name__ == "__main__":
    main()
