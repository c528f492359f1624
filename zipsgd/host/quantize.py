"""Unbiased stochastic quantization of scaled values into stream fields.

A value ``v`` in [-1, 1] quantized at ``b`` bits lies in one of ``2**b`` equal intervals; with
``t = (v + 1) * 2**(b-1)`` the interval index is ``i = min(floor(t), 2**b - 1)`` and the value is
rounded up to level ``i + 1`` with probability ``p = t - i``, so ``E[level] = t`` and the value of
the level, ``2*level/2**b - 1``, has expectation ``v`` exactly (up to float64 rounding of ``p``).
``DOUBLE`` draws two independent roundings of the same value; ``SINGLE`` one; ``RAW32`` rounds
``v * 2**30`` to the nearest integer (ties to even).

**Non-uniform levels** (:func:`quantize_fields_levels`, e.g. the variance-optimal ones of
:mod:`zipsgd.host.levels`): column ``j`` (0 the label) has levels ``l_0 < ... < l_s``,
``s = 2**b``, covering its values; ``v`` in ``[l_i, l_{i+1}]`` gets interval index ``i`` (the
largest ``i <= s - 1`` with ``l_i <= v``) and each sample bit is 1 with probability
``p = (v - l_i) / (l_{i+1} - l_i)``, so ``E[level] = (1-p) l_i + p l_{i+1} = v`` exactly (up to
float64 rounding of ``p``).  The fields have the same layout (index in the low ``b`` bits, then
one bit per sample) and consume the same uniforms as uniform levels.

Randomness: one ``numpy.random.Generator`` (PCG64) per epoch, seeded with
``SeedSequence([seed, epoch])`` (:func:`epoch_rng`).  It draws, sample by sample in stream order,
one uniform double per field and per sample bit (shape ``(rows, n_fields, draws)``), so the
result does not depend on how the rows are chunked.
"""

from __future__ import annotations

import numpy as np

from ..spec.errors import ConfigError
from ..spec.stream import LEVEL_ONE, RAW_FEATURE_FRAC, Encoding, StreamLayout, decode_fields

__all__ = ["epoch_rng", "quantize_fields", "quantize_fields_levels", "quantize_table",
           "level_intervals", "level_values", "dequantize_fields"]


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
    return _sample_fields(index, values, layout, rng)


def quantize_fields_levels(labels: np.ndarray, features: np.ndarray, layout: StreamLayout,
                           rng: np.random.Generator, levels: np.ndarray) -> np.ndarray:
    """Quantize a block of samples into stream fields onto per-column levels.

    Parameters
    ----------
    labels : float array, shape ``(rows,)``
    features : float array, shape ``(rows, n_features)``
    layout : StreamLayout
        ``DOUBLE`` or ``SINGLE`` (``RAW32`` has no levels).
    rng : Generator
        Draws exactly what :func:`quantize_fields` draws for the same block.
    levels : float array, shape ``(n_features + 1, 2**bits + 1)``
        Row 0 the label's levels, then one row per feature; finite and strictly increasing.

    Returns
    -------
    uint64 array, shape ``(rows, n_features + 1)``, laid out as :func:`quantize_fields`'s.

    Raises
    ------
    ConfigError
        For ``RAW32``, levels of the wrong shape, not finite or not strictly increasing, or a
        value that is not finite or outside its column's levels.
    """
    values = np.column_stack([np.asarray(labels, dtype=np.float64).reshape(-1),
                              np.asarray(features, dtype=np.float64)])
    if layout.encoding is Encoding.RAW32:
        raise ConfigError("raw32 fields carry values, not levels: expected double or single "
                          "encoding with levels")
    index, prob = level_intervals(values, levels, layout.bits)
    return _sample_fields(index, prob, layout, rng)


