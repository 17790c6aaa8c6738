"""``run-pipeline models list | fetch NAME... | info PATH|NAME``: the models this project
knows, fetched into the user cache, and what any ONNX file says about itself."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vapipe.pipeline import assets
from vapipe.pipeline.errors import PipelineError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="run-pipeline models", description="List, fetch and inspect detection models."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the models of the manifest and whether each is here")
    fetch = commands.add_parser("fetch", help="download into the user cache (sha256-checked)")
    fetch.add_argument("names", nargs="+")
    info = commands.add_parser("info", help="family, input, batch, classes, opset, size")
    info.add_argument("model", help="a manifest name or a path to an .onnx file")
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_models()
    if args.command == "fetch":
        from vapipe.pipeline.tool_cmds import fetch_main

        return fetch_main(args.names)
    return show_info(args.model)


def list_models() -> int:
    for name, entry in assets.manifest_entries("models").items():
        local = next(
            (
                d / entry["file"]
                for d in assets.search_dirs("models")
                if (d / entry["file"]).is_file()
            ),
            None,
        )
        where = str(local) if local else "not here: run-pipeline models fetch " + name
        print(f"{name:<14} {entry.get('family', '?'):<8} {entry.get('licence', '?'):<28} {where}")
    return EXIT_OK


def show_info(model: str) -> int:
    entry = assets.model_entry(model)
    try:
        path = assets.resolve_model(model)
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    try:
        facts = describe(path)
    except Exception as exc:  # any file: say what is wrong with it, in one line
        print(f"error: {path}: not a readable ONNX model ({exc})", file=sys.stderr)
        return EXIT_FAILURE
    facts["licence"] = entry.get("licence", "not in the manifest: see the model's source")
    if entry.get("export"):
        facts["made with"] = entry["export"]
    width = max(map(len, facts))
    for key, value in facts.items():
        print(f"{key:<{width}}  {value}")
    return EXIT_OK


def describe(path: Path) -> dict[str, Any]:
    """What an ONNX file says about itself, read with onnx (no inference session)."""
    import onnx

    from vapipe.stages.infer.backends.batch_dynamic import make_batch_dynamic
    from vapipe.stages.infer.heads import detect_family
    from vapipe.stages.infer.names import class_names

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    weights = {init.name for init in graph.initializer}
    first = next(i for i in graph.input if i.name not in weights)
    dims = [d.dim_value or d.dim_param or "?" for d in first.type.tensor_type.shape.dim]
    out = [d.dim_value or d.dim_param or "?" for d in graph.output[0].type.tensor_type.shape.dim]
    meta = {prop.key: prop.value for prop in model.metadata_props}
    width, height = (dims[3], dims[2]) if len(dims) == 4 else (None, None)
    family = (
        detect_family(out, meta, width, height)
        if isinstance(width, int) and isinstance(height, int)
        else None
    )
    names = class_names(meta, None)
    if dims and dims[0] == 1:
        rewrite = make_batch_dynamic(str(path))
        batch = (
            "fixed 1; made batch-dynamic at load where that provably keeps the outputs, "
            "else run frame by frame"
            if rewrite.model is not None
            else f"fixed 1; runs frame by frame ({rewrite.reason})"
        )
    else:
        batch = f"dynamic ({dims[0]})" if dims else "?"
    dtype = onnx.helper.tensor_dtype_to_np_dtype(first.type.tensor_type.elem_type)
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    return {
        "file": str(path),
        "size": f"{path.stat().st_size / 2**20:.1f} MiB",
        "family": family.value if family else "unknown (set family in the infer node)",
        "input": f"{first.name} {dims} {dtype}",
        "output": f"{graph.output[0].name} {out}",
        "batch": batch,
        "classes": f"{len(names)}, names from "
        + ("the model's metadata" if "names" in meta else "COCO (the model has none)"),
        "opset": opsets,
    }
