"""``run-pipeline``: run a pipeline graph from a TOML file, or fetch its assets.

Exit codes: 0 done, 1 runtime failure, 2 config or usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vapipe import __version__
from vapipe.cli.common import add_graph_options, check_writable, fail, report
from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.logs import json_line, setup_logging
from vapipe.pipeline.outcome import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from vapipe.pipeline.prepare import prepare_assets
from vapipe.pipeline.runner import Runner
from vapipe.pipeline.signals import install_stop_signals

if TYPE_CHECKING:
    from vapipe.shards.supervisor import ShardRunner

log = logging.getLogger("pipeline")

OUT_OF_MEMORY = "out of memory (under a memory limit such as ulimit -v, or a container's?)"


SUBCOMMANDS = {
    "serve": ("CONFIG", "run it as a service: streams added and removed over HTTP, live "
              "previews, metrics"),
    "models": ("list | fetch NAME... | info PATH|NAME | quantize MODEL",
               "the models known here, what an ONNX file holds, INT8/FP16 copies"),
    "fetch": ("NAME... | --all", "download models and sample clips into the cache"),
    "stages": ("[TYPE] [--markdown]", "the stage types and their keys"),
    "doctor": ("", "the execution providers, OpenCL devices and hardware codecs found here"),
}  # fmt: skip
"""The commands besides ``run-pipeline CONFIG``: --help lists each (a test checks them
against the ones :func:`main` dispatches)."""


def run_parser() -> argparse.ArgumentParser:
    commands = "\n".join(
        f"  run-pipeline {name} {usage}".rstrip() + f"\n      {what}"
        for name, (usage, what) in SUBCOMMANDS.items()
    )
    parser = argparse.ArgumentParser(
        prog="run-pipeline",
        description="Run a video analytics pipeline declared in TOML (see configs/).",
        epilog=f"other commands (each with --help):\n{commands}\n\n"
        "exit codes: 0 done, 1 runtime failure, 2 config or usage error, 130 interrupted",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_graph_options(parser)
    parser.add_argument(
        "--max-frames", type=int, metavar="N", help="stop each source after N frames"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")
    parser.add_argument("--version", action="version", version=f"vapipe {__version__}")
    return parser


def dispatched(tool_cmds: Any) -> dict[str, Callable[[list[str]], int]]:
    """Subcommand -> its main."""
    return {
        "fetch": tool_cmds.fetch_main,
        "stages": tool_cmds.stages_main,
        "doctor": tool_cmds.doctor_main,
        "models": models_main,
        "serve": serve_main,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from vapipe.cli import tools as tool_cmds

    commands = dispatched(tool_cmds)
    style = "json" if _asks_json(args) else "text"
    try:
        if args and args[0] in commands:
            # These have files to clean up on Ctrl-C (a download): KeyboardInterrupt again.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            return commands[args[0]](args[1:])
        return run_main(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `run-pipeline stages | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except MemoryError:
        return fail(OUT_OF_MEMORY, EXIT_FAILURE, style)
    except Exception as exc:  # never a traceback wall: one line, the traceback with debug
        if isinstance(exc, ImportError | OSError) and "map segment" in str(exc):
            # A library that cannot be mapped under an address-space limit.
            return fail(f"{OUT_OF_MEMORY}: {exc}", EXIT_FAILURE, style)
        log.debug("unexpected error", exc_info=True)
        return fail(
            f"{type(exc).__name__}: {exc} (an internal error; --log-level debug shows where)",
            EXIT_FAILURE,
            style,
        )


def serve_main(argv: list[str]) -> int:
    from vapipe.cli.serve import serve_main as serve

    return serve(argv)


def _asks_json(args: list[str]) -> bool:
    """``--log-format json`` among the arguments (read before argparse, for early errors)."""
    return "--log-format=json" in args or any(
        a == "--log-format" and b == "json" for a, b in itertools.pairwise(args)
    )


def run_main(argv: list[str]) -> int:
    parser = run_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    if args.max_frames is not None and args.max_frames < 1:
        parser.error("--max-frames must be at least 1")
    from vapipe.pipeline import config as config_module
    from vapipe.pipeline import graph as graph_module

    try:
        spec = config_module.load(args.config, args.overrides)
        graph = graph_module.build(spec, {args.stats: "--stats"} if args.stats else None)
        if args.stats:
            check_writable(Path(args.stats))
        prepare_assets(graph)
    except ConfigError as exc:
        return fail(exc, EXIT_USAGE, args.log_format)

    from vapipe.shards.choice import runner_for

    try:
        runner = runner_for(
            spec,
            graph,
            overrides=args.overrides,
            max_frames=args.max_frames,
            log_level=args.log_level,
            log_format=args.log_format,
        )
    except ConfigError as exc:
        return fail(exc, EXIT_USAGE, args.log_format)
    # From here to the process's end, SIGINT/SIGTERM stop the run (also while the stages
    # open) and a second one exits at once; never Python's KeyboardInterrupt.
    install_stop_signals(runner.on_signal)
    progress = _Progress(runner) if sys.stderr.isatty() and not args.no_progress else None
    result = runner.run(handle_signals=False, on_started=progress.start if progress else None)
    if progress:
        progress.stop()
    if report(result, args.stats, args.log_format):
        return result.exit_code
    if result.exit_code == EXIT_INTERRUPTED:
        if args.log_format == "json":
            json_line("info", "interrupted: outputs were flushed and closed", exit_code=130)
        else:
            print("interrupted: outputs were flushed and closed", file=sys.stderr)
    return result.exit_code


class _Progress:
    """One self-rewriting line on stderr: frames done of total, and fps."""

    def __init__(self, runner: Runner | ShardRunner) -> None:
        self.runner = runner
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")
        self._started = time.monotonic()

    def start(self, _runner: Any) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(0.5):
            done, total = self.runner.progress()
            elapsed = time.monotonic() - self._started
            fps = done / elapsed if elapsed > 0 else 0.0
            if total:
                bar = "#" * int(30 * done / total)
                line = f"[{bar:<30}] {done}/{total} frames  {fps:.1f} fps"
            else:
                line = f"{done} frames  {fps:.1f} fps"
            sys.stderr.write(f"\r{line}\x1b[K")
            sys.stderr.flush()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(1.0)
            sys.stderr.write("\r\x1b[K")


def models_main(argv: list[str]) -> int:
    from vapipe.cli.models import main as models

    return models(argv)


if __name__ == "__main__":
    sys.exit(main())
