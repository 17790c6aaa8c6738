"""``run-pipeline models list | fetch NAME... | info PATH|NAME | quantize MODEL``: the models
this project knows, fetched into the user cache, what any ONNX file says about itself, and
INT8/FP16 copies calibrated on the user's own footage."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from vapipe.pipeline import assets
from vapipe.pipeline.errors import PipelineError
from vapipe.pipeline.logs import LOG_LEVELS

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
LOW_AGREEMENT = 0.9


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
    add_quantize_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_models()
    if args.command == "fetch":
        from vapipe.cli.tools import fetch_main

        return fetch_main(args.names)
    if args.command == "quantize":
        return run_quantize(args)
    return show_info(args.model)


def add_quantize_parser(commands: Any) -> None:
    quantize = commands.add_parser(
        "quantize",
        help="an INT8 or FP16 copy calibrated on your footage, with its agreement recorded",
        description="Write an INT8 (static QDQ, per-channel weights) or FP16 copy of MODEL. "
        "Calibration frames come from URI through the pipeline's own source and "
        "preprocessing; every 5th is held out to measure how far the copy agrees with the "
        "float model (share of its detections matched: same class, IoU >= 0.5; mean score "
        "change) and how fast both run here. Both go into the file's metadata "
        "(run-pipeline models info shows them).",
    )
    quantize.add_argument("model", help="a manifest name or a path to an .onnx file")
    quantize.add_argument(
        "--calibrate", required=True, metavar="URI",
        help="footage like what the model will see: a file, sample:NAME, rtsp://...",
    )  # fmt: skip
    quantize.add_argument("--frames", type=int, default=200, help="frames taken (default 200)")
    quantize.add_argument("--every", type=int, default=1, help="take every N-th frame")
    quantize.add_argument("--to", choices=["int8", "fp16"], default="int8")
    quantize.add_argument("-o", "--output", type=Path, help="default: MODEL_int8.onnx here")
    quantize.add_argument(
        "--keep-float", choices=["tail", "head", "none", "sensitive"], default="tail",
        help="INT8: keep in float the head's decode after its last convolutions (tail, the "
        "default), those convolutions too (head), nothing (none: YOLOv8n then lost every "
        "detection; bench/results/quantize.md), or the decode and then the nodes whose "
        "outputs INT8 rounds worst, measured, more at each try until --agreement is met "
        "(sensitive)",
    )  # fmt: skip
    quantize.add_argument(
        "--agreement", type=float, default=0.95, metavar="SHARE",
        help="INT8 with --keep-float sensitive: the share of the float model's detections "
        "(same class, IoU >= 0.5, held-out frames) to keep (default 0.95)",
    )  # fmt: skip
    quantize.add_argument(
        "--method", choices=["minmax", "percentile", "entropy"], default="minmax",
        help="INT8: how activation ranges are set from the calibration frames (minmax, the "
        "default: as many detections kept as percentile in bench/results/quantize.md, and "
        "several times faster to calibrate)",
    )  # fmt: skip
    quantize.add_argument(
        "--calibration-table", type=Path, metavar="DIR",
        help="INT8: also write TensorRT's / MIGraphX's calibration table for the float model",
    )  # fmt: skip
    quantize.add_argument("--log-level", default="info", choices=LOG_LEVELS)


def run_quantize(args: Any) -> int:
    from vapipe.pipeline.logs import setup_logging
    from vapipe.quantize.quantize import quantize

    setup_logging(args.log_level)
    if args.frames < 2 or args.every < 1:
        print("error: --frames must be 2 or more and --every 1 or more", file=sys.stderr)
        return EXIT_USAGE
    try:
        path, facts = quantize(
            args.model,
            args.calibrate,
            to=args.to,
            output=args.output,
            frames=args.frames,
            every=args.every,
            keep_float=args.keep_float,
            method=args.method,
            agreement=args.agreement,
            table=args.calibration_table,
        )
    except PipelineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(path)
    for key, value in agreement_lines(facts):
        print(f"  {key}: {value}")
    matched = facts["agreement"].get("matched")
    if matched is not None and matched < LOW_AGREEMENT:
        print(
            f"warning: the copy finds only {matched:.0%} of the float model's detections on "
            "the held-out frames; check it on your footage before using it (README: "
            "Quantise a model)",
            file=sys.stderr,
        )
    return EXIT_OK


def agreement_lines(facts: dict[str, Any]) -> list[tuple[str, str]]:
    """What quantize recorded, as the lines ``quantize`` and ``models info`` print."""
    agreement = facts.get("agreement", {})
    lines = [("quantization", str(facts.get("quantization")))]
    calibration = facts.get("calibration", {})
    lines.append(
        ("calibrated on", f"{calibration.get('frames')} frames of {calibration.get('uri')}")
    )
    matched = agreement.get("matched")
    lines.append((
        "agreement",
        f"{matched:.1%} of {agreement.get('float_detections')} float detections matched "
        f"on {agreement.get('held_out_frames')} held-out frames, mean score change "
        f"{agreement.get('mean_score_change')}" if matched is not None else "no detections",
    ))  # fmt: skip
    if "fps" in agreement:
        lines.append((
            "speed here",
            f"{agreement['fps']} fps against {agreement['float_fps']} float "
            f"({agreement['speedup']}x, {agreement.get('threads')} threads)",
        ))  # fmt: skip
    return lines


def list_models() -> int:
    folders = assets.search_dirs("models")
    absent = []
    rows = [("name", "kind", "licence", "file")]
    for name, entry in assets.manifest_entries("models").items():
        local = next((d / entry["file"] for d in folders if (d / entry["file"]).is_file()), None)
        if local is None:
            absent.append(entry["file"])
        where = str(local) if local else f"not here ({entry['file']})"
        # a detector's YOLO family; what another model is for (face detector, embedding, ...)
        kind = entry.get("family") or entry.get("kind") or "model"
        rows.append((name, kind, entry.get("licence", "?"), where))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
              + "  " + row[3])  # fmt: skip
    if absent:
        offline = os.environ.get(assets.OFFLINE_ENV, "") not in ("", "0")
        print(
            f"\nLooked in {', '.join(str(d.resolve()) for d in folders)}. To get a model not here: "
            f"run-pipeline models fetch NAME"
            + (f" where there is a network ({assets.OFFLINE_ENV} is set here)" if offline else "")
            + f"; or set {assets.ASSETS_ENV} to a folder holding models/FILE; or copy FILE to "
            f"{assets.cache_dir() / 'models'}/FILE (e.g. "
            f"{assets.cache_dir() / 'models' / absent[0]})."
        )
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
    from vapipe.quantize.quantize import recorded

    quantised = recorded(path)
    if quantised:  # a copy made here: its own file, whatever its name; the licence its source's
        entry = entry or assets.model_entry(str(quantised.get("made_from", "")))
    elif not entry:  # a path: the same file named by its manifest name says the same
        found = assets.model_entry_of_file(path)
        if found:
            facts["manifest"] = found[0]
            entry = found[1]
    facts["licence"] = (
        entry.get("licence")
        or facts.pop("metadata licence", None)
        or ("not in the manifest or the model's metadata: see the model's source")
    )
    if quantised:
        facts.update(agreement_lines(quantised))
        facts["made with"] = (
            f"run-pipeline models quantize {quantised.get('made_from', '(a float model)')}"
            f" (onnxruntime {quantised.get('onnxruntime')})"
        )
    elif entry.get("export"):
        facts["made with"] = entry["export"]
    if entry.get("match") is not None:
        facts["match"] = f"{entry['match']} (an embed node's default: FAR <= 1% measured)"
    if entry.get("threshold") is not None:
        facts["threshold"] = f"{entry['threshold']} (a classify node's default)"
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
    licence = meta.get("license") or meta.get("licence")
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
        **({"metadata licence": licence} if licence else {}),
    }
