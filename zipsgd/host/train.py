"""Training runs: one driver for every backend, one report format.

A run takes a data set held in memory (scaled to [-1, 1]) or a ``.zsgd`` file, trains epoch by
epoch on a backend (:mod:`zipsgd.host.backend`: ``float``, ``golden``, and the backends that
run the generated engine, ``verilator``, ``board``, ``board-sim``) and records, per epoch, the
training loss, the loss the engine accumulated and the bytes streamed.  The golden model reads
the packed stream; each epoch is quantized afresh with ``epoch_rng(seed, epoch)`` (the paper's
refetching), or read from the file.  An engine backend runs the same epochs, and the driver
checks its model words and status counters against the golden model's after every epoch.

Step sizes follow ``gamma_k = alpha / k`` for epoch ``k`` (from 1); ``alpha`` is chosen from
the data unless given (``step_size="auto"``, :mod:`zipsgd.host.step_size`), and a run whose
loss becomes non-finite, rises above the starting model's or more than doubles in an epoch
stops with a :class:`ConfigError` that suggests a smaller step.  The engine's registers get
``alpha_k / B`` (step), ``eta = gamma*l2/(1+gamma*l2)`` (decay) and ``gamma*l1/(1+gamma*l2)``
(threshold), each rounded to the nearest register word.
"""

from __future__ import annotations

import importlib.metadata
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..golden.engine import GoldenEngine
from ..golden.engine2 import GoldenEngine2
from ..golden.float_sgd import (
    SgdSettings,
    closed_form_optimum,
    objective,
    proximal_gradient_optimum,
    sgd_epoch,
)
from ..spec.engine import (
    DECAY_FRAC,
    DECAY_WIDTH,
    LOSS_ACC_FRAC,
    STEP_FRAC,
    STEP_WIDTH,
    EngineParams,
    RunConfig,
    UpdateMode,
)
from ..spec.engine2 import LOSS_FRAC as LOSS_FRAC2
from ..spec.engine2 import (
    MAX_BATCH2,
    RESIDUAL_WIDTH,
    EngineParams2,
    RunConfig2,
    lane_plan,
    step_register,
)
from ..spec.errors import ConfigError, DatasetError
from ..spec.fixed import RoundingMode
from ..spec.link import DEFAULT_BAUD
from ..spec.registers import epoch_status
from ..spec.stream import (
    Encoding,
    StreamLayout,
    pack_beats_v1,
    pack_stream,
    per_feature_levels,
    restream_v1,
    uniform_levels,
)
from .backend import EpochJob, EpochJob2, get_backend
from .datasets import open_source
from .levels import DEFAULT_POINTS, LevelStats, check_level_options, solve_table
from .quantize import dequantize_fields, epoch_rng, quantize_fields, quantize_table
from .scaling import ColumnStats, Scaler
from .step_size import AUTO, SAMPLE_ROWS, auto_step_size
from .zsgd_file import EpochStreams, Scaling

__all__ = ["TrainSettings", "ScaledData", "load_scaled", "scale_arrays", "train_in_memory",
           "train_stream_file", "engine_run_config", "engine_run_config2", "lssvm_labels",
           "LOSSES", "UPDATE_MODES", "ROUNDINGS"]

LOSSES = ("squared", "lssvm")
UPDATE_MODES = tuple(mode.name.lower() for mode in UpdateMode)
ROUNDINGS = tuple(mode.name.lower().replace("_", "-") for mode in RoundingMode)
_REGISTERS = RunConfig()  # the register defaults: formats, bits, rounding
_BUILD = EngineParams()  # the build defaults: bus width, N_max, B_max


