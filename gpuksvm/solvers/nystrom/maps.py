"""Nyström kernel maps: x ↦ K(x, Z) M (SPEC §1, TNNLS eq. 10–12), and LLSVM2's learned spectrum.

    K_zz = U Λ Uᵀ,    M = U Λ^{-1/2}  (k × k),    F = K(X, Z) M  (n × k),

so F Fᵀ is the rank-k Nyström approximation of K.  :class:`NystromMap` holds
(Z, U, Λ, spectrum, M); :func:`nystrom_maps` builds the maps of several kernels
on the same landmarks with one batched eigendecomposition; :func:`feature_map`
forms F in row blocks; :func:`supervised_spectrum` is LLSVM2's
μ* = max(0, μ₀ − c/(2λ)) (TNNLS eq. 17–23).  The estimators
(:class:`~gpuksvm.estimators.llsvm.LLSVM`) and the Dask fit (:mod:`gpuksvm.scaleout.llsvm`)
both build on this module.

The eigenvalue floor: eigenvalues below ``eig_floor · λ_max`` are replaced by
that floor (paper: "replace diminishing eigenvalues with a small constant").
K_zz and its eigendecomposition are computed in float64 for every dtype
(k × k: cheap); a float32 map is the float64 one rounded.  In float32 the
floor is raised to eps(float32)·λ_max ≈ 1.2e-7·λ_max: F = K(X, Z) M computed
in float32 carries a round-off of about eps·‖K_x‖/√λ_j in column j, which
swamps the columns of smaller eigenvalues (measured on the 100K noisy
checkerboard, k = 1000, float32 F: floor 1e-10 → 96.9 %, 1e-8 → 98.29 %,
1.2e-7 → 98.34 %, 1.2e-6 → 98.25 %; float64 98.32 %).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from numbers import Real
from typing import Any, Sequence

import numpy as np

from gpuksvm.array import backend as bk
from gpuksvm.array import linalg
from gpuksvm.solvers.nystrom.kmeans import kmeans, sample_rows
from gpuksvm.kernels.kernel import Kernel, kernel_block, kernel_matvec
from gpuksvm.array.blas_threads import host_blas_threads
from gpuksvm.array.validation import check_param

__all__ = ["NystromMap", "MapParams", "build_map", "sample_rows_for_map", "select_landmarks", "apply_spectrum",
           "feature_map", "kernel_block_rows", "KERNEL_BLOCK_BYTES", "nystrom_maps", "supervised_spectrum", "spectrum_objective"]


@dataclass
class NystromMap:
    """A rank-k empirical kernel map x ↦ K(x, Z) M with M = U diag(spectrum)^{1/2}.

    Attributes
    ----------
    kernel : Kernel
    landmarks : (k, d) array Z
    eigvals : (k,) eigenvalues of K_zz after the floor (ascending)
    eigvecs : (k, k) eigenvectors U (None once the map is final: LLSVM's fit frees them)
    spectrum : (k,) weights s with M = U diag(s)^{1/2} (Nyström: 1/eigvals)
    map : (k, k) array M
    n_kept : number of eigenvalues at or above the floor
    """

    kernel: Kernel
    landmarks: Any
    eigvals: Any
    eigvecs: Any
    spectrum: Any
    map: Any
    n_kept: int

    def with_spectrum(self, spectrum: Any) -> "NystromMap":
        """The same eigenbasis with new weights: M' = U diag(spectrum)^{1/2} (LLSVM2 step 4)."""
        xp = bk.namespace_of(self.eigvecs)
        s = xp.asarray(spectrum, dtype=self.eigvecs.dtype)
        return replace(self, spectrum=s, map=self.eigvecs * xp.sqrt(s)[None, :])

    def transform(self, X: Any, *, block_rows: int | None = None) -> Any:
        """F = K(X, Z) M, computed in row blocks (the n × k kernel block is never stored)."""
        return feature_map(X, self.landmarks, self.map, self.kernel, block_rows=block_rows)

    def feature_sq_norm_bound(self, max_sq_norm: float) -> float:
        """An upper bound of ‖K(x, Z) M‖² over the rows with ‖x‖² ≤ ``max_sq_norm``.

        ‖F_x‖² = Σⱼ sⱼ (uⱼᵀk_x)², and since K is PSD the Schur complement of
        K_zz in the Gram matrix of [Z; x] gives Σⱼ (uⱼᵀk_x)²/λⱼ ≤ κ(x, x) (the
        floor only raises λⱼ), so ‖F_x‖² ≤ maxⱼ(sⱼλⱼ) · max κ(x, x) — for the
        Nyström spectrum (s = 1/λ) max κ(x, x) itself (1 for RBF).  The extreme-cost
        rule of :class:`~gpuksvm.estimators.linear_svm.LinearSVM` uses it out of core, where
        max‖F_x‖² itself would cost a pass forming F (inf if it overflows).
        """
        ratio = float(bk.to_host((self.spectrum.astype(np.float64) * self.eigvals.astype(np.float64)).max()))
        with np.errstate(over="ignore", invalid="ignore"):
            return float(np.float64(max(ratio, 0.0)) * np.float64(self.kernel.max_diag(max_sq_norm)))


def _effective_floor(eig_floor: float, dtype: Any) -> float:
    """The relative eigenvalue floor for maps in ``dtype`` (module docstring)."""
    if np.dtype(dtype) == np.float32:
        return max(float(eig_floor), float(np.finfo(np.float32).eps))
    return float(eig_floor)


#: Largest kernel block K(X_b, Z) (bytes) that forming F or predicting holds beside its result:
#: the block is pure scratch above F, and BLAS runs at full speed on far smaller blocks.
KERNEL_BLOCK_BYTES = 32 << 20


def kernel_block_rows(n_rows: int, Z: Any, n_features: int, dtype: Any, device: Any) -> int:
    """Rows per kernel block K(X_b, Z) of :func:`feature_map` and LLSVM's predictions: the
    memory budget's plan (a block row, its input row and its output row), capped at
    :data:`KERNEL_BLOCK_BYTES` of kernel block."""
    k = int(Z.shape[0])
    itemsize = np.dtype(dtype).itemsize
    return bk.plan_rows(n_rows, (2 * k + int(n_features)) * itemsize, device,
                        max_rows=max(KERNEL_BLOCK_BYTES // max(k * itemsize, 1), 1))


def feature_map(X: Any, Z: Any, M: Any, kernel: Kernel, *, block_rows: int | None = None,
                blocks: dict | None = None) -> Any:
    """F = K(X, Z) · M in row blocks (SPEC §1 step 4): :func:`kernel_block_rows` by default.

    :func:`~gpuksvm.kernels.kernel.kernel_matvec` (``blocks``: its kept kernel blocks); F is the
    only n × k array it allocates.
    """
    dt = np.dtype(M.dtype)
    if block_rows is None:
        block_rows = kernel_block_rows(X.shape[0], Z, X.shape[1], dt, bk.device_of(M))
    return kernel_matvec(X, Z, M, kernel, dtype=dt, block_rows=block_rows, method="blocked", blocks=blocks)


def nystrom_maps(Z: Any, kernels: Sequence[Kernel], *, eig_floor: float = 1e-10,
                 dtype: Any = None) -> list[NystromMap]:
    """Nyström maps of several kernels on the same landmarks, with ONE batched eigh.

    This is the fast path for model selection over γ (or degree, …): the
    ``b`` matrices K_zz are stacked ``(b, k, k)`` and decomposed together
    (:func:`gpuksvm.array.linalg.inv_sqrt_psd`; batched cuSOLVER on a GPU).

    Parameters
    ----------
    Z : (k, d) landmarks (NumPy or CuPy; the maps live on Z's device)
    kernels : sequence of Kernel
    eig_floor : float
        Relative eigenvalue floor (see the module docstring).
    dtype : float32 or float64, optional (default: Z's dtype)

    Returns
    -------
    list of NystromMap, one per kernel

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm.kernels.kernel import Kernel
    >>> from gpuksvm.solvers.nystrom.maps import nystrom_maps
    >>> Z = np.random.default_rng(0).normal(size=(20, 3))
    >>> maps = nystrom_maps(Z, [Kernel("rbf", gamma=g) for g in (0.1, 1.0)])
    >>> F = maps[1].transform(Z)
    >>> bool(np.allclose(F @ F.T, Kernel("rbf", gamma=1.0)(Z), atol=1e-6))
    True
    """
    kernels = list(kernels)
    if not kernels:
        raise ValueError("nystrom_maps needs at least one kernel")
    for kern in kernels:
        if not isinstance(kern, Kernel):
            raise ValueError(f"expected Kernel objects, got {kern!r}")
        if not kern.is_psd:
            raise ValueError(f"the Nyström map needs a PSD kernel; {kern.name!r} is not")
    check_param("eig_floor", eig_floor, Real, low=0.0)
    dt = np.dtype(dtype) if dtype is not None else np.dtype(Z.dtype)
    xp = bk.namespace_of(Z)
    Z = xp.asarray(Z, dtype=dt) if not bk.is_sparse(Z) else Z.toarray().astype(dt)
    Z64 = Z.astype(np.float64)
    k = Z.shape[0]
    # K_zz in float64 (module docstring); its values must also fit the working dtype, in which
    # the maps and every K(X, Z) row are formed
    Kzz = xp.empty((len(kernels), k, k), dtype=np.float64)
    fmax = float(np.finfo(dt).max)
    with np.errstate(over="ignore", invalid="ignore"):   # checked right below
        for i, kern in enumerate(kernels):  # SPEC §1 step 2
            if max(kern.gamma, abs(kern.coef0)) > fmax:
                Kzz[i] = np.nan
            else:
                kernel_block(Z64, Z64, kern, dtype=np.float64, out=Kzz[i])
    in_range = xp.abs(Kzz) <= fmax                      # False for inf and NaN
    if not bool(bk.to_host(in_range.all())):
        bad = int(np.flatnonzero(~bk.to_host(in_range.reshape(len(kernels), -1).all(axis=1)))[0])
        kern = kernels[bad]
        raise ValueError(f"the kernel matrix of the landmarks has inf/NaN values in {dt.name}: "
                         f"kernel={kern.name!r}, gamma={kern.gamma:g}, degree={kern.degree:g}, "
                         f"coef0={kern.coef0:g} give values outside the {dt.name} range on this data. "
                         "Use a smaller gamma (or degree), scale the features, or dtype='float64'")
    # step 3: M = U Λ^{-1/2} with the floor, all kernels in one eigh call (on the CPU with
    # one BLAS thread up to k = 2048 or on a busy host: see gpuksvm.array.blas_threads)
    with host_blas_threads(xp, narrow=k <= 2048):
        M, w, kept = linalg.inv_sqrt_psd(Kzz, floor=_effective_floor(eig_floor, dt), mode="clip")
    del Kzz
    M = _signed_columns(M, xp)
    root = xp.sqrt(w)
    U = xp.empty(M.shape, dtype=dt)
    for i in range(M.shape[0]):         # one k × k product at a time, not a float64 copy of the stack
        U[i] = M[i] * root[i][None, :]
    M, w = M.astype(dt, copy=False), w.astype(dt)
    kept = bk.to_host(kept)
    return [NystromMap(kernel=kern, landmarks=Z, eigvals=w[i], eigvecs=U[i], spectrum=1.0 / w[i],
                       map=M[i], n_kept=int(kept[i])) for i, kern in enumerate(kernels)]


def _signed_columns(M: Any, xp: Any) -> Any:
    """Each eigenvector column with its largest-magnitude entry positive: an eigenvector's sign
    is arbitrary (LAPACK and cuSOLVER choose differently), and the features K(x, Z)·M, hence
    ``transform``, would change sign with the library."""
    at = xp.argmax(xp.abs(M), axis=-2)[..., None, :]
    sign = xp.sign(xp.take_along_axis(M, at, axis=-2))
    M *= xp.where(sign == 0, 1.0, sign).astype(M.dtype)     # M is the caller's own: in place
    return M


def supervised_spectrum(nmap: NystromMap, X_lab: Any, y_lab: Any, *, reg: float,
                        a: float = 0.2) -> tuple[Any, Any, Any]:
    """LLSVM2's learned spectrum (TNNLS eq. 17–23).

    Parameters
    ----------
    nmap : NystromMap (its eigvecs U and eigvals Λ are used)
    X_lab : (l, d) labelled rows (on the map's device); y_lab : (l,) labels (host)
    reg : float
        λ of eq. (18)/(19), > 0.
    a : float
        Weight −a of between-class pairs in A (eq. 17).

    Returns
    -------
    mu : (k,) μ* = max(0, μ₀ − c/(2λ))        (eq. 23)
    c : (k,) c = diag(Uᵀ K_Lzᵀ 𝓛 K_Lz U)       (eq. 18)
    mu0 : (k,) μ₀ = diag(Λ⁻¹)
    """
    check_param("spectrum_reg", reg, Real, low=0.0, closed="neither")
    check_param("a", a, Real, low=0.0)
    xp = bk.namespace_of(nmap.eigvecs)
    dt = nmap.eigvecs.dtype
    y_lab = np.asarray(bk.to_host(y_lab)).ravel()
    same = y_lab[:, None] == y_lab[None, :]
    A = np.where(same, 1.0, -float(a))                         # eq. (17)
    lap = np.diag(A.sum(axis=1)) - A                           # 𝓛 = D − A
    G = kernel_block(X_lab, nmap.landmarks, nmap.kernel, dtype=dt) @ nmap.eigvecs  # K_Lz U
    lap = xp.asarray(lap, dtype=dt)
    c = xp.sum(G * (lap @ G), axis=0)                          # diag(Gᵀ 𝓛 G)
    mu0 = 1.0 / nmap.eigvals
    mu = xp.maximum(mu0 - c / (2.0 * reg), 0)                  # eq. (23)
    return mu, c, mu0


def spectrum_objective(mu: Any, c: Any, mu0: Any, reg: float) -> float:
    """The objective cᵀμ + λ‖μ − μ₀‖² that eq. (23) minimizes over μ ≥ 0 (eq. 18–19)."""
    xp = bk.namespace_of(mu)
    return float(bk.to_host(c @ mu + reg * xp.sum((mu - mu0) ** 2)))


# --------------------------------------------------------------------------- LLSVM's map, step by step
@dataclass(frozen=True)
class MapParams:
    """What LLSVM's map depends on (the estimator's parameters of SPEC §1 steps 1–3).

    ``landmarks`` is "kmeans", "random" or a (k, d) array; ``spectrum``
    "nystrom" or "supervised" (LLSVM2 with ``n_labeled``, ``spectrum_reg`` and
    ``dissimilar_pair_weight``, TNNLS eq. 17–23).
    """

    n_landmarks: int
    landmarks: Any
    kmeans_iter: int
    kmeans_init: str
    kmeans_sample: int | None
    eig_floor: float
    spectrum: str
    n_labeled: int
    spectrum_reg: float
    dissimilar_pair_weight: float

    def sample_size(self, out_of_core: bool = False) -> int | None:
        """Rows of the random sample that k-means, random landmarks and LLSVM2 draw from
        (None: all rows; out of core the sample always has a size: 20,000 by default)."""
        if self.kmeans_sample is None and not out_of_core:
            return None
        size = max(int(self.kmeans_sample or 20000), int(self.n_landmarks))
        if self.spectrum == "supervised":
            size = max(size, int(self.n_labeled))
        return size


def sample_rows_for_map(X: Any, y: np.ndarray, params: MapParams, rs: np.random.RandomState) -> tuple[Any, np.ndarray]:
    """The random rows of X and y that k-means, random landmarks and LLSVM2 draw from
    (:meth:`MapParams.sample_size` of them, all rows when None), drawn by their contents and in
    the order of their contents (:func:`~gpuksvm.solvers.nystrom.kmeans.sample_rows`, the draw of the
    out-of-core :class:`~gpuksvm.solvers.nystrom.kmeans.RowReservoir`): the same rows in any order, in memory,
    out of core or on Dask, give the same sample and the same landmarks."""
    idx = sample_rows(X, params.sample_size(), rs, y)
    return X[bk.device_index(X, idx)], np.asarray(y)[idx]


def select_landmarks(Xs: Any, params: MapParams, n_features: int, dev: bk.Device, dt: np.dtype,
                     rs: np.random.RandomState) -> Any:
    """Z on the device (SPEC §1 step 1), from the random sample ``Xs`` of the rows:
    k-means centres, random rows, or the given array."""
    xp = bk.get_namespace(dev)
    n = Xs.shape[0]
    if not isinstance(params.landmarks, str):
        Z = params.landmarks
        Z = bk.to_host(Z) if not bk.is_gpu_array(Z) else Z
        if bk.is_sparse(Z):
            Z = Z.toarray()
        if Z.ndim != 2 or Z.shape[1] != n_features:
            raise ValueError(f"landmarks must have shape (k, {n_features}), got {Z.shape}")
        if Z.shape[0] < 1:
            raise ValueError("landmarks must hold at least one row")
        Z = bk.to_device(Z, dev, dt)
        if not bool(xp.isfinite(Z).all()):
            raise ValueError("landmarks contain NaN or infinity")
        return Z
    k = int(params.n_landmarks)
    if k > n:   # the sample holds min(n_samples, ≥ k) rows: k > n only when n_samples < k
        warnings.warn(f"n_landmarks={k} > n_samples={n}: using n_landmarks={n}", UserWarning)
        k = n
    if params.landmarks == "random":
        idx = np.sort(rs.choice(n, size=k, replace=False))
        return bk.to_device(bk.take_rows(Xs, idx, dense=True), dev, dt, copy=True)
    # Algorithm 1 step 1: k-means on the random sample
    return kmeans(Xs, k, n_iter=int(params.kmeans_iter), init=params.kmeans_init, sample=None,
                  random_state=rs, device=dev, dtype=dt).centers


def apply_spectrum(nmap: NystromMap, Xs: Any, ys: np.ndarray, params: MapParams,
                   rs: np.random.RandomState) -> NystromMap:
    """LLSVM2 (Algorithm 2 step 3) when ``spectrum="supervised"``, else the Nyström map.

    The labelled subset L is ``n_labeled`` random rows of the sample ``Xs``.
    """
    if params.spectrum != "supervised":
        return nmap
    idx = sample_rows(Xs, int(params.n_labeled), rs, ys)
    XL = Xs[bk.device_index(Xs, idx)]
    mu, _, _ = supervised_spectrum(nmap, XL, np.asarray(ys)[idx], reg=float(params.spectrum_reg),
                                   a=float(params.dissimilar_pair_weight))
    if not bool(bk.to_host((mu > 0).any())):
        raise ValueError("LLSVM2 zeroed every eigenvalue (μ* = 0): spectrum_reg is too small "
                         "for this kernel; increase spectrum_reg")
    return nmap.with_spectrum(mu)


def build_map(Xs: Any, ys: Any, kernel: Kernel, params: MapParams, n_features: int, dev: bk.Device,
              dt: np.dtype, rs: np.random.RandomState) -> tuple[NystromMap, float]:
    """Landmarks Z from the random sample ``Xs`` (step 1) and the map M = U Λ^{-1/2} (step 2,
    eq. 8), with the supervised spectrum when asked; also the device clock after step 1."""
    Z = select_landmarks(Xs, params, n_features, dev, dt, rs)
    t1 = bk.synchronized_clock(dev)
    nmap = nystrom_maps(Z, [kernel], eig_floor=float(params.eig_floor), dtype=dt)[0]
    return apply_spectrum(nmap, Xs, ys, params, rs), t1
