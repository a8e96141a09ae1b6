"""CVM exact search on the GPU: core sets across row orders vs the CPU (argv[1] == 'fmad': NVRTC --fmad=false)."""
import sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from gpuksvm.array import cuda_sources
if len(sys.argv) > 1 and sys.argv[1] == "fmad":
    base = cuda_sources.nvrtc_options
    cuda_sources.nvrtc_options = lambda src_dir=None: base(src_dir) + ("--fmad=false",)
import cupy as cp
from gpuksvm import CVM
from gpuksvm.datasets import make_checkerboard
from gpuksvm.array import backend as bk
print("options:", cuda_sources.nvrtc_options())
X, y = make_checkerboard(1000, random_state=0)
Xt, yt = make_checkerboard(500, random_state=1)
for ss in (None, 59):
    kw = dict(gamma=30.0, C=100.0, sample_size=ss, dtype=np.float64, random_state=0)
    ref = CVM(device="cpu", **kw).fit(X, y)
    want = np.sort(ref.core_set_[0]); dec = ref.decision_function(Xt)
    print(f"sample_size={ss}: cpu core set {want.size}, iters {getattr(ref, 'n_iter_', None)}, acc {ref.score(Xt, yt):.4f}")
    rng = np.random.default_rng(2)
    first = None
    for name, idx in [("identity", np.arange(1000)), ("perm", rng.permutation(1000)), ("sorted", np.argsort(y, kind="stable"))]:
        g = CVM(device="gpu", **kw).fit(cp.asarray(X[idx]), cp.asarray(y[idx]))
        cs = np.sort(idx[g.core_set_[0]])
        gd = np.asarray(bk.to_host(g.decision_function(Xt)))
        first = cs if first is None else first
        acc = float((np.asarray(bk.to_host(g.predict(Xt))) == yt).mean())
        print(f"  gpu {name:8s} core {cs.size} ==cpu {np.array_equal(cs, want)} ==gpu-identity {np.array_equal(cs, first)}"
              f" first-diff-pos {int(np.argmax(cs[:min(cs.size, want.size)] != want[:min(cs.size, want.size)]))}"
              f" max|dec-cpu| {np.abs(gd - dec).max():.3e} acc {acc:.4f}")
