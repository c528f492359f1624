"""The bit-exact model of the streaming SGD engine.

It reads the same packed beats the hardware reads (the v1 beat layout of
:mod:`zipsgd.spec.stream`; the level-table codebooks of stream format v2 are for the next
engine, and are refused by the training driver) and performs
exactly the steps of ``docs/ENGINE.md`` with the widths of :mod:`zipsgd.spec.engine`.  The
hardware is verified against it with exact equality of the model words and status counters.

Arithmetic is done on int64 arrays where the widths in :class:`~zipsgd.spec.engine.EngineParams`
prove that nothing can exceed 62 bits (checked at run time by :func:`_check_bound`), and on
Python integers (object arrays) where they cannot (``step * residual``).  Nothing wraps.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..spec.engine import (
    DECAY_FRAC,
    LOSS_ACC_WIDTH,
    LOSS_RESIDUAL_FRAC,
    LOSS_RESIDUAL_WIDTH,
    LOSS_SQUARE_SHIFT,
    RAW_PRODUCT_SHIFT,
    EngineParams,
    EpochStatus,
    RunConfig,
    UpdateMode,
)
from ..spec.errors import ConfigError
from ..spec.fixed import RAND_BITS, align, saturate, shift_right
from ..spec.rng import XorshiftBank
from ..spec.stream import Encoding, decode_fields, unpack_beats_v1

__all__ = ["GoldenEngine"]

_RAND_MASK = (1 << RAND_BITS) - 1
#: Decoded samples in memory at a time, in bytes (``run_epoch``): the training memory bound.
DECODE_BYTES = 64 << 20
#: int64 bytes per value while a sample is decoded: the unpacked field, the two decoded
#: samples and a temporary of the products.
_DECODED_BYTES_PER_VALUE = 32


def _check_bound(values: np.ndarray, log2_bound: int, what: str) -> None:
    """Assert ``|values| <= 2**log2_bound`` (the width the hardware gives them)."""
    if values.size:
        bound = 1 << log2_bound
        if int(values.max()) > bound or int(values.min()) < -bound:
            raise AssertionError(f"{what} exceeded 2**{log2_bound}: the width analysis is wrong")


class GoldenEngine:
    """Bit-exact model of the engine.

    Parameters
    ----------
    params : EngineParams
        The built engine.
    config : RunConfig
        The register settings.  :meth:`configure` changes them between epochs.

    Members
    -------
    model : int64 array, shape ``(n_features,)``
        The model words (``<model_width, model_frac>``).
    """

    def __init__(self, params: EngineParams, config: RunConfig):
        self.params = params
        self.config = None
        # The whole model memory (N_max words); the run uses the first n_features of them.
        self.memory = np.zeros(params.max_features, dtype=np.int64)
        self.configure(config)
        self.load_seed(config.seed)

    @property
    def model(self) -> np.ndarray:
        """The model words the run uses (a view of the first ``n_features`` memory words)."""
        return self.memory[: self.config.n_features]

    @model.setter
    def model(self, words) -> None:
        self.memory[: self.config.n_features] = words

    def configure(self, config: RunConfig) -> None:
        """Write the control registers (between epochs).

        The model memory keeps its words whatever changes (feature count, formats: words are
        reinterpreted, not converted).  The seed register is written, reloading the generators,
        only when ``config.seed`` differs from the seed loaded last (what the host driver does);
        :meth:`load_seed` writes it unconditionally.
        """
        config.check_against(self.params)
        old = self.config
        self.config = config
        if old is not None and old.seed != config.seed:
            self.load_seed(config.seed)

    def load_seed(self, seed: int) -> None:
        """Write the seed register: every generator is reloaded from ``seed``."""
        self.rng = XorshiftBank(self.params.lanes, seed)
        self._seed = seed

    def set_model(self, words) -> None:
        """Write the model memory (words must fit the model format)."""
        words = np.asarray(words, dtype=np.int64)
        if words.shape != (self.config.n_features,):
            raise ConfigError(f"model must have {self.config.n_features} words, "
                              f"found shape {words.shape}")
        _, clipped = saturate(words, self.config.model_width)
        if clipped.any():
            raise ConfigError(f"model words must fit <{self.config.model_width}> bits")
        self.model = words

    # -- the datapath ---------------------------------------------------------------------

    def _dot(self, features: np.ndarray) -> np.ndarray:
        """Dot products of samples with the model, ``dot_frac`` fraction bits (exact)."""
        if self.config.encoding is Encoding.RAW32:
            return ((features * self.model) >> RAW_PRODUCT_SHIFT).sum(axis=1)
        return features @ self.model

    def _gradient(self, features: np.ndarray, scaled: np.ndarray) -> np.ndarray:
        """Sum over samples of ``scaled residual x feature`` per feature (exact)."""
        if self.config.encoding is Encoding.RAW32:
            return ((features * scaled[:, None]) >> RAW_PRODUCT_SHIFT).sum(axis=0)
        return scaled @ features

    def _scaled_residual(self, residual: np.ndarray, status: EpochStatus) -> np.ndarray:
        """``e = sat(round((step * r) >> residual_shift))`` in the gradient format."""
        cfg = self.config
        rand = self.rng.step_residual(residual.size).astype(np.int64) & _RAND_MASK
        product = residual.astype(object) * cfg.step  # up to 88 bits: Python ints
        rounded = shift_right(product, cfg.residual_shift, cfg.rounding, rand.astype(object))
        clamped, clipped = saturate(rounded, cfg.grad_width)
        status.residual_saturations += int(np.count_nonzero(clipped))
        return np.asarray(clamped.astype(np.int64))

    def _accumulate_loss(self, residual: np.ndarray, status: EpochStatus) -> None:
        cfg = self.config
        lo, hi = -(1 << (LOSS_RESIDUAL_WIDTH - 1)), (1 << (LOSS_RESIDUAL_WIDTH - 1)) - 1
        if cfg.dot_frac >= LOSS_RESIDUAL_FRAC:
            narrowed = residual >> (cfg.dot_frac - LOSS_RESIDUAL_FRAC)
            clamped, clipped = saturate(narrowed, LOSS_RESIDUAL_WIDTH)
        else:
            # Saturate before the left shift so the int64 value cannot overflow; the result is
            # the same as shifting first and saturating after.
            gain = LOSS_RESIDUAL_FRAC - cfg.dot_frac
            over, under = residual > (hi >> gain), residual < (lo >> gain)
            clamped = np.clip(residual, lo >> gain, hi >> gain) << gain
            clamped = np.where(over, hi, np.where(under, lo, clamped))
            clipped = over | under
        squares = (clamped * clamped) >> LOSS_SQUARE_SHIFT
        total = status.loss_acc + int(squares.sum(dtype=object))
        limit = (1 << LOSS_ACC_WIDTH) - 1
        if clipped.any() or total > limit:
            status.loss_saturated = True
        status.loss_acc = min(total, limit)

    def _apply_update(self, gradient: np.ndarray, status: EpochStatus) -> None:
        """One model update pass: gradient step, saturation, L2 decay, L1 threshold."""
        cfg = self.config
        layout = cfg.layout(self.params.bus_width)
        slice_index, lane = layout.slice_map(cfg.n_features, self.params.lanes)
        outputs = self.rng.step_lanes(int(slice_index[-1]) + 1)
        rand = outputs[slice_index[1:], lane[1:]].astype(np.int64)
        rand_step, rand_decay = rand & _RAND_MASK, rand >> 16
        step = shift_right(gradient, cfg.update_shift, cfg.rounding, rand_step)
        stepped, clipped = saturate(self.model - step, cfg.model_width)
        status.model_saturations += int(np.count_nonzero(clipped))
        decayed = stepped - shift_right(stepped * cfg.decay, DECAY_FRAC, cfg.rounding, rand_decay)
        magnitude = np.maximum(np.abs(decayed) - cfg.threshold, 0)
        self.model = np.sign(decayed) * magnitude
        status.updates += 1

    # -- an epoch -------------------------------------------------------------------------

    def run_epoch(self, payload, decode_bytes: int = DECODE_BYTES) -> EpochStatus:
        """Train on one packed epoch in the v1 beat layout this engine reads
        (:func:`~zipsgd.spec.stream.pack_beats_v1`; a v2 stream goes through
        :func:`~zipsgd.spec.stream.restream_v1`): a uint8 array or bytes of whole samples, or
        an iterable of such chunks (converted or read as they are used).

        Mini-batch ``t`` holds samples ``[t*B, (t+1)*B)`` of the epoch (the last may be shorter).
        With ``UpdateMode.EXACT`` its dot products use the model after batches ``0..t-1``; with
        ``DELAYED`` the model after batches ``0..t-2``.  Every pending update is applied at the
        end of the epoch, so the model read back after an epoch has seen every sample.  At most
        about ``decode_bytes`` of decoded samples are in memory at a time, whatever the epoch's
        size: a batch larger than that is decoded in parts, whose gradients add exactly.
        """
        cfg = self.config
        layout = cfg.layout(self.params.bus_width)
        sample_bytes = layout.sample_bytes_v1(cfg.n_features)
        chunks = [payload] if isinstance(payload, (bytes, bytearray, memoryview, np.ndarray)) \
            else payload
        step = max(1, decode_bytes // (_DECODED_BYTES_PER_VALUE * (cfg.n_features + 1)))
        status = EpochStatus()
        keep = 1 if cfg.update_mode is UpdateMode.DELAYED else 0
        pending: deque[np.ndarray] = deque()
        batch, in_batch, gradient = cfg.batch_size, 0, None
        n_samples = 0
        for chunk in chunks:
            raw = chunk if isinstance(chunk, np.ndarray) else np.frombuffer(chunk, np.uint8)
            if raw.size % sample_bytes:
                raise ConfigError(f"payload must be a whole number of {sample_bytes}-byte "
                                  f"samples, found a chunk of {raw.size} bytes")
            count = raw.size // sample_bytes
            n_samples += count
            for start in range(0, count, step):
                stop = min(start + step, count)
                fields = unpack_beats_v1(raw[start * sample_bytes:stop * sample_bytes],
                                         layout, cfg.n_features)
                decoded = decode_fields(fields, layout)
                b0 = 0
                while b0 < stop - start:
                    b1 = min(b0 + batch - in_batch, stop - start)
                    part = self._batch(decoded, b0, b1, status)
                    gradient = part if gradient is None else gradient + part
                    in_batch += b1 - b0
                    b0 = b1
                    if in_batch == batch:
                        self._end_batch(gradient, pending, keep, status)
                        in_batch, gradient = 0, None
        if n_samples == 0:
            raise ConfigError(f"payload must be a non-empty whole number of {sample_bytes}-byte "
                              "samples, found 0 bytes")
        if gradient is not None:
            self._end_batch(gradient, pending, keep, status)
        while pending:
            self._apply_update(pending.popleft(), status)
        status.samples = n_samples
        status.beats = n_samples * layout.beats_per_sample(cfg.n_features)
        return status

    def _end_batch(self, gradient, pending: deque, keep: int, status: EpochStatus) -> None:
        _check_bound(gradient, self.params.grad_acc_width - 2, "gradient accumulator")
        pending.append(gradient)
        while len(pending) > keep:
            self._apply_update(pending.popleft(), status)

    def _batch(self, decoded, b0: int, b1: int, status: EpochStatus) -> np.ndarray:
        """Dot products, residuals, loss and gradient of samples ``b0..b1-1`` of a chunk."""
        cfg = self.config
        first = decoded.first[b0:b1]
        dot = self._dot(first)
        _check_bound(dot, self.params.dot_width - 2, "dot product")
        label = align(decoded.label[b0:b1], decoded.label_frac, cfg.dot_frac)
        residual = dot - label
        self._accumulate_loss(residual, status)
        scaled = self._scaled_residual(residual, status)
        return self._gradient(decoded.second[b0:b1], scaled)
