"""A/B in one process: the KernelSVC search engine with C chains (B) against one chain per fold (A)."""
import os, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from sklearn.model_selection import StratifiedKFold
import gpuksvm
from gpuksvm.datasets import load_dataset, subsample
from gpuksvm.model_selection import GridSearchCV
from gpuksvm.solvers.smo import path

real = path.c_chains
def one_chain(Cs, n_chains):
    return real(Cs, 1)

grid = {"gamma": [0.5, 1.0, 2.0], "C": [float(c) for c in np.logspace(-1, 3, 8)]}
cv = StratifiedKFold(5, shuffle=True, random_state=0)
sizes = [int(a) for a in sys.argv[1].split(",")]
rounds = [int(a) for a in sys.argv[2].split(",")]
budgets = sys.argv[3].split(",")
print("cores", os.cpu_count(), flush=True)
for n, reps, budget in zip(sizes, rounds, budgets):
    rng = np.random.default_rng(0)
    X, y = subsample(*load_dataset("ijcnn1", "train"), n, rng)
    X = np.ascontiguousarray(X)
    GridSearchCV(gpuksvm.KernelSVC(device="cpu"), {"gamma": [1.0], "C": [1.0, 10.0]}, cv=2).fit(X[:300], y[:300])
    times = {"A one chain": [], "B chains": []}
    scores = {}
    with gpuksvm.config_context(cpu_memory_budget=budget):
        for r in range(reps):
            for name in times:
                path.c_chains = one_chain if name.startswith("A") else real
                s = GridSearchCV(gpuksvm.KernelSVC(device="cpu"), grid, cv=cv, n_jobs=-1)
                t = time.perf_counter(); s.fit(X, y); dt = time.perf_counter() - t
                times[name].append(dt); scores[name] = s
                print(f"  n={n} round {r + 1} {name}: {dt:.2f} s best {s.best_params_} CV {s.best_score_:.4f}", flush=True)
    path.c_chains = real
    d = np.max(np.abs(scores["A one chain"].cv_results_["mean_test_score"] - scores["B chains"].cv_results_["mean_test_score"]))
    print(f"n={n} budget={budget}: medians A {np.median(times['A one chain']):.2f} s, B {np.median(times['B chains']):.2f} s; "
          f"A/B {np.median(times['A one chain']) / np.median(times['B chains']):.2f}; max|Δ mean_test_score| {d:.4f}", flush=True)
