"""The run's log lines on stderr: text with credentials masked, or one JSON object per line
(``--log-format json``) for log shippers, the run's own summary and final error included."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from vapipe.pipeline.urls import mask_credentials


class MaskingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return mask_credentials(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, for log shippers (Loki, Elasticsearch, journald)."""

    def __init__(self, shard: str = "") -> None:
        super().__init__()
        self.shard = shard

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"shard": self.shard} if self.shard else {}
        entry |= {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": mask_credentials(record.getMessage()),
        }
        if record.exc_info:
            entry["traceback"] = mask_credentials(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


LOG_LEVELS = ("debug", "info", "warning", "error")


def setup_logging(level: str, style: str = "text", prefix: str = "") -> None:
    """Log lines to stderr; ``prefix`` (a shard's name) starts each text line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter(prefix.strip())
        if style == "json"
        else MaskingFormatter(
            f"%(asctime)s %(levelname)-7s {prefix}%(name)s: %(message)s", datefmt="%H:%M:%S"
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def json_line(level: str, message: str, **fields: Any) -> None:
    """A line of the run's own (not a logger's) in the --log-format json shape."""
    entry = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "logger": "vapipe",
        "message": message,
        **fields,
    }
    print(json.dumps(entry, ensure_ascii=False), file=sys.stderr)
