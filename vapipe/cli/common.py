"""What the commands share: the options of a graph, the end of a run as the user sees it
(the --stats file, the summary, one error line) and that error line itself."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.logs import LOG_LEVELS, json_line
from vapipe.pipeline.urls import mask_credentials

if TYPE_CHECKING:
    from vapipe.pipeline.outcome import RunResult

log = logging.getLogger("pipeline")


def add_graph_options(parser: argparse.ArgumentParser) -> None:
    """The options ``run-pipeline CONFIG`` and ``run-pipeline serve CONFIG`` share."""
    parser.add_argument("config", help="pipeline file, e.g. configs/file.toml")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NODE.KEY=VALUE",
        help="override a node key with a TOML value (det.max_batch=8, "
        "cam.uri=video.mp4; pipeline.shards=2 and serve.template=cam for those tables); "
        "repeatable",
    )
    parser.add_argument(
        "--stats",
        metavar="FILE",
        help="write per-stage frames, fps, timings, queue high-water marks and "
        "the execution provider as JSON",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=LOG_LEVELS,
        help="debug also shows tracebacks (default: info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="json: one object per log line (time, level, logger, message) for log shippers",
    )


def report(result: RunResult, stats_path: str | None, log_format: str) -> bool:
    """The end of a run as the user sees it: the --stats file, the summary table (or its
    JSON line), and the error in one line. True when there was an error."""
    stats = result.stats
    if stats_path:
        _write_stats(Path(stats_path), stats)
    if stats["started"]:  # a stage that failed to open leaves nothing worth a table
        if log_format == "json":
            json_line("info", "summary", summary=json.loads(_masked_json(stats)))
        else:
            print(_summary(stats), file=sys.stderr)
    if result.error is None:
        return False
    log.debug("run failed", exc_info=result.error)
    fail(result.error, result.exit_code, log_format)
    return True


def _summary(stats: dict[str, Any]) -> str:
    from vapipe.pipeline.metrics import format_table

    return format_table(stats)


def check_writable(path: Path) -> None:
    """The --stats file can be written: found out now, not after the run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ConfigError(f"cannot write --stats {path}: {exc.strerror or exc}") from None


def _masked_json(stats: dict[str, Any], indent: int | None = None) -> str:
    return mask_credentials(json.dumps(stats, indent=indent, default=str))


def _write_stats(path: Path, stats: dict[str, Any]) -> None:
    text = _masked_json(stats, indent=2)
    try:
        path.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        log.error("cannot write stats to %s: %s", path, exc)


# An error is one line a person reads: what it quotes is cut where it is made; this is the
# last guard (a 100 kB line buries the terminal and fills a journal).
MAX_ERROR_CHARS = 2000


def fail(error: BaseException | str, code: int, style: str = "text") -> int:
    message = mask_credentials(str(error))
    if len(message) > MAX_ERROR_CHARS:
        left_out = len(message) - MAX_ERROR_CHARS + 200
        message = f"{message[:1500]} ... ({left_out:,} characters left out) ... {message[-300:]}"
    if style == "json":
        json_line("error", message, exit_code=code)
    else:
        print(f"error: {message}", file=sys.stderr)
    return code
