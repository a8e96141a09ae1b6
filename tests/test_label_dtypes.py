"""A classifier that fits can be saved: labels are kept in a dtype the model file holds.

``validation.storable_labels`` converts float16, long fixed-width strings and
object strings exactly, and refuses at ``fit`` what the file cannot hold
(datetime64, timedelta64, ...), instead of a ``save`` that fails after
the fit.  Every classifier of the zoo: fit, save, load, same predictions.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from _estimator_zoo import ZOO, estimator_for, zoo_data
from gpuksvm.persistence import io as model_io

from gpuksvm.array.validation import MAX_LABEL_CHARS, encode_classes, storable_labels

CLASSIFIERS = [name for name, (_, _, _, task) in ZOO.items() if task in ("binary", "multiclass", "blocks")]


def _fit(est, task, X, y):
    if task == "blocks":
        return est.fit([(X[a:a + 100], y[a:a + 100]) for a in range(0, X.shape[0], 100)])
    return est.fit(X, y)


def _relabel(y, kind):
    codes = np.searchsorted(np.unique(y), y)
    if kind == "float16":
        return (2 * codes + 1).astype(np.float16)
    if kind == "long-str":
        names = np.array([chr(ord("a") + c) * (MAX_LABEL_CHARS + 1 + c) for c in range(codes.max() + 1)])
        return names[codes]
    if kind == "datetime64":
        return codes.astype("datetime64[D]")
    if kind == "timedelta64":
        return codes.astype("timedelta64[s]")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["float16", "long-str"])
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_labels_the_file_cannot_hold_as_given_are_saved_exactly(name, kind, tmp_path):
    est, task = estimator_for(name)
    X, y = zoo_data("binary" if task == "blocks" else task, n=150)
    labels = _relabel(y, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _fit(est, task, X, labels)
        pred = est.predict(X)
        assert set(pred.tolist()) <= set(labels.tolist())      # the same label values
        np.testing.assert_array_equal(np.sort(np.unique(labels)).tolist(), est.classes_.tolist())
        model_io.save(est, tmp_path / "m.gpuksvm")
        back = model_io.load(tmp_path / "m.gpuksvm")
        np.testing.assert_array_equal(back.predict(X), pred)
    assert back.classes_.dtype == est.classes_.dtype


@pytest.mark.parametrize("kind", ["datetime64", "timedelta64"])
@pytest.mark.parametrize("name", CLASSIFIERS)
def test_labels_the_file_cannot_hold_are_refused_at_fit(name, kind):
    est, task = estimator_for(name)
    X, y = zoo_data("binary" if task == "blocks" else task, n=150)
    with pytest.raises(ValueError, match="cannot be stored in a model file.*Convert y"):
        _fit(est, task, X, _relabel(y, kind))
    assert not hasattr(est, "classes_")


def test_storable_labels_keeps_what_the_file_holds():
    for classes in (np.array([False, True]), np.array([1, 2], dtype=np.uint8), np.array([-1.5, 2.0]),
                    np.array([0.5, 1.0], dtype=np.float32), np.array(["a", "bc"]),
                    np.array(["a", "b"], dtype=object)):
        kept = storable_labels(classes)
        assert kept.dtype == classes.dtype
        np.testing.assert_array_equal(kept, classes)
    wide = storable_labels(np.array([1.5, 2.25], dtype=np.float16))
    assert wide.dtype == np.float32 and wide.tolist() == [1.5, 2.25]
    assert storable_labels(np.array([np.str_("a"), "b"], dtype=object)).tolist() == ["a", "b"]
    assert [type(s) for s in storable_labels(np.array([np.str_("a")], dtype=object))] == [str]
    assert storable_labels(np.array([1, 2], dtype=object)).dtype == np.int64
    with pytest.raises(ValueError, match="cannot be stored"):
        storable_labels(np.array([1, "a"], dtype=object))
    classes, idx = encode_classes(np.array([2.0, 1.0, 2.0], dtype=np.float16))
    assert classes.dtype == np.float32 and idx.tolist() == [1, 0, 1]
