"""Turn upstream weights that are not ONNX into the ONNX file the manifest names. The
catalogue imports nothing of the runtime, which reads it: a converter that cannot run raises
``ConversionError`` or ``ImportError`` (a package to install), and pipeline/assets.py says so."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


class ConversionError(Exception):
    """The manifest names a converter that is not here."""


def convert(kind: str, downloaded: Path, target: Path, input_size: list[int]) -> None:
    """Write ``target`` from ``downloaded`` with the converter named ``kind``."""
    if kind in ("ultralytics", "ultralytics-int8"):
        _ultralytics_export(downloaded, target, input_size, quantize=kind.endswith("int8"))
    else:
        raise ConversionError(f"unknown converter '{kind}' in the model manifest")


def _ultralytics_export(weights: Path, target: Path, input_size: list[int], quantize: bool) -> None:
    from ultralytics import YOLO  # an ImportError names the package to install

    log.info("exporting %s to ONNX with Ultralytics", weights)
    exported = Path(YOLO(str(weights)).export(format="onnx", imgsz=input_size, dynamic=False))
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(exported), str(target), weight_type=QuantType.QUInt8)
    else:
        exported.replace(target)
