"""Many 1080p streams through the real CLI on one GPU: shards, device decode, the standalone
backend at the same batch, all in one run.

    python bench/gpu_bench.py --streams 1,4,8,16 --out bench/results/streams.json

For each stream count the pipeline (OpenCL preprocessing, the torch backend at max_batch 32,
NMS, events only) runs once per variant: one process, ``shards = "auto"``, and at the largest
count also without device decode. Each run reads N copies of a 1080p clip made here with PyAV
(people.mp4 scaled up, 10 s) as files, as fast as they decode. Reported per run: frames,
wall time (start-up included), frames/wall, the inference stage's aggregate steady fps (its
frames over its first-to-last span, summed over shards), every stage's mean ms, GPU
utilisation and memory (nvidia-smi, sampled every 0.25 s), peak host RSS of the whole process
tree. Then the backend alone on the same frames at batch 32: host copies + model + device
decode, and the model with its input already on the GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.run_sampler import Sampler, spy  # noqa: E402
from bench.standalone_gpu import naive_gpu_loop, onnxruntime_cuda, standalone  # noqa: E402

CONFIG = """\
links = [{links}, "pre ! det ! nms ! events"{video_link}]

[pipeline]
queue_size = {queue_size}
shards = {shards}
{pipeline_extra}
{sources}
[nodes.pre]
type = "preprocess"
{pre_extra}

