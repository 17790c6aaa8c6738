"""The decoding ceiling: frames/s of the 16-stream case's software decoding alone, split as
the pipeline's shards split it. No pipeline whose sources decode in software delivers more on
the same machine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import av


def decode_share(clip: str, sources: int, frames: int, threads: int) -> int:
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
        total = sum(pool.map(decode_share, [str(clip)] * processes, [share] * processes,
                             [frames] * processes, [threads] * processes))  # fmt: skip
        return round(total / (time.monotonic() - started), 1)
