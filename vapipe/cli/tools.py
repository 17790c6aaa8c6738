"""The small subcommands of ``run-pipeline``: ``fetch``, ``doctor`` and ``stages``."""

from __future__ import annotations

import argparse
import sys

from vapipe.pipeline import assets
from vapipe.pipeline.logs import LOG_LEVELS, setup_logging
from vapipe.pipeline.outcome import EXIT_FAILURE, EXIT_OK, EXIT_USAGE


def fetch_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="run-pipeline fetch",
        description="Download models and sample clips named in the manifest into the user cache "
        "(sha256-checked). Names: "
        + ", ".join(
            [
                *assets.manifest_entries("models"),
                *(f"sample:{n}" for n in assets.manifest_entries("media")),
            ]
        ),
    )
    parser.add_argument("names", nargs="*", help="model names, or sample:NAME for clips")
    parser.add_argument("--all", action="store_true", help="everything in the manifest")
    parser.add_argument("--force", action="store_true", help="download even if found locally")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    names = list(args.names)
    if args.all:
        names = [
            *assets.manifest_entries("models"),
            *(f"sample:{n}" for n in assets.manifest_entries("media")),
        ]
    if not names:
        parser.error("name at least one model or sample:NAME, or --all")
    wanted: list[tuple[assets.Kind, str]] = [
        ("media", name.removeprefix(assets.SAMPLE_SCHEME))
        if name.startswith(assets.SAMPLE_SCHEME)
        else ("models", name)
        for name in names
    ]
    unknown = [
        name
        for name, (kind, entry) in zip(names, wanted, strict=True)
        if entry not in assets.manifest_entries(kind)
    ]
    if unknown:
        print(f"error: unknown name {', '.join(map(repr, unknown))}", file=sys.stderr)
        return EXIT_USAGE
    failed: list[assets.AssetMissing] = []
    for kind, entry in wanted:
        try:
            print(assets.fetch(kind, entry, force_download=args.force))
        except assets.AssetMissing as exc:
            failed.append(exc)
    if failed:
        shown = ", ".join(exc.name for exc in failed)
        drop = ", ".join(str(assets.cache_dir() / exc.kind / exc.file) for exc in failed)
        print(
            f"error: {len(failed)} of {len(names)} not fetched ({shown}): {failed[-1].reason}; "
            f"set {assets.ASSETS_ENV} to a folder holding models/ and media/ (the files by "
            f"these names), run this again where there is a network, or copy the files to "
            f"{drop}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return EXIT_OK


def doctor_main(argv: list[str]) -> int:
    argparse.ArgumentParser(
        prog="run-pipeline doctor",
        description="Print ONNX Runtime providers, OpenCL devices, FFmpeg hardware codecs and "
        "what 'auto' would pick here.",
    ).parse_args(argv)
    from vapipe.cli.doctor import report

    return report()


def stages_main(argv: list[str]) -> int:
    """List stage types with their keys, defaults and documentation."""
    parser = argparse.ArgumentParser(
        prog="run-pipeline stages",
        description="List stage types and their config keys (built-ins and plugins).",
    )
    parser.add_argument("type", nargs="?", help="show one type only")
    parser.add_argument(
        "--markdown", action="store_true", help="the reference as markdown (docs/configuration.md)"
    )
    args = parser.parse_args(argv)
    from vapipe.cli.reference import keys, markdown
    from vapipe.pipeline import registry

    if args.markdown:
        print(markdown(registry.types()), end="")
        return EXIT_OK

    names = [args.type] if args.type else registry.type_names()
    for name in names:
        cls = registry.lookup(name)
        if cls is None:
            print(
                f"error: unknown stage type '{name}'; valid: {', '.join(registry.type_names())}",
                file=sys.stderr,
            )
            return EXIT_USAGE
        summary = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
        print(f"[{name}]  {summary}")
        for key in keys(cls.Config):
            default = f" = {key.default}" if key.default else ""
            print(f"  {key.key} ({key.type}){default}: {key.doc}")
        print()
    for plugin, reason in registry.plugin_errors.items():
        print(f"plugin '{plugin}' failed to load: {reason}")
    return EXIT_OK