@dataclass(frozen=True)
class TrainSettings:
    """Everything that defines a training run (stored verbatim in the report).  These are the
    run defaults of the command line and of every other caller; the register formats and the
    build limits default to the engine's own (``RunConfig``, ``EngineParams``).

    Raises
    ------
    ConfigError
        If a setting is out of its range, or the backend cannot run these settings.
    """

    backend: str = "golden"
    encoding: str = _REGISTERS.encoding.name.lower()
    bits: int = _REGISTERS.bits
    bus_width: int = _BUILD.bus_width
    epochs: int = 10
    batch_size: int = 16
    step_size: float | str = AUTO  # alpha, or "auto": chosen from the data (step_size.py)
    loss: str = "squared"
    l2: float = 0.0
    l1: float = 0.0
    seed: int = 0
    update_mode: str = _REGISTERS.update_mode.name.lower()
    rounding: str = _REGISTERS.rounding.name.lower().replace("_", "-")
    model_width: int = _REGISTERS.model_width
    model_frac: int = _REGISTERS.model_frac
    grad_width: int = _REGISTERS.grad_width
    grad_frac: int = _REGISTERS.grad_frac
    max_features: int = _BUILD.max_features
    max_batch: int = _BUILD.max_batch
    lanes: int | None = None  # W / 2
    port: str | None = None  # the board's serial port (backends "board", "soc")
    soc: str | None = None  # the SoC's soc.json (backend "soc")
    baud: int = DEFAULT_BAUD
    # A level table when quantizing on the fly (None: uniform levels, no table); golden2 only.
    levels: str | None = None
    levels_method: str = "discretized"
    levels_points: int = DEFAULT_POINTS

    def __post_init__(self):
        get_backend(self.backend).check(self)
        if self.loss not in LOSSES:
            raise ConfigError(f"loss must be squared or lssvm, found {self.loss!r}")
        if self.step_size != AUTO and (isinstance(self.step_size, (str, bool))
                                       or not isinstance(self.step_size, (int, float))):
            raise ConfigError(f"step size must be a number > 0 or auto, found "
                              f"{self.step_size!r}")
        for name in ("step_size", "l1", "l2"):
            if getattr(self, name) != AUTO and not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} must be a finite number, found {getattr(self, name)!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"batch size must be an integer >= 1, found {self.batch_size!r}")
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ConfigError(f"epochs must be >= 1, found {self.epochs!r}")
        if self.step_size != AUTO and not self.step_size > 0:
            raise ConfigError(f"step size must be > 0, found {self.step_size!r}")
        if self.l1 < 0 or self.l2 < 0:
            raise ConfigError(f"l1 and l2 must be >= 0, found {self.l1}, {self.l2}")
        if self.update_mode not in UPDATE_MODES:
            raise ConfigError(f"update mode must be exact or delayed, found "
                              f"{self.update_mode!r}")
        try:
            RoundingMode[self.rounding.upper().replace("-", "_")]
        except KeyError:
            raise ConfigError("rounding must be truncate, half-even or stochastic, found "
                              f"{self.rounding!r}") from None
        self.layout()  # validates encoding, bits, bus width
        self.engine_params()
        check_level_options(self.levels, self.levels_method, self.levels_points, self.layout())
        if self.levels is not None and not get_backend(self.backend).levels:
            raise ConfigError(f"--levels {self.levels} needs a backend that decodes level "
                              f"tables (golden2, verilator2), found {self.backend!r}")
        # The register formats' ranges (RunConfig's checks), before anything is computed.
        RunConfig(model_width=self.model_width, model_frac=self.model_frac,
                  grad_width=self.grad_width, grad_frac=self.grad_frac)

    def layout(self) -> StreamLayout:
        return StreamLayout.make(self.encoding, self.bits, self.bus_width)

    def engine_params(self) -> EngineParams:
        return EngineParams(self.bus_width, self.max_features, self.max_batch, self.lanes)

    def gamma(self, epoch: int) -> float:
        if self.step_size == AUTO:
            raise ValueError("step_size auto is resolved from the data before training")
        return self.step_size / epoch

    def with_step_for(self, features: np.ndarray, labels: np.ndarray,
                      total_rows: int | None = None) -> tuple[TrainSettings, dict]:
        """These settings with ``step_size`` a number (the automatic choice for the scaled
        ``features`` and ``labels`` if it is ``auto``), and the report's record of the choice."""
        if self.step_size != AUTO:
            return self, {"chosen": "given", "alpha": float(self.step_size)}
        choice = auto_step_size(features, labels, batch_size=self.batch_size,
                                epochs=self.epochs, l2=self.l2, l1=self.l1,
                                delayed=self.update_mode == "delayed", seed=self.seed,
                                total_rows=total_rows)
        return replace(self, step_size=choice.alpha), choice.as_dict()


@dataclass
class ScaledData:
    """A data set in memory, scaled to [-1, 1], with what maps a model back to original units.

    ``inverse_model(weights) -> (coef, intercept)`` maps a model on scaled data to original
    units; ``label_scale`` converts scaled losses (``loss * label_scale * label_scale``).
    """

    name: str
    labels: np.ndarray
    features: np.ndarray
    inverse_model: Callable[[np.ndarray], tuple[np.ndarray, float]]
    label_scale: float = 1.0
    extra: dict = field(default_factory=dict)


