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
import shutil
import signal
import statistics
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

from bench.standalone_gpu import naive_gpu_loop, onnxruntime_cuda, standalone  # noqa: E402

CONFIG = """\
links = [{links}, "pre ! det ! nms ! events"{video_link}]

[pipeline]
queue_size = {queue_size}
shards = {shards}

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
) -> Path:
    names = [f"cam{i:02d}" for i in range(streams)]
    pacing = "realtime = true\nloop = true\n" if realtime else "loop = true\n" if loop else ""
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
    )
    path = folder / "pipeline.toml"
    path.write_text(text)
    return path


class Sampler:
    """GPU utilisation and memory (nvidia-smi), the process tree's RSS and the machine's busy
    CPU time (/proc/stat), every 0.25 s."""

    def __init__(self, pid: int, events: Path | None = None) -> None:
        self.pid = pid
        self.events = events
        self._events_read = 0
        self.lines: list[tuple[float, int]] = []  # (monotonic s, event lines so far)
        self.gpu_util: list[float] = []
        self.gpu_mem_mb: list[float] = []
        self.rss_mb: list[float] = []
        self.cpu: list[tuple[float, int, int]] = []  # (monotonic s, busy jiffies, all jiffies)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        smi = shutil.which("nvidia-smi")
        while not self._stop.wait(0.25):
            self._count_lines()
            self.cpu.append((time.monotonic(), *machine_jiffies()))
            self.rss_mb.append(tree_rss_mb(self.pid))
            if smi:
                line = subprocess.run(
                    [smi, "--query-gpu=utilization.gpu,memory.used",
                     "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, check=False,
                ).stdout.strip().splitlines()  # fmt: skip
                if line:
                    util, mem = (float(v) for v in line[0].split(","))
                    self.gpu_util.append(util)
                    self.gpu_mem_mb.append(mem)

    def _count_lines(self) -> None:
        """The events file's lines so far (one per frame, written whole and unbuffered)."""
        if self.events is None or not self.events.exists():
            return
        with self.events.open("rb") as handle:
            handle.seek(self._events_read)
            chunk = handle.read()
        # Count only up to the last newline: a line being written is counted next time.
        whole = chunk.rfind(b"\n") + 1
        self._events_read += whole
        count = (self.lines[-1][1] if self.lines else 0) + chunk.count(b"\n", 0, whole)
        self.lines.append((time.monotonic(), count))

    def steady_rate(self, low: float = 0.2, high: float = 0.8) -> float | None:
        """Event lines per second between the moments ``low`` and ``high`` of the run's
        lines had been written: the steady rate, past the shards' start and before the
        first ones finish, the same measure for any build (it reads only the output)."""
        if not self.lines or self.lines[-1][1] < 100:
            return None
        total = self.lines[-1][1]
        start = next(p for p in self.lines if p[1] >= low * total)
        end = next(p for p in self.lines if p[1] >= high * total)
        return round((end[1] - start[1]) / (end[0] - start[0]), 1) if end[0] > start[0] else None

    def steady_cpu_busy(self, low: float = 0.2, high: float = 0.8) -> float | None:
        """The machine's cores busy (percent of all) over the same span as ``steady_rate``."""
        if not self.lines or self.lines[-1][1] < 100 or len(self.cpu) < 2:
            return None
        total = self.lines[-1][1]
        start = next(p for p in self.lines if p[1] >= low * total)[0]
        end = next(p for p in self.lines if p[1] >= high * total)[0]
        inside = [c for c in self.cpu if start <= c[0] <= end]
        if len(inside) < 2 or inside[-1][2] == inside[0][2]:
            return None
        first, last = inside[0], inside[-1]
        return round(100 * (last[1] - first[1]) / (last[2] - first[2]), 1)

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join(2)
        self._count_lines()
        busy = [u for u in self.gpu_util if u > 0]
        return {
            "gpu_util_mean_pct": round(statistics.mean(busy), 1) if busy else None,
            "gpu_util_max_pct": max(self.gpu_util, default=None),
            "gpu_memory_max_mb": max(self.gpu_mem_mb, default=None),
            "host_rss_peak_mb": round(max(self.rss_mb, default=0.0), 1),
        }


