"""The headline figures, today's build against a baseline build in the same call, alternating.

    # each build a wheel installed with `pip install --no-deps --target SITE` (bench/README.md)
    python bench/headline.py --build /tmp/b-site --commit HASH \\
        --baseline /tmp/a-site --baseline-commit HASH --runs 2 --out bench/results/headline.json

On a GPU machine (torch backend on CUDA; preprocessing in torch on the GPU where the build
has it, else OpenCL on the GPU), the cases are:

- ``streams16_shards8_fps``: 16 x 1080p files looped, 8 shards, the compiled-model cache warm
  (filled by one unmeasured run per build first): the steady frames/s, event lines per second
  between the moments 20% and 80% of the run's lines were written (read from the output, so
  the same measure for any build; run_sampler.Sampler). Until 15ba958 this was the events
  sink's rate over its first-to-last span, which counts the shards' staggered start and end;
  until b897fb8 each shard's inference frames over its own span, summed, which made shards
  that start one after another (a cold cache's) seem faster than shards that start together.
  All three are printed; the JSON holds the steady one.
- ``streams16_shards8_cold_fps``: the same with an empty cache folder for every run (what a
  fresh machine's first run gets). A build without the cache runs as it always does.
- ``start1_cold_s``, ``start1_warm_s``: one stream, launch to the first line of the events
  file (bench/startup_bench.py's measure), cache empty and warm.
- ``start16_warm_s``: 16 streams in 8 shards, launch to the first event, cache warm.
- ``decode16_ceiling_fps``: the same 16 sources decoded alone, in 8 processes with the
  source stage's FFmpeg threads, each picture taken as I420: the most the 16-stream case can
  reach with software decoding; measured in turn with the builds, so drift shows.
- ``streams16_nvdec_fps``: ``streams16_shards8_fps`` with every source on NVIDIA's decoders
  (``hwaccel = "nvdec"``), pictures left on the GPU; a build without it (5ba6359) decodes in
  software. ``streams16_nvdec_shards4_fps``: the same in 4 shards (the build alone);
  ``streams32_nvdec_fps``: 32 sources in 8 shards.
- ``nvdec_same_detections`` (the build alone; not timed): the clip through one stream decoded
  in software and on NVDEC, each frame's detections compared (count, class, box corners).
- ``video4_fps``: 4 x 1080p in 4 shards with an annotated video per source (x264 veryfast):
  the video sink's frames/s.

``--device cpu`` (this project's 2-core machine) runs the CPU cases instead:
``file_fps`` (configs/file.toml's graph on people.mp4, frames over the run's wall time) and
``shards2_fps`` (4 x traffic.mp4 in 2 shards).

Each case runs ``--runs`` times per build, the builds alternating run by run, so a drift of the
machine falls on both. The JSON holds every run, the medians and build / baseline; it is
rewritten after each case, so a call cut short keeps what it measured. A benchmark, never a
test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import (  # noqa: E402
    decode_ceiling,
    harness,
    startup_bench,
    streams_bench,
)

LOOPED_FRAMES = 1200
"""Frames per source of a looped 16-stream run (19,200 in all): some 10 s of steady work at
the target, past the shards' start-up."""


def has_cache(site: str) -> bool:
    """Whether the build knows the torch backend's ``cache_dir`` (added in 29e9ac7)."""
    return (Path(site) / "vapipe/stages/infer/backends/torch_cache.py").exists()


def has_torch_pre(site: str) -> bool:
    """Whether the build can letterbox in torch on the GPU (``preprocess.backend = "torch"``):
    then its 16-stream graph does, and the baseline's runs OpenCL, each its best."""
    return (Path(site) / "vapipe/stages/preprocess/torch_letterbox.py").exists()


def has_nvdec(site: str) -> bool:
    """Whether the build decodes on NVIDIA's decoders (``hwaccel = "nvdec"``): then its
    ``_nvdec`` cases do, and a build without it runs them in software (its best)."""
    return (Path(site) / "vapipe/stages/source/nvdec.py").exists()


def torch_table(site: str, cache: Path | None) -> str:
    table = 'type = "torch"\ndevice = "cuda"'
    if has_cache(site) and cache is not None:
        table += f'\ncache_dir = "{cache}"'
    return table


