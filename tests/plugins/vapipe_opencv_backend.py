from __future__ import annotations

from typing import Any, Literal

import numpy as np

from vapipe.stages.infer.backends.base import ModelInfo
from vapipe.stages.infer.backends.registry import BackendSettings, Request, backend


class OpenCvConfig(BackendSettings):
    """OpenCV's DNN module, on the CPU: ``backend = "opencv"``."""

    type: Literal["opencv"] = "opencv"
    """The backend: ``opencv``."""
    threads: int = 0
    """OpenCV's threads (0: its own choice)."""


class OpenCvBackend:
    """Runs the model picture by picture with ``cv2.dnn``."""

    def __init__(self, path: str, config: OpenCvConfig) -> None:
        import cv2
        import onnx

        graph = onnx.load(path, load_external_data=False).graph

        def dims(value: Any) -> list[int | str | None]:
            return [d.dim_value or d.dim_param or None for d in value.type.tensor_type.shape.dim]

        self.info = ModelInfo(graph.input[0].name, dims(graph.input[0]), np.dtype(np.float32),
                              dims(graph.output[0]))  # fmt: skip
        if config.threads:
            cv2.setNumThreads(config.threads)
        self.net = cv2.dnn.readNetFromONNX(path)
        self.device = "opencv:cpu"

    @property
    def batch_sizes(self) -> tuple[int, ...] | None:
        return None  # any batch: run() takes it a picture at a time

    def run(self, batch: np.ndarray) -> np.ndarray:
        outputs = []
        for picture in batch:
            self.net.setInput(picture[None])
            outputs.append(self.net.forward())
        return np.concatenate(outputs)

    def stats(self) -> dict[str, Any]:
        return {"provider": self.device}

    def close(self) -> None:
        self.net = None


@backend("opencv", OpenCvConfig)
def load(config: OpenCvConfig, request: Request) -> OpenCvBackend:
    return OpenCvBackend(request.path, config)
