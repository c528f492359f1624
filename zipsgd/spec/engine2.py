"""Engine v2: every width, format, rounding and saturation step (numerics v2).

One definition used by the v2 hardware (``zipsgd/hw/v2``) and its bit-exact golden model
(``zipsgd/golden/engine2.py``); ``docs/ENGINE.md`` ("Engine v2") explains each step and
``tests/golden/test_engine2.py`` checks the page against these constants.

What changes from v1, and why (``docs/HARDWARE.md``, "Engine v2"):

* the forward product uses an 18-bit *forward operand* ``x_f`` (a run-time format
  ``<18, FL_f>`` of the model word, rounded to nearest even and saturated), so a lane needs one
  MULT18X18D for it;
* the scaled residual ``e`` is 18 bits, saturated symmetrically, so the gradient term
  ``e * F2`` is one MULT18X18D and a batch of ``B_max <= 512`` terms fits a 35-bit partial;
* a ``raw32`` word is rounded to 16 fraction bits (18-bit feature word);
* the step is an unsigned 17-bit mantissa with a run-time shift;
* the loss is accumulated from the residual rounded to ``<18, 13>``;
* the random bits come from ``U = W / 32`` update generators (model word ``m`` from
  generator ``m mod U``) and ``R = W / 16`` residual generators (sample ``s`` from generator
  ``s mod R``), so the numbers depend on the bus width but not on the lanes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .engine import (
    DECAY_FRAC,
    DECAY_WIDTH,
    MODEL_STORAGE_WIDTH,
    EpochStatus,
    UpdateMode,
    clog2,
)
from .errors import ConfigError
from .fixed import RoundingMode
from .stream import (
    BUS_WIDTHS,
    GROUP_LIMIT,
    QUANT_FEATURE_FRAC,
    TABLE_GROUP_LIMIT,
    Encoding,
    StreamLayout,
    sample_fields,
)

__all__ = [
    "EngineParams2", "RunConfig2", "EpochStatus", "UpdateMode",
    "FORWARD_WIDTH", "RESIDUAL_WIDTH", "RESIDUAL_MAX", "STEP_WIDTH", "RAW_FEATURE_FRAC2",
    "RAW_ROUND_SHIFT", "RAW_PRODUCT_SHIFT2", "PRODUCT_LOG2", "LOSS_WIDTH", "LOSS_FRAC",
    "LOSS_ACC_WIDTH", "PARTIAL_WIDTH", "core_settings", "MAX_BATCH2", "update_units", "DECAY_FRAC",
    "DECAY_WIDTH", "step_register", "LanePlan", "lane_plan", "LANE_CAPACITY",
    "LANE_TABLE_FEATURES", "TABLE_BITS", "check_table_bits", "MAX_LANE_CAPACITY",
    "REPLAY_MARGIN", "MIN_SAMPLE_POSITIONS", "PARTIAL_REUSE",
    "sub_words", "SUB_WORD_SHIFT", "BOARD_PARAMS2", "READER_BURST", "READER_OUTSTANDING",
]

#: The forward operand ``x_f``: ``<18, FL_f>``, one MULT18X18D input.
FORWARD_WIDTH = 18
#: The scaled residual ``e``: ``<18, FL_e>``, saturated to ``[-RESIDUAL_MAX, RESIDUAL_MAX]``.
RESIDUAL_WIDTH = 18
RESIDUAL_MAX = (1 << (RESIDUAL_WIDTH - 1)) - 1
#: The step register: an unsigned 17-bit mantissa ``a``; ``e = round(a * r, residual_shift)``.
STEP_WIDTH = 17
#: A ``raw32`` word (30 fraction bits, clamped to [-1, 1]) becomes an 18-bit feature word with
#: 16 fraction bits: ``(w + 2**13) >> 14`` (round half up).
RAW_FEATURE_FRAC2 = 16
RAW_ROUND_SHIFT = 30 - RAW_FEATURE_FRAC2
#: ``raw32`` products are shifted right (floor) by this so every product has ``8 + FL_f``
#: (dot product) or ``8 + FL_e`` (gradient term) fraction bits.
RAW_PRODUCT_SHIFT2 = RAW_FEATURE_FRAC2 - QUANT_FEATURE_FRAC
#: Every product and gradient term has magnitude <= 2**25 (|F| <= 2**8, |x_f|, |e| <= 2**17;
#: raw32: 2**16 * 2**17 >> 8).
PRODUCT_LOG2 = QUANT_FEATURE_FRAC + FORWARD_WIDTH - 1
#: The loss: the residual rounded (half even) to ``<18, 13>``, saturated, squared (26 fraction
#: bits) and summed in an unsigned saturating 64-bit accumulator.
LOSS_WIDTH = 18
LOSS_FRAC = 13
LOSS_ACC_WIDTH = 64
#: The largest mini-batch: a lane's gradient partial (B_max terms below 2**25) fits 35 bits,
#: and a batch-parity tag makes a 36-bit memory word.
MAX_BATCH2 = 512
PARTIAL_WIDTH = PRODUCT_LOG2 + clog2(MAX_BATCH2) + 1


def update_units(bus_width: int) -> int:
    """Update units (and update generators) of a build: ``W / 32``."""
    return bus_width // 32


#: Words of a lane's per-feature memories (forward operands, partials, replay) at least: a
#: sample of up to ``GROUP_LIMIT * L`` slots fits them (the stream pads longer samples so
#: that each power-of-two class of lanes holds at most this many: ``sample_fields``); a build
#: whose ``N_max`` needs more has more (``EngineParams2.lane_capacity``).
LANE_CAPACITY = GROUP_LIMIT
#: The most a build's lane capacity may be: its address fits the 16-bit WRAP and STEP_ADDR.
MAX_LANE_CAPACITY = 1 << 15
#: Passes of the replay memory (it has ``lane_capacity``) kept free for the passes issued
#: while a sample's residual is computed: a sample spans at most ``lane_capacity -
#: REPLAY_MARGIN`` windows.
REPLAY_MARGIN = 64


@dataclass(frozen=True)
class EngineParams2:
    """Build-time parameters of engine v2: bus width ``W`` (lanes ``L = W / 2``), ``N_max``
    and ``B_max`` (at most :data:`MAX_BATCH2`)."""

    bus_width: int = 64
    max_features: int = 32768
    max_batch: int = MAX_BATCH2

    def __post_init__(self):
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        if not isinstance(self.max_features, int) or not 1 <= self.max_features <= 1 << 20:
            raise ConfigError(f"max_features must be in 1..{1 << 20}, "
                              f"found {self.max_features!r}")
        if not isinstance(self.max_batch, int) or not 1 <= self.max_batch <= MAX_BATCH2:
            raise ConfigError(f"max_batch must be in 1..{MAX_BATCH2}, found {self.max_batch!r}")
        if self.lane_capacity > MAX_LANE_CAPACITY:
            raise ConfigError(f"max_features must leave at most {MAX_LANE_CAPACITY} features "
                              f"a lane at W = {self.bus_width}, found {self.max_features} "
                              f"({self.lane_capacity} a lane)")

    @property
    def lane_capacity(self) -> int:
        """Features a lane's memories hold, and passes its replay memory holds: the least
        power of two, at least :data:`LANE_CAPACITY`, that holds a sample of ``N_max``
        features spread over the ``L`` lanes (``sample_fields``; more features a lane come
        only from raw32's ``L / 4`` positions, which :func:`lane_plan` refuses)."""
        per_lane = -(-sample_fields(self.max_features) // self.lanes)
        return max(LANE_CAPACITY, 1 << (per_lane - 1).bit_length())

    @property
    def max_sample_windows(self) -> int:
        """Windows a sample may span: the replay memory's passes less
        :data:`REPLAY_MARGIN`."""
        return self.lane_capacity - REPLAY_MARGIN

    @property
    def lanes(self) -> int:
        return self.bus_width // 2

    @property
    def update_units(self) -> int:
        return update_units(self.bus_width)

    @property
    def residual_generators(self) -> int:
        """Residual generators ``R = W / 16`` (one per group of eight lanes): sample ``s``
        takes generator ``s mod R``, so the samples a window closes never share one."""
        return self.bus_width // 16

    @property
    def dot_width(self) -> int:
        """Signed width of a dot product: ``N_max`` products of magnitude <= 2**25."""
        return PRODUCT_LOG2 + clog2(self.max_features) + 2

    @property
    def residual_width(self) -> int:
        return self.dot_width + 1

    @property
    def gradient_width(self) -> int:
        """Signed width of a feature's batch gradient: ``B_max`` terms below 2**25."""
        return PRODUCT_LOG2 + clog2(self.max_batch) + 1


#: The engine a board build holds (the board SoCs', ``zipsgd/hw/board_soc.py``; the
#: configuration of the synthesis figures, ``docs/results/synthesis.md``; ``make demo``'s).
BOARD_PARAMS2 = EngineParams2(64, 8192, 512)

#: The memory reader's bursts: beats per burst at most (a 4 KiB page holds 64 beats at
#: W = 512), and bursts in flight at most; its FIFO holds their product
#: (``zipsgd/hw/v2/reader.py``).
READER_BURST = 64
READER_OUTSTANDING = 4


@dataclass(frozen=True)
class RunConfig2:
    """The control registers of engine v2 for one run (``docs/ENGINE.md``, "Engine v2").

    Parameters
    ----------
    encoding, bits, n_features, batch_size, rounding, update_mode, seed : as in v1.
    model_width, model_frac : ``<WL_m, FL_m>``, ``2 <= WL_m <= 32``, ``1 <= FL_m <= 31``.
    forward_frac : ``FL_f`` of the forward operand ``<18, FL_f>``: ``1 <= FL_f <= min(FL_m, 17)``.
    grad_frac : ``FL_e`` of the scaled residual ``<18, FL_e>``: ``FL_m - 8 <= FL_e <= 40``.
    step : the step mantissa ``a`` (unsigned, ``STEP_WIDTH`` bits).
    residual_shift : ``e = round(a * r, residual_shift)``, ``0..63``.
    decay, threshold : L2 decay (``DECAY_FRAC`` fraction bits) and L1 threshold (model words).
    """

    encoding: Encoding = Encoding.DOUBLE
    bits: int = 4
    n_features: int = 1
    batch_size: int = 1
    model_width: int = 32
    model_frac: int = 24
    forward_frac: int = 14
    grad_frac: int = 24
    step: int = 0
    residual_shift: int = 0
    decay: int = 0
    threshold: int = 0
    rounding: RoundingMode = RoundingMode.STOCHASTIC
    update_mode: UpdateMode = UpdateMode.DELAYED
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
            ("forward_frac", 1 <= self.forward_frac <= min(self.model_frac, 17),
             f"1..{min(self.model_frac, 17)} (at most FL_m and 17)"),
            ("grad_frac", max(0, self.model_frac - 8) <= self.grad_frac <= 40,
             f"{max(0, self.model_frac - 8)}..40 (FL_m-8..40)"),
            ("step", 0 <= self.step < 1 << STEP_WIDTH, f"0..2**{STEP_WIDTH}-1"),
            ("residual_shift", 0 <= self.residual_shift <= 63, "0..63"),
            ("decay", 0 <= self.decay < 1 << DECAY_WIDTH, f"0..2**{DECAY_WIDTH}-1"),
            ("threshold", 0 <= self.threshold < 1 << 31, "0..2**31-1"),
            ("seed", 0 <= self.seed < 1 << 32, "0..2**32-1"),
            ("batch_size", self.batch_size >= 1, ">= 1"),
            ("n_features", self.n_features >= 1, ">= 1"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ConfigError(f"{name} must be in {expected}, found {getattr(self, name)!r}")
        StreamLayout(self.encoding, self.bits, 64)   # validates encoding and bits

    def check_against(self, params: EngineParams2) -> None:
        if self.n_features > params.max_features:
            raise ConfigError(f"n_features must be at most N_max={params.max_features}, "
                              f"found {self.n_features}")
        if self.batch_size > params.max_batch:
            raise ConfigError(f"batch_size must be at most B_max={params.max_batch}, "
                              f"found {self.batch_size}")

    @property
    def dot_frac(self) -> int:
        """Fraction bits of products, the dot product and the residual: ``8 + FL_f``."""
        return QUANT_FEATURE_FRAC + self.forward_frac

    @property
    def term_frac(self) -> int:
        """Fraction bits of a gradient term and of a feature's batch gradient: ``8 + FL_e``."""
        return QUANT_FEATURE_FRAC + self.grad_frac

    @property
    def update_shift(self) -> int:
        """Right shift from a batch gradient to model words: ``FL_e + 8 - FL_m`` (>= 0)."""
        return self.term_frac - self.model_frac

    @property
    def forward_shift(self) -> int:
        """Right shift from a model word to its forward operand: ``FL_m - FL_f`` (>= 0)."""
        return self.model_frac - self.forward_frac

    def with_(self, **changes) -> RunConfig2:
        return replace(self, **changes)


def step_register(alpha: float, config: RunConfig2) -> tuple[int, int]:
    """The step mantissa and residual shift for a step ``alpha`` (per sample of the batch: the
    host passes ``alpha_k / B``): ``e = a * r * 2**-s`` in ``<18, FL_e>`` units equals
    ``alpha * r`` with the most mantissa bits that fit.  Returns ``(step, residual_shift)``."""
    if not alpha >= 0 or alpha != alpha or alpha == float("inf"):
        raise ConfigError(f"the step size must be finite and >= 0, found {alpha!r}")
    if alpha == 0:
        return 0, 0
    base = config.dot_frac - config.grad_frac          # s = k + FL_d - FL_e for a = alpha 2**k
    k = (1 << STEP_WIDTH) - 1
    exponent = STEP_WIDTH - 1 - int(np.floor(np.log2(alpha)))
    exponent = min(exponent, 63 - base)
    if exponent + base < 0:
        raise ConfigError(f"the step size {alpha!r} is too large for the formats "
                          f"(FL_f={config.forward_frac}, FL_e={config.grad_frac})")
    mantissa = min(int(round(alpha * 2.0 ** exponent)), k)
    return mantissa, exponent + base


#: Features a lane's per-feature level tables hold (2048 words, 16 levels each): the stream
#: pads longer samples to fit when it has per-feature tables.
LANE_TABLE_FEATURES = TABLE_GROUP_LIMIT
#: Bits of a field whose levels a per-feature table holds (16 words a feature: ``l_0 ..
#: l_15``; ``l_16`` is +1 without a read); a table shared by every feature holds any b's.
TABLE_BITS = 4


def check_table_bits(bits: int, per_feature_levels: bool) -> None:
    """:class:`ConfigError` for per-feature level tables at more than :data:`TABLE_BITS` bits."""
    if per_feature_levels and bits > TABLE_BITS:
        raise ConfigError(f"level tables per feature hold 2**{TABLE_BITS} levels (b <= "
                          f"{TABLE_BITS}), found b = {bits} with a table that differs by "
                          f"feature: quantize at b <= {TABLE_BITS}, or with --levels uniform "
                          f"(one table for every feature)")


#: Lanes of a group: a group closes at most one sample per pass, so a window of shorter
#: samples is issued in passes of one sample end each (``LanePlan.short``).
MIN_SAMPLE_POSITIONS = 8


#: A lane's partial word may be summed into again only this many terms (windows) after its
#: last term: its read-modify-write forwards nothing (``docs/HARDWARE.md``, "Sums").
PARTIAL_REUSE = 4
#: Sub-word ``s`` of a feature's partial is at address ``a + (s << SUB_WORD_SHIFT)``
#: (:func:`sub_words`): ``a < wrap < PARTIAL_REUSE <= 1 << SUB_WORD_SHIFT``, so no two meet.
SUB_WORD_SHIFT = (PARTIAL_REUSE - 1).bit_length()


def sub_words(wrap: int) -> int:
    """Partial words per feature in a lane, for a plan of ``wrap`` addresses per lane.

    A lane meets its ``wrap`` features in turn, one per window, so with ``wrap <
    PARTIAL_REUSE`` a feature's terms would come back too soon: they rotate over ``p``
    sub-words instead, sub-word ``s = t mod p`` of window ``t`` at address ``a + 4 s``
    (:data:`SUB_WORD_SHIFT`), with ``p`` coprime to ``wrap`` and ``wrap * p >= PARTIAL_REUSE``
    (1 -> 4, 2 -> 3, 3 -> 2).  The update sums a feature's sub-words (``p`` reads per address)."""
    if wrap >= PARTIAL_REUSE:
        return 1
    p = -(-PARTIAL_REUSE // wrap)
    while math.gcd(p, wrap) != 1:
        p += 1
    return p


@dataclass(frozen=True)
class LanePlan:
    """How engine v2 lays one epoch onto its lanes (dense mode, ``docs/HARDWARE.md``).

    ``positions`` fields per window (``L``, or ``L/4`` raw32 words); ``fields`` slots per
    sample (``sample_fields(n)``: ``n + 1`` and the padding of a long sample, whose features
    ``j > n`` the update holds at 0); lane ``k`` holds the
    features ``j = k (mod 2**g_log2)`` at ``j >> g_log2`` (``wrap`` addresses); ``step`` is the
    address increment per window; ``last_window``/``last_valid`` end the stream; ``short``
    when a quantized sample has fewer than :data:`MIN_SAMPLE_POSITIONS` fields (each pass then
    ends after one sample end).
    """

    field_width: int
    positions: int
    fields: int
    g_log2: int
    wrap: int
    step: int
    last_window: int
    last_valid: int
    short: bool
    batch_positions: int
    batches: int
    total: int


def lane_plan(config: RunConfig2, params: EngineParams2, samples: int,
              per_feature_levels: bool = False) -> LanePlan:
    """The lane plan of an epoch of ``samples`` samples; :class:`ConfigError` if the engine
    cannot lay it out."""
    config.check_against(params)
    if samples < 1:
        raise ConfigError(f"an epoch needs at least 1 sample, found {samples}")
    raw = config.encoding is Encoding.RAW32
    check_table_bits(config.bits, per_feature_levels)
    fields = sample_fields(config.n_features, per_feature_levels)
    positions = params.lanes // 4 if raw else params.lanes
    g = 1
    while fields % (2 * g) == 0 and positions % (2 * g) == 0:
        g *= 2
    wrap = fields // g
    limit = LANE_TABLE_FEATURES if per_feature_levels else params.lane_capacity
    if wrap > limit or -(-fields // positions) + 2 > params.max_sample_windows:
        raise ConfigError(f"n_features must leave at most {limit} features per lane and a "
                          f"sample within {params.max_sample_windows - 2} windows, found "
                          f"n_features={config.n_features}: {fields} slots per sample and "
                          f"{positions} positions share the factor {g}, so each lane holds "
                          f"{wrap} features")
    total = samples * fields
    last_window = (total - 1) // positions
    layout = StreamLayout(config.encoding, config.bits, params.bus_width,
                          tables=per_feature_levels)
    return LanePlan(
        field_width=8 if raw else layout.field_width, positions=positions, fields=fields,
        g_log2=g.bit_length() - 1, wrap=wrap, step=(positions % fields) // g,
        last_window=last_window, last_valid=total - last_window * positions,
        short=not raw and fields < MIN_SAMPLE_POSITIONS,
        batch_positions=config.batch_size * fields,
        batches=-(-samples // config.batch_size), total=total)


def core_settings(config: RunConfig2, plan: LanePlan, per_feature: bool = False) -> dict:
    """The values of engine v2's settings for a run (the core's setting ports, which the
    register file's configuration fields are named after, ``zipsgd/spec/registers2.py``)."""
    raw = config.encoding is Encoding.RAW32
    bits = 0 if raw else config.bits
    return {
        "field_width": plan.field_width, "index_mask": (1 << bits) - 1,
        "bit_select": (1 << (bits - 1)) if bits else 0,
        "double_sampled": int(config.encoding is Encoding.DOUBLE),
        "per_feature": int(per_feature),
        "raw": int(raw), "short_samples": int(plan.short),
        "g_log2": plan.g_log2, "wrap": plan.wrap,
        "step_addr": plan.step, "last_window": plan.last_window, "last_valid": plan.last_valid,
        "n_features": config.n_features, "batch_positions": plan.batch_positions,
        "batches": plan.batches, "exact": int(config.update_mode is UpdateMode.EXACT),
        "forward_frac": config.forward_frac, "step": config.step,
        "residual_shift": config.residual_shift, "rounding": int(config.rounding),
        "update_shift": config.update_shift, "forward_shift": config.forward_shift,
        "model_width": config.model_width, "decay": config.decay,
        "threshold": config.threshold,
    }
