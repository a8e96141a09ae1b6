"""Declared values of model files: a file that loads predicts finite values without shape errors.

Each test changes one value of a genuine model file (header and arrays, with the
array table and checksums recomputed, so that only the content is wrong) and
checks that :func:`gpuksvm.persistence.io.load` refuses it with a ModelFormatError: non-finite
or out-of-range floats, integer attributes that do not add up, fewer than two
classes, one array member behind two attributes, attributes that disagree across
a model or a Pipeline, and conversions of hostile numbers.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from gpuksvm import CVM, LLSVM, SVI, KernelSVC, LinearSVM, OKFEBClassifier, OneClassCVM
from gpuksvm.persistence import io
from gpuksvm.persistence.model_format import ModelFormatError

from _model_files import rewritten

DATA = Path(__file__).parent / "data"
RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 2))
Y = (X[:, 0] * X[:, 1] > 0).astype(int)
Y3 = np.digitize(X[:, 0], [-0.5, 0.5])


def _saved(model, tmp_path) -> bytes:
    path = tmp_path / "genuine.npz"
    io.save(model, path)
    return path.read_bytes()


def _fitted(header: dict, *names: str) -> dict:
    """The ``fitted`` object of the node reached through the attributes ``names`` (nested estimators)."""
    node = header["model"]
    for name in names:
        node = node["fitted"][name]
    return node["fitted"]


def _array(header: dict, arrays: dict, *names: str) -> str:
    """The member name of the array attribute at ``names`` (the last one is the attribute)."""
    return _fitted(header, *names[:-1])[names[-1]]["array"]


def _load(blob: bytes, tmp_path) -> object:
    path = tmp_path / "changed.npz"
    path.write_bytes(blob)
    return io.load(path)


def _refused(blob: bytes, tmp_path, match: str) -> None:
    with pytest.raises(ModelFormatError, match=match):
        _load(blob, tmp_path)


def _set_array(*names: str, value=None, fn=None):
    """An edit that overwrites the array attribute at ``names`` with ``value`` (or ``fn(array)``)."""
    def edit(header, arrays):
        ref = _array(header, arrays, *names)
        a = arrays[ref].copy()
        if fn is not None:
            arrays[ref] = fn(a)
        else:
            a.reshape(-1)[0] = value
            arrays[ref] = a
    return edit


# ----------------------------------------------------------------------------- models
@pytest.fixture(scope="module")
def models():
    return {
        "linear": LinearSVM(device="cpu").fit(X, Y),
        "linear_proba": LinearSVM(probability=True, device="cpu", random_state=0).fit(X, Y3),
        "svc": KernelSVC(gamma=1.0, device="cpu").fit(X, Y),
        "svc_proba": KernelSVC(gamma=1.0, probability=True, device="cpu", random_state=0).fit(X, Y3),
        "svc_sparse": KernelSVC(gamma=1.0, device="cpu").fit(sp.csr_matrix(X), Y),
        "svc_poly": KernelSVC(kernel="poly", degree=2, gamma=0.5, coef0=1.0, device="cpu").fit(X, Y),
        "svi": SVI(gamma=1.0, probability=True, device="cpu", random_state=0).fit(X, Y3),
        "cvm": CVM(gamma=1.0, device="cpu", random_state=0).fit(X, Y),
        "ocvm": OneClassCVM(gamma=1.0, device="cpu", random_state=0).fit(X),
        "llsvm_f32": LLSVM(n_landmarks=6, dtype="float32", device="cpu", random_state=0).fit(X, Y),
        "okfeb": OKFEBClassifier(rank=3, n_landmarks=6, device="cpu", random_state=0).fit(X, Y),
        "pipeline": make_pipeline(StandardScaler(), LinearSVM(device="cpu")).fit(X, Y),
    }


def test_genuine_files_load(models, tmp_path):
    """The files every test below starts from load and predict finite values."""
    for name, model in models.items():
        loaded = _load(_saved(model, tmp_path), tmp_path)
        out = loaded.decision_function(X) if hasattr(loaded, "decision_function") else loaded.predict(X)
        assert np.isfinite(out).all(), name


# ----------------------------------------------------------------------------- finite floats
FLOAT_ARRAYS = [("linear", ("coef_",)), ("linear", ("intercept_",)), ("linear_proba", ("probA_",)),
                ("linear_proba", ("probB_",)), ("svc", ("dual_coef_",)), ("svc", ("intercept_",)),
                ("svc", ("support_vectors_",)), ("svi", ("intercept_",)), ("cvm", ("rho_",)),
                ("cvm", ("dual_coef_",)), ("llsvm_f32", ("landmarks_",)), ("llsvm_f32", ("map_",)),
                ("okfeb", ("extractor_", "subspace_", "C")), ("okfeb", ("extractor_", "subspace_", "A")),
                ("okfeb", ("_learner", "G")), ("pipeline", ())]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name,attr", FLOAT_ARRAYS, ids=[f"{n}-{'.'.join(a) or 'scaler'}" for n, a in FLOAT_ARRAYS])
def test_non_finite_float_attributes_are_refused(models, tmp_path, name, attr, bad):
    blob = _saved(models[name], tmp_path)
    if name == "pipeline":      # a step's attribute: the scaler's mean_
        def edit(header, arrays):
            step = header["model"]["params"]["steps"][0]["tuple"][1]
            arrays[step["fitted"]["mean_"]["array"]][0] = bad
        blob = rewritten(blob, edit)
    else:
        blob = rewritten(blob, _set_array(*attr, value=bad))
    _refused(blob, tmp_path, "not finite|finite|working range|beyond|out of")


@pytest.mark.parametrize("bad", [{"float": "nan"}, {"float": "inf"}, 1e300])
def test_offset_of_one_class_model_is_bounded(models, tmp_path, bad):
    def edit(header, arrays):
        _fitted(header)["offset_"] = bad
    _refused(rewritten(_saved(models["ocvm"], tmp_path), edit), tmp_path, "offset_")


def test_float32_rows_whose_squared_norms_overflow_are_refused(models, tmp_path):
    """3e38 is a finite float32, but ‖x‖² of such a landmark is inf in every kernel value."""
    blob = rewritten(_saved(models["llsvm_f32"], tmp_path), _set_array("landmarks_", value=3e38))
    _refused(blob, tmp_path, "landmarks_")


def test_values_checked_in_the_working_dtype(models, tmp_path):
    """A float32 model computes in float32: landmarks stored as float64 are cast there (3e38 is a
    fine float64 but its squared norm is inf in float32), and so are a CVM's float64 dual
    coefficients when its support vectors are float32."""
    def wider_landmarks(header, arrays):
        ref = _array(header, arrays, "landmarks_")
        arrays[ref] = np.full(arrays[ref].shape, 3e38)
    _refused(rewritten(_saved(models["llsvm_f32"], tmp_path), wider_landmarks), tmp_path, "landmarks_")

    cvm = CVM(gamma=1.0, dtype="float32", device="cpu", random_state=0).fit(X, Y)
    assert cvm.support_vectors_.dtype == np.float32 and cvm.dual_coef_.dtype == np.float64
    blob = rewritten(_saved(cvm, tmp_path), _set_array("dual_coef_", value=1e100))
    _refused(blob, tmp_path, "dual_coef_")


@pytest.mark.parametrize("degree", [1e300, 101, 1e6])
def test_polynomial_degree_is_declared_small(models, tmp_path, degree):
    def edit(header, arrays):
        _fitted(header)["kernel_"]["kernel"]["degree"] = degree
    _refused(rewritten(_saved(models["svc_poly"], tmp_path), edit), tmp_path, "degree")


def test_kernel_values_overflowing_on_the_stored_rows_are_refused(models, tmp_path):
    """A finite gamma that makes the polynomial kernel of the support vectors overflow."""
    def edit(header, arrays):
        _fitted(header)["kernel_"]["kernel"]["gamma"] = 1e200
    _refused(rewritten(_saved(models["svc_poly"], tmp_path), edit), tmp_path, "kernel values")


def test_pegasos_weights_that_overflow_are_refused(models, tmp_path):
    """lam = 5e-324 is positive, but the weights G/(lam·t) are inf."""
    def edit(header, arrays):
        _fitted(header, "_learner")["lam"] = 5e-324
    _refused(rewritten(_saved(models["okfeb"], tmp_path), edit), tmp_path, "lam")


# ----------------------------------------------------------------------------- one member per attribute
def test_one_array_member_behind_two_attributes_is_refused(models, tmp_path):
    """OK-FEB's sn and ra from one member would load as one object that partial_fit updates twice."""
    def edit(header, arrays):
        st = _fitted(header, "extractor_", "subspace_")
        del arrays[st["ra"]["array"]]
        st["ra"] = {"array": st["sn"]["array"]}
    _refused(rewritten(_saved(models["okfeb"], tmp_path), edit), tmp_path, "already used")


