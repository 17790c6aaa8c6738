"""The OpenCL device the kernel tests run on (PoCL's CPU device in CI)."""

from __future__ import annotations

import pytest

from vapipe.stages.preprocess.cl_kernel import OpenCLUnavailable, select_device


@pytest.fixture(scope="module")
def device():
    try:
        return select_device("auto")
    except OpenCLUnavailable as exc:
        pytest.fail(f"no OpenCL device: install pocl-binary-distribution ({exc})")
