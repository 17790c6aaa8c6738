"""``run-pipeline models quantize``: an INT8 (static QDQ) or FP16 copy of a model, calibrated
on the user's own footage through the pipeline's source and preprocessing, with its agreement
with the float model (on held-out frames) and its speed recorded in the file's metadata."""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any, Literal

from vapipe.pipeline import assets
from vapipe.pipeline.urls import mask_credentials
from vapipe.quantize.calibration import Sample, compare, open_model, take_frames
from vapipe.quantize.sensitivity import CalibrationFrames, first_steps, noisiest_nodes

log = logging.getLogger(__name__)

Precision = Literal["int8", "fp16"]
KeepFloat = Literal["none", "tail", "head", "sensitive"]
Method = Literal["percentile", "minmax", "entropy"]
META_PREFIX = "vapipe_"
CONV_OPS = {"Conv", "ConvTranspose"}
PER_CHANNEL_OPSET = 13  # DequantizeLinear's axis attribute


def tail_nodes(graph: Any, with_last_convs: bool) -> list[str]:
    """The nodes after the model's last convolutions (the head's decode: concatenations of
    boxes with scores, sigmoid, DFL softmax, grid arithmetic), where one INT8 scale per tensor
    cannot hold pixel coordinates and probabilities at once; with ``with_last_convs``, the
    convolutions that feed them too."""
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    reaches_conv: dict[int, bool] = {}

    def reaches(node: Any) -> bool:
        key = id(node)
        if key not in reaches_conv:
            reaches_conv[key] = False  # a graph is acyclic: this only guards the recursion
            reaches_conv[key] = any(
                c.op_type in CONV_OPS or reaches(c)
                for output in node.output
                for c in consumers.get(output, [])
            )
        return reaches_conv[key]

    tail = [n for n in graph.node if n.op_type not in CONV_OPS and not reaches(n)]
    if with_last_convs:
        tail_names = {n.name for n in tail}
        tail += [
            n
            for n in graph.node
            if n.op_type in CONV_OPS
            and not reaches(n)
            and all(c.name in tail_names for o in n.output for c in consumers.get(o, []))
        ]
    return [n.name for n in tail if n.name]


def _named_nodes(model: Any) -> Any:
    """The model with every node named (the exclusion list and the quantiser go by names)."""
    for index, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{index}"
    return model


def at_least_opset(model: Any, version: int) -> Any:
    """The model converted to ONNX opset ``version`` if it is older (YOLOX's export is 11)."""
    import onnx
    from onnx import version_converter

    current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if current >= version:
        return model
    log.info("converting the model from opset %d to %d for per-channel weights", current, version)
    converted = version_converter.convert_version(model, version)
    onnx.checker.check_model(converted)
    return converted


def to_int8(
    source: Path,
    target: Path,
    sample: Sample,
    keep_float: KeepFloat,
    method: Method,
    agreement: float = 0.95,
) -> list[str]:
    """Static QDQ INT8: weights per channel (int8), activations uint8 with ranges from the
    calibration tensors (``method``). Returns the nodes kept in float. ``sensitive`` keeps
    the head's decode in float, then the noisiest nodes by measured SQNR (:mod:`sensitivity`),
    more at each try, until the copy finds ``agreement`` of the float model's detections on
    the held-out frames (or the last try)."""
    import onnx

    with tempfile.TemporaryDirectory() as work:
        prepared = Path(work) / "prepared.onnx"
        _prepare(source, prepared)
        model = onnx.load(str(prepared))
        weights = {init.name for init in model.graph.initializer}
        input_name = next(i.name for i in model.graph.input if i.name not in weights)
        if keep_float != "sensitive":
            excluded = [] if keep_float == "none" else tail_nodes(model.graph, keep_float == "head")
            _quantize_static(prepared, target, input_name, sample, method, excluded)
            return excluded
        base = tail_nodes(model.graph, False)
        _quantize_static(prepared, target, input_name, sample, method, base)
        ranked = noisiest_nodes(prepared, target, input_name, sample.calibration)
        log.info("noisiest nodes in INT8 (SQNR dB): %s", ranked[:8])
        for extra in first_steps(ranked):
            if extra:
                _quantize_static(prepared, target, input_name, sample, method, base + extra)
            matched = compare(str(source), str(target), sample.held_out, False)["matched"]
            log.info("%d noisiest nodes kept in float: %.3f matched", len(extra), matched)
            if matched is not None and matched >= agreement:
                break
        return base + extra


