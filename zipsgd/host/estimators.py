"""scikit-learn estimators: :class:`ZipSGDRegressor` (least squares) and
:class:`ZipSGDClassifier` (LS-SVM on two classes).

``fit`` scales the samples to [-1, 1] (max-abs, with a constant-1 column when
``fit_intercept``) and trains on a backend by name (:mod:`zipsgd.host.backend`): ``float``
trains float64 SGD on the scaled samples; every other backend trains on the samples quantized
and packed by :func:`zipsgd.host.packed.quantize` (the pipeline of ``zipsgd quantize``), one
independently quantized epoch per training epoch, and on the golden model or the engine.  The
parameters are the training run's (:class:`~zipsgd.host.train.TrainSettings`, whose defaults
they take).  ``levels`` (``"uniform"`` or ``"optimal"``: a level table in the packed data, as
``zipsgd quantize --levels``) needs a backend that decodes level tables (``golden2``); optimal
levels scale with minmax instead of max-abs.

Parameters are checked at ``fit`` (as scikit-learn requires): one out of its range raises
``ValueError`` naming it and the range.  Arrays are checked by scikit-learn's own validation.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ..spec.errors import ZipsgdError
from ..spec.stream import BUS_WIDTHS
from .backend import backend_names, get_backend
from .levels import LEVEL_CHOICES
from .packed import quantize
from .train import (
    ROUNDINGS,
    UPDATE_MODES,
    TrainSettings,
    scale_arrays,
    train_in_memory,
    train_stream_file,
)

__all__ = ["ZipSGDRegressor", "ZipSGDClassifier"]

_RUN = TrainSettings()  # the one set of run defaults
_ENCODINGS = ("double", "single", "raw32")


def _integer(low, high=None):
    def check(value):
        return (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
                and value >= low and (high is None or value <= high))
    return check, f"an integer in {low}..{'' if high is None else high}"


def _number(low, positive=False):
    def check(value):
        return (isinstance(value, (int, float, np.integer, np.floating))
                and not isinstance(value, bool) and np.isfinite(value)
                and (value > low if positive else value >= low))
    return check, f"a finite number {'>' if positive else '>='} {low:g}"


def _choice(*names):
    return (lambda value: isinstance(value, str) and value in names), \
        f"one of {', '.join(names)}"


def _pair(value):
    return (isinstance(value, tuple) and len(value) == 2
            and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value))


_STEP_NUMBER = _number(0, positive=True)[0]

#: Every parameter's check and its allowed range, as fit's ValueError says it.
_CHECKS = {
    "backend": (lambda v: isinstance(v, str) and v in backend_names(),
                "a backend name (" + ", ".join(backend_names()) + ")"),
    "encoding": _choice(*_ENCODINGS),
    "bits": _integer(1, 8),
    "bus_width": ((lambda v: v in BUS_WIDTHS and not isinstance(v, bool)),
                  "one of " + ", ".join(map(str, BUS_WIDTHS))),
    "epochs": _integer(1),
    "batch_size": _integer(1),
    "step_size": ((lambda v: v == "auto" or _STEP_NUMBER(v)), "'auto' or a finite number > 0"),
    "l1": _number(0),
    "l2": _number(0),
    "update_mode": _choice(*UPDATE_MODES),
    "rounding": _choice(*ROUNDINGS),
    "model_format": (_pair, "a pair (WL, FL) of integers, 2 <= WL <= 32, 1 <= FL <= 31"),
    "grad_format": (_pair, "a pair (WL, FL) of integers, 2 <= WL <= 32"),
    "lanes": ((lambda v: v is None or _integer(2)[0](v)), "None or a power of two >= 2"),
    "seed": _integer(0, (1 << 64) - 1),
    "fit_intercept": ((lambda v: isinstance(v, (bool, np.bool_))), "True or False"),
    "max_features": _integer(1),
    "max_batch": _integer(1),
    "levels": ((lambda v: v is None or (isinstance(v, str) and v in LEVEL_CHOICES)),
               "None or one of " + ", ".join(LEVEL_CHOICES)),
}


class _ZipSGD(BaseEstimator):
    """What both estimators share: parameters, fit and the linear decision function."""

    _loss = "squared"

    def __init__(self, *, backend=_RUN.backend, encoding=_RUN.encoding, bits=_RUN.bits,
                 bus_width=_RUN.bus_width, epochs=_RUN.epochs, batch_size=_RUN.batch_size,
                 step_size=_RUN.step_size, l1=_RUN.l1, l2=_RUN.l2, update_mode=_RUN.update_mode,
                 rounding=_RUN.rounding, model_format=(_RUN.model_width, _RUN.model_frac),
                 grad_format=(_RUN.grad_width, _RUN.grad_frac), lanes=_RUN.lanes,
                 seed=_RUN.seed, fit_intercept=True, max_features=_RUN.max_features,
                 max_batch=_RUN.max_batch, levels=_RUN.levels):
        self.backend = backend
        self.encoding = encoding
        self.bits = bits
        self.bus_width = bus_width
        self.epochs = epochs
        self.batch_size = batch_size
        self.step_size = step_size
        self.l1 = l1
        self.l2 = l2
        self.update_mode = update_mode
        self.rounding = rounding
        self.model_format = model_format
        self.grad_format = grad_format
        self.lanes = lanes
        self.seed = seed
        self.fit_intercept = fit_intercept
        self.max_features = max_features
        self.max_batch = max_batch
        self.levels = levels

    def _settings(self) -> TrainSettings:
        for name, (check, allowed) in _CHECKS.items():
            value = getattr(self, name)
            if not check(value):
                raise ValueError(f"{name} must be {allowed}, found {value!r}")
        try:
            return TrainSettings(
                backend=self.backend, encoding=self.encoding, bits=int(self.bits),
                bus_width=int(self.bus_width), epochs=int(self.epochs),
                batch_size=int(self.batch_size),
                step_size=self.step_size if self.step_size == "auto" else float(self.step_size),
                loss=self._loss, l2=float(self.l2), l1=float(self.l1), seed=int(self.seed),
                update_mode=self.update_mode, rounding=self.rounding,
                model_width=int(self.model_format[0]), model_frac=int(self.model_format[1]),
                grad_width=int(self.grad_format[0]), grad_frac=int(self.grad_format[1]),
                max_features=int(self.max_features), max_batch=int(self.max_batch),
                lanes=None if self.lanes is None else int(self.lanes), levels=self.levels)
        except ZipsgdError as error:
            raise ValueError(f"invalid parameters: {error}") from None

    def _train(self, X: np.ndarray, labels: np.ndarray) -> None:
        """Train on validated ``X`` and numeric ``labels`` (-1/+1 for LS-SVM); set the fitted
        attributes."""
        settings = self._settings()
        try:
            if get_backend(settings.backend).kind == "float":
                data = scale_arrays(labels, X, loss=self._loss, intercept=self.fit_intercept)
                report = train_in_memory(data, settings)
            else:
                packed = quantize(X, labels, bits=settings.bits, encoding=settings.encoding,
                                  bus_width=settings.bus_width, seed=settings.seed,
                                  epochs=settings.epochs, intercept=self.fit_intercept,
                                  levels=settings.levels)
                data = scale_arrays(labels, X, scaler=packed.scaler)
                # (The packed data bring their level table.)
                report = train_stream_file(packed, dataclasses.replace(settings, levels=None),
                                           eval_data=data)
        except ZipsgdError as error:
            raise ValueError(str(error)) from None
        key = "loss" if "loss" in report["epochs"][0] else "loss_eval"
        self.coef_ = np.asarray(report["model"]["coef"], dtype=np.float64)
        self.intercept_ = float(report["model"]["intercept"])
        self.loss_curve_ = [record[key] for record in report["epochs"]]
        self.n_iter_ = len(report["epochs"])
        self.step_size_ = float(report["settings"]["step_size"])
        self.engine_report_ = _engine_report(report)

    def _decision(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_ + self.intercept_


def _engine_report(report: dict) -> dict:
    """What the run streamed and, where the backend counts them, its cycles and bus
    efficiency; per epoch the engine's own loss (the on-chip loss: quantized samples, the model
    in force at each sample)."""
    epochs = report["epochs"]
    cycles = [e.get("cycles") for e in epochs]
    beats = [e.get("beats") for e in epochs]
    counted = all(c is not None for c in cycles)
    return {
        "backend": report["settings"]["backend"],
        "layout": report["layout"],
        "step_size": report["step_size"],
        "bytes_streamed": report["bytes_streamed"],
        "cycles": sum(cycles) if counted else None,
        "bus_efficiency": sum(beats) / sum(cycles) if counted and sum(cycles) else None,
        "bit_exact": report.get("bit_exact"),
        "engine_loss": [e.get("engine_loss") for e in epochs],
    }


class ZipSGDRegressor(RegressorMixin, _ZipSGD):
    """Least squares by SGD on low-precision data (ZipML); parameters in the module's docs.

    Attributes
    ----------
    coef_ : array, shape (n_features,)
    intercept_ : float
    loss_curve_ : list of float
        Per epoch, the training loss (scaled units) on the samples as given.
    n_iter_ : int
        Epochs trained.
    step_size_ : float
        The step ``alpha`` used (the automatic choice for ``step_size="auto"``).
    engine_report_ : dict
        Bytes streamed, cycles and bus efficiency (engine backends), the on-chip loss.
    """

    _loss = "squared"

    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True,
                             ensure_min_samples=2)
        self._train(X, y)
        return self

    def predict(self, X):
        return self._decision(X)


class ZipSGDClassifier(ClassifierMixin, _ZipSGD):
    """LS-SVM by SGD on low-precision data (ZipML): labels become -1/+1, ``predict`` maps
    the sign of :meth:`decision_function` back to ``classes_``.  Two classes only.

    Attributes
    ----------
    classes_ : array, shape (2,)
    coef_, intercept_, loss_curve_, n_iter_, step_size_, engine_report_
        As :class:`ZipSGDRegressor`'s (the loss on -1/+1 labels).
    """

    _loss = "lssvm"

    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size != 2:
            # (scikit-learn's checks expect the first sentence.)
            raise ValueError(f"Only binary classification is supported: the LS-SVM needs "
                             f"exactly 2 classes, found {self.classes_.size} class(es)")
        self._train(X, np.where(y == self.classes_[1], 1.0, -1.0))
        return self

    def decision_function(self, X):
        """Signed distance: positive for ``classes_[1]``."""
        return self._decision(X)

    def predict(self, X):
        positive = self.decision_function(X) > 0
        return self.classes_[positive.astype(int)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags
