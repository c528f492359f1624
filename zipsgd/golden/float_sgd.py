"""Float64 reference: mini-batch SGD for least squares and LS-SVM, and the optimum it seeks.

The objective on ``K`` samples ``(a_k, b_k)`` is

    F(x) = 1/(2K) * sum_k (a_k . x - b_k)^2 + l2/2 * ||x||^2 + l1 * ||x||_1

(LS-SVM is the same objective with labels in {-1, +1}).  One SGD step on a mini-batch ``S`` is

    y = x - gamma/B * sum_{k in S} a_k (a_k . x - b_k)    (1/B also for a short last batch)
    x = prox(y) = soft_threshold(y / (1 + gamma*l2), gamma*l1 / (1 + gamma*l2))

with ``gamma = alpha / epoch`` (epochs counted from 1).  The mini-batch semantics match the
engine's (``docs/ENGINE.md``): ``delayed=True`` computes batch ``t`` with the model after batches
``0..t-2``.  The engine's L2 step multiplies by ``1 - eta`` with ``eta = gamma*l2/(1+gamma*l2)``,
which is the same as dividing by ``1 + gamma*l2``; its L1 threshold is applied after the decay,
as here.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from functools import wraps

import numpy as np

from ..spec.errors import ConfigError


def _quiet(function):
    """Overflow and NaN are results here (a caller checks the loss is finite), not warnings."""
    @wraps(function)
    def run(*args, **kwargs):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return function(*args, **kwargs)
    return run

__all__ = ["objective", "closed_form_optimum", "SgdSettings", "sgd_epoch", "prox",
           "proximal_gradient_optimum"]


@_quiet
def objective(features: np.ndarray, labels: np.ndarray, model: np.ndarray, l2: float = 0.0,
              l1: float = 0.0) -> float:
    """``F(x)`` above (float64)."""
    residual = features @ model - labels
    return float(0.5 * np.mean(residual**2) + 0.5 * l2 * model @ model
                 + l1 * np.abs(model).sum())


@_quiet
def closed_form_optimum(features: np.ndarray, labels: np.ndarray, l2: float = 0.0) -> np.ndarray:
    """The minimizer of ``F`` with ``l1 = 0``: solves ``(A^T A / K + l2 I) x = A^T b / K``
    (least squares via ``lstsq`` when ``l2 = 0``, so rank-deficient data still works)."""
    if l2 == 0.0:
        return np.linalg.lstsq(features, labels, rcond=None)[0]
    k, n = features.shape
    gram = features.T @ features / k + l2 * np.eye(n)
    return np.linalg.solve(gram, features.T @ labels / k)


@_quiet
def prox(y: np.ndarray, gamma: float, l2: float, l1: float) -> np.ndarray:
    """The proximal operator of ``gamma * (l2/2 ||x||^2 + l1 ||x||_1)``."""
    shrunk = y / (1.0 + gamma * l2)
    threshold = gamma * l1 / (1.0 + gamma * l2)
    return np.sign(shrunk) * np.maximum(np.abs(shrunk) - threshold, 0.0)


@_quiet
def proximal_gradient_optimum(features, labels, l2=0.0, l1=0.0, iterations=20000,
                              tolerance=1e-13) -> np.ndarray:
    """The minimizer of ``F`` when ``l1 > 0`` (no closed form): full-batch proximal gradient
    (ISTA) with step ``1/L`` until the model changes by less than ``tolerance``."""
    if l1 == 0.0:
        return closed_form_optimum(features, labels, l2)
    k = features.shape[0]
    lipschitz = np.linalg.norm(features, 2) ** 2 / k + l2
    step = 1.0 / lipschitz
    model = np.zeros(features.shape[1])
    for _ in range(iterations):
        gradient = features.T @ (features @ model - labels) / k
        updated = prox(model - step * gradient, step, l2, l1)
        if np.max(np.abs(updated - model)) < tolerance:
            return updated
        model = updated
    return model


@dataclass(frozen=True)
class SgdSettings:
    """Hyper-parameters of :func:`sgd_epoch`."""

    batch_size: int = 1
    alpha: float = 0.1
    l2: float = 0.0
    l1: float = 0.0
    delayed: bool = False

    def __post_init__(self):
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be >= 1, found {self.batch_size}")
        if not self.alpha > 0:
            raise ConfigError(f"step size must be > 0, found {self.alpha}")
        if self.l1 < 0 or self.l2 < 0:
            raise ConfigError(f"regularization must be >= 0, found l2={self.l2}, l1={self.l1}")


@_quiet
def sgd_epoch(model: np.ndarray, features: np.ndarray, labels: np.ndarray, epoch: int,
              settings: SgdSettings, second: np.ndarray | None = None) -> np.ndarray:
    """One epoch of mini-batch SGD in stream order; returns the new model.

    ``second``, when given, is a second independent sample of the features used for the
    gradient (double sampling in float: ``Q1(a)`` for the dot product, ``Q2(a)`` for the
    gradient); otherwise the same features serve both.
    """
    gamma = settings.alpha / epoch
    second = features if second is None else second
    model = np.array(model, dtype=np.float64)
    pending: deque[np.ndarray] = deque()
    keep = 1 if settings.delayed else 0
    for start in range(0, features.shape[0], settings.batch_size):
        stop = start + settings.batch_size
        residual = features[start:stop] @ model - labels[start:stop]
        pending.append(second[start:stop].T @ residual / settings.batch_size)
        while len(pending) > keep:
            model = prox(model - gamma * pending.popleft(), gamma, settings.l2, settings.l1)
    while pending:
        model = prox(model - gamma * pending.popleft(), gamma, settings.l2, settings.l1)
    return model
