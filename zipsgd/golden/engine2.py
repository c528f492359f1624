"""The bit-exact model of engine v2 (numerics v2, :mod:`zipsgd.spec.engine2`).

It performs exactly the steps of ``docs/ENGINE.md`` ("Engine v2") on decoded fields, a
mini-batch at a time.  Nothing in it depends on the lanes: sums are exact integers, so the
order in which the hardware adds them does not matter, and the random bits come from one
residual generator (one step per sample) and ``U`` update generators (feature ``m`` from
generator ``m mod U``, one round of steps per ``U`` features).
"""

from __future__ import annotations

import numpy as np

from ..spec.engine2 import (
    DECAY_FRAC,
    FORWARD_WIDTH,
    LOSS_ACC_WIDTH,
    LOSS_FRAC,
    LOSS_WIDTH,
    PRODUCT_LOG2,
    RAW_FEATURE_FRAC2,
    RAW_PRODUCT_SHIFT2,
    RAW_ROUND_SHIFT,
    RESIDUAL_MAX,
    EngineParams2,
    EpochStatus,
    RunConfig2,
    UpdateMode,
    check_table_bits,
)
from ..spec.errors import ConfigError
from ..spec.fixed import RAND_BITS, RoundingMode, align, saturate, shift_right
from ..spec.rng import XorshiftBank, generate, seed_states
from ..spec.stream import (
    RAW_ONE,
    Encoding,
    StreamLayout,
    decode_fields,
    per_feature_levels,
)

__all__ = ["GoldenEngine2", "decode2", "forward_operand"]

_RAND_MASK = (1 << RAND_BITS) - 1
#: Residual-generator outputs made at a time (the sequence does not depend on it).
_DRAW_BLOCK = 4096


def decode2(fields: np.ndarray, layout: StreamLayout, levels: np.ndarray | None = None):
    """Numerics v2 decode of ``(samples, n+1)`` fields: ``(label, first, second, label_frac)``.

    Quantized fields decode as in v1 (through ``levels``, the ``.zsgd`` level table, when
    given); raw32 words are clamped and rounded to 16 fraction bits.
    """
    fields = np.asarray(fields, dtype=np.uint64)
    if layout.encoding is Encoding.RAW32:
        words = fields.astype(np.uint32).view(np.int32).astype(np.int64)
        words = np.clip(words, -RAW_ONE, RAW_ONE)
        f = (words + (1 << (RAW_ROUND_SHIFT - 1))) >> RAW_ROUND_SHIFT
        return f[:, 0].copy(), f[:, 1:], f[:, 1:], RAW_FEATURE_FRAC2
    decoded = decode_fields(fields, layout, levels)
    return decoded.label, decoded.first, decoded.second, decoded.label_frac


def forward_operand(words, shift: int):
    """``x_f = sat_18(round_half_even(x, FL_m - FL_f))`` and which words saturated."""
    return saturate(shift_right(words, shift, RoundingMode.HALF_EVEN), FORWARD_WIDTH)


