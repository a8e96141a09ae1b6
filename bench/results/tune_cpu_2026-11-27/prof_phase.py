import time, warnings, numpy as np
warnings.simplefilter("ignore")
from bench.tune import _ijcnn1, SVC_GRID
from sklearn.model_selection import StratifiedKFold
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.model_selection import kernel_svc as ks
X, y, Xt, yt = _ijcnn1(5000, None)
X = np.ascontiguousarray(X)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
T = {}
real = ks.solve_grids
def timed(*a, **k):
    t = time.perf_counter(); r = real(*a, **k); T["engine"] = time.perf_counter() - t
    T["kernel_s"] = sum(s.kernel_seconds for s in r); T["solve_s"] = sum(sum(map(sum, s.seconds)) for s in r)
    return r
ks.solve_grids = timed
for rep in range(3):
    t = time.perf_counter(); s = GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1, refit=False).fit(X, y); tot = time.perf_counter() - t
    print(f"total {tot:.2f} engine {T['engine']:.2f} (thread: kernel {T['kernel_s']:.2f} solves {T['solve_s']:.2f}) rest {tot - T['engine']:.2f}")
