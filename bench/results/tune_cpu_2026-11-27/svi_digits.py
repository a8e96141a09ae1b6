"""SVI on scikit-learn's digits: our search against scikit-learn's over SVI, the svc_digits grid, 5 folds, two rounds in one process (run: PYTHONPATH=. python bench/results/tune_cpu_2026-11-27/svi_digits.py)."""
import time, warnings, numpy as np
warnings.simplefilter("ignore")
from sklearn.datasets import load_digits
from sklearn.model_selection import StratifiedKFold, GridSearchCV as Sk, train_test_split
from gpuksvm import SVI
from gpuksvm.model_selection import GridSearchCV
X, y = load_digits(return_X_y=True)
X, Xt, y, yt = train_test_split(X / 16.0, y, test_size=1/3, random_state=0, stratify=y)
grid = {"gamma": [0.005, 0.01, 0.02], "C": [1.0, 10.0, 100.0]}
cv = StratifiedKFold(5, shuffle=True, random_state=0)
GridSearchCV(SVI(device="cpu"), {"gamma": [0.01], "C": [1.0, 10.0]}, cv=2).fit(X[:300], y[:300])
for r in range(2):
    a = GridSearchCV(SVI(device="cpu"), grid, cv=cv, n_jobs=-1); t = time.perf_counter(); a.fit(X, y); ta = time.perf_counter() - t
    b = Sk(SVI(device="cpu"), grid, cv=cv); t = time.perf_counter(); b.fit(X, y); tb = time.perf_counter() - t
    print(r, f"ours {ta:.2f} s  sklearn {tb:.2f} s  x{tb/ta:.2f}", a.best_params_ == b.best_params_,
          float(np.max(np.abs(a.cv_results_["mean_test_score"] - b.cv_results_["mean_test_score"]))), set(a.cv_results_["shared_work"]))
