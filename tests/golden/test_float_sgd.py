"""The float64 reference (:mod:`zipsgd.golden.float_sgd`) against independent computations.

Everything here is float arithmetic, so comparisons use ``allclose`` with tolerances near
machine precision (bit-exact claims belong to the engine tests, not here).  The references are
numpy's ``lstsq``/``pinv``, scikit-learn's ``Ridge``, the lasso optimality (subgradient)
conditions, the analytic soft-threshold and gradient steps written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from zipsgd.golden.float_sgd import (
    SgdSettings,
    closed_form_optimum,
    objective,
    prox,
    proximal_gradient_optimum,
    sgd_epoch,
)
from zipsgd.spec.errors import ConfigError


def regression(k: int = 64, n: int = 5, seed: int = 0, noise: float = 0.1):
    """A small least-squares problem in the scaled range (features in [-1, 1])."""
    rng = np.random.default_rng(seed)
    features = rng.uniform(-1.0, 1.0, size=(k, n))
    truth = rng.normal(size=n) / np.sqrt(n)
    labels = features @ truth + noise * rng.normal(size=k)
    return features, labels


def gradient(features, labels, model, l2=0.0):
    """Gradient of the smooth part of ``F``: ``A^T (A x - b) / K + l2 x``."""
    return features.T @ (features @ model - labels) / features.shape[0] + l2 * model


# ---------------------------------------------------------------------------------------------
# objective and optimum


def test_objective_by_hand():
    features = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    labels = np.array([1.0, 0.0, 3.0])
    model = np.array([2.0, -1.0])
    # residuals 1, -2, -2 -> 1/(2*3) * 9 = 1.5; l2/2 * 5 = 0.25*5; l1 * 3
    assert objective(features, labels, model) == pytest.approx(1.5)
    assert objective(features, labels, model, l2=0.5, l1=0.1) == pytest.approx(
        1.5 + 1.25 + 0.3)


def test_closed_form_equals_lstsq():
    features, labels = regression()
    expected = np.linalg.lstsq(features, labels, rcond=None)[0]
    model = closed_form_optimum(features, labels)
    assert_allclose(model, expected, rtol=1e-12, atol=1e-14)
    # ... and it is a stationary point of F.
    assert_allclose(gradient(features, labels, model), 0.0, atol=1e-13)


def test_closed_form_rank_deficient_is_minimum_norm():
    features, labels = regression(n=4)
    features = np.column_stack([features, features[:, 0]])  # duplicated column: rank 4 of 5
    model = closed_form_optimum(features, labels)
    assert_allclose(model, np.linalg.pinv(features) @ labels, rtol=1e-10, atol=1e-12)
    assert model[0] == pytest.approx(model[-1])  # minimum norm splits the weight evenly


@pytest.mark.parametrize("l2", [1e-3, 0.1, 2.0])
def test_closed_form_ridge_normal_equations(l2):
    from sklearn.linear_model import Ridge

    features, labels = regression()
    k, n = features.shape
    model = closed_form_optimum(features, labels, l2)
    # Normal equations of F: (A^T A / K + l2 I) x = A^T b / K.
    lhs = (features.T @ features / k + l2 * np.eye(n)) @ model
    assert_allclose(lhs, features.T @ labels / k, rtol=1e-12, atol=1e-14)
    # scikit-learn's Ridge minimizes ||b - A x||^2 + a ||x||^2, i.e. K*F with a = K*l2.
    ridge = Ridge(alpha=k * l2, fit_intercept=False, solver="cholesky").fit(features, labels)
    assert_allclose(model, ridge.coef_, rtol=1e-10, atol=1e-12)


def l1_max(features, labels) -> float:
    """The smallest lambda_1 that makes x = 0 optimal (with l2 = 0): ``||A^T b / K||_inf``."""
    return float(np.abs(features.T @ labels).max() / features.shape[0])


@pytest.mark.parametrize(("l2", "fraction"), [(0.0, 0.1), (0.05, 0.1), (0.0, 0.5)])
def test_proximal_gradient_satisfies_lasso_optimality(l2, fraction):
    features, labels = regression(n=8, seed=3)
    l1 = fraction * l1_max(features, labels)
    model = proximal_gradient_optimum(features, labels, l2, l1)
    g = gradient(features, labels, model, l2)
    active = model != 0.0
    assert 0 < np.count_nonzero(active) < model.size  # both kinds of condition are exercised
    # Subgradient conditions: g_j + l1 sign(x_j) = 0 where x_j != 0, |g_j| <= l1 where x_j = 0.
    tol = 1e-9
    assert_allclose(g[active] + l1 * np.sign(model[active]), 0.0, atol=tol)
    assert np.all(np.abs(g[~active]) <= l1 + tol)
    # No perturbation of a converged minimizer lowers the objective.
    best = objective(features, labels, model, l2, l1)
    rng = np.random.default_rng(1)
    for _ in range(20):
        moved = model + 1e-4 * rng.normal(size=model.shape)
        assert objective(features, labels, moved, l2, l1) >= best - 1e-15


def test_proximal_gradient_zeroes_weights_at_large_l1():
    features, labels = regression(n=8, seed=3)
    top = l1_max(features, labels)
    counts = [np.count_nonzero(proximal_gradient_optimum(features, labels, 0.0, f * top))
              for f in (0.01, 0.1, 0.5, 1.01)]
    assert counts == sorted(counts, reverse=True)
    assert counts[0] == features.shape[1] and 0 < counts[2] < counts[0] and counts[3] == 0


def test_proximal_gradient_without_l1_is_closed_form():
    features, labels = regression()
    assert_array_equal(proximal_gradient_optimum(features, labels, 0.3, 0.0),
                       closed_form_optimum(features, labels, 0.3))


# ---------------------------------------------------------------------------------------------
# prox


def test_prox_by_hand():
    y = np.array([3.0, -3.0, 0.5, -0.5, 0.0, 0.75])
    # shrink by 1 + 0.5*2 = 2 -> [1.5, -1.5, .25, -.25, 0, .375]; threshold 0.5*1/2 = 0.25
    assert_allclose(prox(y, 0.5, 2.0, 1.0), [1.25, -1.25, 0.0, 0.0, 0.0, 0.125])
    assert_array_equal(prox(y, 0.5, 0.0, 0.0), y)  # no regularization: identity
    assert_allclose(prox(y, 0.5, 2.0, 0.0), y / 2)  # L2 only: shrink


@given(y=st.lists(st.floats(-10, 10), min_size=1, max_size=8),
       gamma=st.floats(1e-3, 4.0), l2=st.floats(0.0, 5.0), l1=st.floats(0.0, 5.0))
def test_prox_is_soft_threshold_and_minimizes(y, gamma, l2, l1):
    y = np.array(y)
    x = prox(y, gamma, l2, l1)
    shrunk, threshold = y / (1 + gamma * l2), gamma * l1 / (1 + gamma * l2)
    analytic = np.where(shrunk > threshold, shrunk - threshold,
                        np.where(shrunk < -threshold, shrunk + threshold, 0.0))
    assert_allclose(x, analytic, rtol=1e-12, atol=1e-12)
    # x = argmin_z 1/2 (z - y)^2 + gamma (l2/2 z^2 + l1 |z|), coordinate by coordinate:
    # z - y + gamma (l2 z + l1 sign z) = 0 where z != 0, |y| <= gamma l1 where z = 0.
    nz = x != 0
    assert_allclose(x[nz] - y[nz] + gamma * (l2 * x[nz] + l1 * np.sign(x[nz])), 0.0,
                    atol=1e-9)
    assert np.all(np.abs(y[~nz]) <= gamma * l1 * (1 + 1e-12) + 1e-12)


# ---------------------------------------------------------------------------------------------
# sgd_epoch


def test_settings_validation():
    for bad in ({"batch_size": 0}, {"alpha": 0.0}, {"alpha": -1.0}, {"l2": -0.1},
                {"l1": -0.1}):
        with pytest.raises(ConfigError):
            SgdSettings(**bad)


@pytest.mark.parametrize("delayed", [False, True])
@pytest.mark.parametrize(("l2", "l1"), [(0.0, 0.0), (0.1, 0.01)])
def test_full_batch_is_one_proximal_gradient_step_per_epoch(delayed, l2, l1):
    """batch = K: every epoch is exactly one step ``x <- prox(x - gamma grad)``, gamma = alpha/k
    (and the delayed mode, which has only one batch to delay, is the same)."""
    features, labels = regression()
    k = features.shape[0]
    alpha = 0.05
    settings = SgdSettings(batch_size=k, alpha=alpha, l2=l2, l1=l1, delayed=delayed)
    model = hand = np.zeros(features.shape[1])
    for epoch in range(1, 6):
        model = sgd_epoch(model, features, labels, epoch, settings)
        gamma = alpha / epoch
        step = hand - gamma * features.T @ (features @ hand - labels) / k
        hand = np.sign(step / (1 + gamma * l2)) * np.maximum(
            np.abs(step / (1 + gamma * l2)) - gamma * l1 / (1 + gamma * l2), 0.0)
        assert_allclose(model, hand, rtol=1e-13, atol=1e-15)


def test_short_last_batch_divides_by_batch_size():
    features, labels = regression(k=10, n=3)
    alpha, batch = 0.3, 4
    model = sgd_epoch(np.zeros(3), features, labels, 1, SgdSettings(batch, alpha))
    hand = np.zeros(3)
    for start in (0, 4, 8):  # batches of 4, 4 and 2 samples, all divided by B = 4
        a, b = features[start:start + batch], labels[start:start + batch]
        hand = hand - alpha * a.T @ (a @ hand - b) / batch
    assert_allclose(model, hand, rtol=1e-13, atol=1e-15)


def test_delayed_batches_use_the_model_one_batch_old():
    features, labels = regression(k=12, n=3)
    alpha, batch = 0.3, 4
    model = sgd_epoch(np.zeros(3), features, labels, 1, SgdSettings(batch, alpha, delayed=True))
    grads, models = [], [np.zeros(3)]
    for t, start in enumerate((0, 4, 8)):
        seen = models[max(0, t - 1)]  # batch t is computed with the model after 0..t-2
        a, b = features[start:start + batch], labels[start:start + batch]
        grads.append(a.T @ (a @ seen - b) / batch)
        if t >= 1:
            models.append(models[-1] - alpha * grads[t - 1])
    hand = models[-1] - alpha * grads[-1]  # the pending update at the end of the epoch
    assert_allclose(model, hand, rtol=1e-13, atol=1e-15)


def test_second_sample_is_used_for_the_gradient():
    features, labels = regression(k=16, n=4)
    settings = SgdSettings(4, 0.2)
    same = sgd_epoch(np.zeros(4), features, labels, 1, settings)
    assert_array_equal(sgd_epoch(np.zeros(4), features, labels, 1, settings, second=features),
                       same)
    other = sgd_epoch(np.zeros(4), features, labels, 1, settings, second=features * 0.5)
    assert not np.allclose(other, same)


def test_input_model_is_not_modified():
    features, labels = regression()
    model = np.ones(features.shape[1])
    sgd_epoch(model, features, labels, 1, SgdSettings(8, 0.1))
    assert_array_equal(model, 1.0)


@pytest.mark.parametrize(("l2", "l1"), [(0.0, 0.0), (0.02, 0.005)])
def test_delayed_differs_from_exact_but_both_converge(l2, l1):
    features, labels = regression(k=256, n=6, seed=7)
    optimum = objective(features, labels,
                        proximal_gradient_optimum(features, labels, l2, l1), l2, l1)
    exact = delayed = np.zeros(6)
    for epoch in range(1, 31):
        exact = sgd_epoch(exact, features, labels, epoch, SgdSettings(8, 0.5, l2, l1))
        delayed = sgd_epoch(delayed, features, labels, epoch,
                            SgdSettings(8, 0.5, l2, l1, delayed=True))
        if epoch == 1:
            assert np.max(np.abs(exact - delayed)) > 1e-6
    for model in (exact, delayed):
        assert objective(features, labels, model, l2, l1) <= optimum * 1.01
