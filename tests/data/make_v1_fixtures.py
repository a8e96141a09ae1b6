"""Writes the format-version-1 fixtures of tests/data with gpuksvm 87b6a68 (the last v1 writer)."""
import json, os, sys, zipfile
import numpy as np
from gpuksvm.persistence import io
from gpuksvm import LinearSVM, OKFEBClassifier, LLSVM
out = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(60, 2)); y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
np.save(os.path.join(out, "v1_X.npy"), X)
lin = LinearSVM(device="cpu", random_state=0).fit(X, y)
io.save(lin, os.path.join(out, "v1_linear.npz"))
np.save(os.path.join(out, "v1_linear_decision.npy"), lin.decision_function(X))
ok = OKFEBClassifier(gamma=1.0, rank=4, n_landmarks=8, device="cpu", random_state=0).fit(X, y)
io.save(ok, os.path.join(out, "v1_okfeb_classifier.npz"))
np.save(os.path.join(out, "v1_okfeb_classifier_decision.npy"), ok.decision_function(X))
ll = LLSVM(gamma=1.0, n_landmarks=5, device="cpu", random_state=0).fit(X, y)
io.save(ll, os.path.join(out, "v1_llsvm.npz"))
np.save(os.path.join(out, "v1_llsvm_decision.npy"), ll.decision_function(X))
# the issue-14 exploit: a genuine model plus a private attribute whose class deletes a file when freed
victim = "VICTIM_PATH_PLACEHOLDER"
payload = {"t": "object", "cls": "gpuksvm.persistence.io:tempfile._TemporaryFileCloser",
           "state": {"name": {"t": "str", "v": victim},
                     "file": {"t": "object", "cls": "gpuksvm.persistence.io:tempfile._TemporaryFileCloser", "state": {}},
                     "delete": {"t": "bool", "v": True}}}
src = os.path.join(out, "v1_linear.npz")
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(out, "v1_exploit.npz"), "w") as zout:
    for name in zin.namelist():
        data = zin.read(name)
        if name == "header.json":
            h = json.loads(data)
            h["tree"]["state"]["_payload"] = payload
            data = json.dumps(h).encode()
        zout.writestr(name, data)
