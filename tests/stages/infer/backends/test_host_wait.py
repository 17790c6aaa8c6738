"""stages/infer/backends/host_wait.py against stand-ins for the CUDA driver and HIP runtime:
which flags reach the primary context, and when the driver's default is left alone."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from vapipe.stages.infer.backends import host_wait
from vapipe.stages.infer.backends.host_wait import set_host_wait


class FakeCuda:
    """libcuda.so.1's four calls, over one device's primary-context state."""

    def __init__(self, flags: int = 0, active: bool = False, devices: int = 1) -> None:
        self.flags, self.active, self.devices = flags, active, devices
        self.set_calls: list[int] = []

    def cuInit(self, _flags: int) -> int:
        return 0

    def cuDeviceGet(self, device: Any, index: int) -> int:
        if index >= self.devices:
            return 101  # CUDA_ERROR_INVALID_DEVICE
        device._obj.value = index
        return 0

    def cuDevicePrimaryCtxGetState(self, _device: Any, flags: Any, active: Any) -> int:
        flags._obj.value, active._obj.value = self.flags, int(self.active)
        return 0

    def cuDevicePrimaryCtxSetFlags_v2(self, _device: Any, flags: int) -> int:
        self.set_calls.append(flags)
        self.flags = flags
        return 0


class FakeHip:
    def __init__(self, devices: int = 1) -> None:
        self.devices = devices
        self.calls: list[tuple[str, int]] = []

    def hipSetDevice(self, index: int) -> int:
        self.calls.append(("device", index))
        return 0 if index < self.devices else 101

    def hipSetDeviceFlags(self, flags: int) -> int:
        self.calls.append(("flags", flags))
        return 0


def use(monkeypatch: pytest.MonkeyPatch, libraries: dict[str, Any]) -> None:
    def load(name: str) -> Any:
        if name not in libraries:
            raise OSError(f"{name}: cannot open shared object file")
        return libraries[name]

    monkeypatch.setattr(host_wait.ctypes, "CDLL", load)


def test_sleep_is_set_on_a_context_not_yet_made_keeping_its_other_flags(monkeypatch) -> None:
    cuda = FakeCuda(flags=0x8)  # CU_CTX_MAP_HOST, set by someone else: kept
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert set_host_wait("sleep", 0, hip=False) == "set"
    assert cuda.set_calls == [0x8 | 4]


@pytest.mark.parametrize(("wait", "flags"), [("spin", 1), ("yield", 2), ("auto", 0)])
def test_each_wait_has_the_drivers_value(monkeypatch, wait: str, flags: int) -> None:
    cuda = FakeCuda(flags=4)
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert set_host_wait(wait, 0, hip=False) == "set"  # type: ignore[arg-type]
    assert cuda.set_calls == [flags]


def test_a_context_already_so_is_left_alone(monkeypatch) -> None:
    cuda = FakeCuda(flags=4, active=True)
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert set_host_wait("sleep", 0, hip=False) == "already so"
    assert cuda.set_calls == []


def test_a_context_made_before_keeps_its_flags_and_says_so(monkeypatch) -> None:
    cuda = FakeCuda(flags=0, active=True)
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert "made before" in set_host_wait("sleep", 0, hip=False)
    assert cuda.set_calls == []


def test_a_missing_device_or_driver_leaves_the_default(monkeypatch) -> None:
    cuda = FakeCuda(devices=1)
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert set_host_wait("sleep", 1, hip=False) == "driver default (CUDA device 1 not found)"
    assert cuda.set_calls == []
    use(monkeypatch, {})
    said = set_host_wait("sleep", 0, hip=False)
    assert said.startswith("driver default (no GPU runtime to ask: libcuda.so.1")


def test_a_refused_set_is_reported_with_the_drivers_status(monkeypatch) -> None:
    cuda = FakeCuda()
    cuda.cuDevicePrimaryCtxSetFlags_v2 = lambda _device, _flags: 708  # type: ignore[method-assign]
    use(monkeypatch, {"libcuda.so.1": cuda})
    assert set_host_wait("sleep", 0, hip=False) == (
        "driver default (cuDevicePrimaryCtxSetFlags: 708)"
    )


def test_hip_sets_the_flags_on_the_chosen_device(monkeypatch) -> None:
    hip = FakeHip(devices=2)
    use(monkeypatch, {"libamdhip64.so": hip})
    assert set_host_wait("sleep", 1, hip=True) == "set"
    assert hip.calls == [("device", 1), ("flags", 4)]
    assert set_host_wait("sleep", 2, hip=True) == "driver default (HIP device 2 not found)"
    hip.hipSetDeviceFlags = lambda _flags: 708  # type: ignore[method-assign]
    assert set_host_wait("spin", 0, hip=True) == "driver default (hipSetDeviceFlags: 708)"


def test_the_real_driver_is_asked_where_there_is_one() -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert set_host_wait("sleep", 0, hip=False).startswith("driver default (no GPU runtime")
    else:
        assert set_host_wait("sleep", 0, hip=False) in ("set", "already so")


def test_threads_sleep_while_the_gpu_works_unless_told_otherwise() -> None:
    """The default, measured (config.py): a shard's inference and preprocessing threads each
    spun on a core its decoders needed."""
    from vapipe.stages.infer.backends.pytorch import TorchConfig

    assert TorchConfig().host_wait == "sleep"
    assert TorchConfig(host_wait="auto").host_wait == "auto"