@pytest.mark.parametrize("labels", [np.array(["", ""], dtype="<U0"), np.array(["", ""], dtype="<U1"),
                                    np.array(["a", "a"]), np.array([0.0, np.nan])],
                         ids=["U0", "empty-strings", "duplicates", "nan"])
def test_class_labels_are_distinct_non_empty_values(models, tmp_path, labels):
    blob = rewritten(_saved(models["linear"], tmp_path), _set_array("classes_", fn=lambda a: labels))
    _refused(blob, tmp_path, "classes_")


CLASSIFIERS = ["linear", "svc", "svi", "cvm", "llsvm_f32", "okfeb"]


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_class_labels_in_another_order_are_refused(models, tmp_path, name):
    """``classes_`` is sorted as fit's np.unique left it: the same labels reversed loaded and
    predicted every row's label swapped (a silent wrong answer)."""
    def edit(header, arrays):
        model = models[name]
        labels = np.asarray(model.classes_)
        for ref, a in arrays.items():                  # every member holding the labels
            if a.dtype == labels.dtype and np.array_equal(a, labels):
                arrays[ref] = a[::-1].copy()
    _refused(rewritten(_saved(models[name], tmp_path), edit), tmp_path, "sorted")


def test_llsvm_labels_agree_with_its_linear_svm(models, tmp_path):
    """LLSVM's classes_ are its inner LinearSVM's: a file where they differ is inconsistent."""
    blob = rewritten(_saved(models["llsvm_f32"], tmp_path), _set_array("svm_", "classes_", fn=lambda a: a + 10))
    _refused(blob, tmp_path, "svm_.classes_: the labels differ")


