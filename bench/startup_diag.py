"""GPU machine diagnostics: start-up phases of a fresh process, CUDA graph capture of the plain
and the traced module (with tracebacks), and 16 decoders at 1, 2, 4 and FFmpeg's own threads.

    python bench/startup_diag.py --clip /tmp/w/clip1080.mp4 --out startup.json

(the clip: make_clip in bench/streams_bench.py). Written for the session that chose the decoder
thread rule (decoder_share in stages/source/stage.py) and found why a traced module could not
be captured (bench/results/streams/startup_and_decoder_threads.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

PHASES = """
import json, time
import numpy as np
t0 = time.perf_counter()
r = {}
def lap(k):
    global t0
    n = time.perf_counter()
    r[k] = round(n - t0, 2)
    t0 = n
import av
lap("import numpy+av")
import torch
lap("import torch")
import onnx, onnx2torch
lap("import onnx+onnx2torch")
import onnxruntime
lap("import onnxruntime")
import pyopencl
lap("import pyopencl")
torch.zeros(1, device="cuda")
lap("cuda init")
import vapipe.stages.infer.stage, vapipe.stages.preprocess.stage
lap("import vapipe stages")
from vapipe.pipeline.assets import resolve_model
from vapipe.stages.infer.backends.config import TorchConfig
from vapipe.stages.infer.backends.pytorch import TorchBackend
path = str(resolve_model("yolox-nano"))
b = TorchBackend(path, name="det", config=TorchConfig(cuda_graphs=False), max_batch=32)
lap("backend load eager (convert+verify)")
for n in (1, 2, 4, 8, 16, 32):
    b.run(np.zeros((n, 3, 416, 416), np.float32))
lap("first call at 6 batch sizes")
b2 = TorchBackend(path, name="det", config=TorchConfig(), max_batch=32)
lap("second backend load with graphs")
r["graphs"] = b2.stats()["cuda_graphs"]
print("PHASES", json.dumps(r))
"""

CAPTURE = """
import traceback
import torch
from vapipe.pipeline.assets import resolve_model
from vapipe.stages.infer.backends.config import TorchConfig
from vapipe.stages.infer.backends.cuda_graphs import first_output
from vapipe.stages.infer.backends.pytorch import TorchBackend
path = str(resolve_model("yolox-nano"))
b = TorchBackend(path, name="det", config=TorchConfig(cuda_graphs=False), max_batch=8)
x = torch.rand(8, 3, 416, 416, device="cuda")
for mode in ("eager", "traced"):
    try:
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            m = b.module if mode == "eager" else torch.jit.trace(b.module, x, check_trace=False)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    m(x)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                first_output(m(x))
            g.replay()
            torch.cuda.synchronize()
            print(mode, "captured")
    except Exception:
        print(mode, "FAILED", traceback.format_exc()[-2500:])
"""


def decode_streams(clip: str, threads: int, streams: int = 16) -> dict[str, float]:
    """``streams`` decoders in as many Python threads, frames converted to BGR."""
    import av

    def rss_mb() -> int:
        return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) // 1024

    counts: list[int] = []

    def work() -> None:
        frames = 0
        with av.open(clip) as container:
            video = container.streams.video[0]
            video.thread_type, video.thread_count = "AUTO", threads
            for frame in container.decode(video):
                frame.to_ndarray(format="bgr24")
                frames += 1
        counts.append(frames)

    base, peak = rss_mb(), 0
    workers = [threading.Thread(target=work) for _ in range(streams)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    while any(worker.is_alive() for worker in workers):
        time.sleep(0.1)
        peak = max(peak, rss_mb())
    wall = time.perf_counter() - started
    return {
        "fps": round(sum(counts) / wall, 1),
        "rss_per_stream_mb": round((peak - base) / streams, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="/tmp/w/clip1080.mp4")
    parser.add_argument("--out", default="startup.json")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    run = subprocess.run([sys.executable, "-c", PHASES], capture_output=True, text=True)
    marked = [line[7:] for line in run.stdout.splitlines() if line.startswith("PHASES")]
    report["startup_phases"] = json.loads(marked[0]) if marked else run.stderr[-3000:]
    run = subprocess.run([sys.executable, "-c", CAPTURE], capture_output=True, text=True)
    report["capture"] = (run.stdout + run.stderr)[-6000:]
    report["decode_16_streams"] = {
        str(threads or "auto"): decode_streams(args.clip, threads) for threads in (1, 2, 4, 0)
    }
    print(json.dumps(report, indent=1))
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
