"""Unbiased stochastic quantization of scaled values into stream fields.

A value ``v`` in [-1, 1] quantized at ``b`` bits lies in one of ``2**b`` equal intervals; with
``t = (v + 1) * 2**(b-1)`` the interval index is ``i = min(floor(t), 2**b - 1)`` and the value is
rounded up to level ``i + 1`` with probability ``p = t - i``, so ``E[level] = t`` and the value of
the level, ``2*level/2**b - 1``, has expectation ``v`` exactly (up to float64 rounding of ``p``).
``DOUBLE`` draws two independent roundings of the same value; ``SINGLE`` one; ``RAW32`` rounds
``v * 2**30`` to the nearest integer (ties to even).

Randomness: one ``numpy.random.Generator`` (PCG64) per epoch, seeded with
``SeedSequence([seed, epoch])`` (:func:`epoch_rng`).  It draws, sample by sample in stream order,
one uniform double per field and per sample bit (shape ``(rows, n_fields, draws)``), so the
result does not depend on how the rows are chunked.
"""

from __future__ import annotations

import numpy as np

from ..spec.errors import ConfigError
from ..spec.stream import RAW_FEATURE_FRAC, Encoding, StreamLayout

__all__ = ["epoch_rng", "quantize_fields", "level_values"]


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator that quantizes epoch ``epoch`` of a stream seeded with ``seed``."""
    if seed < 0 or epoch < 0:
        raise ConfigError(f"seed and epoch must be >= 0, found seed={seed}, epoch={epoch}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))


def level_values(bits: int) -> np.ndarray:
    """The ``2**bits + 1`` quantization levels on [-1, 1]."""
    return np.linspace(-1.0, 1.0, (1 << bits) + 1)


def quantize_fields(labels: np.ndarray, features: np.ndarray, layout: StreamLayout,
                    rng: np.random.Generator | None) -> np.ndarray:
    """Quantize a block of scaled samples into stream fields.

    Parameters
    ----------
    labels : float array, shape ``(rows,)``, values in [-1, 1]
    features : float array, shape ``(rows, n_features)``, values in [-1, 1]
    layout : StreamLayout
    rng : Generator
        Source of the stochastic rounding; unused (may be None) for ``RAW32``.

    Returns
    -------
    uint64 array, shape ``(rows, n_features + 1)``: field 0 the label, then the features.
    """
    values = np.column_stack([np.asarray(labels, dtype=np.float64).reshape(-1),
                              np.asarray(features, dtype=np.float64)])
    # min/max propagate NaN (the comparisons are then False) and see +-Inf: one pass each.
    if values.size and not (values.min() >= -1.0 and values.max() <= 1.0):
        raise ConfigError("scaled values must be finite and within [-1, 1]")
    if layout.encoding is Encoding.RAW32:
        words = np.rint(values * float(1 << RAW_FEATURE_FRAC)).astype(np.int64)
        return (words & 0xFFFF_FFFF).astype(np.uint64)
    b = layout.bits
    # In place on the fresh copy: values becomes t, then the probability of rounding up.
    values += 1.0
    values *= float(1 << (b - 1))
    index = np.floor(values)
    np.minimum(index, float((1 << b) - 1), out=index)
    values -= index
    draws = 2 if layout.encoding is Encoding.DOUBLE else 1
    uniform = rng.random(values.shape + (draws,))
    # Fields have at most 10 bits: build them in uint16, one sample bit at a time (comparing
    # each draw's strided view is about twice as fast as one broadcast comparison).
    fields = index.astype(np.uint16)
    up = np.empty(values.shape, dtype=np.bool_)
    shifted = np.empty(values.shape, dtype=np.uint16)
    for k in range(draws):
        np.less(uniform[..., k], values, out=up)
        np.left_shift(up.view(np.uint8), np.uint16(b + k), out=shifted)
        fields |= shifted
    return fields.astype(np.uint64)