# ----------------------------------------------------------------------------- only ModelFormatError
def test_v1_float_node_holding_a_huge_integer(tmp_path):
    def edit(header, arrays):
        header["tree"]["params"]["C"]["v"] = 10 ** 400
    _refused(rewritten((DATA / "v1_linear.npz").read_bytes(), edit), tmp_path, "float")


@pytest.mark.parametrize("value", [1e300, {"float": "nan"}, {"float": "inf"}, 2.5])
def test_legacy_cvm_scalar_that_is_not_a_count(models, tmp_path, value):
    """Files written before per-problem arrays held a binary CVM's n_iter_ as one number."""
    def edit(header, arrays):
        fitted = _fitted(header)
        del arrays[fitted["n_iter_"]["array"]]
        fitted["n_iter_"] = value
    _refused(rewritten(_saved(models["cvm"], tmp_path), edit), tmp_path, "n_iter_")


def test_legacy_cvm_scalar_count_still_loads(models, tmp_path):
    def edit(header, arrays):
        fitted = _fitted(header)
        del arrays[fitted["n_iter_"]["array"]]
        fitted["n_iter_"] = 7
    assert _load(rewritten(_saved(models["cvm"], tmp_path), edit), tmp_path).n_iter_.tolist() == [7]


@pytest.mark.parametrize("value", [{"strings": ["cpu", "cpu"]}, {"array": "a99"}], ids=["strings", "array"])
def test_device_attribute_given_an_array(models, tmp_path, value):
    def edit(header, arrays):
        arrays["a99"] = np.zeros(3)
        _fitted(header)["_fitted_on"] = value
        if "strings" in value:
            del arrays["a99"]
    _refused(rewritten(_saved(models["linear"], tmp_path), edit), tmp_path, "_fitted_on")


# ----------------------------------------------------------------------------- counts and consistency
@pytest.mark.parametrize("counts", [lambda n: np.array([n + 2, -2]), lambda n: np.array([2 ** 64 - 1, n + 1],
                                                                                         dtype=np.uint64)],
                         ids=["negative", "wrapping"])
def test_svc_n_support_is_non_negative_and_adds_up(models, tmp_path, counts):
    def edit(header, arrays):
        ref = _array(header, arrays, "n_support_")
        n_sv = arrays[_array(header, arrays, "support_")].shape[0]
        arrays[ref] = counts(n_sv)
    _refused(rewritten(_saved(models["svc"], tmp_path), edit), tmp_path, "n_support_")


@pytest.mark.parametrize("name", ["linear", "llsvm_f32", "okfeb"])
def test_a_classifier_has_two_classes_at_least(models, tmp_path, name):
    blob = rewritten(_saved(models[name], tmp_path), _set_array("classes_", fn=lambda a: a[:1]))
    _refused(blob, tmp_path, "at least 2")


def test_cvm_sv_scale_only_with_a_kernel_that_uses_it(models, tmp_path):
    def edit(header, arrays):
        n_sv = arrays[_array(header, arrays, "support_")].shape[0]
        arrays["a99"] = np.ones(n_sv)
        _fitted(header)["_sv_scale"] = {"array": "a99"}
    _refused(rewritten(_saved(models["cvm"], tmp_path), edit), tmp_path, "_sv_scale")


def test_cvm_ovo_shape_with_break_ties_is_refused(models, tmp_path):
    """CVM's parameter check refuses this pair (break_ties defaults to True) at fit and at load; a
    file holding it would otherwise load and then fail at every predict."""
    def edit(header, arrays):
        header["model"]["params"]["decision_function_shape"] = "ovo"
    _refused(rewritten(_saved(models["cvm"], tmp_path), edit), tmp_path, "break_ties")


