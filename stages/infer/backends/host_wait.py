"""How a host thread waits for the GPU: asleep, or spinning on a core.

CUDA's default scheduling ("auto") spins a thread that waits for the GPU (a copy to the host,
``nonzero``) whenever the process has fewer active contexts than the machine has cores, which
is always the case in a shard: each shard's inference thread may spin through every batch it
waits for, on a core the decoders could use. ``sleep`` asks the driver to block the waiting
thread instead (CUDA's ``CU_CTX_SCHED_BLOCKING_SYNC``, HIP's ``hipDeviceScheduleBlockingSync``):
tens of microseconds more per wait, a free core while the GPU works. Measured on the H200
machine (16 cores, 16 x 1080p in 8 shards): with OpenCL preprocessing the two ran alike; with
torch preprocessing (a second waiting thread per shard) ``sleep`` ran 15% faster, so it is the
default.

The setting belongs to the device's primary context and is taken when the context is made, so
it is set before torch first makes it, through the driver (``libcuda.so.1``) or the HIP
runtime (``libamdhip64.so``) that torch itself uses.
"""

from __future__ import annotations

import ctypes
from typing import Literal

HostWait = Literal["auto", "sleep", "yield", "spin"]
SCHEDULE_FLAGS = {"auto": 0, "spin": 1, "yield": 2, "sleep": 4}
"""CUDA's CU_CTX_SCHED_* and HIP's hipDeviceSchedule* share these values."""
_SCHEDULE_MASK = 7


def set_host_wait(wait: HostWait, device_index: int, hip: bool) -> str:
    """Ask for ``wait`` on the device's primary context; returns what happened, in words, for
    the log (never raises: a driver that refuses leaves its own default, which still works)."""
    try:
        if hip:
            return _set_hip(SCHEDULE_FLAGS[wait], device_index)
        return _set_cuda(SCHEDULE_FLAGS[wait], device_index)
    except (OSError, AttributeError) as exc:
        return f"driver default (no GPU runtime to ask: {exc})"


def _set_cuda(flags: int, index: int) -> str:
    cuda = ctypes.CDLL("libcuda.so.1")
    device = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(device), index) != 0:
        return f"driver default (CUDA device {index} not found)"
    current, active = ctypes.c_uint(), ctypes.c_int()
    cuda.cuDevicePrimaryCtxGetState(device, ctypes.byref(current), ctypes.byref(active))
    if current.value & _SCHEDULE_MASK == flags:
        return "already so"
    if active.value:
        return "driver default (the device's context was made before this node opened)"
    others = current.value & ~_SCHEDULE_MASK
    status = cuda.cuDevicePrimaryCtxSetFlags_v2(device, others | flags)
    return "set" if status == 0 else f"driver default (cuDevicePrimaryCtxSetFlags: {status})"


def _set_hip(flags: int, index: int) -> str:
    hip = ctypes.CDLL("libamdhip64.so")
    if hip.hipSetDevice(index) != 0:
        return f"driver default (HIP device {index} not found)"
    status = hip.hipSetDeviceFlags(flags)
    return "set" if status == 0 else f"driver default (hipSetDeviceFlags: {status})"