def quantize_table(labels: np.ndarray, features: np.ndarray, layout: StreamLayout,
                   rng: np.random.Generator | None, table=None) -> np.ndarray:
    """:func:`quantize_fields`, or, given a level table (int16 words, ``.zsgd`` format),
    :func:`quantize_fields_levels` onto the values it decodes to (``word / 256``): the host
    rounds onto exactly the levels the engine decodes."""
    if table is None:
        return quantize_fields(labels, features, layout, rng)
    levels = np.asarray(table, dtype=np.float64) / LEVEL_ONE
    return quantize_fields_levels(labels, features, layout, rng, levels)


def level_intervals(values: np.ndarray, levels: np.ndarray,
                    bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Interval index and probability of rounding up of every value onto its column's levels.

    ``values`` is ``(rows, columns)``, ``levels`` ``(columns, 2**bits + 1)``; a value ``v`` in
    ``[l_i, l_{i+1}]`` gets the largest ``i <= s - 1`` with ``l_i <= v`` and
    ``p = (v - l_i) / (l_{i+1} - l_i)``, so ``(1 - p) l_i + p l_{i+1} = v``.

    Raises
    ------
    ConfigError
        As :func:`quantize_fields_levels`.
    """
    s = 1 << bits
    levels = np.asarray(levels, dtype=np.float64)
    if levels.shape != (values.shape[1], s + 1):
        raise ConfigError(f"expected levels of shape {(values.shape[1], s + 1)} (label and "
                          f"features, 2**bits + 1 levels), found {levels.shape}")
    steps = np.diff(levels, axis=1)
    if not (np.all(np.isfinite(levels)) and np.all(steps > 0)):
        raise ConfigError("expected finite, strictly increasing levels in every column")
    # NaN fails both comparisons, so non-finite values are refused here too.
    inside = (values >= levels[:, 0]) & (values <= levels[:, -1])
    if not inside.all():
        row, column = np.argwhere(~inside)[0]
        raise ConfigError(f"row {row}, column {column} (0 = label): expected a finite value "
                          f"within the column's levels [{levels[column, 0]}, "
                          f"{levels[column, -1]}], found {values[row, column]}")
    index = np.empty(values.shape, dtype=np.int64)
    for column in range(values.shape[1]):  # each column searches its own levels
        index[:, column] = np.searchsorted(levels[column], values[:, column], side="right") - 1
    np.clip(index, 0, s - 1, out=index)
    columns = np.arange(values.shape[1])
    low = levels[columns, index]
    return index, (values - low) / steps[columns, index]


def _sample_fields(index: np.ndarray, prob: np.ndarray, layout: StreamLayout,
                   rng: np.random.Generator) -> np.ndarray:
    """Fields from interval indices and probabilities of rounding up: one uniform per field
    and per sample bit, in stream order; a sample bit is 1 iff its uniform < ``prob``."""
    b = layout.bits
    draws = 2 if layout.encoding is Encoding.DOUBLE else 1
    uniform = rng.random(prob.shape + (draws,))
    # Fields have at most 10 bits: build them in uint16, one sample bit at a time (comparing
    # each draw's strided view is about twice as fast as one broadcast comparison).
    fields = index.astype(np.uint16)
    up = np.empty(prob.shape, dtype=np.bool_)
    shifted = np.empty(prob.shape, dtype=np.uint16)
    for k in range(draws):
        np.less(uniform[..., k], prob, out=up)
        np.left_shift(up.view(np.uint8), np.uint16(b + k), out=shifted)
        fields |= shifted
    return fields.astype(np.uint64)


def dequantize_fields(fields: np.ndarray, layout: StreamLayout,
                      levels=None) -> tuple[np.ndarray, np.ndarray]:
    """The scaled values that stream fields stand for, as the engine decodes them
    (:func:`~zipsgd.spec.stream.decode_fields`): ``(labels, features)`` in float64.  A
    ``DOUBLE`` feature is the mean of its two samples (each is an unbiased estimate; their mean
    has half the variance)."""
    decoded = decode_fields(fields, layout, levels)
    labels = decoded.label / float(1 << decoded.label_frac)
    features = (decoded.first + decoded.second) / float(1 << (decoded.feature_frac + 1))
    return labels, features
