"""Local shards against Ray shards on one machine, and a simulated 3-node Ray cluster losing a
node mid-run.

    python bench/cluster_bench.py --runs 3 --out bench/results/cluster.json

Every run reads the same six file sources (the three sample clips twice) through preprocess,
YOLOX-Nano, nms, the tracker and an events file, in 3 shards, ``--frames`` frames per source.
Sides, alternating run by run, each a fresh ``run-pipeline`` process:

- ``local``: ``pipeline.cluster = "local"`` (processes of this machine);
- ``ray``: ``cluster = "ray"`` with no address: the run starts a Ray instance of its own;
- ``ray-3node``: a Ray test cluster of three nodes on this machine
  (``ray.cluster_utils.Cluster``, started once, not timed), each shard on a node of its own.

Reported per run: launch to the first event, launch to exit, frames/s over the whole process
and over the frames' own span (first to last frame event written). Then ``--loss-runs`` runs on
the 3-node cluster where the node of one shard is removed once that shard delivered 16 frames:
detection (removal to ``source_down``), recovery (removal to the moved shard's first frame,
``source_up``), and whether every frame of every source arrived exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness

SOURCES = ["people", "traffic", "horses"] * 2
NAMES = [f"{clip}{i // 3}" for i, clip in enumerate(SOURCES)]
"""The source nodes: people0, traffic0, horses0, people1, ..."""
CONFIG = """\
links = [{links}, "pre ! det ! nms ! track ! events"]

[pipeline]
shards = 3
cluster = "{cluster}"
{address}
[pipeline.shard_resources]
num_cpus = 1

{sources}
[nodes.pre]
type = "preprocess"

[nodes.det]
type = "infer"
model = "yolox-nano"
max_batch = 4
batch_timeout_ms = 20

[nodes.nms]
type = "nms"

[nodes.track]
type = "track"

