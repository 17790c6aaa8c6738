"""How fast NVIDIA's hardware decoders decode 1080p H.264 into device memory (issue 51's
first question), against FFmpeg's software decoding on the same machine, in one call.

    python bench/nvdec_bench.py --clip people_1080p.mp4 --streams 1,8,16,32 \
        --out bench/results/nvdec.json

Ways, per stream count (frames/s over all streams, each stream decoding ``--frames`` frames,
the clip looped; median of ``--repeats``):

- ``software``: PyAV/FFmpeg's decoder, streams split over ``--processes`` processes, each
  stream in a thread with the source stage's FFmpeg thread count, each picture taken as I420
  (the decoding ceiling of bench/decode_ceiling.py);
- ``nvdec``: PyNvVideoCodec's own demuxer and decoder, one decoder per stream, every stream a
  thread of one process (one CUDA context), pictures left in device memory (NV12);
- ``nvdec-pyav``: packets demuxed by PyAV (as the source stage demuxes them, so timestamps and
  reconnects stay the pipeline's), made Annex B by FFmpeg's ``h264_mp4toannexb``, handed to a
  PyNvVideoCodec decoder per stream; pictures in device memory, the first picture of the
  first stream taken as a torch tensor through DLPack to record what a device front end reads.

A way that cannot start here is reported with its error. A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import av
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402
from bench.decode_ceiling import decode_share  # noqa: E402


def software(clip: str, streams: int, frames: int, processes: int) -> float:
    processes = min(processes, streams)
    # The source stage's rule (stages.source.opening.decoder_share), restated: the device
    # runs this without vapipe installed.
    cores = os.cpu_count() or 1
    threads = 0 if streams == 1 else min(cores, max(4, cores // streams))
    shares = [streams // processes + (i < streams % processes) for i in range(processes)]
    with ProcessPoolExecutor(processes) as pool:
        started = time.monotonic()
        total = sum(pool.map(decode_share, [clip] * processes, shares, [frames] * processes,
                             [threads] * processes))  # fmt: skip
    return total / (time.monotonic() - started)


def _threads(streams: int, work: Callable[[int], int]) -> float:
    """Frames/s of ``work(stream)`` run in one thread per stream, all started together."""
    counts = [0] * streams
    errors: list[str] = []
    start = threading.Barrier(streams + 1)

    def run(index: int) -> None:
        try:
            start.wait()
            counts[index] = work(index)
        except Exception:  # reported, not hidden
            errors.append(traceback.format_exc(limit=3))

    workers = [threading.Thread(target=run, args=(i,)) for i in range(streams)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.monotonic()
    for worker in workers:
        worker.join()
    if errors:
        raise RuntimeError(errors[0])
    return sum(counts) / (time.monotonic() - began)


def nvdec(clip: str, streams: int, frames: int) -> float:
    import PyNvVideoCodec as nvc

    def one(index: int) -> int:
        done = 0
        decoder = None
        while done < frames:
            demuxer = nvc.CreateDemuxer(filename=clip)
            if decoder is None:
                decoder = nvc.CreateDecoder(gpuid=0, codec=demuxer.GetNvCodecId(),
                                            usedevicememory=True)  # fmt: skip
            for packet in demuxer:
                done += len(decoder.Decode(packet))
                if done >= frames:
                    break
        return done

    return _threads(streams, one)


def annex_b_packets(clip: str) -> Any:
    """(payload bytes, pts) of each video packet, Annex B, as PyAV demuxes them."""
    with av.open(clip) as container:
        video = container.streams.video[0]
        annexb = av.BitStreamFilterContext("h264_mp4toannexb", video)
        for packet in container.demux(video):
            for filtered in annexb.filter(packet):
                yield bytes(filtered), filtered.pts or 0
        for filtered in annexb.filter(None):
            yield bytes(filtered), filtered.pts or 0


def nvdec_pyav(clip: str, streams: int, frames: int, seen: dict[str, Any]) -> float:
    import PyNvVideoCodec as nvc
    import torch

    def feed(decoder: Any, payload: bytes, pts: int) -> list[Any]:
        data = np.frombuffer(payload, dtype=np.uint8)
        packet = nvc.PacketData()
        packet.bsl_data, packet.bsl, packet.pts = data.ctypes.data, data.size, pts
        return decoder.Decode(packet)

    def one(index: int) -> int:
        decoder = nvc.CreateDecoder(gpuid=0, codec=nvc.cudaVideoCodec.H264,
                                    usedevicememory=True)  # fmt: skip
        done = 0
        while done < frames:
            for payload, pts in annex_b_packets(clip):
                pictures = feed(decoder, payload, pts)
                if pictures and index == 0 and "tensor" not in seen:
                    tensor = torch.from_dlpack(pictures[0])
                    seen["tensor"] = {"shape": list(tensor.shape), "dtype": str(tensor.dtype),
                                      "device": str(tensor.device)}  # fmt: skip
                done += len(pictures)
                if done >= frames:
                    break
        return done

    return _threads(streams, one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--streams", default="1,8,16,32")
    parser.add_argument("--frames", type=int, default=480, help="per stream")
    parser.add_argument("--processes", type=int, default=8, help="software's processes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ways", default="software,nvdec,nvdec-pyav")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "clip": args.clip,
        "frames_per_stream": args.frames,
        "cases": {},
    }
    try:
        import PyNvVideoCodec as nvc

        report["pynvvideocodec"] = nvc.__version__
        report["packetdata_fields"] = [n for n in dir(nvc.PacketData()) if not n.startswith("_")]
    except Exception as exc:  # reported: the nvdec ways then fail with it
        report["pynvvideocodec"] = f"cannot import: {exc}"
    seen: dict[str, Any] = {}
    for streams in map(int, args.streams.split(",")):
        for way in args.ways.split(","):
            runs: list[float] = []
            try:
                for _ in range(args.repeats):
                    if way == "software":
                        runs.append(software(args.clip, streams, args.frames, args.processes))
                    elif way == "nvdec":
                        runs.append(nvdec(args.clip, streams, args.frames))
                    else:
                        runs.append(nvdec_pyav(args.clip, streams, args.frames, seen))
                case = {"fps": round(harness.median(runs), 1),
                        "runs": [round(r, 1) for r in runs]}  # fmt: skip
            except Exception as exc:
                case = {"error": str(exc)[-1500:]}
            report["cases"][f"{way}/{streams}"] = case
            print(way, streams, case, flush=True)
    report["device_tensor"] = seen.get("tensor")
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