def machine_jiffies() -> tuple[int, int]:
    """(busy, all) CPU time of the whole machine so far, from /proc/stat's first line."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def tree_rss_mb(root: int) -> float:
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, ppid = int(entry), int(fields.get("PPid", "0").strip() or 0)
        children.setdefault(ppid, []).append(pid)
        rss[pid] = float(fields.get("VmRSS", "0 kB").split()[0]) / 1024
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0.0)
        stack.extend(children.get(pid, []))
    return total


def _spy(process: subprocess.Popen[str], into: Path, name: str) -> None:
    """4 s of py-spy samples of the parent (it takes every shard's frames for the sinks) and
    the two largest processes under it (shards, not the forkserver),
    ``VAPIPE_BENCH_SPY_AFTER`` seconds (default 8) into the run, and one ``top``.
    ``VAPIPE_BENCH_SPY_ARGS``: more of py-spy's options (``--gil``: only the samples that
    hold the interpreter lock)."""
    import psutil

    time.sleep(float(os.environ.get("VAPIPE_BENCH_SPY_AFTER", "8")))
    if process.poll() is not None:
        return
    into.mkdir(parents=True, exist_ok=True)
    tree = psutil.Process(process.pid).children(True)
    busy = [psutil.Process(process.pid)]
    busy += sorted(tree, key=lambda p: p.memory_info().rss)[-2:]  # shards, not the forkserver
    top = subprocess.run(["top", "-b", "-n", "1", "-w", "200"], capture_output=True, text=True)
    records = [
        subprocess.Popen(
            ["py-spy", "record", "--pid", str(p.pid), "-d", "4", "-r", "50", "-f", "raw",
             "--nonblocking", *os.environ.get("VAPIPE_BENCH_SPY_ARGS", "").split(),
             "-o", str(into / f"spy_{name}_{i}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i, p in enumerate(busy)
    ]  # fmt: skip
    for record in records:
        record.wait(60)
    (into / f"top_{name}.txt").write_text(top.stdout[:20000])


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
    spy = os.environ.get("VAPIPE_BENCH_SPY")  # a folder for _spy's samples
    if spy:
        threading.Thread(target=_spy, args=(process, Path(spy), folder.name), daemon=True).start()
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
        result["capture_to_event_p50_ms_median_source"] = statistics.median(
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


def _decode_share(clip: str, sources: int, frames: int, threads: int) -> int:
    """One process's share of the ceiling: ``sources`` decoders in threads, as a shard runs
    them, each handing ``frames`` pictures over as I420 arrays (what the source stage makes
    for the OpenCL path), looping the clip."""

    def one() -> None:
        done = 0
        while done < frames:
            with av.open(clip) as container:
                video = container.streams.video[0]
                video.thread_type, video.thread_count = "AUTO", threads
                for picture in container.decode(video):
                    picture.to_ndarray(format="yuv420p")
                    done += 1
                    if done >= frames:
                        break

    workers = [threading.Thread(target=one) for _ in range(sources)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sources * frames


def decode_ceiling(clip: Path, streams: int, processes: int, frames: int) -> float:
    """Frames/s of the decoding alone, split as the pipeline's shards split it (``streams``
    sources over ``processes``, FFmpeg threads as the source stage gives them): the most a
    pipeline whose sources decode in software can deliver on this machine."""
    from concurrent.futures import ProcessPoolExecutor

    from vapipe.stages.source.opening import decoder_share

    threads = decoder_share(streams)
    share = streams // processes
    with ProcessPoolExecutor(processes) as pool:
        started = time.monotonic()
        total = sum(pool.map(_decode_share, [str(clip)] * processes, [share] * processes,
                             [frames] * processes, [threads] * processes))  # fmt: skip
        return round(total / (time.monotonic() - started), 1)
