"""Masking credentials in long texts: the one-pass masker against the regular expressions it
replaced (quadratic on long runs of letters), on 20 kB and 1 MB texts.

    python -m bench.mask_bench [--runs 5] [--out bench/results/mask.json]

The old expressions get one run per text and are skipped past 20 kB where they take minutes.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from vapipe.pipeline.urls import mask_credentials

OLD_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)(?P<userinfo>[^\s'\"<>]*)@"
    r"(?=[^\s'\"<>@]*(?:[\s'\"<>]|$))"
)
OLD_CUT = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:?//)[^\s'\"<>/@:]+:(?!\d+(?:[\s'\"<>/?]|$))[^\s'\"<>/@]*"
    r"(?=[\s'\"<>]|$)"
)


def old_mask(text: str) -> str:
    text = OLD_URL.sub(lambda m: f"{m.group('scheme')}***@", text)
    return OLD_CUT.sub(lambda m: f"{m.group('scheme')}***", text)


def texts(size: int) -> dict[str, str]:
    return {
        "one long id (letters)": "x" * size,
        "letters then //": "a" * (size // 2) + "//" + "b" * (size // 2),
        "a//a//...": "a//" * (size // 3),
        "http://a:a:a...": "http://" + "a:" * (size // 2),
        "log lines with URLs": ("rtsp://admin:pw@cam-1:554/stream reconnecting " * size)[:size],
    }


def median_ms(mask: Callable[[str], str], text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        mask(text)
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    for size in (20_000, 1_000_000):
        for name, text in texts(size).items():
            row = {
                "text": name,
                "chars": len(text),
                "ms": median_ms(mask_credentials, text, args.runs),
            }
            if size <= 20_000:
                row["old_ms"] = median_ms(old_mask, text, 1)
            rows.append(row)
            print(json.dumps(row))
    if args.out:
        args.out.write_text(json.dumps({"runs": args.runs, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