def _prepare(source: Path, prepared: Path) -> None:
    """onnxruntime's pre-processing (shapes, fusions), per-channel opset, named nodes."""
    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process

    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    model = _named_nodes(at_least_opset(onnx.load(str(prepared)), PER_CHANNEL_OPSET))
    onnx.save(model, str(prepared))


def _quantize_static(
    prepared: Path,
    target: Path,
    input_name: str,
    sample: Sample,
    method: Method,
    excluded: list[str],
) -> None:
    from onnxruntime.quantization import (
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    quantize_static(
        str(prepared),
        str(target),
        CalibrationFrames(input_name, sample.calibration),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method={
            "percentile": CalibrationMethod.Percentile,
            "minmax": CalibrationMethod.MinMax,
            "entropy": CalibrationMethod.Entropy,
        }[method],
        nodes_to_exclude=excluded,
    )


def to_fp16(source: Path, target: Path) -> None:
    """Weights and arithmetic in half precision; the input and outputs stay float32, so the
    pipeline feeds it as it feeds the float model."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    onnx.save(model, str(target))


def write_calibration_table(source: Path, sample: Sample, folder: Path) -> None:
    """TensorRT's and MIGraphX's INT8 calibration table (calibration.flatbuffers, .cache,
    .json) for the float model, from the same tensors: for ``trt_int8_calibration_table_name``
    and ``migraphx_int8_calibration_table_name``."""
    import onnx
    from onnxruntime.quantization import write_calibration_table as write_table
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        model = onnx.load(str(source))
        weights = {init.name for init in model.graph.initializer}
        input_name = next(i.name for i in model.graph.input if i.name not in weights)
        calibrator = create_calibrator(
            source,
            [],
            augmented_model_path=str(Path(work) / "augmented.onnx"),
            calibrate_method=CalibrationMethod.MinMax,
        )
        calibrator.collect_data(CalibrationFrames(input_name, sample.calibration))
        write_table(calibrator.compute_data(), dir=str(folder))


def record(target: Path, source: Path, facts: dict[str, Any]) -> None:
    """The float model's own metadata (class names, ...) and ours, into the quantised file."""
    import onnx

    original = {p.key: p.value for p in onnx.load(str(source), load_external_data=False)
                .metadata_props}  # fmt: skip
    model = onnx.load(str(target))
    merged = {**original, **{p.key: p.value for p in model.metadata_props}}
    merged.update({f"{META_PREFIX}{k}": json.dumps(v) for k, v in facts.items()})
    del model.metadata_props[:]
    for key, value in merged.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(target))


def quantize(
    model: str,
    calibrate: str,
    to: Precision = "int8",
    output: Path | None = None,
    frames: int = 200,
    every: int = 1,
    keep_float: KeepFloat = "tail",
    method: Method = "minmax",
    table: Path | None = None,
    measure_speed: bool = True,
    agreement: float = 0.95,
) -> tuple[Path, dict[str, Any]]:
    """Write the quantised model; return its path and what was recorded in it."""
    import onnxruntime

    assets.prepare([assets.Needed("models", model, "MODEL")] if assets.model_entry(model) else [])
    source = assets.resolve_model(model)
    target = output or Path(f"{source.stem}_{to}.onnx")
    infer = open_model(str(source))
    try:
        sample = take_frames(calibrate, infer, frames, every)
    finally:
        infer.close()
    log.info(
        "%d frames of %s: %d to calibrate on, %d held out",
        len(sample.calibration) + len(sample.held_out),
        mask_credentials(calibrate),
        len(sample.calibration),
        len(sample.held_out),
    )
    facts: dict[str, Any] = {
        "made_from": model,
        "quantization": to,
        "onnxruntime": onnxruntime.__version__,
        "calibration": {
            "uri": mask_credentials(calibrate),
            "frames": len(sample.calibration),
            "every": every,
        },
    }
    if to == "int8":
        excluded = to_int8(source, target, sample, keep_float, method, agreement)
        facts["int8"] = {
            "format": f"QDQ, weights int8 per channel, activations uint8 ({method} ranges)",
            "kept_float": keep_float,
            "nodes_kept_float": len(excluded),
        }
        if table is not None:
            write_calibration_table(source, sample, table)
    else:
        to_fp16(source, target)
    facts["agreement"] = compare(str(source), str(target), sample.held_out, measure_speed)
    record(target, source, facts)
    return target, facts


def recorded(path: Path) -> dict[str, Any]:
    """What ``quantize`` recorded in a model file (empty for any other model)."""
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
    return {
        key[len(META_PREFIX) :]: json.loads(value)
        for key, value in meta.items()
        if key.startswith(META_PREFIX)
    }
