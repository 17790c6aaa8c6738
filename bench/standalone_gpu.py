"""The baselines the multi-stream runs are compared with, on the same 1080p frames: each
backend alone at batch 1/8/32 (torch with and without CUDA graphs, onnxruntime's CUDA
provider with the head decoded in numpy or in the model), and the naive single-thread loop."""

from __future__ import annotations

import functools
import json
import statistics
import time
from pathlib import Path
from typing import Any

import av
import numpy as np


def letterboxed_frames(clip: Path, count: int) -> np.ndarray:
    """The clip's first frames as YOLOX-Nano inputs (416x416, top-left, BGR, 0-255)."""
    import cv2

    tensors = []
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            image = cv2.resize(frame.to_ndarray(format="bgr24"), (416, 234))
            canvas = np.full((416, 416, 3), 114, np.uint8)
            canvas[:234] = image
            tensors.append(canvas.transpose(2, 0, 1).astype(np.float32))
            if len(tensors) == count:
                break
    return np.stack(tensors)


def onnxruntime_cuda(clip: Path, batches: tuple[int, ...] = (1, 8, 32), repeats: int = 10) -> Any:
    """onnxruntime's CUDA provider alone on the same frames, host copies and NMS included:
    the raw head decoded with numpy, and the decode appended to the model (what the pipeline
    does on accelerators by default)."""
    from vapipe.pipeline.assets import resolve_model
    from vapipe.stages.infer.backends.onnx_runtime import OnnxBackend, OnnxRuntimeConfig
    from vapipe.stages.infer.graph_decode import HeadLayout
    from vapipe.stages.infer.heads import Family
    from vapipe.stages.nms import NmsConfig, NmsStage

    frames = letterboxed_frames(clip, max(batches))
    nms = NmsStage("nms", NmsConfig())
    report: dict[str, Any] = {}
    for in_model in (False, True):
        started = time.perf_counter()
        backend = OnnxBackend(
            str(resolve_model("yolox-nano")),
            name="det",
            config=OnnxRuntimeConfig(providers=["cuda"]),
            max_batch=max(batches),
            head=(lambda info, accelerated: HeadLayout(Family.YOLOX, 416, 416))
            if in_model
            else None,
        )
        side: dict[str, Any] = {
            "device": backend.device,
            "load_s": round(time.perf_counter() - started, 2),
            "cpu_ops": backend.cpu_ops,
        }
        for batch in batches:
            step = functools.partial(decode_step, backend, frames[:batch], nms, in_model)
            side[f"batch_{batch}_fps"] = median_fps(step, batch, repeats)
        report["decode_in_model" if in_model else "decode_numpy"] = side
        backend.close()
    return report


def decode_step(backend: Any, data: np.ndarray, nms: Any, in_model: bool) -> None:
    """One batch through an onnxruntime backend, to the nms node's kept boxes."""
    from vapipe.stages.infer.graph_decode import candidates_from_rows

    if not in_model:
        host_decode(backend, data, nms)
        return
    for found in candidates_from_rows(backend.run(data), ()):
        nms.select(found, None)


def naive_gpu_loop(clip: Path, frames: int = 300) -> dict[str, Any]:
    """What a user writes by hand: one thread, frame by frame, PyAV decode to BGR, OpenCV
    letterbox, the onnx2torch module on the GPU (eager), numpy decode and NMS."""
    import cv2
    import onnx
    import onnx2torch
    import torch

    from vapipe.pipeline.assets import resolve_model
    from vapipe.stages.infer.heads import Family, decode
    from vapipe.stages.nms import NmsConfig, NmsStage

    module = onnx2torch.convert(onnx.load(str(resolve_model("yolox-nano")))).cuda().eval()
    nms = NmsStage("nms", NmsConfig())
    done, found = 0, 0
    with torch.inference_mode(), av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            if done == 10:  # after the warm-up (CUDA context, cuDNN's first calls)
                started = time.perf_counter()
            image = frame.to_ndarray(format="bgr24")
            ratio = min(416 / image.shape[1], 416 / image.shape[0])
            small = cv2.resize(
                image, (round(image.shape[1] * ratio), round(image.shape[0] * ratio))
            )
            canvas = np.full((416, 416, 3), 114, np.uint8)
            canvas[: small.shape[0], : small.shape[1]] = small
            tensor = torch.from_numpy(canvas.transpose(2, 0, 1)[None].astype(np.float32)).cuda()
            raw = module(tensor).cpu().numpy()
            found += len(nms.select(decode(Family.YOLOX, raw, 416, 416)[0], None))
            done += 1
            if done == frames:
                break
    return {
        "frames": done - 10,
        "fps": round((done - 10) / (time.perf_counter() - started), 1),
        "detections": found,
    }


