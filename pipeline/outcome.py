"""How a run ends: its exit code, its first error (one line, naming the node), its stats."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from vapipe.pipeline.errors import ConfigError, PipelineError, StageError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass
class RunResult:
    exit_code: int
    error: PipelineError | None
    stats: dict[str, Any]


def exit_code_for(error: PipelineError | None, interrupted: bool) -> int:
    """2 for a config error, 1 for any other, else 130 after Ctrl-C, else 0."""
    if isinstance(error, ConfigError):
        return EXIT_USAGE
    if error is not None:
        return EXIT_FAILURE
    return EXIT_INTERRUPTED if interrupted else EXIT_OK


def naming_node(error: ConfigError, node: str) -> ConfigError:
    """The error, with the node it happened in when it does not say."""
    if error.node:
        return error
    return ConfigError(error.message, file=error.file, line=error.line, node=node, key=error.key)


def as_pipeline_error(exc: BaseException, stage: str, item: Any) -> PipelineError:
    """What a stage raised, as the run reports it: naming the stage, and the frame (source
    and seq) it was working on."""
    if isinstance(exc, StageError):
        return exc
    if isinstance(exc, ConfigError):  # found at run time, still the config's fault: exit 2
        return naming_node(exc, stage)
    return StageError(
        stage,
        str(exc) or type(exc).__name__,
        source_id=getattr(item, "source_id", None),
        seq=getattr(item, "seq", None),
    )


def exit_text(code: int | None) -> str:
    """A child process's exit code in words: ``exit 1``, ``killed by SIGKILL``."""
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
