"""OK-FEB search: ours on one thread and on two against scikit-learn's search over OKFEBClassifier, the bench grid, 5,000 ijcnn1 rows, two rounds in one process."""
import time, warnings, numpy as np
warnings.simplefilter("ignore")
from sklearn.model_selection import StratifiedKFold, GridSearchCV as Sk
from gpuksvm import OKFEBClassifier
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.datasets import load_dataset, subsample
X, y = subsample(*load_dataset("ijcnn1", "train"), 5000, np.random.default_rng(0))
grid = {"gamma": [1.0, 2.0], "alpha": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2]}
cv = StratifiedKFold(5, shuffle=True, random_state=0)
est = OKFEBClassifier(device="cpu", random_state=0)
GridSearchCV(est, {"gamma":[1.0], "alpha":[1e-4,1e-3]}, cv=2).fit(X[:300], y[:300])
for r in range(2):
    for name, mk in (("ours n_jobs=1", lambda: GridSearchCV(est, grid, cv=cv, n_jobs=1)),
                     ("ours n_jobs=-1", lambda: GridSearchCV(est, grid, cv=cv, n_jobs=-1)),
                     ("sklearn n_jobs=None", lambda: Sk(est, grid, cv=cv))):
        s = mk(); t = time.perf_counter(); s.fit(X, y); dt = time.perf_counter() - t
        print(r, name, round(dt, 2), s.best_params_, round(s.best_score_, 4), np.round(s.cv_results_["mean_test_score"], 4) if r == 0 and name.startswith("sk") else "")