class GoldenEngine2:
    """Bit-exact model of engine v2.

    Members
    -------
    model : int64 array ``(n_features,)``, the model words ``<WL_m, FL_m>``.
    forward : int64 array ``(n_features,)``, the forward operands in force.
    """

    def __init__(self, params: EngineParams2, config: RunConfig2, levels=None):
        self.params = params
        self.memory = np.zeros(params.max_features, dtype=np.int64)
        self.config = None
        self.levels = None
        self.configure(config, levels)
        self.load_seed(config.seed)

    @property
    def model(self) -> np.ndarray:
        return self.memory[: self.config.n_features]

    def configure(self, config: RunConfig2, levels=None) -> None:
        """New register settings (between epochs); the forward operands are recomputed."""
        config.check_against(self.params)
        if levels is not None and config.encoding is Encoding.RAW32:
            raise ConfigError("raw32 streams have no levels")
        check_table_bits(config.bits, per_feature_levels(levels))
        self.config = config
        self.levels = None if levels is None else np.asarray(levels, dtype=np.int64)
        self.forward, _ = forward_operand(self.model.copy(), config.forward_shift)

    def load_seed(self, seed: int) -> None:
        """The seed register write: reloads the update and residual generators."""
        units, draws = self.params.update_units, self.params.residual_generators
        states = seed_states(seed, units + draws)
        self.bank = XorshiftBank(units, seed)              # the update generators
        self.residual_states = states[units:].copy()
        self.residual_buffers = [np.empty(0, dtype=np.uint32) for _ in range(draws)]
        self.residual_count = 0                            # samples drawn since the seed

    def _residual_draws(self, count: int) -> np.ndarray:
        """Low 16 bits for the next ``count`` samples: sample ``s`` (counted from the seed
        write) steps residual generator ``s mod R``.  Outputs are generated ahead in blocks."""
        draws = self.params.residual_generators
        index = np.arange(self.residual_count, self.residual_count + count) % draws
        out = np.empty(count, dtype=np.int64)
        for r in range(draws):
            mine = index == r
            need = int(mine.sum())
            if need > self.residual_buffers[r].size:
                more, self.residual_states[r:r + 1] = generate(
                    self.residual_states[r:r + 1], max(need, _DRAW_BLOCK))
                self.residual_buffers[r] = np.concatenate([self.residual_buffers[r],
                                                           more[:, 0]])
            out[mine] = self.residual_buffers[r][:need].astype(np.int64) & _RAND_MASK
            self.residual_buffers[r] = self.residual_buffers[r][need:]
        self.residual_count += count
        return out

    def write_model(self, words) -> None:
        words = np.asarray(words, dtype=np.int64)
        self.memory[: words.size] = words
        self.forward, _ = forward_operand(self.model.copy(), self.config.forward_shift)

    # -- one epoch -------------------------------------------------------------------------
    def run_epoch_fields(self, fields: np.ndarray) -> EpochStatus:
        """Train one epoch on ``(samples, n+1)`` fields; returns the status registers."""
        cfg, params = self.config, self.params
        layout = StreamLayout(cfg.encoding, cfg.bits, params.bus_width,
                              tables=per_feature_levels(self.levels))
        fields = np.asarray(fields, dtype=np.uint64)
        if fields.ndim != 2 or fields.shape[1] != cfg.n_features + 1:
            raise ConfigError(f"fields must be (samples, {cfg.n_features + 1}), "
                              f"found {fields.shape}")
        status = EpochStatus()
        status.samples = fields.shape[0]
        status.beats = layout.stream_beats(cfg.n_features, fields.shape[0])
        pending = None
        for start in range(0, fields.shape[0], cfg.batch_size):
            gradient = self._batch(fields[start:start + cfg.batch_size], layout, status)
            if cfg.update_mode is UpdateMode.EXACT:
                self._update(gradient, status)
            else:
                if pending is not None:
                    self._update(pending, status)
                pending = gradient
        if pending is not None:
            self._update(pending, status)
        return status

    def _batch(self, fields, layout, status: EpochStatus) -> np.ndarray:
        cfg = self.config
        label, first, second, label_frac = decode2(fields, layout, self.levels)
        raw = layout.encoding is Encoding.RAW32
        products = first * self.forward
        if raw:
            products >>= RAW_PRODUCT_SHIFT2
        _bounded(products, PRODUCT_LOG2, "a product")
        dot = products.sum(axis=1)
        residual = dot - align(label, label_frac, cfg.dot_frac)
        # The loss: the residual rounded to <18, 13>, squared, summed (saturating).
        narrow = align(residual, cfg.dot_frac, LOSS_FRAC, RoundingMode.HALF_EVEN)
        narrow, clipped = saturate(narrow, LOSS_WIDTH)
        total = status.loss_acc + int((narrow * narrow).sum())
        status.loss_saturated |= bool(clipped.any()) or total >= 1 << LOSS_ACC_WIDTH
        status.loss_acc = min(total, (1 << LOSS_ACC_WIDTH) - 1)
        # The scaled residual e = sat(round(a * r, residual_shift)), one draw per sample.
        rand = self._residual_draws(len(dot))
        scaled = [shift_right(int(r) * cfg.step, cfg.residual_shift, cfg.rounding, int(u))
                  for r, u in zip(residual.tolist(), rand.tolist(), strict=True)]
        e = np.clip(np.array(scaled, dtype=object), -RESIDUAL_MAX, RESIDUAL_MAX)
        status.residual_saturations += sum(1 for a, b in zip(e, scaled, strict=True) if a != b)
        e = e.astype(np.int64)
        terms = e[:, None] * second
        if raw:
            terms >>= RAW_PRODUCT_SHIFT2
        _bounded(terms, PRODUCT_LOG2, "a gradient term")
        return terms.sum(axis=0)

    def _update(self, gradient: np.ndarray, status: EpochStatus) -> None:
        cfg, units = self.config, self.params.update_units
        n = cfg.n_features
        rounds = -(-n // units)
        draws = self.bank.step_lanes(rounds).reshape(-1)[:n].astype(np.int64)
        low, high = draws & _RAND_MASK, (draws >> 16) & _RAND_MASK
        step = shift_right(gradient, cfg.update_shift, cfg.rounding, low)
        x1, clipped = saturate(self.model - step, cfg.model_width)
        status.model_saturations += int(clipped.sum())
        x2 = x1 - shift_right(cfg.decay * x1, DECAY_FRAC, cfg.rounding, high)
        x3 = np.sign(x2) * np.maximum(np.abs(x2) - cfg.threshold, 0)
        self.memory[:n] = x3
        self.forward, clipped = forward_operand(x3.copy(), cfg.forward_shift)
        status.forward_saturations += int(clipped.sum())
        status.updates += 1


def _bounded(values: np.ndarray, log2_bound: int, what: str) -> None:
    if values.size and int(np.abs(values).max()) > 1 << log2_bound:
        raise AssertionError(f"{what} exceeded 2**{log2_bound}: the width analysis is wrong")
