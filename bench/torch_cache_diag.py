"""Why a module loaded from the compiled-model cache runs slower than a fresh one (issue 28).

    python bench/torch_cache_diag.py --model PATH --out DIR

The torch backend alone, on the GPU, built three ways in one process: the cache off (onnx2torch's
module specialised per batch size), the cache cold (traced, stored) and warm (loaded). For each:
whether CUDA graphs were captured, the time of one batch at 8/16/32 (replayed, median of 50),
and the kernels of one op-by-op forward at batch 32 under the torch profiler (count, names,
device time), so a difference in what runs shows by name.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np


def time_batches(backend: Any, torch: Any, sizes: tuple[int, ...]) -> dict[int, float]:
    shape = (3, 416, 416)
    out = {}
    for size in sizes:
        batch = np.random.default_rng(size).random((size, *shape), np.float32) * 255
        for _ in range(5):
            backend.run_on_device(batch)
        torch.cuda.synchronize()
        spans = []
        for _ in range(50):
            started = time.perf_counter()
            backend.run_on_device(batch)
            torch.cuda.synchronize()
            spans.append(time.perf_counter() - started)
        out[size] = round(statistics.median(spans) * 1000, 3)
    return out


def kernels(module: Any, torch: Any, size: int) -> dict[str, Any]:
    from torch.profiler import ProfilerActivity, profile

    batch = torch.rand((size, 3, 416, 416), device="cuda") * 255
    with torch.inference_mode():
        for _ in range(3):
            module(batch)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            module(batch)
            torch.cuda.synchronize()
    names: Counter[str] = Counter()
    device_us = 0.0
    memcpy = Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            names[event.name[:90]] += 1
            device_us += event.device_time_total if hasattr(event, "device_time_total") else 0
            if "memcpy" in event.name.lower() or "Memcpy" in event.name:
                memcpy[event.name[:60]] += 1
    return {
        "kernels": sum(names.values()),
        "device_us": round(device_us, 1),
        "memcpy": dict(memcpy),
        "top": names.most_common(25),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-batch", type=int, default=32)
    args = parser.parse_args()
    import torch

    from vapipe.stages.infer.backends.config import TorchConfig
    from vapipe.stages.infer.backends.pytorch import TorchBackend

    report: dict[str, Any] = {"torch": torch.__version__}
    cache = tempfile.mkdtemp()
    for variant, setting in (("off", "off"), ("cold", cache), ("warm", cache), ("off2", "off")):
        started = time.perf_counter()
        config = TorchConfig(type="torch", device="cuda", cache_dir=setting)
        backend = TorchBackend(args.model, name="det", config=config, max_batch=args.max_batch)
        ready_s = time.perf_counter() - started
        row: dict[str, Any] = {
            "ready_s": round(ready_s, 2),
            "graphs": backend.graphs.sizes if backend.graphs else None,
            "cache": backend.startup.get("cache"),
            "executor_optimize": torch._C._get_graph_executor_optimize(),
            "ms_per_batch": time_batches(backend, torch, (8, 16, 32)),
        }
        module = backend.fixed[32] if backend.fixed else None
        if module is None:
            from vapipe.stages.infer.backends.cuda_graphs import specialise

            sample = torch.rand((32, 3, 416, 416), device="cuda")
            with torch.inference_mode():
                module = specialise(torch, backend.module, sample)
        row["op_by_op_b32"] = kernels(module, torch, 32)
        if backend.fixed:
            row["graph_b32"] = str(backend.fixed[32].graph)[:6000]
        report[variant] = row
        print(variant, json.dumps({k: v for k, v in row.items() if k != "graph_b32"})[:3000])
        backend.close()
        torch.cuda.empty_cache()
        torch._C._set_graph_executor_optimize(True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "torch_cache_diag.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
