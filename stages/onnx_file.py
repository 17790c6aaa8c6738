"""The first check of every node that loads a model file: that it is an ONNX model, so that a
text file, random bytes or a truncated download is one line naming the file and the key, exit
2, and not a parser's message about ``onnx.ModelProto``."""

from __future__ import annotations

from pathlib import Path

from vapipe.pipeline.errors import ConfigError


def check_onnx(path: Path, key: str = "model") -> None:
    """Raises ConfigError (``key``) naming ``path`` when it is not a readable ONNX model."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf's DecodeError, OSError...: the file is not a model
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{path}: not an ONNX model ({reason})", key=key) from None
    if not model.graph.node or not model.graph.output:
        raise ConfigError(f"{path}: not an ONNX model (no graph in it)", key=key)
