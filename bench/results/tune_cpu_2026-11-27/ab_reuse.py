import time, warnings, numpy as np, sys
warnings.simplefilter("ignore")
from bench.tune import _ijcnn1, SVC_GRID
from sklearn.model_selection import StratifiedKFold, GridSearchCV as SkGS
from sklearn.svm import SVC
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.solvers.smo import path
X, y, Xt, yt = _ijcnn1(5000, None)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
real_take = path._SpareGrams.take
res = {"reuse": [], "fresh": []}
svc = "svc" in sys.argv       # a 2,000-row SVC search before each
bench = "bench" in sys.argv   # scikit-learn's two searches of the bench before each
for rep in range(int(sys.argv[1])):
    for mode in ("fresh", "reuse") if rep % 2 == 0 else ("reuse", "fresh"):
        path._SpareGrams.take = real_take if mode == "reuse" else (lambda self: None)
        if svc:
            SkGS(SVC(), SVC_GRID, cv=cv, n_jobs=-1).fit(X[:2000], y[:2000])
        if bench:
            SkGS(KernelSVC(device="cpu"), SVC_GRID, cv=cv).fit(X, y)
            SkGS(SVC(cache_size=1000), SVC_GRID, cv=cv, n_jobs=-1).fit(X, y)
        t = time.perf_counter(); GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1).fit(X, y); res[mode].append(time.perf_counter() - t)
for m, v in res.items():
    print(m, " ".join(f"{x:.2f}" for x in v), "median", round(float(np.median(v)), 3))