def load_scaled(spec: str, *, loss: str = "squared", scaling="maxabs", label_column: int = 0,
                intercept: bool = False) -> ScaledData:
    """Read a data source into memory and scale it to [-1, 1] (``lssvm``: labels to -1/+1
    first, so their scale is 1).

    Raises
    ------
    DatasetError
        For unreadable or invalid data.
    """
    source = open_source(spec, label_column=label_column)
    labels, features = source.arrays()
    data = scale_arrays(labels, features, source.name, loss=loss, scaling=scaling,
                        intercept=intercept)
    if getattr(source, "true_model", None) is not None:
        data.extra["true_model"] = np.asarray(source.true_model).tolist()
    return data


def scale_arrays(labels: np.ndarray, features: np.ndarray, name: str = "arrays", *,
                 loss: str = "squared", scaling="maxabs", intercept: bool = False,
                 scaler: Scaler | None = None) -> ScaledData:
    """Scale checked, finite arrays to [-1, 1] (``lssvm``: labels to -1/+1 first) with
    ``scaler``, or one made from their own statistics (:func:`load_scaled` of arrays already in
    memory, e.g. with a transformed label).

    Raises
    ------
    DatasetError
        For a label that does not vary, or ``lssvm`` labels that are not two values.
    """
    if loss == "lssvm":
        labels = lssvm_labels(labels)
    if scaler is None:
        stats = ColumnStats.from_arrays(labels, features)
        scaler = Scaler.from_stats(stats, Scaling.parse(scaling), intercept=intercept)
    scaled_labels, scaled_features = scaler.transform(labels, features)
    return ScaledData(name, scaled_labels, scaled_features, scaler.inverse_model,
                      float(scaler.scales[0]))


def lssvm_labels(labels: np.ndarray) -> np.ndarray:
    """Map a two-class label vector to -1 (smaller value) and +1 (larger value)."""
    classes = np.unique(labels)
    if classes.size != 2:
        raise DatasetError(f"the lssvm loss needs exactly two label values, found {classes.size}")
    return np.where(labels == classes[1], 1.0, -1.0)


def _original(loss: float, label_scale: float) -> float | None:
    """A scaled loss in the labels' original units; None where that is beyond a float (labels
    near 1e154 and larger)."""
    value = loss * label_scale * label_scale  # (Python floats: inf, never an OverflowError)
    return value if math.isfinite(value) else None


class _Divergence:
    """Stops a run whose loss is not finite, rises above the starting model's (zero), or more
    than doubles in an epoch: the step is then too large (a decaying step does not recover)."""

    def __init__(self, settings: TrainSettings, start_loss: float):
        self.settings, self.previous = settings, start_loss
        self.start = start_loss

    def check(self, loss: float, epoch: int, what: str = "training loss") -> float:
        alpha = self.settings.step_size
        hint = (f"the step size {alpha:g} is too large: expected a smaller one, e.g. "
                f"{alpha / 4:g} (or auto)")
        if not math.isfinite(loss):
            raise ConfigError(f"the {what} became {loss} in epoch {epoch}: {hint}")
        if loss > max(self.start, 2.0 * self.previous):
            raise ConfigError(f"the {what} rose from {self.previous:.4g} to {loss:.4g} in "
                              f"epoch {epoch}: {hint}")
        self.previous = loss
        return loss


def _word(value: float, frac: int, width: int, what: str, allow_zero: bool = False) -> int:
    scaled = value * 2.0 ** frac
    if not math.isfinite(scaled) or scaled >= 2.0 ** width:
        raise ConfigError(f"{what} must be at most {((1 << width) - 1) / (1 << frac):.10g} to "
                          f"fit its register, found {value:.10g}")
    word = int(round(scaled))
    if word >= 1 << width:
        raise ConfigError(f"{what} must be at most {((1 << width) - 1) / (1 << frac):.10g} to "
                          f"fit its register, found {value:.10g}")
    if word == 0 and value > 0 and not allow_zero:
        raise ConfigError(f"{what} {value:g} rounds to 0 in its register (resolution "
                          f"{2.0 ** -frac:g}); use a larger step size or smaller batch")
    return word


