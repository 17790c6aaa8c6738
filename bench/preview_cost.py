"""What the page's previews cost the pipeline, and that their CPU share holds it.

    python bench/preview_cost.py --runs 2 --seconds 15 --viewers 4

``run-pipeline serve`` on configs/file.toml with the sample clip looped as fast as it decodes
(CPU-bound: anything the previews take comes out of the frames/s), sides alternating, each
a fresh process: ``alone`` (nobody watching), ``watched, unbounded`` (VIEWERS MJPEG viewers
of the stream at --preview-fps, and [serve] preview_cpu_share = 4, more than the machine has:
what the viewers cost with no share), ``watched`` (the same viewers, the default share of 0.1
core). Frames/s from the frame events written in the steady state; the
previews' own CPU seconds per second from /metrics (vapipe_preview_cpu_s_total).
Writes bench/results/preview_cost.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness, serve_bench

REPO = Path(__file__).resolve().parent.parent
SIDES = {"alone": None, "watched, unbounded": 4.0, "watched": 0.1}


def viewer(url: str, stop: threading.Event) -> None:
    with (
        httpx.Client(base_url=url, timeout=None) as client,
        client.stream("GET", "/streams/cam/mjpeg") as response,
    ):
        for _ in response.iter_bytes():
            if stop.is_set():
                return


def preview_cpu_s(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vapipe_preview_cpu_s_total")
    )


def one_run(
    side: str, viewers: int, warmup_s: float, seconds: float, preview_fps: float
) -> dict[str, float]:
    share = SIDES[side]
    serve_bench.OVERRIDES[:] = [o for o in serve_bench.OVERRIDES if not o.startswith("serve.")]
    if share is not None:
        serve_bench.OVERRIDES.append(f"serve.preview_cpu_share={share}")
    serve_bench.OVERRIDES.append(f"serve.preview_fps={preview_fps:g}")
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        process, url = serve_bench.start("serve", cwd)
        assert url is not None
        stop = threading.Event()
        if share is not None:
            for _ in range(viewers):
                threading.Thread(target=viewer, args=(url, stop), daemon=True).start()
        events = cwd / "out" / "cam.jsonl"
        deadline = time.monotonic() + 120
        while serve_bench.frame_lines(events) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(warmup_s)
        first, cpu_first, started = (
            serve_bench.frame_lines(events),
            preview_cpu_s(url),
            time.monotonic(),
        )
        time.sleep(seconds)
        last, cpu_last, ended = (
            serve_bench.frame_lines(events),
            preview_cpu_s(url),
            time.monotonic(),
        )
        stop.set()
        process.send_signal(signal.SIGINT)
        process.wait(120)
    wall = ended - started
    return {"fps": (last - first) / wall, "preview_cores": (cpu_last - cpu_first) / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--viewers", type=int, default=4)
    parser.add_argument("--preview-fps", type=float, default=30.0, help="[serve] preview_fps")
    parser.add_argument("--output", default=str(REPO / "bench/results/preview_cost.json"))
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    for index in range(args.runs):
        for side in SIDES:
            measured = one_run(side, args.viewers, args.warmup, args.seconds, args.preview_fps)
            runs[side].append({k: round(v, 3) for k, v in measured.items()})
            print(f"run {index + 1}: {side} {runs[side][-1]}", file=sys.stderr)
    medians = {
        side: {key: harness.median(r[key] for r in values) for key in ("fps", "preview_cores")}
        for side, values in runs.items()
    }
    alone = medians["alone"]["fps"]
    result = {
        "benchmark": "the page's previews: serve on configs/file.toml, people.mp4 looped, "
        f"{args.viewers} MJPEG viewers at {args.preview_fps:g} frames/s",
        "runs": runs,
        "median": medians,
        "unbounded_over_alone": harness.ratio(medians["watched, unbounded"]["fps"], alone),
        "watched_over_alone": harness.ratio(medians["watched"]["fps"], alone),
    }
    harness.record(Path(args.output), result, about=__doc__)
    print(harness.table(
        ["side", "median frames/s", "previews' CPU (cores)", "runs (frames/s)"],
        [[side, f"{m['fps']:.1f}", f"{m['preview_cores']:.3f}",
          ", ".join(str(r["fps"]) for r in runs[side])] for side, m in medians.items()],
    ))  # fmt: skip
    print(f"\nunbounded / alone {result['unbounded_over_alone']}, "
          f"watched / alone {result['watched_over_alone']}")  # fmt: skip


if __name__ == "__main__":
    main()
