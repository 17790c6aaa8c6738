"""The OpenCL device the kernel tests run on (PoCL's CPU device in CI)."""

from __future__ import annotations

import pytest

from tests.conftest import opencl_device, skip_without_opencl


@pytest.fixture(scope="module")
def device():
    """The device whose letterbox kernel built: a test asking for it is an OpenCL test."""
    skip_without_opencl()
    return opencl_device()