class Headline:
    def __init__(self, builds: dict[str, str], runs: int, work: Path, out: Path,
                 report: dict[str, Any]) -> None:  # fmt: skip
        self.builds, self.runs, self.work, self.out, self.report = builds, runs, work, out, report
        self.report.setdefault("cases", {})
        self.caches = {name: work / f"cache-{name}" for name in builds}

    def case(self, name: str, measure: Callable[[str, str], float | None]) -> None:
        """``measure(build_name, site)`` ``self.runs`` times per build, alternating."""
        runs: dict[str, list[float | None]] = {b: [] for b in self.builds}
        for _ in range(self.runs):
            for build, site in self.builds.items():
                try:
                    value = measure(build, site)
                except (Exception, SystemExit) as exc:  # a failed run is recorded, not fatal
                    print(f"{name} {build}: {type(exc).__name__}: {str(exc)[-400:]}", flush=True)
                    value = None
                runs[build].append(value)
                print(f"{name} {build}: {value}", flush=True)
        medians = {b: _median(v) for b, v in runs.items()}
        entry: dict[str, Any] = {**medians, "runs": runs}
        if medians.get("build") and medians.get("baseline"):
            entry["ratio"] = round(medians["build"] / medians["baseline"], 3)
        self.report["cases"][name] = entry
        self.save()

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.report, indent=1) + "\n")

    # GPU cases
    def streams(
        self, build: str, site: str, *, cold: bool, frames: int = LOOPED_FRAMES,
        count: int = 16, shards: str = "8", nvdec: bool = False,
    ) -> float | None:  # fmt: skip
        folder = Path(tempfile.mkdtemp(dir=self.work))
        cache = Path(tempfile.mkdtemp(dir=self.work)) if cold else self.caches[build]
        config = streams_bench.write_config(
            folder, self.clip, count, shards, True, queue_size=8,
            backend_extra=torch_table(site, cache), loop=True, torch_pre=has_torch_pre(site),
            hwaccel="nvdec" if nvdec and has_nvdec(site) else None,
        )  # fmt: skip
        result = streams_bench.run_pipeline(
            folder, config, extra_env={"PYTHONPATH": site}, max_frames=frames
        )
        if "error" in result:
            raise RuntimeError(result["error"][-400:])
        print(f"  events sink over its span: {result['stage_fps']['events']}; shards' "
              f"inference rates summed: {result['infer_steady_fps']}; decoders "
              f"{result['decoders']}; CPU {result['steady_cpu_busy_pct']}% busy; GPU "
              f"{result.get('gpu_util_mean_pct')}% busy", flush=True)  # fmt: skip
        return result["steady_fps"]

    def same_detections(self, site: str) -> dict[str, Any]:
        """The 1080p clip once through one stream decoded in software, once on NVDEC: each
        frame's detections (count, class, box corners), compared."""
        runs = {}
        for name, nvdec in (("software", False), ("nvdec", True)):
            folder = Path(tempfile.mkdtemp(dir=self.work))
            config = streams_bench.write_config(
                folder, self.clip, 1, "1", True, queue_size=8,
                backend_extra=torch_table(site, self.caches["build"]), torch_pre=True,
                hwaccel="nvdec" if nvdec else None,
            )  # fmt: skip
            result = streams_bench.run_pipeline(folder, config, extra_env={"PYTHONPATH": site})
            if "error" in result:
                raise RuntimeError(result["error"][-400:])
            events = (folder / "out/events.jsonl").read_text().splitlines()
            frames = [json.loads(line) for line in events]
            runs[name] = {e["seq"]: e["detections"] for e in frames if "detections" in e}
            runs[name + "_decoders"] = result["decoders"]
        return compare_detections(runs["software"], runs["nvdec"]) | {
            "decoders": {"software": runs["software_decoders"], "nvdec": runs["nvdec_decoders"]}
        }

    def start(self, build: str, site: str, *, streams: int, shards: int, cold: bool) -> float:
        folder = Path(tempfile.mkdtemp(dir=self.work))
        cache = Path(tempfile.mkdtemp(dir=self.work)) if cold else self.caches[build]
        config = startup_bench.write_config(
            folder, str(self.clip), streams, shards, torch_table(site, cache),
            'backend = "opencl"\ndevice = "gpu"',
        )  # fmt: skip
        return startup_bench.one_run(folder, config, 24, site)["first_event_s"]

    def video(self, build: str, site: str) -> float | None:
        folder = Path(tempfile.mkdtemp(dir=self.work))
        config = streams_bench.write_config(
            folder, self.clip, 4, "4", True, queue_size=8, video=True,
            backend_extra=torch_table(site, self.caches[build]), torch_pre=has_torch_pre(site),
        )  # fmt: skip
        result = streams_bench.run_pipeline(folder, config, extra_env={"PYTHONPATH": site})
        if "error" in result:
            raise RuntimeError(result["error"][-400:])
        return result["stage_fps"].get("video")

    def gpu(self, only: set[str] | None) -> None:
        self.clip = streams_bench.make_clip(self.work / "clip1080.mp4")
        for build, site in self.builds.items():  # fill each build's cache, unmeasured
            self.start(build, site, streams=1, shards=1, cold=False)
            # The 16-stream graph's own entry (its batch sizes are another key): without
            # it, the first "warm" 16x8 run was a cold one.
            self.streams(build, site, cold=False, frames=50)
        cases: dict[str, Callable[[str, str], float | None]] = {
            # NVDEC in the build; software in a baseline without it (5ba6359).
            "streams16_nvdec_fps": lambda b, s: self.streams(b, s, cold=False, nvdec=True),
            "streams16_shards8_fps": lambda b, s: self.streams(b, s, cold=False),
            # The same for either build (PYTHONPATH is not read): a machine-drift check
            # and the ceiling the 16-stream cases sit under.
            "decode16_ceiling_fps": lambda b, s: decode_ceiling.decode_ceiling(
                self.clip, 16, 8, LOOPED_FRAMES
            ),
            "streams16_nvdec_shards4_fps": lambda b, s: (
                self.streams(b, s, cold=False, nvdec=True, shards="4") if b == "build" else None
            ),
            "streams32_nvdec_fps": lambda b, s: self.streams(
                b, s, cold=False, nvdec=True, count=32
            ),
            "start1_warm_s": lambda b, s: self.start(b, s, streams=1, shards=1, cold=False),
            "start16_warm_s": lambda b, s: self.start(b, s, streams=16, shards=8, cold=False),
            "video4_fps": self.video,
            "start1_cold_s": lambda b, s: self.start(b, s, streams=1, shards=1, cold=True),
            "streams16_shards8_cold_fps": lambda b, s: self.streams(b, s, cold=True),
        }
        for name, measure in cases.items():
            if only is None or name in only:
                self.case(name, measure)
        if only is None or "nvdec_same_detections" in only:
            self.report["nvdec_same_detections"] = self.same_detections(self.builds["build"])
            self.save()

    # CPU cases
    def cpu(self, only: set[str] | None) -> None:
        from bench import compare_builds

        traffic = Path(tempfile.mkdtemp(dir=self.work)) / "shards2.toml"
        sources = "".join(
            f'[nodes.cam{i}]\ntype = "source"\nuri = "sample:traffic"\n\n' for i in range(4)
        )
        links = ", ".join(f'"cam{i} ! pre"' for i in range(4))
        traffic.write_text(
            f'links = [{links}, "pre ! det ! nms ! events"]\n\n[pipeline]\nshards = 2\n\n'
            f'{sources}[nodes.pre]\ntype = "preprocess"\n\n[nodes.det]\ntype = "infer"\n'
            'model = "yolox-nano"\nmax_batch = 4\n\n[nodes.nms]\ntype = "nms"\n\n'
            '[nodes.events]\ntype = "events"\npath = "out/events.jsonl"\n'
        )
        cases = {
            "file_fps": REPO / "configs/file.toml",
            "shards2_fps": traffic,
        }
        for name, config in cases.items():
            if only is None or name in only:
                self.case(name, lambda b, s, c=config: compare_builds.run_once(
                    Path(s), c, [], sys.executable)["fps"])  # fmt: skip


