"""cupy.cuda.nvrtc: the version of the NVRTC that compiles the fake's RawModules."""
from gpuemu import failures
from gpuemu import nvrtc as _nvrtc


def getVersion():  # noqa: N802 - CuPy's name
    """(major, minor) of the real NVRTC when installed, else the fake runtime's 13.0; raises as CuPy
    does when NVRTC cannot be loaded (see gpuemu.failures)."""
    failures.check_nvrtc()
    try:
        return _nvrtc.version()
    except _nvrtc.NvrtcUnavailable:
        return (13, 0)
