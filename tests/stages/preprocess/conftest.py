"""The OpenCL device the kernel tests run on (PoCL's CPU device in CI)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import skip_without_opencl
from vapipe.stages.preprocess.cl_kernel import open_program


@pytest.fixture(scope="module")
def device():
    """The device whose letterbox kernel built: a test asking for it is an OpenCL test."""
    skip_without_opencl()
    return open_program("auto", None, np.dtype(np.float32)).device