[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 32
batch_timeout_ms = 10
workers = {workers}
{decode_line}

[nodes.det.backend]
{backend_extra}

[nodes.nms]
type = "nms"

[nodes.events]
type = "events"
path = "out/events.jsonl"
{video}"""

VIDEO = """
[nodes.video]
type = "video"
path = "out/{source_id}.mp4"
"""


def make_clip(path: Path, seconds: float = 10.0) -> Path:
    """people.mp4 scaled to 1920x1080, H.264: what a 1080p camera recording looks like."""
    from vapipe.pipeline.assets import resolve_media

    rate = Fraction(24000, 1001)
    with av.open(resolve_media("sample:people")) as source, av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        for count, frame in enumerate(source.decode(video=0)):
            if count >= seconds * float(rate):
                break
            big = frame.reformat(width=1920, height=1080, format="yuv420p")
            big.pts, big.time_base = count, 1 / rate
            out.mux(stream.encode(big))
        out.mux(stream.encode(None))
    return path


def write_config(
    folder: Path,
    clip: Path,
    streams: int,
    shards: str,
    device_decode: bool | None,
    *,
    queue_size: int = 64,
    realtime: bool = False,
    video: bool = False,
    backend_extra: str = "",
    decode_threads: int | None = None,
    bgr_input: bool = False,
    numpy_pre: bool = False,
    torch_pre: bool = False,
    workers: int = 2,
    video_preset: str | None = None,
    video_threads: int | None = None,
    loop: bool = False,
    hwaccel: str | None = None,
    python_cpus: int | None = None,
) -> Path:
    names = [f"cam{i:02d}" for i in range(streams)]
    pacing = "realtime = true\nloop = true\n" if realtime else "loop = true\n" if loop else ""
    if hwaccel is not None:
        pacing += f'hwaccel = "{hwaccel}"\n'
    if decode_threads is not None:
        pacing += f"decode_threads = {decode_threads}\n"
    sources = "".join(
        f'[nodes.{name}]\ntype = "source"\nuri = "{clip}"\n{pacing}\n' for name in names
    )
    links = ", ".join(f'"{name} ! pre"' for name in names)
    text = CONFIG.format(
        links=links,
        shards=shards,
        sources=sources,
        decode_line=""
        if device_decode is None
        else f"decode_on_device = {str(device_decode).lower()}",
        queue_size=queue_size,
        video_link=', "nms ! video"' if video else "",
        video=VIDEO
        + (f'preset = "{video_preset}"\n' if video_preset else "")
        + (f"threads = {video_threads}\n" if video_threads is not None else "")
        if video
        else "",
        backend_extra=backend_extra or 'type = "torch"\ndevice = "cuda"',
        pre_extra='backend = "numpy"'
        if numpy_pre
        else ('backend = "torch"' if torch_pre else 'backend = "opencl"\ndevice = "gpu"')
        + ("\nyuv_input = false" if bgr_input else ""),
        workers=workers,
        # Older builds lack the key: written only where asked for.
        pipeline_extra=f"python_cpus = {python_cpus}\n" if python_cpus else "",
    )
    path = folder / "pipeline.toml"
    path.write_text(text)
    return path


def run_pipeline(
    folder: Path,
    config: Path,
    stop_after_s: float | None = None,
    extra_env: dict[str, str] | None = None,
    max_frames: int | None = None,
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    started = time.monotonic()
    limit = ["--max-frames", str(max_frames)] if max_frames else []
    command = [sys.executable, "-m", "vapipe", str(config), "--stats", "stats.json"]
    process = subprocess.Popen(
        [*command, "--no-progress", *limit],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    sampler = Sampler(process.pid, folder / "out" / "events.jsonl")
    spy_into = os.environ.get("VAPIPE_BENCH_SPY")  # a folder for py-spy's samples
    if spy_into:
        threading.Thread(
            target=spy, args=(process, Path(spy_into), folder.name), daemon=True
        ).start()
    if stop_after_s is not None:  # realtime sources loop: Ctrl-C after this long
        try:
            process.wait(stop_after_s)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=540)
    wall = time.monotonic() - started
    sampled = sampler.stop()
    if process.returncode not in (0, 130):
        return {"error": stderr[-1500:], "exit_code": process.returncode}
    stats = json.loads((folder / "stats.json").read_text())
    stages = stats["stages"]
    frames = stages["det"]["frames"]
    result = {
        "frames": frames,
        "wall_s": round(wall, 2),
        "frames_per_wall_s": round(frames / wall, 1),
        "steady_fps": sampler.steady_rate(),
        "steady_cpu_busy_pct": sampler.steady_cpu_busy(),
        "infer_steady_fps": stages["det"]["fps"],
        "stage_mean_ms": {
            name: s.get("mean_ms") for name, s in stages.items() if not name.startswith("cam")
        },
        "stage_fps": {
            name: s.get("fps") for name, s in stages.items() if not name.startswith("cam")
        },
        "infer_calls": stages["det"]["calls"],
        "device": stages["det"].get("provider"),
        **sampled,
    }
    if "shards" in stats:
        result["shard_processes"] = [
            {"sources": len(s["sources"]), **s.get("process", {})} for s in stats["shards"]
        ]
        sources = [st for sh in stats["shards"] for st in sh["stages"].values() if "uri" in st]
        keys = ("frames", "calls", "fps", "mean_ms", "head_decode", "cuda_graphs", "startup")
        result["shard_det"] = [
            {k: s["stages"]["det"].get(k) for k in keys} | {"ready": s.get("startup")}
            for s in stats["shards"]
        ]
    else:
        sources = [st for st in stages.values() if "uri" in st]
    result["decode_threads"] = sorted({str(st.get("decode_threads")) for st in sources})
    result["decoders"] = sorted({str(st.get("decoder")) for st in sources})
    result["frames_as_yuv420"] = sum(st.get("frames_as_yuv420") or 0 for st in sources)
    result["decode_on_device"] = "head decode and NMS on" in stderr
    result["head_decode"] = stages["det"].get("head_decode")
    result["cpu_ops"] = stages["det"].get("cpu_ops")
    det = stages["det"]
    result["mean_batch"] = round(det["frames"] / det["calls"], 2) if det.get("calls") else None
    result["cuda_graphs"] = det.get("cuda_graphs")
    result["open_s"] = {name: s["open_s"] for name, s in stages.items() if s.get("open_s")}
    result["ready_s"] = stats.get("ready_s") or stats.get("open_s")
    latency = stages["events"].get("latency", {})
    if latency:
        result["capture_to_event_p95_ms_worst_source"] = max(v["p95_ms"] for v in latency.values())
        result["capture_to_event_p50_ms_median_source"] = harness.median(
            v["p50_ms"] for v in latency.values()
        )
    result["dropped"] = sum(q["dropped"] for q in stats["queues"].values())
    if "video" in stages:
        result["video_fps"] = stages["video"]["fps"]
    return result


def streams_part(
    counts: list[int],
    work: Path,
    *,
    shards: list[str] | None = None,
    queue_size: int = 64,
    seconds: float = 10.0,
    extras: bool = False,
    realtime_shards: tuple[str, ...] = ("8",),
) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    clip = make_clip(work / "clip1080.mp4", seconds)
    report: dict[str, Any] = {"clip": "people.mp4 scaled to 1920x1080, 240 frames", "runs": []}
    try:
        report["standalone_torch_yolox_nano"] = standalone(clip)
    except Exception as exc:
        report["standalone_torch_yolox_nano"] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(report, indent=1), flush=True)
    for count in counts:
        variants = [(s, True) for s in shards or ["1", '"auto"']]
        if count == max(counts) and not shards:
            variants += [('"auto"', False), (str(count // 2), True)]
        for setting, device_decode in variants:
            label = setting.strip('"')
            folder = work / f"s{count}-{label}-{int(device_decode)}"
            folder.mkdir(parents=True, exist_ok=True)
            quoted = label if label.isdigit() else f'"{label}"'
            config = write_config(folder, clip, count, quoted, device_decode, queue_size=queue_size)
            run = {"streams": count, "shards": label, "queue_size": queue_size,
                   "device_decode_asked": device_decode}  # fmt: skip
            try:
                run.update(run_pipeline(folder, config))
            except Exception as exc:
                run["error"] = f"{type(exc).__name__}: {exc}"
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
    if extras:
        report["realtime"] = [
            extra_run(work, clip, f"realtime{n}", 16, n, realtime=True) for n in realtime_shards
        ]
        report["video"] = extra_run(work, clip, "video", 4, "4", video=True)
    return report


def extra_run(work: Path, clip: Path, name: str, streams: int, shards: str, **kind: bool) -> Any:
    """16 cameras paced at their frame rate (latency, drops), or 4 with annotated video."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    config = write_config(folder, clip, streams, shards, True, queue_size=8, **kind)
    run: dict[str, Any] = {"streams": streams, "shards": shards, **kind}
    try:
        run.update(run_pipeline(folder, config, stop_after_s=45 if kind.get("realtime") else None))
    except Exception as exc:
        run["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(run), flush=True)
    return run


def runs_part(
    specs: list[str],
    work: Path,
    *,
    seconds: float,
    queue_size: int = 8,
    realtime_s: float = 45,
    alone: bool = True,
) -> dict[str, Any]:
    """Named runs: ``16x8`` is 16 streams in 8 shards; suffixes ``-eager`` (no CUDA graphs),
    ``-hostdecode`` (no device decode), ``-rt`` (paced cameras, 45 s, then Ctrl-C),
    ``-video`` (annotated video per source), ``-dtN`` (``decode_threads = N`` per source),
    ``-ort`` (onnxruntime's CUDA provider instead of torch, head decoded in the model; with
    ``-hostdecode`` in numpy), ``-np`` (numpy preprocessing instead of OpenCL), ``-w1`` (one
    inference worker instead of two),
    ``-auto`` (``backend = "auto"``: what the pipeline picks by itself), ``-bgr`` (sources
    convert to BGR; default: I420 planes to the OpenCL kernel), ``-pNAME`` (with ``-video``:
    the video sink's x264 preset, e.g. ``-pultrafast``; default veryfast), ``-tN`` (with
    ``-video``: ``threads = N`` encoder threads per file; ``-t0`` x264's own choice)."""
    work.mkdir(parents=True, exist_ok=True)
    clip = make_clip(work / "clip1080.mp4", seconds)
    report: dict[str, Any] = {"clip": f"people.mp4 scaled to 1920x1080, {seconds:g} s", "runs": []}
    if alone:
        for key, part in (
            ("naive_gpu_loop", naive_gpu_loop),
            ("standalone_torch_yolox_nano", standalone),
        ):
            try:
                report[key] = part(clip)
            except Exception as exc:
                report[key] = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps({key: report[key]}), flush=True)
    if any("-ort" in spec for spec in specs):
        try:
            report["standalone_onnxruntime_cuda"] = onnxruntime_cuda(clip)
        except Exception as exc:
            report["standalone_onnxruntime_cuda"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(report["standalone_onnxruntime_cuda"]), flush=True)
    for spec in specs:
        head, *flags = spec.split("-")
        streams, shards = (int(n) for n in head.split("x"))
        folder = work / spec
        folder.mkdir(parents=True, exist_ok=True)
        realtime = "rt" in flags
        threads = next((int(f[2:]) for f in flags if f.startswith("dt")), None)
        backend = 'type = "torch"\ndevice = "cuda"'
        if "eager" in flags:
            backend += "\ncuda_graphs = false"
        if "nocache" in flags:
            backend += '\ncache_dir = "off"'
        if "ort" in flags:
            backend = 'type = "onnxruntime"\nproviders = ["cuda"]'
        if "auto" in flags:
            backend = 'type = "auto"'
        decode = None if {"auto", "ort"} & set(flags) else True
        if "hostdecode" in flags:
            decode = False
        config = write_config(
            folder, clip, streams, str(shards), decode,
            queue_size=queue_size, realtime=realtime, video="video" in flags,
            backend_extra=backend, decode_threads=threads, bgr_input="bgr" in flags,
            numpy_pre="np" in flags, workers=1 if "w1" in flags else 2,
            video_preset=next((f[1:] for f in flags if f.startswith("p")), None),
            video_threads=next((int(f[1:]) for f in flags if f[:1] == "t" and f[1:].isdigit()),
                               None),
        )  # fmt: skip
        run: dict[str, Any] = {"spec": spec, "streams": streams, "shards": shards}
        try:
            extra_env = {"OMP_NUM_THREADS": "1"} if "omp1" in flags else None
            run.update(run_pipeline(folder, config, stop_after_s=realtime_s if realtime else None,
                                    extra_env=extra_env))  # fmt: skip
        except Exception as exc:
            run["error"] = f"{type(exc).__name__}: {exc}"
        report["runs"].append(run)
        print(json.dumps(run), flush=True)
    return report
