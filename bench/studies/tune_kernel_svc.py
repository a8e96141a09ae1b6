"""The KernelSVC shared-work search engine against scikit-learn's GridSearchCV(SVC), one process.

:func:`gpuksvm.model_selection.kernel_svc.search_kernel_svc` on the first rows
of ijcnn1, StratifiedKFold(5, shuffle=True, random_state=0), γ ∈ {0.5, 1, 2}
× C ∈ logspace(−1, 3, 8), against ``GridSearchCV(SVC(), same grid, same cv,
n_jobs=-1)``: wall time of each, every candidate's mean test accuracy, and
the best parameters.  This is a focused study of the engine alone (no search
class, no refit); ``bench/tune.py`` compares the full searches.

Usage: ``GPUKSVM_DATA_DIR=... python -m bench.studies.tune_kernel_svc [--n 5000]``.

Result (5,000 rows, 2-core CPU shared with other jobs, load average 7.9–8.7,
2026-11-26): the engine 9.43 s, with scoring every fit 10.92 s;
``GridSearchCV(SVC, n_jobs=-1)`` 47.26 s — 4.3× (5.0× for the fits alone);
every mean test accuracy within 0.0002 of scikit-learn's, the same best
parameters (γ = 0.5, C = 72.0, 0.9976).  Earlier runs of the same version at
load 4.7–5.8: 4.1× (10.83 s against 44.52 s).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

from gpuksvm.datasets import load_dataset
from gpuksvm.estimators.kernel_svc import KernelSVC
from gpuksvm.model_selection.kernel_svc import search_kernel_svc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    X, y = load_dataset("ijcnn1", n_samples=args.n)
    grid = {"gamma": [0.5, 1.0, 2.0], "C": list(np.logspace(-1, 3, 8))}
    cands = [{"gamma": g, "C": c} for g in grid["gamma"] for c in grid["C"]]
    splits = list(StratifiedKFold(args.folds, shuffle=True, random_state=0).split(X, y))
    print(f"ijcnn1 first {args.n} rows, {len(cands)} candidates x {len(splits)} folds; "
          f"load average {os.getloadavg()}")

    t0 = time.perf_counter()
    fits = list(search_kernel_svc(KernelSVC(device="cpu"), X, y, splits, cands))
    t_fit = time.perf_counter() - t0
    scores = np.zeros((len(cands), len(splits)))
    for fit in fits:
        te = splits[fit.split][1]
        scores[fit.candidate, fit.split] = fit.estimator.score(X[te], y[te])
    t_ours = time.perf_counter() - t0
    print(f"search_kernel_svc: {t_fit:.2f} s, with scoring {t_ours:.2f} s; load average {os.getloadavg()}")

    t0 = time.perf_counter()
    gs = GridSearchCV(SVC(), grid, cv=splits, n_jobs=-1).fit(X, y)
    t_skl = time.perf_counter() - t0
    print(f"GridSearchCV(SVC, n_jobs=-1): {t_skl:.2f} s; load average {os.getloadavg()}")

    ours = scores.mean(axis=1)
    theirs = np.array([gs.cv_results_["mean_test_score"][
        next(i for i, p in enumerate(gs.cv_results_["params"]) if p == c)] for c in cands])
    best = cands[int(np.argmax(ours))]
    print(f"speed-up {t_skl / t_ours:.1f}x; max |mean_test_score diff| {np.abs(ours - theirs).max():.4f}; "
          f"best ours {best} ({ours.max():.4f}), sklearn {gs.best_params_} ({gs.best_score_:.4f})")


if __name__ == "__main__":
    main()