def standalone(clip: Path, batches: tuple[int, ...] = (1, 8, 32), repeats: int = 10) -> Any:
    """The torch backend alone, with and without CUDA graphs, on the pipeline's letterboxed
    frames: host copies + model + numpy decode + NMS, host copy + model + device decode, and
    the model alone with its input already on the GPU."""

    from vapipe.pipeline.assets import resolve_model
    from vapipe.stages.infer.backends.pytorch import TorchBackend, TorchConfig

    frames = letterboxed_frames(clip, max(batches))
    report: dict[str, Any] = {}
    for graphs in (True, False):
        started = time.perf_counter()
        backend = TorchBackend(
            str(resolve_model("yolox-nano")),
            name="det",
            config=TorchConfig(device="cuda", cuda_graphs=graphs),
            max_batch=max(batches),
        )
        side: dict[str, Any] = {
            "load_s": round(time.perf_counter() - started, 2),
            "cuda_graphs": backend.stats()["cuda_graphs"],
            "capture_s": backend.stats()["cuda_graph_capture_s"],
        }
        for batch in batches:
            side[f"batch_{batch}"] = backend_rates(backend, frames[:batch], repeats)
        report["cuda_graphs_on" if graphs else "cuda_graphs_off"] = side
        backend.close()
        print(json.dumps({f"standalone graphs={graphs}": side}), flush=True)
    return report


def backend_rates(backend: Any, data: np.ndarray, repeats: int) -> dict[str, float]:
    """Frames per second of one backend at one batch, three ways (median of ``repeats``)."""
    import torch

    from vapipe.stages.infer.device_decode import DeviceDecoder
    from vapipe.stages.infer.heads import Family
    from vapipe.stages.nms import NmsConfig, NmsStage, Selection

    batch = len(data)
    nms = NmsStage("nms", NmsConfig())
    decoder = DeviceDecoder(Family.YOLOX, 416, 416, (), Selection.of(nms.name, nms.config))
    on_gpu = torch.from_numpy(data).cuda()

    def host_path() -> None:
        host_decode(backend, data, nms)

    def device_path() -> None:
        decoder(backend.run_on_device(data))

    def model_only() -> None:
        with torch.inference_mode():
            if backend.graphs is not None:
                backend.graphs.run(on_gpu, batch)
            else:
                backend.module(on_gpu)
        torch.cuda.synchronize()

    steps = {"host_copy_numpy_decode": host_path, "device_decode": device_path,
             "model_only": model_only}  # fmt: skip
    return {f"fps_{name}": median_fps(step, batch, repeats) for name, step in steps.items()}


def host_decode(backend: Any, data: np.ndarray, nms: Any) -> None:
    """One batch through the backend, its head decoded with numpy and suppressed on the host."""
    from vapipe.stages.infer.heads import Family, decode

    for found in decode(Family.YOLOX, backend.run(data), 416, 416):
        nms.select(found, None)


def median_fps(step: Any, batch: int, repeats: int, warmup: int = 3) -> float:
    """Frames per second of ``step`` (one batch), median of ``repeats`` after ``warmup``."""
    for _ in range(warmup):
        step()
    rates = []
    for _ in range(repeats):
        tick = time.perf_counter()
        step()
        rates.append(batch / (time.perf_counter() - tick))
    return round(statistics.median(rates), 1)