def engine_run_config(settings: TrainSettings, n_features: int, epoch: int) -> RunConfig:
    """The register settings for ``epoch`` (from 1) of a run."""
    gamma = settings.gamma(epoch)
    shrink = 1.0 + gamma * settings.l2
    return RunConfig(
        encoding=Encoding.parse(settings.encoding), bits=settings.bits, n_features=n_features,
        batch_size=settings.batch_size, model_width=settings.model_width,
        model_frac=settings.model_frac, grad_width=settings.grad_width,
        grad_frac=settings.grad_frac,
        step=_word(gamma / settings.batch_size, STEP_FRAC, STEP_WIDTH, "step size / batch"),
        decay=_word(gamma * settings.l2 / shrink, DECAY_FRAC, DECAY_WIDTH, "L2 decay"),
        threshold=_word(gamma * settings.l1 / shrink, settings.model_frac, 31, "L1 threshold",
                        allow_zero=True),
        rounding=RoundingMode[settings.rounding.upper().replace("-", "_")],
        update_mode=UpdateMode[settings.update_mode.upper()],
        seed=settings.seed & 0xFFFF_FFFF,
    )


def engine_run_config2(settings: TrainSettings, n_features: int, epoch: int) -> RunConfig2:
    """The engine v2 register settings for ``epoch`` (from 1): the step ``alpha_k / B`` through
    :func:`~zipsgd.spec.engine2.step_register`, the forward operand at its default ``FL_f``
    (at most ``FL_m``), decay and threshold as for v1.  The scaled residual is 18 bits in v2, so
    its format comes from the step, not from ``grad_width``/``grad_frac``: the most fraction
    bits with which ``|e| = |alpha r|`` fits for ``|r| <= 4`` (labels and predictions of scaled
    data), within ``FL_m - 8 .. 40``."""
    gamma = settings.gamma(epoch)
    shrink = 1.0 + gamma * settings.l2
    alpha = gamma / settings.batch_size
    fit = RESIDUAL_WIDTH - 1 - 2 - math.ceil(math.log2(alpha)) if alpha > 0 else 40
    grad_frac = min(40, max(settings.model_frac - 8, 0, fit))
    config = RunConfig2(
        encoding=Encoding.parse(settings.encoding), bits=settings.bits, n_features=n_features,
        batch_size=settings.batch_size, model_width=settings.model_width,
        model_frac=settings.model_frac,
        forward_frac=min(RunConfig2.forward_frac, settings.model_frac),
        grad_frac=grad_frac,
        decay=_word(gamma * settings.l2 / shrink, DECAY_FRAC, DECAY_WIDTH, "L2 decay"),
        threshold=_word(gamma * settings.l1 / shrink, settings.model_frac, 31, "L1 threshold",
                        allow_zero=True),
        rounding=RoundingMode[settings.rounding.upper().replace("-", "_")],
        update_mode=UpdateMode[settings.update_mode.upper()],
        seed=settings.seed & 0xFFFF_FFFF)
    step, shift = step_register(alpha, config)
    return config.with_(step=step, residual_shift=shift)


def _level_table(settings: TrainSettings, labels, features):
    """The level table of a run that quantizes on the fly (None without ``levels``): solved
    on the scaled data in memory."""
    if settings.levels == "uniform":
        return uniform_levels(settings.bits, features.shape[1])
    if settings.levels == "optimal":
        stats = LevelStats(features.shape[1], points=settings.levels_points)
        stats.update(labels, features)
        return solve_table(stats, settings.bits, settings.levels_method)
    return None


def _optimum(data: ScaledData, settings: TrainSettings) -> dict:
    if settings.l1 > 0:
        model = proximal_gradient_optimum(data.features, data.labels, settings.l2, settings.l1)
        method = "proximal gradient (ISTA) to convergence"
    else:
        model = closed_form_optimum(data.features, data.labels, settings.l2)
        method = "closed form"
    loss = objective(data.features, data.labels, model, settings.l2, settings.l1)
    return {"loss": loss, "loss_original_units": _original(loss, data.label_scale),
            "method": method, "model_scaled": model.tolist()}


def _report_base(source: str, settings: TrainSettings, n_samples: int, n_features: int) -> dict:
    return {"zipsgd_version": importlib.metadata.version("zipsgd"), "source": source,
            "settings": asdict(settings), "seed": settings.seed, "n_samples": n_samples,
            "n_features": n_features, "layout": str(settings.layout()), "epochs": []}


def _finish(report: dict, model_scaled: np.ndarray, inverse_model, engine) -> dict:
    coef, intercept = inverse_model(model_scaled)
    report["model"] = {"coef": np.asarray(coef).tolist(), "intercept": float(intercept),
                       "scaled": np.asarray(model_scaled).tolist()}
    if engine is not None:
        cfg = engine.config
        # The simulated engine's own words when there was one (equal to the golden model's
        # when report["bit_exact"]).
        report["model_words"] = report.pop("simulated_model_words", engine.model.tolist())
        report["model_format"] = [cfg.model_width, cfg.model_frac]
    report["bytes_streamed"] = sum(e["bytes_streamed"] for e in report["epochs"])
    return report


def train_in_memory(data: ScaledData, settings: TrainSettings, progress=None) -> dict:
    """Train on a scaled in-memory data set; returns the report (a JSON-ready dict).

    ``progress``, if given, is called as ``progress(epoch, record)`` after every epoch (``record``
    is None while the simulated engine is still running).

    Raises
    ------
    ConfigError
        For settings the data cannot train with, or a run that diverges (see the module).
    """
    labels = data.labels if settings.loss == "squared" else lssvm_labels(data.labels)
    data = ScaledData(data.name, labels, data.features, data.inverse_model, data.label_scale,
                      data.extra)
    n_samples, n_features = data.features.shape
    settings, step = settings.with_step_for(data.features, data.labels)
    if get_backend(settings.backend).kind != "float":
        # Epoch 1's step is the largest: checked now.
        _run_config(settings)(settings, n_features, 1)
    report = _report_base(data.name, settings, n_samples, n_features)
    report["step_size"] = step
    report["optimum"] = _optimum(data, settings)
    layout = settings.layout()

    exact_loss = _exact_loss(data, settings)
    divergence = _Divergence(settings, exact_loss(np.zeros(n_features)))
    if get_backend(settings.backend).kind == "float":
        model = np.zeros(n_features)
        for epoch in range(1, settings.epochs + 1):
            started = time.perf_counter()
            sgd = SgdSettings(settings.batch_size, settings.step_size, settings.l2,
                              settings.l1, settings.update_mode == "delayed")
            model = sgd_epoch(model, data.features, data.labels, epoch, sgd)
            loss = divergence.check(exact_loss(model), epoch)
            record = {"epoch": epoch, "gamma": settings.gamma(epoch), "loss": loss,
                      "loss_original_units": _original(loss, data.label_scale),
                      "bytes_streamed": n_samples * (n_features + 1) * 4,
                      "seconds": time.perf_counter() - started}
            report["epochs"].append(record)
            if progress is not None:
                progress(epoch, record)
        return _finish(report, model, data.inverse_model, None)

    if get_backend(settings.backend).numerics == 2:
        table = _level_table(settings, data.labels, data.features)

        def fields_for(epoch):
            return quantize_table(data.labels, data.features, layout,
                                  epoch_rng(settings.seed, epoch - 1), table)

        if table is not None:
            report["level_table"] = table.tolist()
        engine = _golden2_epochs(report, settings, n_features, n_samples, fields_for, table,
                                 data.label_scale, {"loss": exact_loss}, divergence, progress)
        return _finish(report, engine.model / float(1 << settings.model_frac),
                       data.inverse_model, engine)

    def payload_for(epoch):  # the fields go straight into the v1 engine's beats
        fields = quantize_fields(data.labels, data.features, layout,
                                 epoch_rng(settings.seed, epoch - 1))
        return pack_beats_v1(fields, layout)

    engine = _engine_epochs(report, settings, n_features, n_samples, payload_for,
                            data.label_scale, {"loss": exact_loss}, divergence, progress)
    return _finish(report, engine.model / float(1 << settings.model_frac), data.inverse_model,
                   engine)


def _engine_epochs(report, settings: TrainSettings, n_features: int, n_samples: int,
                   payload_for, label_scale: float, losses: dict, divergence: _Divergence,
                   progress) -> GoldenEngine:
    """Run the golden model (and, for an engine backend, the engine, checked against it
    epoch by epoch); append the epoch records to ``report``; return the golden engine.
    ``payload_for(epoch)`` gives the epoch in the v1 beats the current engine reads (an array
    or an iterable of chunks).  ``losses`` maps record keys to functions of the model (float,
    scaled units): the first is the one ``divergence`` watches."""
    layout = settings.layout()
    params = settings.engine_params()
    backend = get_backend(settings.backend)
    checked = backend.kind == "engine"
    engine = None
    jobs, expected = [], []
    for epoch in range(1, settings.epochs + 1):
        started = time.perf_counter()
        config = engine_run_config(settings, n_features, epoch)
        if engine is None:
            engine = GoldenEngine(params, config)
        else:
            engine.configure(config)
        payload = payload_for(epoch)
        if checked:  # an engine backend is sent the whole epoch
            payload = np.concatenate(list(payload)) if not isinstance(payload, np.ndarray) \
                else payload
        status = engine.run_epoch(payload)
        record = {"epoch": epoch, "gamma": settings.gamma(epoch),
                  **_status_record(status, n_samples, label_scale, config),
                  "bytes_streamed": status.beats * layout.beat_bytes}
        _finish_record(record, engine.model / float(1 << config.model_frac), losses,
                       divergence, label_scale, started)
        report["epochs"].append(record)
        if checked:
            jobs.append(EpochJob(config, payload, n_samples, write_seed=epoch == 1))
            expected.append((status, engine.model.copy()))
        elif progress is not None:
            progress(epoch, record)
    if checked:
        _check_engine(report, backend, settings, params, jobs, expected, n_features, progress,
                      losses, label_scale)
    return engine


#: What each loss of a record is (also the report's "loss_labels").
_LOSS_NAMES = {
    "loss": "training loss",
    "loss_dequantized": "loss on the dequantized data",
    "loss_eval": "loss on the evaluation data",
    "engine_loss": "on-chip loss",
}


def _finish_record(record: dict, model, losses: dict, divergence: _Divergence,
                   label_scale: float, started: float) -> None:
    """An epoch record's losses (``losses`` as :func:`_engine_epochs`: the first one is
    checked by ``divergence``), in scaled and original units, and its time."""
    for index, (key, loss_of) in enumerate(losses.items()):
        loss = loss_of(model)
        record[key] = divergence.check(loss, record["epoch"], _LOSS_NAMES[key]) \
            if index == 0 else loss
        record[f"{key}_original_units"] = _original(loss, label_scale)
    record["seconds"] = time.perf_counter() - started


def _run_config(settings: TrainSettings):
    """The register settings function of the backend's numerics."""
    return engine_run_config2 if get_backend(settings.backend).numerics == 2 \
        else engine_run_config


def _golden2_epochs(report, settings: TrainSettings, n_features: int, n_samples: int,
                    fields_for, table, label_scale: float, losses: dict,
                    divergence: _Divergence, progress) -> GoldenEngine2:
    """Run the engine v2 model (numerics v2) epoch by epoch on ``fields_for(epoch)`` (an
    epoch's ``(samples, n + 1)`` fields), decoding through ``table`` when given; append the
    epoch records to ``report`` (``losses`` and ``divergence`` as :func:`_engine_epochs`);
    return the engine."""
    layout = settings.layout()
    params = EngineParams2(settings.bus_width, settings.max_features,
                           min(settings.max_batch, MAX_BATCH2))
    backend = get_backend(settings.backend)
    checked = backend.kind == "engine"
    engine = None
    jobs, expected = [], []
    for epoch in range(1, settings.epochs + 1):
        started = time.perf_counter()
        config = engine_run_config2(settings, n_features, epoch)
        if engine is None:
            engine = GoldenEngine2(params, config, levels=table)
        else:
            engine.configure(config, table)
        fields = fields_for(epoch)
        status = engine.run_epoch_fields(fields)
        if checked:
            jobs.append(_epoch_job2(params, config, fields, table, epoch == 1))
            expected.append((status, engine.model.copy()))
        record = {"epoch": epoch, "gamma": settings.gamma(epoch),
                  **_status_record(status, n_samples, label_scale, config,
                                   2 * LOSS_FRAC2),
                  "residual_shift": config.residual_shift,
                  "forward_saturations": status.forward_saturations,
                  "bytes_streamed": status.beats * layout.beat_bytes}
        _finish_record(record, engine.model / float(1 << config.model_frac), losses,
                       divergence, label_scale, started)
        report["epochs"].append(record)
        if progress is not None and not checked:
            progress(epoch, record)
    if checked:
        results = backend.run_epochs(settings, params, jobs, np.zeros(n_features, np.int64),
                                     _engine_progress(progress))
        _engine_results(report, results, expected, [(j.plan.total // j.plan.fields,
                                                     j.config.model_frac) for j in jobs],
                        _same_status2, 2 * LOSS_FRAC2, losses, label_scale)
    return engine


def _epoch_job2(params: EngineParams2, config: RunConfig2, fields: np.ndarray, table,
                first: bool) -> EpochJob2:
    """An epoch for an engine v2 backend: the seed and the level table with the first (one
    shared row when every feature's levels are the same; uniform levels without a table)."""
    raw = config.encoding is Encoding.RAW32
    if table is None and not raw:
        table = uniform_levels(config.bits, config.n_features)
    per_feature = per_feature_levels(table)
    plan = lane_plan(config, params, fields.shape[0], per_feature)
    layout = StreamLayout(config.encoding, config.bits, params.bus_width, tables=per_feature)
    return EpochJob2(config, plan, pack_stream(fields, layout), write_seed=first,
                     levels=table if first else None, per_feature=per_feature)


def _same_status2(hw: dict, status) -> bool:
    return (hw["loss"], hw["samples"], hw["beats"], hw["updates"], hw["model_saturations"],
            hw["residual_saturations"], hw["forward_saturations"],
            bool(hw["loss_saturated"])) == (
        status.loss_acc, status.samples, status.beats, status.updates,
        status.model_saturations, status.residual_saturations, status.forward_saturations,
        bool(status.loss_saturated))


def _engine_progress(progress):
    def on_epoch(done):
        if progress is not None:
            progress(done, None)
    return on_epoch


def _engine_results(report, results, expected, epochs, same_status, loss_frac: int, losses,
                    label_scale, extra=None) -> None:
    """Take an engine backend's epochs into the report, each checked against the golden
    model's ``expected`` ``(status, model words)``: ``epochs`` holds each epoch's samples and
    ``FL_m``; the record's losses become the engine's own (the golden ones are kept)."""
    report["golden_backend_check"] = "model words and status compared with the golden model"
    for record, result, (status, words), (samples, model_frac) in zip(
            report["epochs"], results, expected, epochs, strict=True):
        hw = result["status"]
        exact = (hw["error_flags"] == 0 and np.array_equal(result["model_words"], words)
                 and same_status(hw, status))
        cycles = hw["cycles_busy"]
        record["golden_loss"], record["golden_engine_loss"] = record.get("loss"), \
            record["engine_loss"]
        record["engine_loss"] = hw["loss"] / float(1 << loss_frac) / (2 * samples)
        record["engine_loss_original_units"] = _original(record["engine_loss"], label_scale)
        model = np.asarray(result["model_words"], dtype=np.float64) / float(1 << model_frac)
        for key, loss_of in losses.items():
            record[key] = loss_of(model)
            record[f"{key}_original_units"] = _original(record[key], label_scale)
        record.update({"bit_exact": bool(exact), "cycles": cycles,
                       "bus_efficiency": hw["beats"] / cycles if cycles else None,
                       "simulation_seconds": result["wall_s"]})
        if "upload_s" in result:  # (a SoC's: its upload into DRAM, apart from the epoch)
            record["upload_seconds"] = result["upload_s"]
            record["epoch_seconds"] = result["wall_s"]
        if extra is not None:
            record.update(extra(hw))
    report["bit_exact"] = all(r["bit_exact"] for r in report["epochs"])
    report["simulated_model_words"] = results[-1]["model_words"]


def _check_engine(report, backend, settings, params, jobs, expected, n_features, progress,
                  losses, label_scale) -> None:
    """Run the epochs on the engine backend and check each against the golden model."""
    initial = np.zeros(n_features, dtype=np.int64)
    results = backend.run_epochs(settings, params, jobs, initial, _engine_progress(progress))
    _engine_results(report, results, expected,
                    [(j.samples, j.config.model_frac) for j in jobs],
                    lambda hw, status: epoch_status(hw) == status, LOSS_ACC_FRAC, losses,
                    label_scale,
                    lambda hw: {"cycles_starved": hw["cycles_starved"],
                                "cycles_update_stall": hw["cycles_update_stall"]})


def _status_record(status, n_samples: int, label_scale: float, config,
                   loss_frac: int = LOSS_ACC_FRAC) -> dict:
    engine_loss = status.loss_acc / float(1 << loss_frac) / (2 * n_samples)
    return {"engine_loss": engine_loss,
            "engine_loss_original_units": _original(engine_loss, label_scale),
            "loss_acc": status.loss_acc, "beats": status.beats, "samples": status.samples,
            "updates": status.updates, "model_saturations": status.model_saturations,
            "residual_saturations": status.residual_saturations,
            "loss_saturated": status.loss_saturated, "step_word": config.step}


