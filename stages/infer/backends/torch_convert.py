"""What converting an ONNX model to torch needs beyond onnx2torch: converters for ops of
newer opsets than it knows, and a module that returns its first output only (to trace)."""

from __future__ import annotations

from typing import Any

from vapipe.stages.infer.backends.cuda_graphs import first_output


class FirstOutput:
    """A module's first output only, so that a traced module returns one tensor."""

    def __new__(cls, module: Any) -> Any:
        import torch

        class FirstOutput(torch.nn.Module):
            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, batch: Any) -> Any:
                return first_output(self.inner(batch))

        return FirstOutput(module)


def bridge_newer_opsets(model: Any) -> list[str]:
    """Register, for ops whose opset version onnx2torch lacks, its nearest older converter.

    Newer opsets mostly add optional inputs or attributes (Split-18's num_outputs, Reshape-19's
    types); the check against onnxruntime catches the cases where that is not enough.
    """
    from onnx import defs
    from onnx2torch.node_converters.registry import add_converter, get_converter

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    bridged = []
    for op_type in sorted({node.op_type for node in model.graph.node}):
        try:
            since = defs.get_schema(op_type, max_inclusive_version=opset).since_version
            get_converter(op_type, since)
            continue
        except NotImplementedError:
            pass
        except Exception:
            continue
        for older in range(since - 1, 0, -1):
            try:
                converter = get_converter(op_type, older)
            except Exception:
                continue
            add_converter(operation_type=op_type, version=since)(converter)
            bridged.append(f"{op_type}-{since} (as {op_type}-{older})")
            break
    return bridged
