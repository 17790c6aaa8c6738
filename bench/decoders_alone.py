"""NVIDIA's video decoders alone on the 1080p clip, fed in several ways, steady state (issue
61's case (a)): how many frames/s the card's NVDEC engines give, and which feeding reaches them.

    python bench/decoders_alone.py --clip clip1080.mp4 --streams 16,32 --seconds 6 \\
        --ways pipeline,memory,threaded --out bench/results/decoders_alone.json

Every way makes its decoders and decodes a few pictures per stream first (a decoder's making
and the first pictures are start-up, not throughput), then counts the pictures each stream
completes inside one window of ``--seconds`` that starts at the same moment for all streams
(a wall-clock time handed to every thread and process), each stream looping the clip:

- ``pipeline``: as the source stage feeds them: PyAV demuxes, FFmpeg's ``h264_mp4toannexb``
  filters, ``vapipe``'s NvdecStream hands each packet to its decoder and copies every picture
  into a tensor of its own with an event (stages/source/nvdec.py); one thread per stream, one
  process, one CUDA context;
- ``memory``: the clip's Annex B packets read once into memory, each stream's thread only
  calling ``Decode`` (no demuxing, no copy): the most that Python threads feeding
  PyNvVideoCodec can give;
- ``memoryP4`` (``memoryPN``): the same streams split over N processes (N contexts);
- ``threaded``: PyNvVideoCodec's ThreadedDecoder per stream (its own demuxer and a native
  thread decoding ahead), pictures taken in batches of 8.

``nvidia-smi`` is sampled during every window: decoder utilisation and the video clock, whose
ratio to 1,860 MHz scales NVIDIA's ~771 frames/s of 1080p H.264 per engine (NVDEC application
note, Video Codec SDK 13) into this card's engines' limit. A benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402

WARM_PICTURES = 8
"""Pictures each stream decodes before the window: the decoder made and its pipeline full."""
ENGINE_FPS_AT_1860 = 771
"""NVIDIA's figure for one NVDEC engine, 1080p H.264, at a 1,860 MHz video clock."""


class Window:
    """The counting window every stream shares: pictures completed between ``start`` and
    ``end`` (wall-clock seconds, so that processes share it too) count."""

    def __init__(self, start: float, seconds: float) -> None:
        self.start, self.end = start, start + seconds

    def run(self, warm: Callable[[], int], step: Callable[[], int]) -> int:
        """``warm()`` until ``WARM_PICTURES``, wait for the start, then ``step()`` (the
        pictures one call completed) until the end; the count inside the window."""
        done = 0
        while done < WARM_PICTURES:
            done += warm()
        if time.time() > self.start:
            raise RuntimeError("a stream was not ready when the window opened (raise --lead)")
        time.sleep(max(0.0, self.start - time.time()))
        counted = 0
        while time.time() < self.end:
            counted += step()
        return counted


def annex_b(clip: str) -> list[tuple[bytes, int]]:
    import av

    packets = []
    with av.open(clip) as container:
        video = container.streams.video[0]
        annexb = av.BitStreamFilterContext("h264_mp4toannexb", video)
        for packet in container.demux(video):
            for out in annexb.filter(packet if packet.size else None):
                packets.append((bytes(out), int(out.pts if out.pts is not None else 0)))
    return packets


def memory_stream(clip: str, packets: list[tuple[bytes, int]]) -> Callable[[], int]:
    import numpy as np
    import PyNvVideoCodec as nvc

    decoder = nvc.CreateDecoder(gpuid=0, codec=nvc.cudaVideoCodec.H264, usedevicememory=True)
    arrays = [(np.frombuffer(data, np.uint8), pts) for data, pts in packets]
    position = [0]

    def step() -> int:
        data, pts = arrays[position[0] % len(arrays)]
        position[0] += 1
        message = nvc.PacketData()
        message.bsl_data, message.bsl, message.pts = data.ctypes.data, data.size, pts
        return len(decoder.Decode(message))

    return step


def pipeline_stream(clip: str, _: Any) -> Callable[[], int]:
    import av

    from vapipe.stages.source.nvdec import NvdecBackend

    backend = NvdecBackend(0)
    state: dict[str, Any] = {}

    def session() -> None:
        if "container" in state:
            state["container"].close()
        container = av.open(clip)
        video = container.streams.video[0]
        state["container"], state["packets"] = container, container.demux(video)
        if "decoder" not in state or not state["decoder"].restart(video):
            state["decoder"] = backend.open(video)

    session()

    def step() -> int:
        try:
            packet = next(state["packets"])
        except StopIteration:
            session()
            return 0
        pictures = state["decoder"].decode(packet)
        if pictures and pictures[-1].ready is not None:  # copies done, as a reader waits
            pictures[-1].ready.synchronize()
        return len(pictures)

    return step


def threaded_stream(clip: str, _: Any) -> Callable[[], int]:
    import PyNvVideoCodec as nvc

    decoder = nvc.ThreadedDecoder(clip, buffer_size=16, gpu_id=0, use_device_memory=True)

    def step() -> int:
        got = len(decoder.get_batch_frames(8))
        if got == 0:  # the file's end: the next pass
            decoder.reconfigure_decoder(clip)
        return got

    return step


MAKERS: dict[str, Callable[[str, Any], Callable[[], int]]] = {
    "pipeline": pipeline_stream,
    "memory": memory_stream,
    "threaded": threaded_stream,
}


def run_streams(way: str, clip: str, streams: int, window: Window) -> int:
    """One process's share: a thread per stream; the pictures they completed in the window."""
    packets = annex_b(clip) if way == "memory" else None
    counts = [0] * streams
    errors: list[str] = []

    def one(index: int) -> None:
        try:
            step = MAKERS[way](clip, packets)
            counts[index] = window.run(step, step)
        except Exception:  # reported, not hidden
            errors.append(traceback.format_exc(limit=4))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(errors[0])
    return sum(counts)


def _process_share(args: tuple[str, str, int, float, float]) -> int:
    way, clip, streams, start, seconds = args
    return run_streams(way, clip, streams, Window(start, seconds))


class Smi:
    """``nvidia-smi`` samples (every 250 ms) while a window runs."""

    FIELDS = ("utilization.decoder", "clocks.video", "utilization.gpu", "clocks.sm")

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            ["nvidia-smi", f"--query-gpu={','.join(self.FIELDS)}",
             "--format=csv,noheader,nounits", "-lms", "250"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.rows: list[tuple[float, list[float]]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                values = [float(v) for v in line.split(",")]
            except ValueError:
                continue
            self.rows.append((time.time(), values))

    def between(self, start: float, end: float) -> dict[str, float]:
        inside = [v for t, v in self.rows if start <= t <= end]
        if not inside:
            return {}
        return {
            name: round(sum(row[i] for row in inside) / len(inside), 1)
            for i, name in enumerate(self.FIELDS)
        }

    def stop(self) -> None:
        self.process.terminate()


def measure(way: str, clip: str, streams: int, seconds: float, lead: float) -> dict[str, Any]:
    processes = 1
    base = way
    if way.startswith("memoryP"):
        base, processes = "memory", int(way[len("memoryP") :])
    start = time.time() + lead
    if processes == 1:
        counted = run_streams(base, clip, streams, Window(start, seconds))
    else:
        shares = [streams // processes + (i < streams % processes) for i in range(processes)]
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            counted = sum(pool.map(_process_share,
                                   [(base, clip, s, start, seconds) for s in shares]))  # fmt: skip
    return {"fps": round(counted / seconds, 1), "pictures": counted, "start": start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", required=True, help="a 1080p H.264 clip (streams_bench's)")
    parser.add_argument("--streams", default="16,32")
    parser.add_argument("--ways", default="pipeline,memory,threaded")
    parser.add_argument("--seconds", type=float, default=6.0, help="the counting window")
    parser.add_argument("--lead", type=float, default=8.0, help="set-up time before it opens")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    smi = Smi()
    report: dict[str, Any] = {"clip": args.clip, "window_s": args.seconds, "cases": {}}
    try:
        clocks = subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK"], capture_output=True,
                                text=True, check=False).stdout  # fmt: skip
        report["clock_query"] = [line.strip() for line in clocks.splitlines() if "Video" in line]
    except OSError as exc:
        report["clock_query"] = str(exc)
    for streams in map(int, args.streams.split(",")):
        for way in args.ways.split(","):
            runs = []
            for _ in range(args.repeats):
                try:
                    result = measure(way, args.clip, streams, args.seconds, args.lead)
                    start = result.pop("start")
                    result["smi"] = smi.between(start + 0.5, start + args.seconds - 0.2)
                    video_clock = result["smi"].get("clocks.video")
                    if video_clock:
                        result["engines_limit_7"] = round(
                            7 * ENGINE_FPS_AT_1860 * video_clock / 1860
                        )
                except Exception as exc:
                    result = {"error": str(exc)[-1200:]}
                runs.append(result)
                print(way, streams, result, flush=True)
            fps = [r["fps"] for r in runs if "fps" in r]
            report["cases"][f"{way}/{streams}"] = {
                "fps": harness.median(fps) if fps else None,
                "runs": runs,
            }
    smi.stop()
    print(json.dumps(harness.record(args.out, report) if args.out else report, indent=1))


if __name__ == "__main__":
    main()
