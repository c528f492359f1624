"""The engine's parameters, run-time configuration and every datapath width.

One definition used by the hardware generator, the golden model, the host and the benches;
``docs/ENGINE.md`` explains each step and is checked against the constants here by the tests.

Two kinds of settings:

* :class:`EngineParams` are fixed when the hardware is generated (bus width, N_max, B_max);
  they size the adder trees, accumulators and memories.
* :class:`RunConfig` is what the control registers hold while training: encoding and bits,
  feature count, batch size, the model and gradient fixed-point formats, the step size, the
  proximal terms, the rounding mode, the update mode and the random seed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from .errors import ConfigError
from .fixed import RoundingMode
from .stream import BUS_WIDTHS, MAX_FEATURES, QUANT_FEATURE_FRAC, Encoding, StreamLayout

__all__ = [
    "EngineParams",
    "EpochStatus",
    "RunConfig",
    "UpdateMode",
    "STEP_FRAC",
    "STEP_WIDTH",
    "DECAY_FRAC",
    "DECAY_WIDTH",
    "PRODUCT_MAGNITUDE_LOG2",
    "RAW_PRODUCT_SHIFT",
    "LOSS_RESIDUAL_WIDTH",
    "LOSS_RESIDUAL_FRAC",
    "LOSS_SQUARE_SHIFT",
    "LOSS_ACC_WIDTH",
    "LOSS_ACC_FRAC",
    "MODEL_STORAGE_WIDTH",
    "UPDATE_WINDOW",
    "BOARD_LANES",
    "BOARD_MAX_FEATURES",
    "BOARD_MAX_BATCH",
    "BOARD_FREQ_MHZ",
    "OOC_FREQ_MHZ",
    "SIM_MAX_FEATURES",
    "SIM_MAX_BATCH",
    "sim_params",
    "clog2",
]

#: Cycles from a fused update's issue to the first issue that reads its written words, less
#: one (``docs/HARDWARE.md``, "Hazards"): a fused beat waits until no fused beat with its field
#: offset was issued in the last ``UPDATE_WINDOW`` cycles, and a plain beat issued 1 ..
#: ``UPDATE_WINDOW - 1`` cycles after one takes the updated words by forwarding.  The hardware
#: (``zipsgd/hw/core.py``, whose update pipeline checks its length against it) and the cycle model
#: (``zipsgd/host/perf.py``) use this one value.
UPDATE_WINDOW = 15

#: The board build's defaults (``zipsgd synth``; ``docs/results/synthesis.md``): the lane count
#: whose W = 64 engine routes on an ECP5-85F, and an engine clock that build meets with margin
#: over placement seeds (the ULX3S preset of ``zipsgd/host/perf.py`` uses both).  Out-of-context
#: builds default to the timing goal instead.
BOARD_LANES = 4
#: The board build's N_max and B_max (``zipsgd synth``): what a board holds for training.
BOARD_MAX_FEATURES = 2048
BOARD_MAX_BATCH = 256
BOARD_FREQ_MHZ = 50.0
OOC_FREQ_MHZ = 100.0
#: The small simulation build (``N_max``, ``B_max``): the simulation tests, the soak, coverage,
#: the cycle measurements of the performance model and the simulated board use it, because
#: it builds in minutes and computes the same numbers as any larger build.
SIM_MAX_FEATURES = 1024
SIM_MAX_BATCH = 64

#: Model words are stored in memories this wide; the run-time model format is at most this.
MODEL_STORAGE_WIDTH = 32
#: The step-size register: unsigned, this many bits, this many fraction bits (alpha in [0, 256)).
STEP_WIDTH = 32
STEP_FRAC = 24
#: The L2 decay register (eta = gamma*lambda / (1 + gamma*lambda)): unsigned, eta in [0, 1).
DECAY_WIDTH = 24
DECAY_FRAC = 24
#: RAW32 features carry 30 fraction bits; their products are shifted right (floor) by this much
#: so that every product has ``QUANT_FEATURE_FRAC + FL_model`` fraction bits.
RAW_PRODUCT_SHIFT = 30 - QUANT_FEATURE_FRAC
#: Every feature x model (or feature x scaled-residual) product has magnitude <= 2**39:
#: |F| <= 2**8 and |word| <= 2**31 (quantized); RAW32: (2**30 * 2**31) >> 22.
PRODUCT_MAGNITUDE_LOG2 = QUANT_FEATURE_FRAC + MODEL_STORAGE_WIDTH - 1
#: The loss accumulates squared residuals narrowed to <32, 24> (floor, then saturate) ...
LOSS_RESIDUAL_WIDTH = 32
LOSS_RESIDUAL_FRAC = 24
#: ... squared (48 fraction bits), shifted right (floor) by 16, summed in an unsigned
#: saturating 64-bit accumulator with 32 fraction bits.
LOSS_SQUARE_SHIFT = 16
LOSS_ACC_WIDTH = 64
LOSS_ACC_FRAC = 2 * LOSS_RESIDUAL_FRAC - LOSS_SQUARE_SHIFT


def clog2(value: int) -> int:
    """Smallest ``k`` with ``2**k >= value``."""
    return max(0, (int(value) - 1).bit_length())


class UpdateMode(enum.IntEnum):
    """When a mini-batch's gradient reaches the model (the register encoding)."""

    #: Batch ``t`` is computed with the model after batches ``0..t-1``: plain mini-batch SGD.
    #: The engine stalls at every batch boundary until the last gradient is in.
    EXACT = 0
    #: Batch ``t`` is computed with the model after batches ``0..t-2`` (one batch stale); the
    #: engine never stalls at a batch boundary.
    DELAYED = 1


