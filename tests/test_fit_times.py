"""``fit_times_``, the one vocabulary: seconds per stage of the fit, for every method that records it."""
from __future__ import annotations

import pytest

from _estimator_zoo import compare_fitted, fitted_zoo_model
from gpuksvm.persistence import io as model_io

RECORDS = {"cvm": ("prepare", "core_sets", "model"), "cvm_multiclass": ("prepare", "core_sets", "model"),
           "one_class_cvm": ("prepare", "core_sets", "model"),
           "llsvm": ("landmarks", "map", "features", "svm"), "svi": ("subsets", "sub_svms", "ensemble")}


@pytest.mark.parametrize("name", list(RECORDS))
def test_fit_times_are_seconds_per_stage_and_are_saved(name, tmp_path):
    est, _ = fitted_zoo_model(name)
    times = est.fit_times_
    assert isinstance(times, dict) and set(RECORDS[name]) <= set(times), times
    assert all(isinstance(v, float) and v >= 0.0 for v in times.values()), times
    model_io.save(est, tmp_path / "m.gpuksvm")
    compare_fitted(est, model_io.load(tmp_path / "m.gpuksvm"))
