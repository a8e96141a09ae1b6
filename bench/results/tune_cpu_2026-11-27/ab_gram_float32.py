"""The KernelSVC search with its Gram matrix in float32 (the current engine: values computed in
float64, rounded once) against float64, alternating, in one process; then the SMO alone on the
grid's 120 problems with either matrix (one thread).

    PYTHONPATH=. python bench/results/tune_cpu_2026-11-27/ab_gram_float32.py [rounds]
"""
import sys
import time
import warnings

import numpy as np
from sklearn.model_selection import StratifiedKFold

from bench.tune import SVC_GRID, _ijcnn1
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.solvers.smo import gram_smo, path
from gpuksvm.solvers.smo.path import _seed

warnings.simplefilter("ignore")
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
X, y, _, _ = _ijcnn1(5000, None)
X = np.ascontiguousarray(X)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
original = path.KernelRows.__init__


def float64_rows(self, X, kernel, budget, rows=None, dtype=np.float64):
    original(self, X, kernel, budget, rows, np.float64)


GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
T, res = {"float32": [], "float64": []}, {}
for r in range(rounds + 2):
    for name in (("float32", "float64") if r % 2 == 0 else ("float64", "float32")):
        path.KernelRows.__init__ = original if name == "float32" else float64_rows
        t = time.perf_counter()
        s = GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1).fit(X, y)
        T[name].append(time.perf_counter() - t)
        res[name] = s
        print(f"search, round {r + 1}: {name} {T[name][-1]:.2f} s, best {s.best_params_}", flush=True)
path.KernelRows.__init__ = original
d = np.abs(res["float32"].cv_results_["mean_test_score"] - res["float64"].cv_results_["mean_test_score"]).max()
print("search medians:", {k: round(float(np.median(v)), 3) for k, v in T.items()}, f"max |Δ mean_test_score| {d:.4f}")

Xd = np.asarray(X, dtype=np.float64)
yy = np.where(y > 0, 1.0, -1.0)
folds = [tr for tr, _ in cv.split(X, y)]
sq = (Xd * Xd).sum(1)
D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * Xd @ Xd.T, 0)
grams = {"float64": {g: np.exp(-g * D2) for g in SVC_GRID["gamma"]}}
grams["float32"] = {g: G.astype(np.float32) for g, G in grams["float64"].items()}
for G in (grams["float64"][1.0], grams["float32"][1.0]):
    gram_smo.solve_on_gram(G, folds[0][:200], yy[folds[0][:200]], np.full(200, 1.0))
S = {"float32": [], "float64": []}
for r in range(rounds):
    for name in (("float32", "float64") if r % 2 == 0 else ("float64", "float32")):
        steps, t = 0, time.thread_time()
        for g in SVC_GRID["gamma"]:
            for tr in folds:
                prev = None
                for c, C in enumerate(SVC_GRID["C"]):
                    start = (None, None) if prev is None else _seed(prev, C / SVC_GRID["C"][c - 1])
                    a, gr, it = gram_smo.solve_on_gram(grams[name][g], tr, yy[tr], np.full(tr.size, C), *start)
                    prev, steps = (a, gr), steps + it
        S[name].append(time.thread_time() - t)
        print(f"SMO, round {r + 1}: {name} {S[name][-1]:.3f} s of thread time, {steps} steps", flush=True)
print("SMO medians:", {k: round(float(np.median(v)), 3) for k, v in S.items()})
