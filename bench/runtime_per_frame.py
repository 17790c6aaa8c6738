"""The runtime's own cost per frame after the decoders (issue 61's bound in one process): N
stand-in sources that hand out ready frames (1080p geometry, no pixels, no decoding), a
stand-in detector that attaches a model's candidates a batch at a time (as the torch backend's
on-device decode hands them: already suppressed, model-input pixels), then the real ``nms``
node and the real ``events`` sink writing every line to a file. No model, no GPU: what is left
is queues, threads, the interpreter lock and the per-frame Python of nms and events, which is
what one process per GPU runs at thousands of frames a second.

    python bench/runtime_per_frame.py --runs 5 --frames 2000 [--streams 16]
        [--site A_SITE --site B_SITE]   # two builds (pip install --target), alternating
        [--python-cpus 0 --python-cpus 1]   # its threads on every core, then on one
                                            # (pipeline/affinity.py), alternating

Writes bench/results/runtime_per_frame.json (``--out``) and prints the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import harness  # noqa: E402

CANDIDATES = 24
"""Boxes a frame's candidates hold: the people clip at 1080p gives 10-40 after on-device NMS."""


def graph_text(streams: int, frames: int, events: Path, python_cpus: int | None = None) -> str:
    """The graph: sources -> stand-in detector (batches across streams) -> nms -> events."""
    names = [f"s{k:02d}" for k in range(streams)]
    links = [f"{name} ! det" for name in names] + ["det ! nms ! events"]
    nodes = "".join(
        f'[nodes.{name}]\ntype = "bench_frames"\nframes = {frames}\n\n' for name in names
    )
    pinned = f"python_cpus = {python_cpus}\n" if python_cpus else ""  # older builds lack it
    return (
        f'links = {json.dumps(links)}\n\n[pipeline]\nname = "runtime_per_frame"\n{pinned}\n{nodes}'
        '[nodes.det]\ntype = "bench_candidates"\nmax_batch = 32\n\n'
        '[nodes.nms]\ntype = "nms"\nconf = 0.25\n\n'
        f'[nodes.events]\ntype = "events"\npath = "{events}"\n'
    )


def child(streams: int, frames: int, python_cpus: int | None) -> dict[str, Any]:
    """One run in this process (the build on sys.path): frames/s from all opened to the end."""
    from fractions import Fraction

    import numpy as np

    from vapipe.api import Pipeline
    from vapipe.pipeline.detections import Detections
    from vapipe.pipeline.frame import Frame, StreamInfo
    from vapipe.pipeline.geometry import Letterbox
    from vapipe.pipeline.registry import register
    from vapipe.pipeline.stage import BatchStage, SourceStage, StageConfig

    class FramesConfig(StageConfig):
        """A stand-in source."""

        frames: int = 100
        """How many."""

    class CandidatesConfig(StageConfig):
        """A stand-in detector."""

        max_batch: int = 32
        """Frames a batch."""

    letterbox = Letterbox(1 / 3, 0, 140, 640, 360, 1920, 1080)
    image = np.zeros((1080, 1920, 3), np.uint8)  # one read-only picture shared by every frame
    image.flags.writeable = False
    rng = np.random.default_rng(61)
    names = tuple(f"class{k}" for k in range(80))
    pool = []
    for _ in range(64):
        corner = rng.uniform(0, 560, (CANDIDATES, 2)).astype(np.float32)
        size = rng.uniform(8, 80, (CANDIDATES, 2)).astype(np.float32)
        pool.append(
            Detections(
                np.concatenate([corner, corner + size], axis=1),
                rng.uniform(0.1, 0.95, CANDIDATES).astype(np.float32),
                rng.integers(0, 80, CANDIDATES).astype(np.int32),
                names,
                suppressed=True,
            )
        )

    @register("bench_frames")
    class Frames(SourceStage):
        Config = FramesConfig
        config: FramesConfig

        def frames(self):  # type: ignore[no-untyped-def]
            info = StreamInfo(self.name, "bench", 1920, 1080, Fraction(30))
            for seq in range(self.config.frames):
                yield Frame(self.name, seq, seq / 30, time.time(), image, info, letterbox=letterbox)

    @register("bench_candidates")
    class Candidates(BatchStage):
        Config = CandidatesConfig
        config: CandidatesConfig
        reads_pixels = False

        def __init__(self, name: str, config: StageConfig) -> None:
            super().__init__(name, config)
            self.max_batch = self.config.max_batch
            self.batch_timeout_s = 0.01
            self.count = 0

        def process_batch(self, items: list[Frame]) -> list[Frame]:
            for frame in items:
                frame.detections = pool[self.count % len(pool)]
                self.count += 1
            return items

    with tempfile.TemporaryDirectory() as folder:
        events = Path(folder) / "events.jsonl"
        pipeline = Pipeline.from_string(graph_text(streams, frames, events, python_cpus))
        outcome = pipeline.run()
        lines = sum(1 for _ in events.open("rb"))
    stats = outcome.stats
    if outcome.exit_code != 0 or lines != streams * frames:
        raise SystemExit(f"run failed: exit {outcome.exit_code}, {lines} lines")
    wall = stats["wall_s"] - stats["open_s"]  # opening a stand-in, nms and events: ~0
    stages = stats["stages"]
    return {
        "fps": streams * frames / wall,
        "nms_ms": stages["nms"].get("mean_ms"),
        "events_ms": stages["events"].get("mean_ms"),
    }


def measure(site: str | None, streams: int, frames: int, cpus: int | None) -> dict[str, Any]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH")) if p)
    pinned = ["--python-cpus", str(cpus)] if cpus else []
    command = [sys.executable, __file__, "--child", "--streams", str(streams),
               "--frames", str(frames), *pinned]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{site or 'this tree'}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--frames", type=int, default=2000, help="per stream")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--site", action="append", default=[],
                        help="a build (pip install --target); twice: a against b")  # fmt: skip
    parser.add_argument("--label", default="", help="what the sites are, for the result")
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/runtime_per_frame.json")
    parser.add_argument("--python-cpus", type=int, action="append", default=[],
                        help="[pipeline] python_cpus (0: unset); twice: alternating")  # fmt: skip
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.streams, args.frames, (args.python_cpus or [0])[0] or None)))
        return
    sites = args.site or [None]
    settings = args.python_cpus or [0]

    def label(site: str | None, cpus: int) -> str:
        named = site or "this tree"
        return named if len(settings) == 1 else f"{named}, python_cpus {cpus or 'unset'}"

    sides = {label(site, cpus): (lambda s=site, c=cpus: measure(s, args.streams, args.frames, c))
             for site in sites for cpus in settings}  # fmt: skip
    runs = harness.alternate(sides, args.runs)
    fps = {side: harness.summary([r["fps"] for r in rows], 1) for side, rows in runs.items()}
    result: dict[str, Any] = {
        "benchmark": "the runtime's cost per frame after the decoders: stand-in sources and "
        "detector, the real nms node and events sink (bench/runtime_per_frame.py)",
        "streams": args.streams,
        "frames_per_stream": args.frames,
        "python_cpus": settings,
        "label": args.label,
        "fps": fps,
        "runs": runs,
    }
    if len(sides) == 2:
        a, b = (fps[side]["median"] for side in sides)
        result["ratio_b_over_a"] = harness.ratio(b, a)
    harness.record(args.out, result)
    for side, summary in fps.items():
        print(f"{side}: {summary['median']:.0f} frames/s (runs {summary['runs']})")
    if "ratio_b_over_a" in result:
        print(f"b / a: {result['ratio_b_over_a']}")


if __name__ == "__main__":
    main()
