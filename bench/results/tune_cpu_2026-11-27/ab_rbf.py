import time, warnings, numpy as np, sys
warnings.simplefilter("ignore")
from bench.tune import _ijcnn1, SVC_GRID
from sklearn.model_selection import StratifiedKFold
from gpuksvm import KernelSVC
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.kernels import compiled_rbf
X, y, Xt, yt = _ijcnn1(5000, None)
cv = StratifiedKFold(5, shuffle=True, random_state=0)
GridSearchCV(KernelSVC(device="cpu"), {k: v[:2] for k, v in SVC_GRID.items()}, cv=2).fit(X[:300], y[:300])
res = {True: [], False: []}
for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4):
    for flag in (False, True):
        compiled_rbf.AVAILABLE = flag
        t = time.perf_counter(); s = GridSearchCV(KernelSVC(device="cpu"), SVC_GRID, cv=cv, n_jobs=-1).fit(X, y); res[flag].append(time.perf_counter() - t)
print("numpy  ", " ".join(f"{v:.2f}" for v in res[False]), "median", np.median(res[False]))
print("compiled", " ".join(f"{v:.2f}" for v in res[True]), "median", np.median(res[True]))
