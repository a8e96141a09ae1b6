"""The KernelSVC search without refit, its Gram matrix float32 (the engine's) or float64, alternating, in one process:
time, engine wall time, kernel and solve thread time.

    PYTHONPATH=. python bench/results/tune_cpu_2026-11-27/ab_gram_float32_search.py [rounds]
"""
import sys, time, warnings, numpy as np
warnings.simplefilter("ignore")
from sklearn.model_selection import StratifiedKFold
from bench.tune import SVC_GRID, _ijcnn1
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.model_selection import kernel_svc as ks
from gpuksvm.solvers.smo import path
X, y, _, _ = _ijcnn1(5000, None); X = np.ascontiguousarray(X)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
original = path.KernelRows.__init__
def f64(self, X, kernel, budget, rows=None, dtype=np.float64): original(self, X, kernel, budget, rows, np.float64)
K = {}
real = ks.solve_grids
def timed(*a, **k):
    t = time.perf_counter(); r = real(*a, **k); K["e"] = time.perf_counter() - t
    K["k"] = sum(s.kernel_seconds for s in r); K["s"] = sum(sum(map(sum, s.seconds)) for s in r); return r
ks.solve_grids = timed
GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
T = {"f32": [], "f64": []}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    for name in (("f32", "f64") if r % 2 == 0 else ("f64", "f32")):
        path.KernelRows.__init__ = original if name == "f32" else f64
        t = time.perf_counter(); GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1, refit=False).fit(X, y); T[name].append(time.perf_counter() - t)
        print(r, name, round(T[name][-1], 2), "engine", round(K["e"], 2), "kernel", round(K["k"], 2), "solves", round(K["s"], 2), flush=True)
print({k: round(float(np.median(v)), 3) for k, v in T.items()})
