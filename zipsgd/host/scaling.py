"""Per-column scaling of samples to [-1, 1], and mapping a trained model back to original units.

The quantizer needs every value in [-1, 1].  One pass over a source gives each column's range
(:class:`ColumnStats`); a :class:`Scaler` built from it maps a value ``x`` of column ``j`` to
``v = (x - offset_j) / scale_j`` and keeps ``(offset_j, scale_j)``, which is exactly the scale
table of a ``.zsgd`` file (label first, then the features; :mod:`zipsgd.host.zsgd_file`).

Rules (the same for every source):

* ``MAXABS``: offset 0, scale ``max |x|`` (zeros stay zero, so sparse data stays sparse).
* ``MINMAX``: offset ``(max + min) / 2``, scale ``(max - min) / 2``.
* **Constant feature columns** get scale 1 instead of 0 (offset as above): under ``MAXABS`` an
  all-zero column stays 0, under ``MINMAX`` any constant column becomes 0.  (Under ``MAXABS`` a
  constant *non-zero* column has a non-zero range of ``|x|`` and becomes all +1 or all -1.)  No
  warning: such a column simply carries no information, and its weight maps back consistently.
* **A constant label** (zero range under the chosen scaling, or all zero) is an error
  (:class:`~zipsgd.spec.errors.DatasetError`): there is nothing to learn.
* **Intercept**: with ``intercept=True`` the scaler appends a constant-1.0 feature column after
  scaling; its table entry is offset 0 / scale 1, and :meth:`Scaler.inverse_model` folds its
  weight into the intercept.  The ``.zsgd`` header does not record which column is the
  intercept: whoever maps a model back must know (the last feature, when it was requested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..spec.errors import ConfigError, DatasetError
from .datasets import DataSource
from .zsgd_file import Scaling

__all__ = ["ColumnStats", "Scaler"]


@dataclass(frozen=True, eq=False)
class ColumnStats:
    """Per-column minimum and maximum of a data set, label first (the scale-table order).

    Members
    -------
    minimum, maximum : float64 arrays, shape ``(n_features + 1,)``
    count : int
        Rows seen (the same for every column: sources are dense).
    """

    minimum: np.ndarray
    maximum: np.ndarray
    count: int

    @property
    def n_features(self) -> int:
        return self.minimum.shape[0] - 1

    @classmethod
    def from_arrays(cls, labels, features) -> ColumnStats:
        """Statistics of in-memory arrays (``labels`` ``(n,)``, ``features`` ``(n, d)``)."""
        table = np.column_stack([np.asarray(labels, dtype=np.float64).reshape(-1),
                                 np.asarray(features, dtype=np.float64)])
        if table.shape[0] == 0:
            raise DatasetError("expected at least one sample to compute statistics, found none")
        return cls(table.min(axis=0), table.max(axis=0), table.shape[0])

    @classmethod
    def from_source(cls, source: DataSource, chunk_rows: int = 65536,
                    progress=None) -> ColumnStats:
        """One pass over ``source`` (none if it is already in memory).

        ``progress``, if given, is called with the row count of every chunk.
        """
        cached = source.in_memory()
        if cached is not None:
            stats = cls.from_arrays(*cached)
            if progress is not None:
                progress(stats.count)
            return stats
        stats = None
        for labels, features in source.iter_chunks(chunk_rows):
            chunk = cls.from_arrays(labels, features)
            stats = chunk if stats is None else stats.merge(chunk)
            if progress is not None:
                progress(labels.shape[0])
        return stats  # iter_chunks has raised DatasetError if there were no rows

    def merge(self, other: ColumnStats) -> ColumnStats:
        """Statistics of both data sets together (same columns)."""
        if other.minimum.shape != self.minimum.shape:
            raise ValueError(f"cannot merge statistics of {self.n_features} and "
                             f"{other.n_features} features")
        return ColumnStats(np.minimum(self.minimum, other.minimum),
                           np.maximum(self.maximum, other.maximum), self.count + other.count)


class Scaler:
    """Maps samples to [-1, 1] column by column and models back to original units.

    Parameters
    ----------
    offsets, scales : float arrays, shape ``(n_features + 1,)``
        Label first, then the data features: ``v = (x - offset) / scale``.  Finite; scales > 0.
    intercept : bool
        Append a constant-1.0 feature after scaling (see the module documentation).

    Members
    -------
    n_features : int
        Data features (columns of the input).
    n_weights : int
        Features of the scaled samples, ``n_features + intercept``: the model's length.

    Raises
    ------
    ConfigError
        If the arrays have different or too small shapes, or hold non-finite values or
        non-positive scales.
    """

    def __init__(self, offsets, scales, *, intercept: bool = False):
        offsets = np.array(offsets, dtype=np.float64).reshape(-1)
        scales = np.array(scales, dtype=np.float64).reshape(-1)
        if offsets.shape != scales.shape or offsets.shape[0] < 2:
            raise ConfigError(f"offsets and scales must both have n_features + 1 >= 2 entries, "
                              f"found {offsets.shape[0]} and {scales.shape[0]}")
        if not (np.isfinite(offsets).all() and np.isfinite(scales).all() and (scales > 0).all()):
            raise ConfigError("scale table must hold finite offsets and positive finite scales")
        offsets.setflags(write=False)
        scales.setflags(write=False)
        self.offsets, self.scales, self.intercept = offsets, scales, bool(intercept)

    @classmethod
    def from_stats(cls, stats: ColumnStats, scaling=Scaling.MAXABS, *,
                   intercept: bool = False) -> Scaler:
        """The scaler for ``stats`` under ``scaling`` (constant-column rules: module docs).

        Raises
        ------
        DatasetError
            If the label is constant.
        """
        scaling = Scaling.parse(scaling)
        low, high = stats.minimum, stats.maximum
        if scaling is Scaling.MAXABS:
            offsets = np.zeros_like(low)
            scales = np.maximum(np.abs(low), np.abs(high))
        else:
            # Halve before adding: (max + min) and (max - min) can overflow near float max.
            offsets = high / 2 + low / 2
            scales = high / 2 - low / 2
        if not scales[0] > 0 or low[0] == high[0]:
            raise DatasetError(f"expected a label that varies, found the constant {low[0]!r}: "
                               "nothing to learn")
        scales = np.where(scales > 0, scales, 1.0)
        return cls(offsets, scales, intercept=intercept)

    @classmethod
    def from_table(cls, offsets, scales, *, intercept: bool = False) -> Scaler:
        """The scaler of a ``.zsgd`` scale table (:class:`StreamHeader` ``offsets``/``scales``).

        With ``intercept``, the table's last feature is the intercept column and is dropped.
        """
        offsets, scales = np.asarray(offsets), np.asarray(scales)
        if intercept:
            if offsets[-1] != 0.0 or scales[-1] != 1.0:
                raise ConfigError("intercept column must have offset 0 and scale 1, found "
                                  f"{offsets[-1]!r} and {scales[-1]!r}")
            offsets, scales = offsets[:-1], scales[:-1]
        return cls(offsets, scales, intercept=intercept)

    @property
    def n_features(self) -> int:
        return self.offsets.shape[0] - 1

    @property
    def n_weights(self) -> int:
        return self.n_features + self.intercept

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``.zsgd`` scale table ``(offsets, scales)``, ``n_weights + 1`` entries each."""
        if not self.intercept:
            return self.offsets.copy(), self.scales.copy()
        return np.append(self.offsets, 0.0), np.append(self.scales, 1.0)

    def transform(self, labels, features) -> tuple[np.ndarray, np.ndarray]:
        """Scale samples to [-1, 1].

        Parameters
        ----------
        labels : float array, shape ``(r,)``
        features : float array, shape ``(r, n_features)``

        Returns
        -------
        scaled_labels : float64 array, shape ``(r,)``
        scaled_features : float64 array, shape ``(r, n_weights)``
            The intercept column (all 1.0), if any, is last.

        Both are clipped to [-1, 1].  For the data the statistics came from, clipping only
        removes float rounding (``(x - offset) / scale`` can land an ulp outside); for other
        data (a test set) it saturates values outside the training range.
        """
        labels = np.asarray(labels, dtype=np.float64).reshape(-1)
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape != (labels.shape[0], self.n_features):
            raise ValueError(f"expected features of shape ({labels.shape[0]}, "
                             f"{self.n_features}), found {features.shape}")
        scaled_labels = np.clip((labels - self.offsets[0]) / self.scales[0], -1.0, 1.0)
        scaled = (features - self.offsets[1:]) / self.scales[1:]
        if self.intercept:
            scaled = np.column_stack([scaled, np.ones(scaled.shape[0])])
        return scaled_labels, np.clip(scaled, -1.0, 1.0, out=scaled)

    def inverse_model(self, weights) -> tuple[np.ndarray, float]:
        """Map a model trained on scaled data back to original units.

        A model ``w`` with ``y_s ~ sum_j w_j v_j`` on scaled data predicts
        ``y = label_offset + label_scale * sum_j w_j (x_j - offset_j) / scale_j``, that is
        ``y = coef . x + intercept`` with ``coef_j = label_scale * w_j / scale_j`` and
        ``intercept = label_offset - sum_j coef_j offset_j`` (plus ``label_scale * w_last``
        for the intercept column, if any).

        Parameters
        ----------
        weights : float array, shape ``(n_weights,)``

        Returns
        -------
        coef : float64 array, shape ``(n_features,)``
        intercept : float
        """
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        if weights.shape[0] != self.n_weights:
            raise ValueError(f"expected {self.n_weights} weights, found {weights.shape[0]}")
        label_offset, label_scale = self.offsets[0], self.scales[0]
        coef = label_scale * weights[:self.n_features] / self.scales[1:]
        intercept = label_offset - float(coef @ self.offsets[1:])
        if self.intercept:
            intercept += label_scale * weights[-1]
        return coef, float(intercept)

    def __repr__(self):
        return (f"Scaler(n_features={self.n_features}, intercept={self.intercept}, "
                f"label=({self.offsets[0]:g}, {self.scales[0]:g}))")
