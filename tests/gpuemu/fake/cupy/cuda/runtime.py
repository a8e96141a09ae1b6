"""cupy.cuda.runtime: the queries gpuksvm makes.  Free memory: $GPUEMU_FREE_BYTES (default 2 GiB: the
device's free memory when the process started) less what the memory pool holds."""

from gpuemu import failures

is_hip = False


class CUDARuntimeError(RuntimeError):
    """As CuPy's (cupy_backends/cuda/api/runtime.pyx): built from a CUDA status code, its message is
    ``cudaGetErrorName: cudaGetErrorString`` of it."""

    def __init__(self, status):
        self.status = status
        name, text = failures.CUDA_ERRORS[status]
        super().__init__(f"{name}: {text}")

    def __reduce__(self):
        return (type(self), (self.status,))


def getDeviceCount():  # noqa: N802 - CUDA's names
    failures.check_device()
    return 1


def getDevice():  # noqa: N802
    from . import _current
    return _current[0]


def setDevice(i):  # noqa: N802
    from . import _current
    _current[0] = int(i)


def memGetInfo():  # noqa: N802
    failures.check_device()
    from cupy import get_default_memory_pool
    from cupy.cuda.memory import device_capacity
    return max(device_capacity() - get_default_memory_pool().total_bytes(), 0), 16 * 2**30


def deviceSynchronize():  # noqa: N802
    from . import Device
    Device().synchronize()


def runtimeGetVersion():  # noqa: N802
    return 13000


def driverGetVersion():  # noqa: N802 - 0 without a driver, as cudaDriverGetVersion
    return failures.driver_version(13000)


def getDeviceProperties(i):  # noqa: N802
    failures.check_device()
    return {"name": b"gpuemu (CPU emulator)", "totalGlobalMem": 16 * 2**30, "multiProcessorCount": 108,
            "major": 8, "minor": 0, "sharedMemPerBlock": 48 * 1024, "maxThreadsPerBlock": 1024,
            "warpSize": 32, "maxGridSize": (2**31 - 1, 65535, 65535)}
