"""cupy.cuda.runtime: the queries gpuksvm makes.  Free memory: $GPUEMU_FREE_BYTES (default 2 GiB)."""
import os

is_hip = False


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():  # noqa: N802 - CUDA's names
    return 1


def getDevice():  # noqa: N802
    from . import _current
    return _current[0]


def setDevice(i):  # noqa: N802
    from . import _current
    _current[0] = int(i)


def memGetInfo():  # noqa: N802
    return int(os.environ.get("GPUEMU_FREE_BYTES", 2 * 2**30)), 16 * 2**30


def deviceSynchronize():  # noqa: N802
    from . import Device
    Device().synchronize()


def runtimeGetVersion():  # noqa: N802
    return 13000


def driverGetVersion():  # noqa: N802
    return 13000


def getDeviceProperties(i):  # noqa: N802
    return {"name": b"gpuemu (CPU emulator)", "totalGlobalMem": 16 * 2**30, "multiProcessorCount": 108,
            "major": 8, "minor": 0, "sharedMemPerBlock": 48 * 1024, "maxThreadsPerBlock": 1024,
            "warpSize": 32, "maxGridSize": (2**31 - 1, 65535, 65535)}