def train_stream_file(stream: EpochStreams, settings: TrainSettings, progress=None,
                      eval_data: ScaledData | None = None) -> dict:
    """Train the engine (golden model, or an engine backend checked against it) on a packed
    data set (a ``.zsgd`` :class:`~zipsgd.host.zsgd_file.StreamFile` or a
    :class:`~zipsgd.host.packed.PackedData`); epoch ``k`` reads stored stream ``(k - 1) mod
    epoch_count``.  The stream's encoding, bits and bus width override ``settings``'; a level
    table in its header needs a backend that decodes one (``golden2``).

    Every epoch records ``loss_dequantized``, the loss of the model on the data of the first
    stored epoch as the engine decodes it, and, with ``eval_data`` (the original samples scaled
    by the stream's own scale table), ``loss_eval`` on them: both compare with float SGD's
    loss.  ``engine_loss`` is the on-chip loss (``docs/LOSS.md``).  An automatic
    step is chosen from ``eval_data`` if given, else from the dequantized data.
    """
    header = stream.header
    if get_backend(settings.backend).kind == "float":
        raise ConfigError(f"a .zsgd file trains on the golden model or an engine backend (not "
                          f"float SGD, which needs the unquantized data), found "
                          f"{settings.backend!r}")
    backend = get_backend(settings.backend)
    if header.levels is not None and not backend.levels:
        raise ConfigError(f"{stream.name} carries a level table: expected a backend that "
                          f"decodes level tables (golden2, verilator2), found {settings.backend!r}")
    if settings.levels is not None:
        raise ConfigError(f"levels {settings.levels!r}: a .zsgd file brings its own levels "
                          "(quantize --levels), expected none")
    layout = header.layout
    settings = TrainSettings(**{**asdict(settings), "encoding": layout.encoding.name.lower(),
                                "bits": layout.bits, "bus_width": layout.bus_width})
    if eval_data is not None and eval_data.features.shape[1] != header.n_features:
        raise ConfigError(f"the evaluation data have {eval_data.features.shape[1]} features: "
                          f"expected {header.n_features}, as in {stream.name}")
    dequantized = _DequantizedLoss(stream, settings)
    if eval_data is not None:
        settings, step = settings.with_step_for(eval_data.features, eval_data.labels)
    else:
        settings, step = settings.with_step_for(*dequantized.head(), header.n_samples)
    _run_config(settings)(settings, header.n_features, 1)  # the registers, before any work
    report = _report_base(stream.name, settings, header.n_samples, header.n_features)
    report["step_size"] = step
    losses = {"loss_dequantized": dequantized}
    if eval_data is not None:
        report["eval_source"] = eval_data.name
        losses = {"loss_eval": _exact_loss(eval_data, settings), **losses}
    report["loss_labels"] = {key: _LOSS_NAMES[key] for key in (*losses, "engine_loss")}
    divergence = _Divergence(settings, next(iter(losses.values()))(np.zeros(header.n_features)))
    scaler = Scaler.from_table(header.offsets, header.scales, intercept=header.intercept)
    if backend.numerics == 2:
        def fields_for(epoch):  # the golden model takes an epoch's fields at once
            return np.concatenate(list(stream.iter_fields((epoch - 1) % header.epoch_count)))

        engine = _golden2_epochs(report, settings, header.n_features, header.n_samples,
                                 fields_for, header.levels, float(header.scales[0]), losses,
                                 divergence, progress)
        return _finish(report, engine.model / float(1 << settings.model_frac),
                       scaler.inverse_model, engine)

    def payload_for(epoch):  # read, checked and converted chunk by chunk as the model goes
        return restream_v1(stream.iter_epoch_chunks((epoch - 1) % header.epoch_count), layout,
                           header.n_features, header.n_samples)

    engine = _engine_epochs(report, settings, header.n_features, header.n_samples, payload_for,
                            float(header.scales[0]), losses, divergence, progress)
    return _finish(report, engine.model / float(1 << settings.model_frac),
                   scaler.inverse_model, engine)


def _exact_loss(data: ScaledData, settings: TrainSettings):
    def loss(model):
        return objective(data.features, data.labels, model, settings.l2, settings.l1)
    return loss


class _DequantizedLoss:
    """The loss of a model on the first stored epoch as the engine decodes it, read chunk by
    chunk (a file larger than memory too)."""

    def __init__(self, stream: EpochStreams, settings: TrainSettings):
        self.stream, self.settings = stream, settings

    def _blocks(self, max_samples: int = 65536):
        layout, levels = self.stream.layout, self.stream.header.levels
        for fields in self.stream.iter_fields(0, max_samples):
            yield dequantize_fields(fields, layout, levels)

    def head(self) -> tuple[np.ndarray, np.ndarray]:
        """The first :data:`~zipsgd.host.step_size.SAMPLE_ROWS` samples (features, labels)."""
        labels, features = next(self._blocks(SAMPLE_ROWS))
        return features, labels

    def __call__(self, model: np.ndarray) -> float:
        squares, count = 0.0, 0
        with np.errstate(over="ignore", invalid="ignore"):
            for labels, features in self._blocks():
                residual = features @ model - labels
                squares += float(residual @ residual)
                count += labels.shape[0]
            return (0.5 * squares / count + 0.5 * self.settings.l2 * float(model @ model)
                    + self.settings.l1 * float(np.abs(model).sum()))
