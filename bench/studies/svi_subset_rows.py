"""How large must SVI's sub-SVMs be?  The study behind ``min_subset_rows`` and the check (issue 15).

For each dataset and each sub-SVM size r of a grid, SVI's ensemble is fitted
with every sub-SVM holding r rows (M = 5 subsets per binary problem), then
steps 4–5 give the paper's closed-form model, which is scored on the test set
next to scikit-learn's SVC on the same rows (fitted once per dataset, in the
same run).  For every ensemble the held-out check of
:func:`gpuksvm.solvers.svi.steps.ensemble_check` is computed as well — the
sub-models' pairwise disagreement D and the closed-form model's accuracy
against the sub-models' leave-subset-out average on held-out rows — without
acting on it, so that its thresholds can be set against the accuracy gap to
SVC it is meant to detect.  The model is not capped (``max_margin_sv=None``):
the study is of the method, not of the cap.

Datasets (γ, C as in ``bench/svi.py``): ijcnn1, adult, the two-sine data,
a 4×4 checkerboard with 10 % of its training labels flipped (γ = 20, C = 10,
clean test set) and digits (one-vs-one pairs of ≈ 240 rows: r ≤ 40).

    python -m bench svi_subset_rows --scale paper --device cpu      # through the harness
    python bench/studies/svi_subset_rows.py --scale paper --device cpu      # ≈ 30 min on 2 busy cores
    python bench/studies/svi_subset_rows.py                                 # --scale small

Writes ``bench/results/svi_subset_rows.json``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/
from _timing import machine_info, print_table, write_json  # noqa: E402
from svi import PARAMS, load  # noqa: E402  (bench/svi.py)

from gpuksvm.array import backend as bk  # noqa: E402
from gpuksvm.solvers.svi import algorithm as svi_solver  # noqa: E402
from gpuksvm.estimators.svi import SVI  # noqa: E402

PARAMS = dict(PARAMS, board={"gamma": 20.0, "C": 10.0})
GRID = {
    "paper": {"ijcnn1": [500, 1000, 2000, 5000], "adult": [1000, 2000, 3256, 6000],
              "two_sines": [200, 500, 1000, 2000, 4000], "board": [1000, 2000, 4000],
              "digits": [20, 40]},
    "small": {"ijcnn1": [200, 500, 1000, 2000], "adult": [200, 500, 800, 1600],
              "two_sines": [50, 100, 200, 400], "board": [200, 500, 1000], "digits": [20, 40]},
}
N_SUBSETS = 5


def load_any(name: str, scale: str):
    if name == "board":
        from gpuksvm.datasets import make_checkerboard

        n = 20_000 if scale == "paper" else 5_000
        X, y = make_checkerboard(n, flip=0.1, random_state=0)
        Xt, yt = make_checkerboard(10_000, random_state=1)
        return X, y, Xt, yt
    return load(name, scale, 0)


def study(name: str, scale: str, device: str, sizes: list[int], seeds: list[int]) -> dict:
    from sklearn.svm import SVC

    X, y, Xt, yt = load_any(name, scale)
    params = PARAMS[name]
    t0 = time.perf_counter()
    svc = SVC(kernel="rbf", cache_size=1000, **params).fit(X, y)
    ref = {"accuracy": float(svc.score(Xt, yt)), "n_sv": int(svc.support_.size),
           "fit_s": time.perf_counter() - t0}
    print(f"  {name}: SVC {ref}", flush=True)
    dev = bk.resolve_device(device)
    Xtd = bk.to_device(Xt, dev) if dev.is_gpu else Xt
    rows = []
    for r in sizes:
        for seed in seeds:
            # every sub-SVM of every problem gets r rows: θ tiny, min_subset_rows = r
            est = SVI(kernel="rbf", device=device, random_state=seed, n_subsets=N_SUBSETS,
                      subset_rate=1e-9, min_subset_rows=r, ensemble_check=False, max_margin_sv=None,
                      **params)
            est._check_params()
            t0 = time.perf_counter()
            Xv, _y, classes, yidx, Xd, kernel, dev_, dt = est._prepare(X, y)
            ens = svi_solver.ensemble_stage(Xv, Xd, yidx, kernel, est._solver_params(), dev_, dt)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", svi_solver.ExactFallbackWarning)
                model = svi_solver.margin_stage(ens)
            fit_s = time.perf_counter() - t0
            est._store(model, classes, dev, dt)
            acc = float(np.mean(np.asarray(bk.to_host(est.predict(Xtd))) == yt))
            ens_p = [p for p in range(len(model.problems)) if not model.solved_exactly[p]]
            checks = [svi_solver.check_problem(ens, p, model.margin_rows[p], model.coef[p][
                np.searchsorted(model.support, model.margin_rows[p])], float(model.intercepts[p]))
                for p in ens_p]
            D = [c["disagreement"] for c in checks if c["disagreement"] is not None]
            loss = [100 * (c["accuracy_ensemble"] - c["accuracy_model"]) for c in checks
                    if c["accuracy_model"] is not None]
            row = {"dataset": name, "rows_per_sub_svm": r, "seed": seed, "accuracy": acc,
                   "gap_vs_SVC_pp": 100 * (ref["accuracy"] - acc), "n_sv": int(model.support.size),
                   "fit_s": fit_s, "n_problems": len(model.problems), "n_ensembles": len(ens_p),
                   "disagreement_pct": 100 * float(np.mean(D)) if D else None,
                   "disagreement_max_pct": 100 * float(np.max(D)) if D else None,
                   "loss_vs_ensemble_pp": float(np.mean(loss)) if loss else None,
                   "loss_vs_ensemble_max_pp": float(np.max(loss)) if loss else None,
                   "check_passed": f"{sum(c['passed'] for c in checks)}/{len(checks)}"}
            rows.append(row)
            print(f"  {name:9s} r={r:<6d} seed={seed} acc={acc:.4f} gap={row['gap_vs_SVC_pp']:.2f}pp "
                  f"D={row['disagreement_pct']} loss={row['loss_vs_ensemble_pp']} "
                  f"passed={row['check_passed']}", flush=True)
    return {"dataset": name, "params": params, "n_train": int(X.shape[0]), "n_test": int(Xt.shape[0]),
            "svc": ref, "rows": rows}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="small", choices=["small", "paper"])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--datasets", default="ijcnn1,adult,two_sines,board,digits")
    ap.add_argument("--seeds", default="0,1")
    args = ap.parse_args(argv)
    device = "cuda" if args.device == "gpu" else args.device
    seeds = [int(s) for s in args.seeds.split(",") if s]
    t0 = time.perf_counter()
    results = [study(name, args.scale, device, GRID[args.scale][name], seeds)
               for name in args.datasets.split(",") if name]
    table = [dict(r, svc_accuracy=res["svc"]["accuracy"]) for res in results for r in res["rows"]]
    print_table(table, ["dataset", "rows_per_sub_svm", "seed", "svc_accuracy", "accuracy", "gap_vs_SVC_pp",
                        "disagreement_pct", "loss_vs_ensemble_pp", "check_passed", "n_sv", "fit_s"])
    payload = {"benchmark": "svi_subset_rows", "scale": args.scale, "device_arg": args.device,
               "machine": machine_info(device), "n_subsets": N_SUBSETS, "seeds": seeds,
               "rows": table,
               "datasets": {res["dataset"]: {"params": res["params"], "n_train": res["n_train"],
                                             "n_test": res["n_test"],
                                             **{f"svc_{k}": v for k, v in res["svc"].items()}}
                            for res in results},
               "wall_s": time.perf_counter() - t0,
               "load_average_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
               "note": "2-core CPU shared with other jobs: times are for comparison within the run only"}
    print(f"wrote {write_json('svi_subset_rows', payload)}")
    return payload


if __name__ == "__main__":
    main()