def compare_detections(first: dict[int, list], second: dict[int, list]) -> dict[str, Any]:
    """Frames whose detection counts differ, and per frame each detection of ``first``
    matched to the same-class detection of ``second`` whose corners are nearest (the order of
    equal scores is not fixed: batches formed by timing take other kernels): the largest
    corner difference of a matched pair (pixels), and detections left without a match."""
    counts_differ = [seq for seq in first if len(first[seq]) != len(second.get(seq, []))]
    worst = 0.0
    unmatched = 0
    for seq, boxes in first.items():
        left = list(second.get(seq, []))
        for a in boxes:
            same = [b for b in left if b["class_id"] == a["class_id"]]
            if not same:
                unmatched += 1
                continue
            nearest = min(same, key=lambda b: _corner_gap(a, b))
            left.remove(nearest)
            worst = max(worst, _corner_gap(a, nearest))
    return {
        "frames": len(first),
        "frames_compared": len(second),
        "frames_with_other_counts": len(counts_differ) + abs(len(first) - len(second)),
        "unmatched": unmatched,
        "max_corner_diff_px": round(worst, 3),
        "detections": sum(len(v) for v in first.values()),
    }


def _corner_gap(a: dict, b: dict) -> float:
    return max(abs(p - q) for p, q in zip(a["xyxy"], b["xyxy"], strict=True))


def _median(values: list[float | None]) -> float | None:
    clean = [v for v in values if v is not None]
    return round(harness.median(clean), 3) if clean else None


def parser() -> argparse.ArgumentParser:
    """The command line (docs/performance.md shows it; tests/test_docs.py parses those lines)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="site folder of the build measured")
    parser.add_argument("--commit", required=True, help="its full commit hash")
    parser.add_argument("--baseline", required=True, help="site folder of the baseline build")
    parser.add_argument("--baseline-commit", required=True)
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--machine", help="what it ran on (default: from the platform)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/vapipe-headline"))
    parser.add_argument("--out", type=Path, default=REPO / "bench/results/headline.json")
    return parser


def main() -> None:
    args = parser().parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    report = {
        "commit": args.commit,
        "baseline_commit": args.baseline_commit,
        "machine": args.machine or f"{platform.node()} {platform.processor()}",
        "device": args.device,
        "runs_per_build": args.runs,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "command": "python bench/headline.py " + " ".join(sys.argv[1:]),
    }
    headline = Headline(
        {"build": args.build, "baseline": args.baseline}, args.runs, args.work, args.out, report
    )
    only = set(args.cases.split(",")) if args.cases else None
    headline.gpu(only) if args.device == "gpu" else headline.cpu(only)
    print(json.dumps(report["cases"], indent=1))


if __name__ == "__main__":
    main()
