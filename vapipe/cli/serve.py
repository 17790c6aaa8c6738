"""``run-pipeline serve CONFIG``: the graph of CONFIG run as a service until SIGINT/SIGTERM,
with streams added and removed over HTTP (vapipe/serve/http_api.py) while it runs."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from vapipe.pipeline.errors import ConfigError
from vapipe.pipeline.logs import json_line, setup_logging
from vapipe.pipeline.outcome import EXIT_USAGE
from vapipe.pipeline.signals import install_stop_signals
from vapipe.serve.http_api import is_loopback

log = logging.getLogger("pipeline")


def serve_parser() -> argparse.ArgumentParser:
    from vapipe.cli.common import add_graph_options

    parser = argparse.ArgumentParser(
        prog="run-pipeline serve",
        description="Run the graph of CONFIG as a service until SIGINT/SIGTERM: streams "
        "are added and removed over HTTP, events stream live (SSE), /metrics for Prometheus, "
        "a page with live previews at /. See docs/api.md.",
        epilog="exit codes: 2 config or usage error, 130 stopped by a signal",
    )
    add_graph_options(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any free)")
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the bearer token every request but /healthz must carry "
        "(or set VAPIPE_TOKEN); required to listen on anything but loopback",
    )
    return parser


def read_token(path: str | None) -> str | None:
    if path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read --token-file {path}: {exc.strerror or exc}") from None
        if not token:
            raise ConfigError(f"--token-file {path} is empty")
        return token
    value = os.environ.get("VAPIPE_TOKEN")
    if value is None or value == "":
        return None
    if not value.strip():
        raise ConfigError("VAPIPE_TOKEN is blank: set a token, or unset it")
    return value.strip()


def listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve_main(argv: list[str]) -> int:
    from vapipe.cli.common import check_writable, fail, report
    from vapipe.pipeline.prepare import prepare_assets

    parser = serve_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    from vapipe.pipeline import config as config_module
    from vapipe.pipeline import graph as graph_module
    from vapipe.pipeline.runner import Runner
    from vapipe.serve.event_hub import EventHub
    from vapipe.serve.sharded import ShardedService
    from vapipe.serve.streams import Service, Streams, with_tap
    from vapipe.shards.plan import shard_count
    from vapipe.shards.supervisor import ShardRunner

    try:
        token = read_token(args.token_file)
        if token is None and not is_loopback(args.host):
            raise ConfigError(
                f"listening on {args.host} needs a token: --token-file FILE or VAPIPE_TOKEN "
                "(or --host 127.0.0.1)"
            )
        spec = config_module.load(args.config, args.overrides)
        graph = graph_module.build(with_tap(spec), {args.stats: "--stats"} if args.stats else None)
        if args.stats:
            check_writable(Path(args.stats))
        prepare_assets(graph)
        shards = shard_count(spec.settings.shards)
        service: Streams
        runner: Runner | ShardRunner
        on_cluster = spec.settings.cluster == "ray"
        if shards > 1 or on_cluster:
            sharded = ShardedService(
                graph,
                EventHub(),
                shards,
                transport=ray_transport() if on_cluster else None,
                overrides=tuple(args.overrides),
                log_level=args.log_level,
                log_format=args.log_format,
            )
            service, runner = sharded, sharded.runner
        else:
            local = Service(graph, EventHub())
            service, runner = local, local.runner
        sock = listen(args.host, args.port)
    except ConfigError as exc:
        return fail(exc, EXIT_USAGE, args.log_format)

    import uvicorn

    from vapipe.serve.http_api import make_app

    server = uvicorn.Server(
        uvicorn.Config(
            make_app(service, token, args.host),
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
    )
    host, port = sock.getsockname()[:2]
    http = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="http")

    def started(_runner: object) -> None:
        http.start()
        message = f"serving {args.config} on http://{host}:{port}"
        if args.log_format == "json":
            json_line("info", message, host=host, port=port)
        else:
            log.info("%s (streams: %s)", message, ", ".join(graph.source_ids))

    install_stop_signals(runner.on_signal)
    result = runner.run(handle_signals=False, on_started=started)
    server.should_exit = True
    if http.is_alive():
        http.join(10.0)
    sock.close()
    report(result, args.stats, args.log_format)
    return result.exit_code


def ray_transport() -> Any:
    """Shards as actors of a Ray cluster (ConfigError when Ray is not installed)."""
    from vapipe.shards.ray_actors import RayActors

    return RayActors()
