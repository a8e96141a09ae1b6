"""The array layer: devices and array namespaces, host/device transfers, CUDA source loading,
dense linear algebra, BLAS threads and input validation.  The only layer that imports ``cupy``."""
