"""Core Vector Machine: two-class and one-class L2-SVMs as minimum enclosing balls (SPEC §2).

Tsang, Kwok & Cheung (2005).  With a kernel of constant diagonal κ(x,x) = κ
(RBF; or any kernel normalized as κ(x,z)/√(κ(x,x)κ(z,z))) the L2-SVM duals are
MEB problems  max −αᵀK̃α, α ≥ 0, Σα = 1  in the feature space of a transformed
kernel k̃ with constant diagonal κ̃:

* two-class (eq. 8–10):  k̃(zᵢ,zⱼ) = yᵢyⱼκ(xᵢ,xⱼ) + yᵢyⱼ + δᵢⱼ/C,  κ̃ = κ + 1 + 1/C;
  recovery (eq. 11)  w = Σαᵢyᵢφ(xᵢ), b = Σαᵢyᵢ, ξᵢ = αᵢ/C, ρ = αᵀK̃α;
  decision f(x) = Σαᵢyᵢκ(xᵢ,x) + b (the margin constraint is yf ≥ ρ − ξ, so
  f is on the scale of ρ, not 1);
* one-class (eq. 7):  k̃ = κ + δᵢⱼ/C, κ̃ = κ + 1/C;  f(x) = Σαᵢκ(xᵢ,x) − ρ.

The core-set algorithm (§4, Bădoiu–Clarkson): start from two points (the
closest opposite-class pair of a sample, or the Kumar et al. furthest pair for
one-class), then repeatedly add the point furthest from the ball centre (eq.
12–13) and re-solve the MEB on the core set (warm-started simplex SMO, see
:mod:`gpuksvm.solvers.meb`) until no point lies outside the (1+ε) ball.  The
furthest point is looked for among ``n_tries`` random samples of
``sample_size`` rows (probabilistic speed-up, LibCVM: up to 7 fresh samples
before declaring convergence; time per iteration independent of n) or, with
``sample_size=None``, among all rows — on a GPU one fused CUDA kernel computes
every distance and the arg-max (``kernels_cuda/cvm.cu``).  The guarantee is a
(1+ε)²-approximation: R² ≤ p* + κ̃ ≤ (1+ε)²R² (eq. 15).

ε is annealed as in LibCVM (``eps_schedule="anneal"``): the search starts
with a loose ε₀ = max(eps, 1e-2) and ε is divided by 10 each time no point is
found outside the ball, down to ``eps``; the inner SMO tolerance follows ε.

Multi-class: one-vs-one by default.  Each pairwise problem only holds the rows
of two classes, so its core set (and K̃_S) is smaller and its ball tighter than
in a one-vs-rest problem, the sampled search stays cheap, and voting needs no
calibration between problems whose decision values live on different scales
(ρ differs per problem) — which is also what LibCVM (built on LIBSVM) does.
``multi_class="ovr"`` is available; its decision values are divided by each
problem's ρ so that the margin sits at 1 in every problem before the arg-max.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, OutlierMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from . import backend as bk
from .base import DeviceMixin
from .kernels import Kernel, kernel_matvec, make_kernel
from .multiclass import binary_problems, ovr_decision_function, problem_rows
from .scaleout.cvm import fit_cvm
from .scaleout.dispatch import dask_dispatch
from .solvers.meb import SimplexMEB, kernel_scale, make_scanner
from .validation import check_choice, check_param, encode_classes, validate_X, validate_X_y

__all__ = ["CVM", "OneClassCVM"]

_INIT_SAMPLE = 256          # rows per class looked at for the initial pair
_ANNEAL_START = 1e-2        # loosest ε of the annealing schedule
_ANNEAL_FACTOR = 0.1        # ε ← max(eps, ε·factor) each time the search converges
_MAX_STALLS = 3             # consecutive searches returning a core vector before giving up
_OUTLIER_SLACK_FACTOR = 3.0  # one-class: an outlier's slack exceeds this × the median SV slack


class _CVMBase(DeviceMixin, BaseEstimator):
    """Shared parameter handling, core-set loop and prediction of the CVM estimators."""

    _task = "classification"

    # ------------------------------------------------------------------ params
    def _check_common(self) -> None:
        check_param("C", self.C, Real, low=0.0, closed="neither")
        check_param("eps", self.eps, Real, low=0.0, high=1.0, closed="neither")
        check_param("sample_size", self.sample_size, Integral, low=1, allow_none=True)
        check_param("n_tries", self.n_tries, Integral, low=1)
        check_param("max_iter", self.max_iter, Integral, low=1)
        check_param("max_core_size", self.max_core_size, Integral, low=2)
        check_param("degree", self.degree, Real, low=0.0)
        check_param("coef0", self.coef0, Real)
        check_choice("eps_schedule", self.eps_schedule, ("anneal", "fixed"))
        check_choice("inner_solver", self.inner_solver, ("active_set", "smo"))
        if not isinstance(self.normalize, (bool, np.bool_)):
            raise ValueError(f"normalize must be True or False, got {self.normalize!r}")

    def _make_kernel(self, X: Any) -> Kernel:
        kernel = make_kernel(self.kernel, self.gamma, self.degree, self.coef0, X)
        if not kernel.is_psd:
            raise ValueError(f"kernel={kernel.name!r} is not positive semi-definite; the CVM needs a "
                             "PSD kernel (use 'rbf', or 'poly'/'linear' with normalize=True)")
        if kernel.constant_diag is None and not self.normalize:
            raise ValueError(
                f"the CVM needs a kernel with constant κ(x, x) (CVM paper eq. 4); kernel="
                f"{kernel.name!r} has κ(x, x) depending on x. Use kernel='rbf', or pass "
                "normalize=True to use κ(x, z)/sqrt(κ(x, x) κ(z, z)).")
        return kernel

    # ------------------------------------------------------------------ core-set loop
    def _initial_pair(self, scanner, rows: np.ndarray, y: np.ndarray | None,
                      rs: np.random.RandomState) -> tuple[int, int]:
        """§4.1.1: closest opposite-class pair, or (one-class) the furthest pair, on a sample."""
        if y is not None:
            pos = rows[y[rows] > 0]
            neg = rows[y[rows] < 0]
            ps = pos if pos.shape[0] <= _INIT_SAMPLE else rs.choice(pos, _INIT_SAMPLE, replace=False)
            ns = neg if neg.shape[0] <= _INIT_SAMPLE else rs.choice(neg, _INIT_SAMPLE, replace=False)
            K = scanner.kernel_between(ps, ns)
            i, j = np.unravel_index(int(np.argmax(K)), K.shape)   # max κ = closest pair
            return int(ps[i]), int(ns[j])
        smp = rows if rows.shape[0] <= 2 * _INIT_SAMPLE else rs.choice(rows, 2 * _INIT_SAMPLE, replace=False)
        z0 = int(smp[rs.randint(smp.shape[0])])
        za = int(smp[int(np.argmin(scanner.kernel_between(np.array([z0]), smp)[0]))])
        kb = scanner.kernel_between(np.array([za]), smp)[0]
        kb[smp == za] = np.inf
        zb = int(smp[int(np.argmin(kb))])
        return za, zb

    def _solve(self, X: Any, y: np.ndarray | None, rows: np.ndarray | None, kernel: Kernel,
               xscale: Any, dev: bk.Device, dt: np.dtype, rs: np.random.RandomState) -> dict:
        """One MEB problem on the rows ``rows`` (None = all) with labels ``y`` (None = one-class)."""
        n = X.shape[0]
        all_rows = rows is None
        rows_arr = np.arange(n, dtype=np.int64) if all_rows else rows
        n_c = rows_arr.shape[0]
        if n_c < 2:
            raise ValueError(f"the CVM needs at least 2 training rows, got n_samples={n_c}")
        C = float(self.C)
        kt = 1.0 + 1.0 / C + (1.0 if y is not None else 0.0)     # κ̃ (κ = 1 after normalization)
        sample = self.sample_size
        exact = sample is None or n_c <= int(sample) * int(self.n_tries)
        # a distributed row source brings its own furthest-point search (gpuksvm.scaleout.cvm)
        factory = getattr(X, "__gpuksvm_scanner__", None)
        scanner = (factory(y, kernel, xscale, C, dt, dev) if factory is not None
                   else make_scanner(X, y, kernel, xscale, C, dt, dev))
        meb = SimplexMEB(kt)
        inner = meb.solve_active_set if self.inner_solver == "active_set" else meb.solve

        def ktilde_row(krow: np.ndarray, idx: int) -> np.ndarray:
            if y is None:
                return krow                                              # eq. 7
            core = np.asarray(scanner.core_idx[:-1], dtype=np.int64)
            return y[core] * y[idx] * (krow + 1.0)                       # eq. 10 (off-diagonal)

        a, b_ = self._initial_pair(scanner, rows_arr, y, rs)
        for idx in (a, b_):
            krow = scanner.append(idx)
            meb.append(ktilde_row(krow, idx))
        meb.set_alpha(np.array([0.5, 0.5]))
        in_core = {a, b_}

        eps = float(self.eps)
        eps_cur = max(eps, _ANNEAL_START) if self.eps_schedule == "anneal" else eps
        max_iter = int(self.max_iter)
        stop = "max_iter"
        n_iter = 0
        n_stalls = 0          # consecutive searches that returned a core vector
        cand_idx = None if all_rows else rows_arr
        # Every pass of this loop adds a core vector (≤ max_iter), tightens ε (a
        # finite number of times: ε₀ → eps by factors of 10) or handles a stall
        # (at most _MAX_STALLS in a row, then it stops): it always terminates.
        while True:
            if n_iter >= max_iter:
                stop = "max_iter"
                break
            q = meb.q
            R2 = kt - q
            coef, b = scanner.set_alpha(meb.alpha)
            # outside the (1+ε) ball  ⇔  κ̃ + q − 2s > (1+ε)²R²  ⇔  s < s_thr   (eq. 12)
            s_thr = 0.5 * (kt + q - (1.0 + eps_cur) ** 2 * R2)
            found = -1
            if exact:
                s_min, idx = scanner.exact_min(cand_idx, coef, b)
                if s_min < s_thr:
                    found = idx
            else:
                groups = rows_arr[rs.randint(0, n_c, size=(int(self.n_tries), int(sample)))]
                if dev.is_gpu:   # all tries in one launch; the first successful try wins
                    best, arg = scanner.group_min(groups, coef, b)
                    hit = np.nonzero(best < s_thr)[0]
                    if hit.shape[0]:
                        found = int(arg[hit[0]])
                else:            # lazily, one try at a time (usually the first succeeds)
                    for t in range(groups.shape[0]):
                        best, arg = scanner.group_min(groups[t:t + 1], coef, b)
                        if best[0] < s_thr:
                            found = int(arg[0])
                            break
            if found < 0:
                if eps_cur > eps:
                    eps_cur = max(eps, eps_cur * _ANNEAL_FACTOR)
                    inner(0.5 * eps_cur * R2)
                    continue
                stop = "converged"
                break
            if found in in_core:
                # A core vector outside the ball: with the inner gap ≤ ε R²/2 every
                # core vector lies within √(1+ε) R, so only inner slack or rounding
                # in the scores (float32) can cause this.  Tighten by SMO (robust);
                # if it keeps happening the precision limit is reached: stop.
                n_stalls += 1
                if n_stalls > _MAX_STALLS:
                    stop = "stalled"
                    break
                meb.solve(0.05 * eps_cur * R2 / n_stalls)
                continue
            n_stalls = 0
            if meb.m >= int(self.max_core_size):
                stop = "max_core_size"
                break
            krow = scanner.append(found)
            meb.append(ktilde_row(krow, found))
            in_core.add(found)
            n_iter += 1
            inner(0.5 * eps_cur * R2)
        core = np.asarray(scanner.core_idx, dtype=np.int64)
        alpha = meb.alpha.copy()
        ycore = None if y is None else y[core]
        return {"core": core, "alpha": alpha, "rho": meb.q, "radius2": meb.radius2,
                "b": 0.0 if y is None else float(alpha @ ycore), "y": ycore, "n_iter": n_iter,
                "stop": stop, "search": "exact" if exact else f"sampled({int(sample)})",
                "n_smo_steps": meb.n_steps, "kappa_t": kt}

    def _prepare(self, X: Any):
        """Device, dtype, kernel, device copy of X and the normalization scales."""
        dev = self._device()
        dt = bk.resolve_dtype(self.dtype, dev)
        Xd = bk.to_device(X, dev, dt)
        kernel = self._make_kernel(Xd)
        xscale = kernel_scale(Xd, kernel, bool(self.normalize))
        return dev, dt, kernel, Xd, xscale

    def _store_model(self, Xd: Any, results: list[dict], signed: bool, xscale: Any,
                     dev: bk.Device, dt: np.dtype) -> None:
        """support_ (union of SVs), support_vectors_, dual_coef_ (n_problems × n_SV), intercept_."""
        sv_sets = [r["core"][r["alpha"] > 0] for r in results]
        support = np.unique(np.concatenate(sv_sets)) if sv_sets else np.empty(0, np.int64)
        pos = {int(v): k for k, v in enumerate(support)}
        D = np.zeros((len(results), support.shape[0]))
        for p, r in enumerate(results):
            keep = r["alpha"] > 0
            coef = r["alpha"][keep] * (r["y"][keep] if signed else 1.0)
            D[p, [pos[int(v)] for v in r["core"][keep]]] = coef
        xp = bk.get_namespace(dev)
        SV = Xd[support]
        if bk.is_sparse(SV):
            SV = SV.toarray()
        self.support_ = support
        self.support_vectors_ = xp.asarray(SV, dtype=dt)
        self.dual_coef_ = D
        self._sv_scale = None if xscale is None else np.asarray(bk.to_host(xscale), np.float64)[support]
        self.n_support_total_ = int(support.shape[0])

    def _kernel_expansion(self, X: Any) -> tuple[np.ndarray, str]:
        """(n, n_problems) host values Σᵢ coefᵢ κₙ(xᵢ, x) of the stored expansion."""
        check_is_fitted(self, "dual_coef_")
        dt = self.support_vectors_.dtype
        Xd, kind = self._validated_input(X, dt)
        xp = self._fitted_xp()
        V = np.asarray(bk.to_host(self.dual_coef_), dtype=np.float64).T
        if self._sv_scale is not None:
            V = V * np.asarray(bk.to_host(self._sv_scale))[:, None]
        if V.shape[0] == 0:
            return np.zeros((Xd.shape[0], V.shape[1])), kind
        D = kernel_matvec(Xd, self.support_vectors_, xp.asarray(np.ascontiguousarray(V), dtype=dt),
                          self.kernel_, dtype=dt)
        D = np.asarray(bk.to_host(D), dtype=np.float64).reshape(Xd.shape[0], -1)
        if self._sv_scale is not None:
            D *= np.asarray(bk.to_host(kernel_scale(Xd, self.kernel_, True)), np.float64)[:, None]
        return D, kind

    def _fit_rows(self, Xd: Any, yi: np.ndarray | None, kernel: Kernel, xscale: Any, dev: bk.Device,
                  dt: np.dtype, rs: np.random.RandomState) -> "_CVMBase":
        """The core-set fits on prepared rows and the fitted attributes.

        ``Xd`` is the device array, or a distributed row source
        (:mod:`gpuksvm.scaleout`); ``yi`` the encoded labels (``classes_``
        already set), or None for the one-class task.
        """
        self.kernel_ = kernel
        if yi is None:
            res = self._solve(Xd, None, None, kernel, xscale, dev, dt, rs)
            results = [res]
            self._store_model(Xd, results, False, xscale, dev, dt)
            # outlier threshold ρ − τ, τ = 3·median SV slack (see OneClassCVM; ρ itself would
            # flag every support vector)
            a_sv = res["alpha"][res["alpha"] > 0]
            tau = _OUTLIER_SLACK_FACTOR * float(np.median(a_sv)) / float(self.C) if a_sv.size else 0.0
            res["threshold"] = res["rho"] - tau
            self.intercept_ = np.array([-res["threshold"]])
            self._set_one_class_fit(res)
        else:
            problems = binary_problems(self.classes_.shape[0], self.multi_class)
            results = []
            for p, (ci, cj) in enumerate(problems):
                rows, yp = problem_rows(yi, ci, cj)
                ypm = np.zeros(yi.shape[0])       # ±1 on the problem's rows
                ypm[rows] = yp
                res = self._solve(Xd, ypm, None if cj is None else rows, kernel, xscale, dev, dt, rs)
                results.append(res)
                if self.verbose:
                    print(f"[CVM] problem {p + 1}/{len(problems)}: {res['n_iter']} iterations, "
                          f"core set {res['core'].shape[0]}, stop={res['stop']}, search={res['search']}")
            self.problems_ = problems
            self._store_model(Xd, results, True, xscale, dev, dt)
            self.intercept_ = np.array([r["b"] for r in results])
        self._record(results)
        self._set_fitted_device(dev)
        return self

    def _record(self, results: list[dict]) -> None:
        single = len(results) == 1
        pick = (lambda key: results[0][key]) if single else (lambda key: [r[key] for r in results])
        self.core_set_ = pick("core")
        self.alpha_ = pick("alpha")
        self.radius_ = (float(np.sqrt(max(results[0]["radius2"], 0.0))) if single
                        else np.sqrt(np.maximum([r["radius2"] for r in results], 0.0)))
        self.rho_ = np.array([r["rho"] for r in results])
        self.n_iter_ = (int(results[0]["n_iter"]) if single
                        else np.array([r["n_iter"] for r in results]))
        self.stop_reason_ = pick("stop")
        self.search_ = results[0]["search"]
        self.kappa_tilde_ = float(results[0]["kappa_t"])
        self.n_smo_steps_ = (int(results[0]["n_smo_steps"]) if single
                             else np.array([r["n_smo_steps"] for r in results]))
        self.core_set_size_ = (int(results[0]["core"].shape[0]) if single
                               else np.array([r["core"].shape[0] for r in results]))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class CVM(ClassifierMixin, _CVMBase):
    """Core Vector Machine classifier (two-class L2-SVM as an MEB; SPEC §2).

    Parameters
    ----------
    kernel : {"rbf", "poly", "linear"} or Kernel, default="rbf"
        Kernels whose κ(x, x) is not constant (poly, linear) need ``normalize=True``.
    gamma : "mean_dist", "scale", "auto" or float, default="mean_dist"
        "mean_dist" = 1/β with β the mean squared distance between rows (CVM
        paper §5, also LibCVM's default).
    degree, coef0 : float
        Polynomial kernel parameters.
    C : float, default=10.0
        Weight of the squared slacks (eq. 8); enters K̃ as 1/C on the diagonal.
    eps : float, default=1e-5
        Approximation parameter ε: stop when no point is found outside the
        (1+ε)R ball.  The paper uses 1e-6 (more core vectors, slower).
    sample_size : int or None, default=59
        Candidates per furthest-point search (probabilistic speed-up); None
        scans every row (exact search; on a GPU one fused kernel).  When the
        problem has at most ``sample_size * n_tries`` rows the search is exact.
    n_tries : int, default=7
        Fresh samples tried before declaring convergence (LibCVM).
    max_iter : int, default=100000
        Maximum number of core vectors added.
    max_core_size : int, default=50000
        Cap on |S| (LibCVM).  K̃_S is a dense |S|² float64 matrix.
    eps_schedule : {"anneal", "fixed"}, default="anneal"
        "anneal": search with ε₀ = max(eps, 1e-2) and divide ε by 10 each time
        the search converges, down to ``eps`` (LibCVM anneals ε the same way);
        the inner SMO tolerance follows ε.  "fixed": ``eps`` throughout.
    inner_solver : {"active_set", "smo"}, default="active_set"
        Solver of the MEB on the core set, warm-started from the previous α.
        "smo": pairwise updates on the simplex with second-order working-set
        selection (LibCVM's choice); "active_set": primal active-set method
        with an incrementally maintained (K̃_PP)⁻¹ — same optimum, far fewer
        steps when K̃ is ill-conditioned (large C), see
        :meth:`gpuksvm.solvers.meb.SimplexMEB.solve_active_set`.
    normalize : bool, default=False
        Use κ(x, z)/√(κ(x, x)κ(z, z)) (paper eq. 4, case 3).
    task : {"classification", "one_class"}, default="classification"
        "one_class" fits the one-class L2-SVM on X ignoring y and predicts ±1
        (as :class:`OneClassCVM`).
    multi_class : {"ovo", "ovr"}, default="ovo"
        One-vs-one (default, see the module docstring for why) or one-vs-rest.
    device : str, default="auto"
    dtype : float32, float64 or None
        Compute dtype of kernel evaluations (float32 on GPU, float64 on CPU by
        default).  The MEB solver always works in float64.
    random_state : int, RandomState or None
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray
    core_set_ : ndarray of int (list of arrays for multi-class)
        Training-row indices of the core vectors, in the order they were added.
    alpha_ : ndarray (list for multi-class)
        MEB weights α of the core vectors (Σα = 1).
    support_ : ndarray of int
        Rows with α > 0 (union over the binary problems).
    support_vectors_ : array (n_SV, n_features)
    dual_coef_ : ndarray (n_problems, n_SV)
        αᵢyᵢ (eq. 11).
    intercept_ : ndarray (n_problems,)
        b = Σαᵢyᵢ (eq. 11).
    rho_ : ndarray (n_problems,)
        ρ = αᵀK̃α, the margin of the L2-SVM.
    radius_ : float (array for multi-class)
        Radius R of the final ball in the k̃ feature space.
    n_iter_ : int (array)
        Core vectors added after the initial pair.
    stop_reason_ : str (list)
        "converged", "max_iter" or "max_core_size".
    search_ : str
        "sampled(59)" or "exact".
    kernel_ : Kernel
    n_features_in_ : int

    Examples
    --------
    >>> from gpuksvm import CVM
    >>> from gpuksvm.datasets import make_checkerboard
    >>> X, y = make_checkerboard(2000, random_state=0)
    >>> clf = CVM(gamma=30.0, C=1000.0, device="cpu", random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.95
    True
    """

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "mean_dist", degree: float = 3,
                 coef0: float = 1.0, C: float = 10.0, eps: float = 1e-5, sample_size: int | None = 59,
                 n_tries: int = 7, max_iter: int = 100_000, max_core_size: int = 50_000,
                 eps_schedule: str = "anneal", inner_solver: str = "active_set", normalize: bool = False, task: str = "classification",
                 multi_class: str = "ovo", device: str = "auto", dtype: Any = None,
                 random_state: Any = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.eps = eps
        self.sample_size = sample_size
        self.n_tries = n_tries
        self.max_iter = max_iter
        self.max_core_size = max_core_size
        self.eps_schedule = eps_schedule
        self.inner_solver = inner_solver
        self.normalize = normalize
        self.task = task
        self.multi_class = multi_class
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    @dask_dispatch(fit_cvm)
    def fit(self, X: Any, y: Any = None) -> "CVM":
        """Fit the CVM on (X, y); with ``task="one_class"`` y is ignored."""
        self._check_params()
        rs = check_random_state(self.random_state)
        if self.task == "one_class":
            X, _ = validate_X(self, X, reset=True)
            dev, dt, kernel, Xd, xscale = self._prepare(X)
            return self._fit_rows(Xd, None, kernel, xscale, dev, dt, rs)
        X, y, _ = validate_X_y(self, X, y)
        self.classes_, yi = encode_classes(y)
        dev, dt, kernel, Xd, xscale = self._prepare(X)
        return self._fit_rows(Xd, yi, kernel, xscale, dev, dt, rs)

    def _check_params(self) -> None:
        self._check_common()
        check_choice("task", self.task, ("classification", "one_class"))
        check_choice("multi_class", self.multi_class, ("ovo", "ovr"))

    def _set_one_class_fit(self, res: dict) -> None:
        self.classes_ = np.array([-1, 1])

    def _raw(self, X: Any) -> tuple[np.ndarray, str]:
        D, kind = self._kernel_expansion(X)
        return D + self.intercept_[None, :], kind

    @dask_dispatch()
    def decision_function(self, X: Any):
        """Decision values f(x) = Σαᵢyᵢκ(xᵢ, x) + b.

        Binary: (n,), positive for ``classes_[1]``.  One-class task: Σαᵢκ(xᵢ, x) − ρ.
        Multi-class: (n, n_classes) scores whose arg-max is the prediction (ovo:
        votes + squashed confidences; ovr: f/ρ per class).
        """
        D, kind = self._raw(X)
        if self.task == "one_class" or len(self.classes_) == 2:
            out = D[:, 0]
        elif self.multi_class == "ovr":
            out = D / self.rho_[None, :]
        else:
            out = ovr_decision_function(D, len(self.classes_))
        return bk.as_kind(out, kind)

    @dask_dispatch()
    def predict(self, X: Any):
        """Predicted labels (±1 for the one-class task)."""
        D, kind = self._raw(X)
        if self.task == "one_class":
            return bk.as_kind(np.where(D[:, 0] >= 0, 1, -1), kind)
        if len(self.classes_) == 2:
            idx = (D[:, 0] > 0).astype(np.int64)
        elif self.multi_class == "ovr":
            idx = np.argmax(D / self.rho_[None, :], axis=1)
        else:
            idx = np.argmax(ovr_decision_function(D, len(self.classes_)), axis=1)
        return bk.as_kind(self.classes_[idx], kind)


class OneClassCVM(OutlierMixin, _CVMBase):
    """One-class L2-SVM by the Core Vector Machine (novelty detection; CVM paper §3.2.1).

    The MEB dual with k̃ = κ + δᵢⱼ/C (eq. 7).  Like scikit-learn's
    ``OneClassSVM``: ``score_samples(x) = Σαᵢκ(xᵢ, x) = wᵀφ(x)``,
    ``decision_function = score_samples − offset_`` (negative for outliers) and
    ``predict`` returns +1 (inlier) / −1 (outlier).

    **The outlier threshold** is ``offset_ = ρ − τ`` with τ = 3·median(ξⱼ)
    over the support vectors (ξⱼ = αⱼ/C): x is an outlier when its slack
    ρ − wᵀφ(x) exceeds three times the typical support-vector slack.  The
    paper's hyperplane wᵀφ(x) = ρ (eq. 7; ρ is kept as ``rho_``) is not used
    as the threshold: with squared slacks *every* support vector has
    ξⱼ = αⱼ/C > 0 and lies beyond it, and on data whose rows are not in general
    position — duplicated rows, boolean features, few distinct values, a
    low-dimensional cloud with constant columns — nearly every row is a
    support vector, so every training row was an outlier (issue 14).  A
    median-based factor (robust statistics' usual 3) is used because the
    α-weighted mean slack is dominated by the outliers' own large α and
    missed 1 of 10 planted outliers in ``tests/test_cvm.py``.  Measured on
    200 rows, C = 1, outlier fractions with ρ → with ρ − τ: boolean 5-D 100 % →
    0–0.5 %; 20 points × 10 copies 40 % → 0 %; 1-D normal plus two constant
    columns 100 % → 7–12 %; 3-D normal 24 % → 2–3 %; 300 normal 2-D rows plus
    10 planted far points: all 10 flagged (3 data seeds).  C ↑ still gives
    fewer outliers (3-D normal, 400 rows: C = 0.1, 1, 10 → 5.5 %, 1.5 %, 0 %).

    Parameters
    ----------
    kernel, gamma, degree, coef0, eps, sample_size, n_tries, max_iter, max_core_size,
    eps_schedule, inner_solver, normalize, device, dtype, random_state, verbose
        As in :class:`CVM`.
    C : float, default=1.0
        Weight of the squared slacks.

    Attributes
    ----------
    core_set_, alpha_, support_, support_vectors_, radius_, n_iter_, stop_reason_, search_
        As in :class:`CVM`.
    dual_coef_ : ndarray (1, n_SV)
        α of the support vectors.
    offset_ : float
        The outlier threshold ρ − τ (see above).
    rho_ : ndarray (1,)
        ρ = αᵀK̃α, the margin of the paper's hyperplane.
    intercept_ : ndarray (1,)
        −offset_.

    Examples
    --------
    >>> import numpy as np
    >>> from gpuksvm import OneClassCVM
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> oc = OneClassCVM(gamma=0.5, device="cpu", random_state=0).fit(X)
    >>> int(oc.predict([[8.0, 8.0]])[0])
    -1
    """

    _task = "one_class"

    def __init__(self, kernel: str | Kernel = "rbf", gamma: Any = "mean_dist", degree: float = 3,
                 coef0: float = 1.0, C: float = 1.0, eps: float = 1e-5, sample_size: int | None = 59,
                 n_tries: int = 7, max_iter: int = 100_000, max_core_size: int = 50_000,
                 eps_schedule: str = "anneal", inner_solver: str = "active_set", normalize: bool = False, device: str = "auto",
                 dtype: Any = None, random_state: Any = None, verbose: int = 0) -> None:
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.C = C
        self.eps = eps
        self.sample_size = sample_size
        self.n_tries = n_tries
        self.max_iter = max_iter
        self.max_core_size = max_core_size
        self.eps_schedule = eps_schedule
        self.inner_solver = inner_solver
        self.normalize = normalize
        self.device = device
        self.dtype = dtype
        self.random_state = random_state
        self.verbose = verbose

    @dask_dispatch(fit_cvm)
    def fit(self, X: Any, y: Any = None) -> "OneClassCVM":
        """Fit on X (y is ignored)."""
        self._check_params()
        rs = check_random_state(self.random_state)
        X, _ = validate_X(self, X, reset=True)
        dev, dt, kernel, Xd, xscale = self._prepare(X)
        return self._fit_rows(Xd, None, kernel, xscale, dev, dt, rs)

    def _check_params(self) -> None:
        self._check_common()

    def _set_one_class_fit(self, res: dict) -> None:
        self.offset_ = float(res["threshold"])

    @dask_dispatch()
    def score_samples(self, X: Any):
        """Σαᵢκ(xᵢ, x) (higher = more normal)."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(D[:, 0], kind)

    @dask_dispatch()
    def decision_function(self, X: Any):
        """score_samples − offset_: negative for outliers."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(D[:, 0] - self.offset_, kind)

    @dask_dispatch()
    def predict(self, X: Any):
        """+1 for inliers, −1 for outliers."""
        D, kind = self._kernel_expansion(X)
        return bk.as_kind(np.where(D[:, 0] - self.offset_ >= 0, 1, -1), kind)