@dataclass(frozen=True)
class EngineParams:
    """Build-time parameters of the engine.

    Parameters
    ----------
    bus_width : int
        AXI4-Stream data width ``W`` (64, 128, 256 or 512).
    max_features : int
        ``N_max``: the largest feature count the model memory holds.
    max_batch : int
        ``B_max``: the largest mini-batch (sizes the gradient accumulators).
    lanes : int or None
        ``L``: feature fields the engine processes per cycle, a power of two from 2 to
        ``W / 2`` (``None``: ``W / 2``, one beat per cycle at every encoding).  A beat with more
        fields than lanes is issued as several *slices* of at most ``L`` fields, one per cycle
        (:func:`zipsgd.spec.stream.slices_per_sample`); fewer lanes trade throughput at the
        narrowest encodings for multipliers and logic.

    Raises
    ------
    ConfigError
    """

    bus_width: int = 64
    max_features: int = 32768
    max_batch: int = 1024
    lanes: int | None = None

    def __post_init__(self):
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        if not isinstance(self.max_features, int) or not 1 <= self.max_features <= min(
                MAX_FEATURES, 1 << 21):
            raise ConfigError(f"max_features must be in 1..{1 << 21}, found "
                              f"{self.max_features!r}")
        if not isinstance(self.max_batch, int) or not 1 <= self.max_batch <= 1 << 16:
            raise ConfigError(f"max_batch must be in 1..65536, found {self.max_batch!r}")
        most = self.bus_width // 2   # fields per beat of ``single`` at 1 bit (2-bit fields)
        if self.lanes is None:
            object.__setattr__(self, "lanes", most)
        elif (not isinstance(self.lanes, int) or isinstance(self.lanes, bool)
              or self.lanes < 2 or self.lanes > most or self.lanes & (self.lanes - 1)):
            raise ConfigError(f"lanes must be a power of two from 2 to {most} (W/2), found "
                              f"{self.lanes!r}")

    @property
    def dot_width(self) -> int:
        """Signed width of the dot product: N_max products of magnitude <= 2**39."""
        return PRODUCT_MAGNITUDE_LOG2 + clog2(self.max_features) + 2

    @property
    def residual_width(self) -> int:
        """Signed width of dot product minus aligned label (|label| <= 2**39)."""
        return self.dot_width + 1

    @property
    def grad_acc_width(self) -> int:
        """Signed width of a gradient accumulator: B_max products of magnitude <= 2**39."""
        return PRODUCT_MAGNITUDE_LOG2 + clog2(self.max_batch) + 2

    @property
    def max_batch_field_width(self) -> int:
        return clog2(self.max_batch + 1)


@dataclass(frozen=True)
class RunConfig:
    """What the control registers hold for one training run (see ``docs/REGISTERS.md``).

    Parameters
    ----------
    encoding, bits : the stream's encoding and interval-index bits (32 for raw32).
    n_features : int
    batch_size : int
        Samples per mini-batch, ``1..B_max``; the last batch of an epoch may be shorter.
    model_width, model_frac : int
        Model format ``<WL_m, FL_m>``: ``2 <= WL_m <= 32``, ``1 <= FL_m <= 31``.
    grad_width, grad_frac : int
        Format ``<WL_g, FL_g>`` of the scaled residual ``e = alpha * r`` that multiplies every
        feature: ``2 <= WL_g <= 32`` and ``FL_m - 8 <= FL_g <= FL_m + 32``, ``FL_g >= 0``.
    step : int
        Step-size register word (``STEP_FRAC`` fraction bits, unsigned ``STEP_WIDTH``): the host
        writes ``alpha_k / batch_size``.
    decay : int
        L2 proximal decay word (``DECAY_FRAC`` fraction bits):
        ``eta = gamma*lambda / (1 + gamma*lambda)``.
    threshold : int
        L1 proximal threshold in model words (``FL_m`` fraction bits): ``gamma * lambda_1``.
    rounding : RoundingMode
        Rounding of the scaled residual, the model update and the decay.
    update_mode : UpdateMode
    seed : int
        32-bit seed of the on-chip random generators.
    """

    encoding: Encoding = Encoding.DOUBLE
    bits: int = 4
    n_features: int = 1
    batch_size: int = 1
    model_width: int = 32
    model_frac: int = 24
    grad_width: int = 32
    grad_frac: int = 24
    step: int = 0
    decay: int = 0
    threshold: int = 0
    rounding: RoundingMode = RoundingMode.STOCHASTIC
    update_mode: UpdateMode = UpdateMode.EXACT
    seed: int = 1
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "encoding", Encoding.parse(self.encoding))
        if self.encoding is Encoding.RAW32:
            object.__setattr__(self, "bits", 32)
        object.__setattr__(self, "rounding", RoundingMode(self.rounding))
        object.__setattr__(self, "update_mode", UpdateMode(self.update_mode))
        checks = [
            ("model_width", 2 <= self.model_width <= MODEL_STORAGE_WIDTH, "2..32"),
            ("model_frac", 1 <= self.model_frac <= 31, "1..31"),
            ("grad_width", 2 <= self.grad_width <= 32, "2..32"),
            ("grad_frac", max(0, self.model_frac - 8) <= self.grad_frac <= self.model_frac + 32,
             f"{max(0, self.model_frac - 8)}..{self.model_frac + 32} (FL_m-8..FL_m+32)"),
            ("step", 0 <= self.step < 1 << STEP_WIDTH, f"0..2**{STEP_WIDTH}-1"),
            ("decay", 0 <= self.decay < 1 << DECAY_WIDTH, f"0..2**{DECAY_WIDTH}-1"),
            ("threshold", 0 <= self.threshold < 1 << 31, "0..2**31-1"),
            ("seed", 0 <= self.seed < 1 << 32, "0..2**32-1"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("n_features", self.n_features >= 1, ">= 1"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ConfigError(f"{name} must be in {expected}, found {getattr(self, name)!r}")
        self.layout(64)  # validates encoding and bits

    def layout(self, bus_width: int) -> StreamLayout:
        return StreamLayout(self.encoding, self.bits, bus_width)

    def check_against(self, params: EngineParams) -> None:
        """Raise ConfigError if the run does not fit the built engine."""
        if self.n_features > params.max_features:
            raise ConfigError(f"n_features must be at most N_max={params.max_features}, "
                              f"found {self.n_features}")
        if self.batch_size > params.max_batch:
            raise ConfigError(f"batch_size must be at most B_max={params.max_batch}, "
                              f"found {self.batch_size}")

    @property
    def dot_frac(self) -> int:
        """Fraction bits of the dot product and the residual."""
        return QUANT_FEATURE_FRAC + self.model_frac

    @property
    def residual_shift(self) -> int:
        """Right shift that narrows ``step * residual`` to the gradient format."""
        return STEP_FRAC + self.dot_frac - self.grad_frac

    @property
    def update_shift(self) -> int:
        """Right shift that narrows a gradient accumulator to model words."""
        return self.grad_frac + QUANT_FEATURE_FRAC - self.model_frac

    def with_(self, **changes) -> RunConfig:
        return replace(self, **changes)



def sim_params(bus_width: int = 64, lanes: int | None = None) -> EngineParams:
    """The small simulation build (:data:`SIM_MAX_FEATURES`, :data:`SIM_MAX_BATCH`)."""
    return EngineParams(bus_width, SIM_MAX_FEATURES, SIM_MAX_BATCH, lanes)

@dataclass
class EpochStatus:
    """What the engine's status registers say after one epoch.

    Members
    -------
    loss_acc : int
        Sum over the epoch's samples of the squared, narrowed residuals (``LOSS_ACC_FRAC``
        fraction bits), saturated at ``2**64 - 1``.
    samples, beats, updates : int
        Samples and beats consumed; model updates applied (one per mini-batch).
    model_saturations : int
        Model words that were clamped to the model format by an update.
    residual_saturations : int
        Scaled residuals clamped to the gradient format.
    loss_saturated : bool
        The loss accumulator (or a narrowed residual) saturated.
    forward_saturations : int
        Engine v2 only: forward operands clamped to 18 bits by an update.
    """

    loss_acc: int = 0
    samples: int = 0
    beats: int = 0
    updates: int = 0
    model_saturations: int = 0
    residual_saturations: int = 0
    loss_saturated: bool = False
    #: Engine v2: model words whose forward operand was clamped to 18 bits.
    forward_saturations: int = 0

    @property
    def loss_sum(self) -> float:
        """The accumulated sum of squared residuals as a float (scaled label units)."""
        return self.loss_acc / float(1 << LOSS_ACC_FRAC)
