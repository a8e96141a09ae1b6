"""GPU batched KernelSVC search vs the CPU engine, per (gamma, C): held-out accuracy, objective, steps."""
import sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
from gpuksvm.array import cuda_sources
DTYPES = (np.float32, np.float64)
if len(sys.argv) > 1 and sys.argv[1] == "fmad":
    base = cuda_sources.nvrtc_options
    cuda_sources.nvrtc_options = lambda src_dir=None: base(src_dir) + ("--fmad=false",)
    DTYPES = (np.float32,)
print("options:", cuda_sources.nvrtc_options())
from sklearn.model_selection import StratifiedKFold
from bench.tune import _ijcnn1, SVC_GRID
from gpuksvm import KernelSVC
from gpuksvm.array import backend as bk
from gpuksvm.array.validation import encode_classes
from gpuksvm.kernels.kernel import Kernel
from gpuksvm.solvers.smo import path
import os
X, y, Xt, yt = _ijcnn1(int(os.environ.get("DIAG_N", 5000)), 100)
X = np.ascontiguousarray(X)
classes, yidx = encode_classes(y)
splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(X, y))
folds = [path.GridProblem(rows=tr.astype(np.int64), weight=np.ones(tr.size), held_out=te.astype(np.int64)) for tr, te in splits]
Cs = SVC_GRID["C"]
def acc(res, f, C, g):
    tr, te = splits[f]
    m = KernelSVC.from_result(res, X[tr], Kernel("rbf", gamma=g), C=C, gamma=g, device="cpu")
    return float((np.asarray(bk.to_host(m.predict(X[te]))) == y[te]).mean())
worst = []
for g in SVC_GRID["gamma"]:
    k = Kernel("rbf", gamma=g)
    t = time.time(); cpu = path.solve_grids(X, yidx, classes, [path.GridJob(k, folds, Cs, 1e-3, 200 * 2**20)])[0]; tc = time.time() - t
    for dt in DTYPES:
        t = time.time(); gr = path.solve_grid_batched(X, yidx, classes, k, folds, Cs, tol=1e-3, device="cuda", dtype=dt); tg = time.time() - t
        print(f"gamma={g} {np.dtype(dt).name}: cpu {cpu.engine} {tc:.2f}s gpu {tg:.2f}s")
        for c, C in enumerate(Cs):
            da = [acc(gr[f][c], f, C, g) - acc(cpu.results[f][c], f, C, g) for f in range(5)]
            ob = [(float(gr[f][c].objective[0]), float(cpu.results[f][c].objective[0])) for f in range(5)]
            it = [int(gr[f][c].n_iter[0]) for f in range(5)]
            conv = [bool(gr[f][c].converged[0]) for f in range(5)]
            cap = [bool(gr[f][c].max_iter_reached[0]) for f in range(5)]
            nsv = [(int(gr[f][c].support.size), int(cpu.results[f][c].support.size)) for f in range(5)]
            print(f"  C={C:9.3f} mean dacc {np.mean(da):+.4f} dacc {[round(a, 4) for a in da]} "
                  f"obj(g,c) {[(round(a, 2), round(b, 2)) for a, b in ob][:2]} iters {it} conv {conv} cap {cap} nSV {nsv[:2]}")
            worst.append((abs(np.mean(da)), g, C, np.dtype(dt).name))
worst.sort(reverse=True)
print("worst", worst[:3])
_, g, C, dtn = worst[0]
for f in range(2):
    tr, te = splits[f]
    for dev in ("gpu", "cpu"):
        m = KernelSVC(device=dev, C=C, gamma=g, dtype=dtn if dev == "gpu" else None).fit(X[tr], y[tr])
        print(f"  independent {dev} fold {f} gamma={g} C={C:.3f}: acc {float((np.asarray(bk.to_host(m.predict(X[te]))) == y[te]).mean()):.4f} "
              f"obj {np.asarray(m.objective_)} n_iter {np.asarray(m.n_iter_)} nSV {int(np.sum(m.n_support_))} solver {getattr(m, 'solver_', None)}")