@pytest.mark.parametrize("name", ["svc_proba", "svi"])
def test_platt_coefficients_one_per_binary_problem(models, tmp_path, name):
    def edit(header, arrays):
        for attr in ("probA_", "probB_"):
            ref = _array(header, arrays, attr)
            arrays[ref] = arrays[ref][:-1]
    _refused(rewritten(_saved(models[name], tmp_path), edit), tmp_path, "probA_")


def test_probability_needs_platt_coefficients(models, tmp_path):
    """probability=True makes predict_proba available: it needs the Platt coefficients."""
    def edit(header, arrays):
        header["model"]["params"]["probability"] = True
    _refused(rewritten(_saved(models["svc"], tmp_path), edit), tmp_path, "probability=True")


def test_problems_are_those_of_the_multiclass_scheme(models, tmp_path):
    """ovo and ovr have 3 problems each for 3 classes: the scheme must be the one fitted."""
    def edit(header, arrays):
        header["model"]["params"]["multi_class"] = "ovr"
    _refused(rewritten(_saved(models["svi"], tmp_path), edit), tmp_path, "problems_")


def test_pipeline_steps_agree_on_widths(models, tmp_path):
    """The scaler's output width must be the classifier's input width (each node alone is valid)."""
    def edit(header, arrays):
        scaler = header["model"]["params"]["steps"][0]["tuple"][1]["fitted"]
        scaler["n_features_in_"] = 3
        for attr in ("mean_", "var_", "scale_"):
            ref = scaler[attr]["array"]
            arrays[ref] = np.ones(3)
    _refused(rewritten(_saved(models["pipeline"], tmp_path), edit), tmp_path, "features")


def test_scaler_statistics_its_parameters_use(models, tmp_path):
    def no_mean(header, arrays):
        scaler = header["model"]["params"]["steps"][0]["tuple"][1]["fitted"]
        del arrays[scaler["mean_"]["array"]]
        scaler["mean_"] = None
    _refused(rewritten(_saved(models["pipeline"], tmp_path), no_mean), tmp_path, "with_mean")

    for bad in (0.0, 1e-320, 7.0):       # zero, dividing moderate rows to inf, not √var_
        def bad_scale(header, arrays):
            scaler = header["model"]["params"]["steps"][0]["tuple"][1]["fitted"]
            arrays[scaler["scale_"]["array"]][0] = bad
        _refused(rewritten(_saved(models["pipeline"], tmp_path), bad_scale), tmp_path, "scale_")


def test_okfeb_matrix_that_must_be_positive_definite(models, tmp_path):
    def edit(header, arrays):
        ref = _array(header, arrays, "extractor_", "subspace_", "C")
        arrays[ref] = -np.eye(arrays[ref].shape[0], dtype=arrays[ref].dtype)
    _refused(rewritten(_saved(models["okfeb"], tmp_path), edit), tmp_path, "positive definite")


def test_okfeb_stored_norms_match_the_stored_vectors(models, tmp_path):
    """The kernels read ‖s‖² from sn: a smaller one turns exp(−γ‖x − s‖²) into a growing exponential."""
    blob = rewritten(_saved(models["okfeb"], tmp_path),
                     _set_array("extractor_", "subspace_", "sn", fn=lambda a: a * 0.0))
    _refused(blob, tmp_path, "sn")


def test_sparse_index_pointer_is_checked_entry_by_entry(models, tmp_path):
    """indptr ending in 0 passes SciPy's check_format (it skips its index checks when the last
    pointer is 0), and SciPy's compiled routines then read past the arrays."""
    def edit(header, arrays):
        ref = _fitted(header)["support_vectors_"]["indptr"]["array"]
        arrays[ref] = arrays[ref].copy()
        arrays[ref][::2] = 0
        arrays[ref][-1] = 0
    _refused(rewritten(_saved(models["svc_sparse"], tmp_path), edit), tmp_path, "indptr")


# ----------------------------------------------------------------------------- version 1
def test_v1_header_class_is_the_tree_class(tmp_path):
    def edit(header, arrays):
        header["class"] = "gpuksvm.llsvm.LLSVM"
    _refused(rewritten((DATA / "v1_linear.npz").read_bytes(), edit), tmp_path, "class")


def test_rewritten_unchanged_file_still_loads(tmp_path):
    """The helper itself: a file rewritten without changes loads (so refusals above are the edits')."""
    blob = rewritten((DATA / "v1_linear.npz").read_bytes(), lambda header, arrays: None)
    np.testing.assert_array_equal(_load(blob, tmp_path).decision_function(np.load(DATA / "v1_X.npy")),
                                  np.load(DATA / "v1_linear_decision.npy"))
