"""The scikit-learn estimators (:mod:`zipsgd.host.estimators`): scikit-learn's own estimator
checks on the ``float`` and ``golden`` backends, the fitted attributes, bad parameters, and the
same model as a training run on the same data."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numpy.testing import assert_allclose
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import zipsgd
from zipsgd import ZipSGDClassifier, ZipSGDRegressor
from zipsgd.host.datasets import open_source
from zipsgd.host.train import TrainSettings, scale_arrays, train_in_memory

#: Checks that cannot apply, by estimator class: none so far.  (A check that cannot apply is
#: listed here with its reason; parametrize_with_checks then marks it xfail by name.)
EXPECTED_FAILED: dict[str, dict[str, str]] = {"ZipSGDRegressor": {}, "ZipSGDClassifier": {}}


def expected_failed_checks(estimator) -> dict[str, str]:
    return EXPECTED_FAILED[type(estimator).__name__]


# Few epochs keep the whole set to seconds (the checks train on a few hundred samples).
@parametrize_with_checks([ZipSGDRegressor(backend="float", epochs=3),
                          ZipSGDClassifier(backend="float", epochs=3),
                          ZipSGDRegressor(backend="golden", epochs=3),
                          ZipSGDClassifier(backend="golden", epochs=3)],
                         expected_failed_checks=expected_failed_checks)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def _regression(n=400, d=6, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.arange(1, d + 1)
    y = X @ rng.normal(size=d) + 3.0 + 0.1 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("backend", ["float", "golden"])
def test_regressor_fits_and_reports(backend):
    X, y = _regression()
    model = ZipSGDRegressor(backend=backend, bits=6, epochs=10).fit(X, y)
    assert model.score(X, y) > 0.99
    assert model.coef_.shape == (6,) and isinstance(model.intercept_, float)
    assert len(model.loss_curve_) == model.n_iter_ == 10
    assert model.loss_curve_[-1] < model.loss_curve_[0]
    assert model.step_size_ == model.engine_report_["step_size"]["alpha"] > 0
    assert model.engine_report_["bytes_streamed"] > 0
    if backend == "golden":
        assert model.engine_report_["layout"] == "double6/W64"
        assert len(model.engine_report_["engine_loss"]) == 10


def test_golden_estimator_trains_the_model_of_a_training_run():
    """The estimator packs with zipsgd.quantize and trains on the packed epochs: the same
    model words as a training run that quantizes each epoch in memory."""
    labels, features = open_source("synthetic:8:300").arrays()
    model = ZipSGDRegressor(epochs=4, fit_intercept=False, step_size=0.25).fit(features, labels)
    run = train_in_memory(scale_arrays(labels, features),
                          TrainSettings(epochs=4, step_size=0.25))
    assert_allclose(model.coef_, run["model"]["coef"], rtol=0, atol=0)
    assert model.loss_curve_ == [e["loss"] for e in run["epochs"]]


def test_classifier_maps_labels_back():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    y = np.where(X @ [1.0, -2.0, 0.5, 0.0] + 0.3 > 0, "spam", "ham")
    clf = ZipSGDClassifier(epochs=8).fit(X, y)
    assert list(clf.classes_) == ["ham", "spam"]
    assert set(clf.predict(X)) <= {"ham", "spam"}
    assert clf.score(X, y) > 0.9
    assert_allclose(clf.decision_function(X), X @ clf.coef_ + clf.intercept_)
    assert np.array_equal(clf.predict(X) == "spam", clf.decision_function(X) > 0)


def test_estimators_work_in_pipelines_and_cross_validation():
    labels, features = open_source("sklearn:breast_cancer").arrays()
    pipe = make_pipeline(StandardScaler(), ZipSGDClassifier(backend="float", epochs=5))
    assert cross_val_score(pipe, features, labels, cv=3).mean() > 0.9


@pytest.mark.parametrize("name, value, allowed", [
    ("bits", 0, "an integer in 1..8"),
    ("epochs", 0, "an integer in 1.."),
    ("step_size", -1.0, "'auto' or a finite number > 0"),
    ("step_size", "big", "'auto' or a finite number > 0"),
    ("encoding", "triple", "one of double, single, raw32"),
    ("backend", "gpu", "a backend name"),
    ("bus_width", 100, "one of 64, 128, 256, 512"),
    ("model_format", (24,), "a pair (WL, FL)"),
    ("l2", np.nan, "a finite number >= 0"),
])
def test_bad_parameters_raise_value_error_at_fit(name, value, allowed):
    X, y = _regression(n=50)
    model = ZipSGDRegressor(**{name: value})  # accepted as given: checked at fit
    with pytest.raises(ValueError, match=f"^{name} must be {re.escape(allowed)}.*found"):
        model.fit(X, y)


def test_a_combination_out_of_range_is_a_value_error():
    X, y = _regression(n=50)
    with pytest.raises(ValueError, match="invalid parameters: .*grad"):
        ZipSGDRegressor(model_format=(32, 24), grad_format=(32, 2)).fit(X, y)


def test_a_diverging_step_is_a_value_error_suggesting_a_smaller_one():
    X, y = _regression(n=200)
    with pytest.raises(ValueError, match="step size 50 is too large: expected a smaller one"):
        ZipSGDRegressor(backend="float", step_size=50.0).fit(X, y)


def test_levels_train_on_golden2_and_need_it():
    """levels= packs a level table (optimal levels scale with minmax) and trains on the
    backend that decodes it; a backend that does not is refused at fit."""
    X, y = _regression()
    model = ZipSGDRegressor(backend="golden2", levels="optimal", bits=3, epochs=6).fit(X, y)
    assert model.score(X, y) > 0.95
    assert model.engine_report_["layout"] == "double3/W64"
    with pytest.raises(ValueError, match="needs a backend that decodes level tables"):
        ZipSGDRegressor(backend="golden", levels="uniform").fit(X, y)
    with pytest.raises(ValueError, match="^levels must be None or one of uniform, optimal"):
        ZipSGDRegressor(backend="golden2", levels="best").fit(X, y)


def test_the_package_exports_the_api():
    assert zipsgd.ZipSGDRegressor is ZipSGDRegressor
    assert {"quantize", "load", "PackedData", "ZipSGDClassifier"} <= set(zipsgd.__all__)
    with pytest.raises(AttributeError):
        zipsgd.no_such_name  # noqa: B018