[nodes.events]
type = "events"
path = "events.jsonl"
"""
PLACED = re.compile(r"shard(\d) \(ray node \S+ \(([0-9a-f]{8})\)")


def write_config(folder: Path, cluster: str, address: str | None) -> Path:
    sources = "".join(
        f'[nodes.{name}]\ntype = "source"\nuri = "sample:{clip}"\n\n'
        for name, clip in zip(NAMES, SOURCES, strict=True)
    )
    path = folder / "cluster.toml"
    path.write_text(
        CONFIG.format(
            links=", ".join(f'"{n} ! pre"' for n in NAMES),
            cluster=cluster,
            address=f'ray_address = "{address}"\n' if address else "",
            sources=sources,
        )
    )
    return path


def seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def one_run(config: Path, frames: int, lose: Any = None) -> dict[str, Any]:
    """A run; with ``lose`` (the test cluster), the node of a shard on a worker node is
    removed once that shard delivered 16 frames."""
    folder = config.parent
    events = folder / "events.jsonl"
    events.unlink(missing_ok=True)
    command = [sys.executable, "-m", "vapipe", str(config), "--max-frames", str(frames),
               "--no-progress", "--log-level", "info"]  # fmt: skip
    launched, started = time.monotonic(), time.time()
    log = (folder / "log.txt").open("w")
    process = subprocess.Popen(command, cwd=folder, stderr=log, stdout=subprocess.DEVNULL)
    first, removed_at, lost_shard = None, None, None
    while process.poll() is None:
        if first is None and events.exists() and events.stat().st_size > 0:
            first = time.monotonic() - launched
        if lose is not None and removed_at is None:
            removed_at, lost_shard = maybe_remove(lose, folder, events)
        time.sleep(0.02)
    total = time.monotonic() - launched
    log.close()
    if process.returncode != 0:
        tail = (folder / "log.txt").read_text()[-2000:]
        raise SystemExit(f"run failed ({process.returncode}): {tail}")
    records = [json.loads(line) for line in events.read_text().splitlines()]
    shown = [r for r in records if r["event"] == "frame"]
    span = seconds(shown[-1]["time"]) - seconds(shown[0]["time"])
    result: dict[str, Any] = {
        "first_event_s": round(first if first is not None else total, 3),
        "exit_s": round(total, 3),
        "frames": len(shown),
        "fps_process": round(len(shown) / total, 2),
        "fps_span": round(len(shown) / span, 2) if span > 0 else None,
        "launched_at": started,
    }
    if lose is not None:
        result.update(loss_report(records, removed_at, lost_shard, frames))
    return result


def maybe_remove(cluster: Any, folder: Path, events: Path) -> tuple[float | None, int | None]:
    text = (folder / "log.txt").read_text()
    workers = {n.node_id[:8]: n for n in cluster.worker_nodes}
    for match in PLACED.finditer(text):
        shard, node = int(match[1]), match[2]
        if node not in workers:
            continue
        names = NAMES[shard::3]  # round robin over the 3 shards
        done = events.read_text().count(f'"source_id":"{names[0]}"') if events.exists() else 0
        if done >= 16:
            removed = time.time()
            cluster.remove_node(workers[node])
            return removed, shard
    return None, None


def loss_report(records: list[dict], removed_at: float | None, shard: int | None,
                frames: int) -> dict[str, Any]:  # fmt: skip
    if removed_at is None or shard is None:
        return {"loss": "the run ended before a node was removed"}
    down = [r for r in records if r["event"] == "source_down"]
    up = [r for r in records if r["event"] == "source_up"]
    seqs: dict[str, list[int]] = {}
    for record in records:
        if record["event"] == "frame":
            seqs.setdefault(record["source_id"], []).append(record["seq"])
    return {
        "lost_shard": shard,
        "detected_s": round(min(seconds(r["time"]) for r in down) - removed_at, 3),
        "recovered_s": round(max(seconds(r["time"]) for r in up) - removed_at, 3),
        "down_s": [r["down_s"] for r in up],
        "reasons": sorted({re.sub(r".* died \((.*?):.*", r"\1", r["reason"]) for r in down}),
        "every_frame_once": all(s == list(range(frames)) for s in seqs.values()),
    }


def median(values: list[float]) -> float:
    return round(harness.median(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loss-runs", type=int, default=3)
    parser.add_argument("--frames", type=int, default=96, help="per source")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    work = Path(tempfile.mkdtemp(prefix="vapipe-cluster-"))
    report: dict[str, Any] = {
        "command": "python bench/cluster_bench.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "sources": len(SOURCES),
        "frames_per_source": args.frames,
        "runs": {},
    }

    def make_cluster() -> Any:
        made = Cluster(initialize_head=True,
                       head_node_args={"num_cpus": 2, "include_dashboard": False})  # fmt: skip
        for _ in range(2):
            made.add_node(num_cpus=2)
        made.wait_for_nodes()
        return made

    cluster = make_cluster()
    sides = {"local": ("local", None), "ray": ("ray", None), "ray-3node": ("ray", cluster.address)}
    for index in range(args.runs):
        for side, (kind, address) in sides.items():
            folder = work / f"{side}-{index}"
            folder.mkdir()
            run = one_run(write_config(folder, kind, address), args.frames)
            report["runs"].setdefault(side, []).append(run)
            print(side, json.dumps(run), flush=True)
    report["median"] = {
        side: {key: median([r[key] for r in runs]) for key in ("first_event_s", "exit_s",
                                                               "fps_process", "fps_span")}
        for side, runs in report["runs"].items()
    }  # fmt: skip
    base = report["median"]["local"]
    report["ratio_to_local"] = {
        side: {key: round(m[key] / base[key], 3) for key in ("fps_process", "fps_span")}
        for side, m in report["median"].items()
    }
    cluster.shutdown()
    losses = []
    for index in range(args.loss_runs):
        cluster = make_cluster()  # three nodes again for every run
        folder = work / f"loss-{index}"
        folder.mkdir()
        run = one_run(write_config(folder, "ray", cluster.address), args.frames, lose=cluster)
        losses.append(run)
        print("loss", json.dumps(run), flush=True)
        cluster.shutdown()
    report["node_loss"] = losses
    print(json.dumps({"median": report["median"], "ratio": report["ratio_to_local"]}, indent=1))
    if args.out:
        harness.record(args.out, report)


if __name__ == "__main__":
    os.environ.setdefault("VAPIPE_OFFLINE", "1")
    main()
