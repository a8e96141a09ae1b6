"""The compiled SMO of 79173a3 (scalar passes through the row index) against the current one (every
pass vectorized: the wide layout, gathered row buffers, the shrunk rows' gradient through whole rows).

    PYTHONPATH=. python bench/results/tune_cpu_2026-11-27/ab_smo_layouts.py [rounds]

Part 1, the 120 problems of the 5,000-row ijcnn1 grid (5 folds × γ ∈ {0.5, 1, 2} × 8 C, C ascending,
each C but the smallest seeded from the one below it as the search seeds it), one thread: SMO thread
time, steps, and whether both give the same α and ∇ bit for bit.  Part 2, the search itself
(``GridSearchCV(KernelSVC(), ..., n_jobs=-1)`` with its refit) with either module.  Rounds alternate.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.model_selection import StratifiedKFold

from bench.tune import SVC_GRID, _ijcnn1
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.solvers.smo import gram_smo as current, path
from gpuksvm.solvers.smo.path import _seed

warnings.simplefilter("ignore")
BEFORE = "79173a3"


def _module(commit: str):
    src = subprocess.run(["git", "show", f"{commit}:gpuksvm/solvers/smo/gram_smo.py"], check=True,
                         capture_output=True, text=True).stdout
    src = src.replace("cache=True, nogil=True", "cache=False, nogil=True")   # compiled here, not cached
    fn = os.path.join(tempfile.mkdtemp(), f"gram_smo_{commit}.py")
    with open(fn, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(f"gram_smo_{commit}", fn)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
mods = {"before": _module(BEFORE), "now": current}
X, y, _, _ = _ijcnn1(5000, None)
X = np.ascontiguousarray(X.toarray() if hasattr(X, "toarray") else X, dtype=np.float64)
yy = np.where(y > 0, 1.0, -1.0)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
folds = [tr for tr, _ in cv.split(X, y)]
sq = (X * X).sum(1)
D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0)
grams = {g: np.exp(-g * D2) for g in SVC_GRID["gamma"]}
Cs = SVC_GRID["C"]
for m in mods.values():   # compile
    m.solve_on_gram(grams[1.0], folds[0][:200], yy[folds[0][:200]], np.full(200, 1.0))


def grid(m):
    out, steps = [], 0
    t = time.thread_time()
    for g in SVC_GRID["gamma"]:
        for tr in folds:
            prev = None
            for c, C in enumerate(Cs):
                start = (None, None) if prev is None else _seed(prev, C / Cs[c - 1])
                a, gr, it = m.solve_on_gram(grams[g], tr, yy[tr], np.full(tr.size, C), *start)
                prev = (a, gr)
                out.append(prev)
                steps += it
    return time.thread_time() - t, steps, out


T = {k: [] for k in mods}
for r in range(rounds):
    res = {}
    for name in (list(mods) if r % 2 == 0 else list(mods)[::-1]):
        dt, steps, out = grid(mods[name])
        T[name].append(dt)
        res[name] = out
        print(f"part 1, round {r + 1}: {name} {dt:.3f} s of SMO thread time, {steps} steps", flush=True)
    same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(res["before"], res["now"]))
    print(f"part 1, round {r + 1}: the same α and ∇ bit for bit: {same}", flush=True)
print("part 1 medians:", {k: round(float(np.median(v)), 3) for k, v in T.items()}, flush=True)

S = {k: [] for k in mods}
GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
for r in range(rounds + 2):
    for name in (list(mods) if r % 2 == 0 else list(mods)[::-1]):
        path.gram_smo = mods[name]
        t = time.perf_counter()
        s = GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1).fit(X, y)
        S[name].append(time.perf_counter() - t)
        print(f"part 2, round {r + 1}: {name} {S[name][-1]:.2f} s, best {s.best_params_}", flush=True)
path.gram_smo = current
print("part 2 medians:", {k: round(float(np.median(v)), 3) for k, v in S.items()})
