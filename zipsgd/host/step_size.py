"""The automatic step size (``step_size="auto"``, the run default).

SGD here takes the step ``gamma_k = alpha / k`` in epoch ``k``, so epoch 1's ``alpha`` is the
largest step of a run.  The choice has two parts:

1. **A bound no run exceeds.**  On a bounded sample of at most :data:`SAMPLE_ROWS` rows of the
   scaled data, a power iteration estimates ``lambda``, the largest eigenvalue of the scaled Gram
   matrix ``A^T A / K``; ``r`` is the largest squared row norm ``||a_k||^2``.  Mini-batch SGD with
   batch ``B`` drawn from ``K`` rows has the expected smoothness constant (Gower et al., *SGD:
   General Analysis and Improved Rates*, ICML 2019)

       L_B = K (B - 1) / (B (K - 1)) * lambda + (K - B) / (B (K - 1)) * r  + l2

   and a step ``alpha <= 1 / L_B`` cannot make float SGD diverge.
2. **A pilot within it.**  The candidates ``alpha = f / L_B`` for every safety factor ``f`` in
   :data:`SAFETY_FACTORS` train float SGD for ``min(epochs, PILOT_EPOCHS)`` epochs on the same
   sample with the run's batch size, regularization and update mode, and the one with the
   lowest final loss is chosen.  Below the bound the best step depends on the data: on
   ill-conditioned data (breast_cancer) the largest step is best, on noisy data (AER/CPS1988)
   a step 4x smaller, because ``alpha / k`` then leaves less gradient noise in the last epochs.

``docs/results/step_size.md`` checks the choice against a grid of steps (0.1x to 10x) for float
SGD and the engine model on five data sets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..golden.float_sgd import SgdSettings, objective, sgd_epoch

__all__ = ["AUTO", "SAMPLE_ROWS", "PILOT_EPOCHS", "SAFETY_FACTORS", "StepChoice",
           "auto_step_size", "largest_eigenvalue"]

#: The value of ``step_size`` that asks for the automatic choice.
AUTO = "auto"
#: The most rows the estimate and the pilot read (a random sample, fixed by the run's seed).
SAMPLE_ROWS = 4096
#: The most epochs a pilot run trains.
PILOT_EPOCHS = 20
#: Candidate steps as fractions of the bound 1 / L_B, largest first.
SAFETY_FACTORS = (1.0, 0.5, 0.25, 0.125, 0.0625)
_POWER_ITERATIONS = 200
_POWER_TOLERANCE = 1e-6


@dataclass(frozen=True)
class StepChoice:
    """The automatic step: ``alpha``, the bound ``1 / L_B`` it is a fraction ``factor`` of,
    the estimates behind the bound and the pilot's final loss per factor."""

    alpha: float
    factor: float
    bound: float
    largest_eigenvalue: float
    largest_row_norm: float
    sample_rows: int
    pilot_epochs: int
    pilot_losses: dict

    def as_dict(self) -> dict:
        return {"chosen": AUTO, **asdict(self),
                "pilot_losses": {str(k): v for k, v in self.pilot_losses.items()}}


def largest_eigenvalue(features: np.ndarray, seed: int = 0) -> float:
    """The largest eigenvalue of ``features^T features / rows`` by power iteration."""
    rows, columns = features.shape
    vector = np.random.default_rng(seed).standard_normal(columns)
    vector /= np.linalg.norm(vector)
    value = 0.0
    for _ in range(_POWER_ITERATIONS):
        product = features.T @ (features @ vector) / rows
        updated = float(np.linalg.norm(product))
        if updated == 0.0:
            return 0.0
        vector = product / updated
        if abs(updated - value) <= _POWER_TOLERANCE * updated:
            return updated
        value = updated
    return value


def auto_step_size(features: np.ndarray, labels: np.ndarray, *, batch_size: int, epochs: int,
                   l2: float = 0.0, l1: float = 0.0, delayed: bool = False,
                   seed: int = 0, total_rows: int | None = None) -> StepChoice:
    """Choose ``alpha`` for scaled ``features`` (rows in [-1, 1]) and ``labels``.

    ``total_rows`` is the data set's row count ``K`` when ``features`` is already a sample of
    it (default: its own row count).
    """
    rows = features.shape[0]
    if rows > SAMPLE_ROWS:
        pick = np.sort(np.random.default_rng(seed).choice(rows, SAMPLE_ROWS, replace=False))
        features, labels = features[pick], labels[pick]
    total = rows if total_rows is None else total_rows
    lam = largest_eigenvalue(features, seed)
    row_norm = float(np.max(np.einsum("ij,ij->i", features, features)))
    batch = min(batch_size, total)
    if total > 1:
        smooth = (total * (batch - 1) * lam + (total - batch) * row_norm) / (batch * (total - 1))
    else:
        smooth = row_norm
    smooth = max(smooth, lam) + l2
    if not smooth > 0:  # all-zero features: any step leaves the model at zero
        smooth = 1.0
    bound = 1.0 / smooth
    pilot_epochs = min(epochs, PILOT_EPOCHS)
    losses = {}
    for factor in SAFETY_FACTORS:
        sgd = SgdSettings(batch_size, factor * bound, l2, l1, delayed)
        model = np.zeros(features.shape[1])
        for epoch in range(1, pilot_epochs + 1):
            model = sgd_epoch(model, features, labels, epoch, sgd)
        loss = objective(features, labels, model, l2, l1)
        losses[factor] = loss if np.isfinite(loss) else float("inf")
    factor = min(SAFETY_FACTORS, key=lambda f: (losses[f], -f))
    return StepChoice(factor * bound, factor, bound, lam, row_norm, features.shape[0],
                      pilot_epochs, losses)
