"""Kernel functions and memory-aware kernel block operations (SPEC §0).

Kernels
-------
=========  =====================================  ==================
name       κ(x, z)                                κ(x, x)
=========  =====================================  ==================
rbf        exp(-γ ‖x − z‖²)                       1 (constant)
poly       (γ xᵀz + c₀)^p                         (γ‖x‖² + c₀)^p
linear     xᵀz                                    ‖x‖²
sigmoid    tanh(γ xᵀz + c₀)   (not PSD)           tanh(γ‖x‖² + c₀)
=========  =====================================  ==================

A block K(X, Z) is computed as one GEMM ``G = X Zᵀ`` and one fused elementwise
pass; for the RBF kernel ``exp(-γ·max(‖x‖² + ‖z‖² − 2G, 0))`` (the clamp matters
in float32).  On a GPU the pass is the CUDA kernel ``kernels_cuda/kernel_block.cu``;
on the CPU it is :func:`epilogue_host` (float64 RBF blocks compiled by numba on request, where it
is installed: :mod:`gpuksvm.kernels.compiled_rbf`); :func:`epilogue_numpy` is the twin of both,
the oracle of their tests.

Every operation works in row blocks sized by :func:`gpuksvm.array.backend.plan_rows`
from the memory budget, and retries a block with fewer rows on out-of-memory.
Nothing here ever forms an n×n matrix unless the caller asks for that block.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any

import numpy as np
import scipy.sparse as sp

from gpuksvm.array import cuda_sources as _cuda
from gpuksvm.array import backend as bk
from gpuksvm.kernels import compiled_rbf

__all__ = [
    "Kernel",
    "epilogue_host",
    "epilogue_numpy",
    "KERNELS",
    "make_kernel",
    "resolve_gamma",
    "kernel_block",
    "kernel_matvec",
    "kernel_diag",
    "row_sq_norms",
]

KERNELS = ("rbf", "poly", "linear", "sigmoid")
KERNEL_CODES = {"linear": 0, "rbf": 1, "poly": 2, "sigmoid": 3}
_ALIASES = {"gaussian": "rbf", "polynomial": "poly"}

# the fused mat-vec keeps m accumulators per row in registers (kernel_matvec.cu: GK_MAXM, GK_BLOCK)
_FUSED_MAX_D = 64
_FUSED_MAX_M = 16
_FUSED_BLOCK = 128
# one-pass tiled block kernel (kernel_block.cu) for small d; GEMM + epilogue above
_TILED_MAX_D = 64
_TILE = 64
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class Kernel:
    """A kernel with its parameters resolved to numbers.

    Parameters
    ----------
    name : {"rbf", "poly", "linear", "sigmoid"}
    gamma : float
        Scale γ of rbf/poly/sigmoid (ignored by linear).
    degree : float
        Degree p of poly.
    coef0 : float
        Offset c₀ of poly/sigmoid.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.kernels.kernel import Kernel
    >>> k = Kernel("rbf", gamma=0.5)
    >>> X = np.eye(2)
    >>> np.round(k(X), 4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """

    name: str = "rbf"
    gamma: float = 1.0
    degree: float = 3.0
    coef0: float = 0.0

    def __post_init__(self) -> None:
        name = _ALIASES.get(str(self.name).lower(), str(self.name).lower())
        if name not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.name!r}")
        object.__setattr__(self, "name", name)
        for attr in ("gamma", "degree", "coef0"):
            v = getattr(self, attr)
            try:
                ok = isinstance(v, (Real, np.floating, np.integer)) and not isinstance(v, bool) \
                    and bool(np.isfinite(float(v)))
            except OverflowError:
                ok = False
            if not ok:
                raise ValueError(f"kernel {attr} must be a finite number, got {v!r}")
            object.__setattr__(self, attr, float(v))
        if name in ("rbf", "poly", "sigmoid") and self.gamma <= 0:
            raise ValueError(f"gamma must be > 0, got {self.gamma!r}")
        if name == "poly" and self.degree < 0:
            raise ValueError(f"degree must be >= 0, got {self.degree!r}")
        if name == "poly" and self.degree != int(self.degree):
            raise ValueError(f"degree must be a whole number for kernel='poly', got {self.degree!r}: "
                             f"(γ xᵀz + c₀)^{self.degree:g} is not a real number where γ xᵀz + c₀ < 0, "
                             "so the kernel values would be NaN")

    @property
    def code(self) -> int:
        return KERNEL_CODES[self.name]

    @property
    def constant_diag(self) -> float | None:
        """κ(x, x) when it is the same for every x (RBF: 1), else ``None``."""
        return 1.0 if self.name == "rbf" else None

    def max_diag(self, max_sq_norm: float) -> float:
        """An upper bound of κ(x, x) over the rows with ‖x‖² ≤ ``max_sq_norm``.

        κ(x, x) depends on ‖x‖² only, through γ‖x‖² + c₀ (poly, sigmoid), so
        its extremes lie at ‖x‖² = 0 or ``max_sq_norm`` (inf if it overflows).
        """
        if self.name == "rbf":
            return 1.0
        if self.name == "linear":
            return float(max_sq_norm)
        if self.name == "sigmoid":
            return 1.0
        ends = np.abs([self.coef0, self.gamma * float(max_sq_norm) + self.coef0])
        with np.errstate(over="ignore"):
            return float(np.max(ends ** self.degree))

    @property
    def is_psd(self) -> bool:
        return self.name != "sigmoid"

    def __call__(self, X: Any, Z: Any = None, **kwargs: Any):
        return kernel_block(X, Z, self, **kwargs)

    def diag(self, X: Any):
        return kernel_diag(X, self)

    def matvec(self, X: Any, Z: Any, V: Any, **kwargs: Any):
        return kernel_matvec(X, Z, V, self, **kwargs)

    def params(self) -> dict:
        return {"kernel": self.name, "gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}


# --------------------------------------------------------------------------- gamma
def _moments(X: Any) -> tuple[float, float, float]:
    """mean of all entries, mean of squared entries, ‖mean row‖² (host floats, in float64
    whatever X's dtype: float32 squares of 1e20 would overflow)."""
    if sp.issparse(X) or bk.is_sparse(X):
        n, d = X.shape
        Xf = X.astype(np.float64) if X.dtype != np.float64 else X
        mean_entry = float(Xf.sum()) / (n * d)
        mean_sq = float(Xf.multiply(Xf).sum()) / (n * d)
        colmean = np.asarray(bk.to_host(Xf.mean(axis=0))).ravel()
    else:
        xp = bk.namespace_of(X)
        Xf = X.astype(xp.float64) if X.dtype != xp.float64 else X
        with np.errstate(over="ignore"):   # an overflow gives inf, which resolve_gamma reports
            mean_entry = float(Xf.mean())
            mean_sq = float((Xf * Xf).mean())
            colmean = bk.to_host(Xf.mean(axis=0))
    return mean_entry, mean_sq, float(np.dot(colmean, colmean))


def _resolved(gamma: float, rule: str, stat: str) -> float:
    """A gamma computed from the data must be a positive finite number, else say what to change."""
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma={rule!r} resolved to {gamma!r} ({stat}): the scale of X is outside what "
                         "the kernel can use. Scale the features (e.g. "
                         "sklearn.preprocessing.StandardScaler) or pass a numeric gamma.")
    return float(gamma)


def _is_constant(X: Any) -> bool:
    """Whether every entry of X is the same value."""
    if bk.is_sparse(X):
        data = X.data
        n, d = X.shape
        lo, hi = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
        if data.size < n * d:               # an implicit zero is one of the values
            lo, hi = min(lo, 0.0), max(hi, 0.0)
        return lo == hi
    return float(X.min()) == float(X.max())


def _spread(value: float, rule: str, stat: str, X: Any) -> float | None:
    """A spread statistic of X (Var(X), the mean squared distance) that is not a positive normal
    float64: None (scikit-learn's gamma = 1) when X is constant, else an error — values too small
    for their squares (or a spread too small next to their size) would make it 0 or subnormal."""
    if value >= np.finfo(np.float64).tiny:
        return value
    if _is_constant(X):
        return None
    raise ValueError(f"gamma={rule!r} needs {stat}, which is {value:.3g}: not a positive normal float64 "
                     "although X is not constant. The values of X are too small for their squares "
                     "(or their spread too small next to their size) to be represented. Scale the "
                     "features (e.g. sklearn.preprocessing.StandardScaler) or pass a numeric gamma.")


def resolve_gamma(gamma: Any, X: Any = None) -> float:
    """Resolve ``gamma`` to a positive number.

    ``"scale"``
        1 / (d · Var(X)) over all entries, as scikit-learn (1.0 if X is constant); a
        Var(X) that is 0 or subnormal for an X that is not constant (values whose
        squares underflow) is an error.
    ``"auto"``
        1 / d.
    ``"mean_dist"``
        1 / β with β the mean squared distance between distinct rows (CVM paper
        §5).  Computed exactly with the identity
        mean_{i≠j} ‖xᵢ − xⱼ‖² = 2n/(n−1) (mean‖x‖² − ‖x̄‖²), which costs one pass
        over X, so no sampling is needed.
    number
        Used as given (must be > 0).
    """
    if isinstance(gamma, str):
        if X is None:
            raise ValueError(f"gamma={gamma!r} needs the training data")
        n, d = X.shape
        if gamma == "scale":
            mean_entry, mean_sq, _ = _moments(X)
            var = _spread(mean_sq - mean_entry**2, gamma, "Var(X)", X)
            if var is None:
                return 1.0
            with np.errstate(over="ignore", divide="ignore"):
                g = np.float64(1.0) / (np.float64(d) * np.float64(var))
            return _resolved(float(g), gamma, f"1/(d·Var(X)) with Var(X) = {var:.3g}")
        if gamma == "auto":
            return 1.0 / d
        if gamma == "mean_dist":
            if n < 2:
                return 1.0
            _, mean_sq, colnorm = _moments(X)
            beta = _spread(2.0 * n / (n - 1) * (mean_sq * d - colnorm), gamma,
                           "the mean squared distance β between rows", X)
            if beta is None:
                return 1.0
            with np.errstate(over="ignore", divide="ignore"):
                g = np.float64(1.0) / np.float64(beta)
            return _resolved(float(g), gamma, f"1/β with β = {beta:.3g} the mean squared distance")
        raise ValueError(f"gamma must be 'scale', 'auto', 'mean_dist' or a positive number, got {gamma!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (Real, np.floating, np.integer)):
        raise ValueError(f"gamma must be 'scale', 'auto', 'mean_dist' or a positive number, got {gamma!r}")
    if not np.isfinite(gamma) or gamma <= 0:
        raise ValueError(f"gamma must be > 0, got {gamma!r}")
    return float(gamma)


def make_kernel(kernel: str | Kernel = "rbf", gamma: Any = "scale", degree: float = 3,
                coef0: float = 0.0, X: Any = None) -> Kernel:
    """Build a :class:`Kernel`, resolving a string ``gamma`` on ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import make_kernel
    >>> X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0], [0.0, 2.0]])
    >>> k = make_kernel("rbf", gamma="scale", X=X)      # 1 / (d · Var(X))
    >>> k.name, round(k.gamma, 4)
    ('rbf', 0.7273)
    """
    if isinstance(kernel, Kernel):
        return kernel
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be one of {KERNELS} or a Kernel, got {kernel!r}")
    name = _ALIASES.get(kernel.lower(), kernel.lower())
    if name not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    g = 1.0 if name == "linear" else resolve_gamma(gamma, X)
    return Kernel(name, gamma=g, degree=degree, coef0=coef0)


# --------------------------------------------------------------------------- helpers
def row_sq_norms(X: Any, dtype: Any = None):
    """‖xᵢ‖² for every row (dense or sparse, NumPy or CuPy)."""
    if bk.is_sparse(X):
        xp = bk.namespace_of(X)
        out = xp.asarray(X.multiply(X).sum(axis=1)).ravel()
    else:
        xp = bk.namespace_of(X)
        out = xp.einsum("ij,ij->i", X, X)
    return out.astype(dtype, copy=False) if dtype is not None else out


def _float_dtype(*arrays: Any, dtype: Any = None) -> np.dtype:
    if dtype is not None:
        return np.dtype(dtype)
    dts = [np.dtype(a.dtype) for a in arrays if a is not None and hasattr(a, "dtype")]
    if any(dt == np.float32 for dt in dts) and not any(dt == np.float64 for dt in dts):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def _as_2d(A: Any, xp, dtype: np.dtype | None):
    """Validate a 2-D array/sparse matrix on the namespace ``xp`` without copying if possible.

    ``dtype=None`` keeps a dense array's dtype: the blocked loops convert each row block (a
    float32 X asked for in float64 is never copied whole, which would double it outside the
    budget)."""
    if bk.is_sparse(A):
        if xp is np:
            A = sp.csr_matrix(bk.to_host(A)) if bk.is_gpu_array(A) else A.tocsr()
        else:
            A = bk.to_device(A, bk.Device("cuda", int(xp.cuda.Device().id)))
        return A.astype(dtype) if A.dtype != dtype else A
    if xp is np:
        A = np.asarray(bk.to_host(A))
    else:
        A = xp.asarray(A)
    if A.ndim == 1:
        A = A.reshape(1, -1)
    if A.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {A.shape}")
    return A if dtype is None else A.astype(dtype, copy=False)


def epilogue_host(G: np.ndarray, xn: Any, zn: Any, kernel: Kernel, *, compiled: bool = False) -> np.ndarray:
    """In-place elementwise pass turning ``G = X Zᵀ`` into K(X, Z) on the host.

    With ``compiled=True``, a C-contiguous float64 RBF block goes through the
    pass compiled by numba (:func:`gpuksvm.kernels.compiled_rbf.rbf_epilogue`:
    one pass, a vectorized exp within 2 units in the last place of NumPy's)
    when numba is installed; everything else through :func:`epilogue_numpy`."""
    if (compiled and kernel.name == "rbf" and compiled_rbf.AVAILABLE and G.dtype == np.float64 and G.ndim == 2
            and G.flags.c_contiguous):
        return compiled_rbf.rbf_epilogue(G, xn, zn, kernel.gamma)
    return epilogue_numpy(G, xn, zn, kernel)


def epilogue_numpy(G: np.ndarray, xn: Any, zn: Any, kernel: Kernel) -> np.ndarray:
    """In-place elementwise pass turning ``G = X Zᵀ`` into K(X, Z) in NumPy (the twin of the
    CUDA epilogue and of the compiled host RBF pass, the oracle of their tests)."""
    name = kernel.name
    if name == "rbf":
        G *= -2.0
        G += xn[:, None]
        G += zn[None, :]
        np.maximum(G, 0.0, out=G)
        G *= -kernel.gamma
        np.exp(G, out=G)
    elif name == "poly":
        G *= kernel.gamma
        G += kernel.coef0
        np.power(G, kernel.degree, out=G)
    elif name == "sigmoid":
        G *= kernel.gamma
        G += kernel.coef0
        np.tanh(G, out=G)
    return G


def _epilogue_gpu(G, xn, zn, kernel: Kernel):
    """In-place fused pass on a CuPy block (kernels_cuda/kernel_block.cu)."""
    if kernel.name == "linear":
        return G
    xp = bk.namespace_of(G)
    n, k = G.shape
    if xn is not None:
        xn = xp.ascontiguousarray(xn, dtype=G.dtype)
        zn = xp.ascontiguousarray(zn, dtype=G.dtype)
    # linear never reaches the kernel; poly/sigmoid do not read xn, zn (NULL)
    _cuda.launch_1d("kernel_block", f"kernel_epilogue_{_suffix(G.dtype)}", n * k,
                    (G, xn, zn, n, k, G.strides[0] // G.itemsize, kernel.code,
                     kernel.gamma, kernel.coef0, kernel.degree))
    return G


def _suffix(dtype: Any) -> str:
    """The kernel-name suffix of a working dtype (``_f32`` / ``_f64`` variants)."""
    return "f32" if np.dtype(dtype) == np.float32 else "f64"


def _gram_rows(Xb, Zt, out):
    """out ← Xb · Zᵀ (dense result written into ``out``)."""
    if bk.is_sparse(Xb) or bk.is_sparse(Zt):
        G = Xb @ Zt
        if bk.is_sparse(G):
            G = G.toarray()
        out[...] = G
    else:
        bk.namespace_of(out).matmul(Xb, Zt, out=out)
    return out


# --------------------------------------------------------------------------- blocks
def kernel_block(X: Any, Z: Any = None, kernel: Kernel | str = "rbf", *, dtype: Any = None,
                 block_rows: int | None = None, out: Any = None, method: str = "auto",
                 z_sq_norms: Any = None, compiled: bool = False):
    """The kernel block K(X, Z) (``n × k``), computed in row blocks.

    Parameters
    ----------
    X : array-like or sparse matrix, shape (n, d)
    Z : array-like or sparse matrix, shape (k, d), optional
        Defaults to ``X``.
    kernel : Kernel or str
        A string uses the default parameters of :class:`Kernel` (γ = 1).
    dtype : float32 or float64, optional
        Result dtype; by default float32 if the inputs are float32, else float64.
    block_rows : int, optional
        Rows per block; by default planned from the memory budget.
    out : array, optional
        Preallocated ``n × k`` output of the result dtype, same kind (NumPy/CuPy) as
        the computation, with contiguous rows (C order; padded rows allowed); anything
        else raises ``ValueError``.
    method : {"auto", "gemm", "tiled"}
        GPU only. ``"gemm"``: cuBLAS GEMM then the fused elementwise epilogue
        (two passes over the output). ``"tiled"``: one CUDA kernel computing the
        dot products and the kernel function per 64×64 output tile, writing each
        output once (dense, d ≤ 64). ``"auto"``: tiled for d ≤ 64, else gemm.
        The CPU always uses BLAS GEMM + :func:`epilogue_host` (see ``compiled``).
    z_sq_norms : array, optional
        ‖zⱼ‖² of the rows of ``Z`` (RBF), when the caller keeps them (the CVM's
        core vectors): saves a pass over ``Z`` per call.
    compiled : bool
        CPU, float64 RBF: the elementwise pass compiled by numba where it is installed
        (:mod:`gpuksvm.kernels.compiled_rbf`; 3.4× faster than NumPy's on an AVX2 host, within
        2 units in the last place).  Off by default: the first compiled call of a process loads
        numba's compiler, about 45 MB; KernelSVC's search engine asks for it (its SMO is
        compiled by numba anyway).

    Returns
    -------
    K : ndarray (NumPy or CuPy, following ``X``), shape (n, k)

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import kernel_block
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    >>> kernel_block(X, X[:2], "linear")
    array([[1., 0.],
           [0., 1.],
           [1., 1.]])
    """
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    if method not in ("auto", "gemm", "tiled"):
        raise ValueError(f"method must be 'auto', 'gemm' or 'tiled', got {method!r}")
    if Z is None:
        Z = X
    xp = bk.namespace_of_any(X, Z)
    dt = _float_dtype(X, Z, dtype=dtype)
    if bk.is_sparse(X):
        X = _as_2d(X, xp, dt) if xp is not np else X
    else:
        X = _as_2d(X, xp, None)        # each row block is converted in the loop
    Z = _as_2d(Z, xp, dt)
    n, d = X.shape
    k = Z.shape[0]
    if Z.shape[1] != d:
        raise ValueError(f"X has {d} features but Z has {Z.shape[1]}")
    if out is None:
        out = xp.empty((n, k), dtype=dt)
    else:
        _check_out(out, (n, k), dt, xp)
    if n == 0 or k == 0:
        return out
    Zt = Z.T
    zn = None
    if kernel.name == "rbf":
        zn = row_sq_norms(Z, dt) if z_sq_norms is None else xp.asarray(z_sq_norms).astype(dt, copy=False)
    device = bk.device_of(out)
    if block_rows is None:
        block_rows = bk.plan_rows(n, (k + d) * dt.itemsize, device)
    gpu = xp is not np
    tiled_ok = gpu and not bk.is_sparse(X) and not bk.is_sparse(Z) and d <= _TILED_MAX_D
    if method == "tiled" and not tiled_ok:
        raise ValueError("method='tiled' needs dense CuPy inputs with d <= 64")
    if tiled_ok and method != "gemm":
        Zc = xp.ascontiguousarray(Z)

        def run_tiled(s: int, e: int) -> None:
            Xb = xp.ascontiguousarray(X[s:e], dtype=dt)
            xn = row_sq_norms(Xb, dt) if kernel.name == "rbf" else None   # only rbf reads the norms
            _tiled_block_gpu(Xb, Zc, xn, zn, out[s:e], kernel)

        bk.map_row_blocks(run_tiled, n, block_rows, what="kernel_block")
        return out

    def run(s: int, e: int) -> None:
        Xb = X[s:e]
        if bk.is_sparse(Xb):
            Xb = Xb.astype(dt) if Xb.dtype != dt else Xb
        else:
            Xb = Xb.astype(dt, copy=False)
        Gb = _gram_rows(Xb, Zt, out[s:e])
        xn = row_sq_norms(Xb, dt) if kernel.name == "rbf" else None
        if gpu:
            _epilogue_gpu(Gb, xn, zn, kernel)
        else:
            epilogue_host(Gb, xn, zn, kernel, compiled=compiled)

    bk.map_row_blocks(run, n, block_rows, what="kernel_block")
    return out


def _check_out(out: Any, shape: tuple[int, int], dt: np.dtype, xp) -> None:
    """``out=`` must be an array of the computation's kind and dtype whose rows are contiguous
    (C order; rows may be padded, as in a view ``buf[:, :k]``): both GPU paths write it by row
    stride through a ``T*`` of the working dtype."""
    if bk.namespace_of(out) is not xp or bk.is_sparse(out):
        raise ValueError(f"out must be a dense {'CuPy' if xp is not np else 'NumPy'} array like the inputs, "
                         f"got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, expected {shape}")
    if out.dtype != dt:
        raise ValueError(f"out has dtype {out.dtype}, expected {dt} (the result dtype; pass dtype= to change it)")
    if shape[0] and shape[1] and (out.strides[1] != out.itemsize
                                  or (shape[0] > 1 and out.strides[0] < shape[1] * out.itemsize)):
        raise ValueError(f"out must be C-ordered (contiguous rows), got strides {out.strides}")


def _tiled_block_gpu(Xb, Z, xn, zn, out_rows, kernel: Kernel) -> None:
    """One-pass tiled kernel block on the GPU (kernels_cuda/kernel_block.cu)."""
    n, d = Xb.shape
    k = Z.shape[0]
    # a 16×16 block computes a 64×64 tile; row tiles beyond gridDim.y are looped over
    grid = ((k + _TILE - 1) // _TILE, min((n + _TILE - 1) // _TILE, _MAX_GRID_Y))
    _cuda.launch("kernel_block", f"kernel_block_tiled_{_suffix(Xb.dtype)}", grid, (16, 16),
                 (Xb, Z, xn, zn, out_rows, n, k, d, out_rows.strides[0] // out_rows.itemsize, kernel.code,
                  kernel.gamma, kernel.coef0, kernel.degree))


def kernel_diag(X: Any, kernel: Kernel | str = "rbf", *, dtype: Any = None):
    """κ(xᵢ, xᵢ) for every row.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import Kernel, kernel_diag
    >>> X = np.array([[1.0, 0.0], [1.0, 1.0]])
    >>> kernel_diag(X, Kernel("poly", gamma=1.0, degree=2, coef0=1.0))
    array([4., 9.])
    """
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    xp = bk.namespace_of(X)
    dt = _float_dtype(X, dtype=dtype)
    n = X.shape[0]
    if kernel.name == "rbf":
        return xp.ones(n, dtype=dt)
    sq = row_sq_norms(X, dt) if bk.is_sparse(X) else row_sq_norms(xp.asarray(X, dtype=dt))
    if kernel.name == "linear":
        return sq
    t = kernel.gamma * sq + kernel.coef0
    return t**kernel.degree if kernel.name == "poly" else xp.tanh(t)


def kernel_matvec(X: Any, Z: Any, V: Any, kernel: Kernel | str = "rbf", *, dtype: Any = None,
                  block_rows: int | None = None, method: str = "auto", blocks: dict | None = None):
    """K(X, Z) · V without materializing K(X, Z).

    Parameters
    ----------
    X : (n, d), Z : (k, d), V : (k,) or (k, m)
    method : {"auto", "blocked", "fused"}
        ``"blocked"``: kernel blocks of ``block_rows`` rows times V (CPU path and
        GPU path for large d).  ``"fused"``: the CUDA tile kernel of
        ``kernels_cuda/kernel_matvec.cu`` (GPU, dense, d ≤ 64, m ≤ 16).
        ``"auto"`` picks fused on a GPU when it applies.
    blocks : dict, optional
        The blocked path keeps its kernel blocks here (by rows and dtype) and takes
        them from here when present: products of the same X and Z with several V
        (the caller's dict holds them, so the caller bounds its size).

    Returns
    -------
    (n,) or (n, m) array on X's device.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import Kernel, kernel_block, kernel_matvec
    >>> rng = np.random.default_rng(0)
    >>> X, Z, V = rng.normal(size=(40, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    >>> k = Kernel("rbf", gamma=0.5)
    >>> bool(np.allclose(kernel_matvec(X, Z, V, k), kernel_block(X, Z, k) @ V))
    True
    """
    kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    if method not in ("auto", "blocked", "fused"):
        raise ValueError(f"method must be 'auto', 'blocked' or 'fused', got {method!r}")
    xp = bk.namespace_of_any(X, Z)
    dt = _float_dtype(X, Z, V, dtype=dtype)
    V = bk.asarray_in(xp, V, dt)
    vec = V.ndim == 1
    V2 = V.reshape(-1, 1) if vec else V
    Z = _as_2d(Z, xp, dt)
    if Z.shape[0] != V2.shape[0]:
        raise ValueError(f"Z has {Z.shape[0]} rows but V has {V2.shape[0]}")
    n = X.shape[0]
    k, m = V2.shape
    gpu = xp is not np
    fusable = (gpu and not bk.is_sparse(X) and not bk.is_sparse(Z)
               and X.shape[1] <= _FUSED_MAX_D and m <= _FUSED_MAX_M)
    if method == "fused" and not fusable:
        raise ValueError("method='fused' needs dense CuPy inputs with d <= 64 and at most 16 columns in V")
    use_fused = method == "fused" or (method == "auto" and fusable and blocks is None)
    out = xp.empty((n, m), dtype=dt)
    if n == 0:
        return out.ravel() if vec else out
    if k == 0:
        out[...] = 0
        return out.ravel() if vec else out
    if use_fused:
        Xd = xp.ascontiguousarray(_as_2d(X, xp, dt))
        _fused_matvec_gpu(Xd, xp.ascontiguousarray(Z), xp.ascontiguousarray(V2), out, kernel)
    else:
        if not (bk.is_sparse(X) and xp is np):
            X = _as_2d(X, xp, dt if bk.is_sparse(X) else None)   # dense: kernel_block converts per block
        if block_rows is None:
            # the output counts against the budget too (a million rows' decisions: 8 MB per column);
            # the blocks take half of the rest: measured on the CPU (1M rows against 1,201 support
            # vectors, float64), the process's peak grows ~12 MB past the traced arrays whatever
            # the block size (the allocator's slack, BLAS), and the callers keep result-sized
            # arrays beside the output (decisions plus intercepts, labels); with whole-budget
            # blocks predict grew 264 MB under a 256 MB budget, with half-budget blocks 141 MB;
            # not slower (300k rows x 1,200 vectors: 12,500-row blocks 5.9-10.0 s, 25,000-row
            # blocks 7.7-7.9 s, 2 cores at load 5: the blocks are past where BLAS gains anything)
            budget = bk.memory_budget(bk.device_of(out))
            block_rows = bk.plan_rows(n, (k + X.shape[1]) * dt.itemsize, bk.device_of(out),
                                      budget=max((budget - out.nbytes) // 2, budget // 4))

        def run(s: int, e: int) -> None:
            Kb = None if blocks is None else blocks.get((s, e, dt.str))
            if Kb is None:
                Kb = kernel_block(X[s:e], Z, kernel, dtype=dt, block_rows=e - s)
                if blocks is not None:
                    blocks[(s, e, dt.str)] = Kb
            xp.matmul(Kb, V2, out=out[s:e])

        bk.map_row_blocks(run, n, block_rows, what="kernel_matvec")
    return out.ravel() if vec else out


def _fused_matvec_gpu(X, Z, V, out, kernel: Kernel) -> None:
    n, d = X.shape
    k, m = V.shape
    # one thread per row; the kernel's tiles are static shared memory
    _cuda.launch_1d("kernel_matvec", f"kernel_matvec_{_suffix(X.dtype)}", n,
                    (X, Z, V, out, n, k, d, m, kernel.code, kernel.gamma, kernel.coef0, kernel.degree),
                    block=_FUSED_BLOCK, max_blocks=None)
