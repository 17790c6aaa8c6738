"""Decoding 1080p H.264 in software and with ``hwaccel`` (the source node's option), as the
pipeline's shards decode: N streams split over P processes, each stream in its own thread.

    python bench/hwdecode_bench.py --hwaccel cuda --streams 1,16 --processes 8 \
        --out bench/results/hwdecode.json

Per stream count and way of decoding, frames/s over all streams (median of ``--repeats``):

- ``software``: FFmpeg's software decoder with the source stage's thread count; the picture
  stays in the decoder's planes, as the source hands a plain 4:2:0 picture on;
- ``<hwaccel>``: decoded on the device and downloaded to host memory (PyAV's default; NV12);
- ``<hwaccel>-owned``: decoded on the device and left there (``HWAccel(is_hw_owned=True)``);
  each picture's luma plane is taken as a torch tensor through DLPack when torch is there,
  which is how a device front end would read it without a host copy.

``--take bgr`` converts every picture to BGR as well (the first version of this benchmark:
what a stage reading ``Frame.image`` pays). A way of decoding that cannot start here is
reported with its error, not left out.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import av

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.streams_bench import make_clip  # noqa: E402


def decode(path: str, way: str, threads: int, take: str) -> tuple[int, str]:
    """Frames decoded from one stream, and how its last picture was held."""
    kwargs: dict[str, Any] = {}
    accel = way.removesuffix("-owned")
    owned = way.endswith("-owned")
    if way != "software":
        from av.codec.hwaccel import HWAccel

        kwargs["hwaccel"] = HWAccel(accel, allow_software_fallback=False, is_hw_owned=owned)
    torch = None
    if owned:
        try:
            import torch  # type: ignore[no-redef]
        except ImportError:
            torch = None
    frames, held = 0, ""
    with av.open(path, **kwargs) as container:
        stream = container.streams.video[0]
        if way == "software":
            stream.thread_type, stream.thread_count = "AUTO", threads
        for picture in container.decode(stream):
            if take == "bgr":
                picture.to_ndarray(format="bgr24")
            elif torch is not None:
                # PyAV's planes take no CUDA stream (torch.from_dlpack passes one): the
                # capsule itself, the decoder having finished the picture it returned.
                luma = torch.utils.dlpack.from_dlpack(picture.planes[0].__dlpack__(stream=None))
                held = f"{luma.device} {tuple(luma.shape)}"
            frames += 1
            held = held or picture.format.name
    return frames, held


def one_process(path: str, way: str, streams: int, threads: int, take: str) -> tuple[int, str]:
    """``streams`` decoders in threads, as a shard runs its sources."""
    results: list[tuple[int, str]] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(decode(path, way, threads, take))
        except Exception as exc:
            failures.append(exc)

    workers = [threading.Thread(target=run) for _ in range(streams)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if failures:
        raise RuntimeError(f"{len(failures)} of {streams} decoders failed: {failures[0]!r}")
    return sum(count for count, _ in results), results[0][1]


def rate(path: Path, way: str, streams: int, processes: int, repeats: int, take: str) -> dict:
    from vapipe.stages.source.opening import decoder_share

    processes = max(1, min(processes, streams))
    shares = [streams // processes + (i < streams % processes) for i in range(processes)]
    threads = decoder_share(streams)
    rates, held = [], ""
    with ProcessPoolExecutor(processes) as pool:
        for _ in range(repeats):
            started = time.perf_counter()
            done = list(pool.map(one_process, [str(path)] * processes, [way] * processes,
                                 shares, [threads] * processes, [take] * processes))  # fmt: skip
            rates.append(sum(count for count, _ in done) / (time.perf_counter() - started))
            held = done[0][1]
    return {"fps": round(harness.median(rates), 1), "runs": [round(r, 1) for r in rates],
            "picture": held}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hwaccel", default="cuda")
    parser.add_argument("--streams", default="1,16")
    parser.add_argument("--processes", type=int, default=8, help="at most one per stream")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="the clip's length")
    parser.add_argument("--take", choices=("planes", "bgr"), default="planes")
    parser.add_argument("--out", default=str(REPO / "bench/results/hwdecode.json"))
    args = parser.parse_args()
    from av.codec.hwaccel import hwdevices_available

    report: dict[str, Any] = {
        "command": "python bench/hwdecode_bench.py " + " ".join(sys.argv[1:]),
        "pyav": av.__version__,
        "device_types": list(hwdevices_available()),
        "runs": [],
    }
    ways = ("software", args.hwaccel, f"{args.hwaccel}-owned")
    with tempfile.TemporaryDirectory() as scratch:
        clip = make_clip(Path(scratch) / "clip1080.mp4", args.seconds)
        for streams in map(int, args.streams.split(",")):
            run: dict[str, Any] = {"streams": streams, "take": args.take}
            for way in ways:
                try:
                    run[way] = rate(clip, way, streams, args.processes, args.repeats, args.take)
                except Exception as exc:
                    run[way] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            report["runs"].append(run)
            print(json.dumps(run), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    harness.record(Path(args.out), report)


if __name__ == "__main__":
    main()
