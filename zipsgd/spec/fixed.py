"""Fixed-point formats and the narrowing steps (rounding, saturation) of the engine.

Amaranth has no fixed-point type, so every narrowing in the engine is one of the functions here,
and the hardware implements exactly the same steps (``docs/ENGINE.md`` lists where each is used).
Values are plain integers ("words"): a word ``w`` in format ``<WL, FL>`` means ``w / 2**FL``.

All functions accept Python ``int`` (arbitrary precision, never wraps) or NumPy ``int64`` arrays.
For int64 arrays the caller guarantees, by the width analysis of ``docs/ENGINE.md`` ("Why
nothing overflows"), that every intermediate stays below 2**62; :func:`shift_left` also checks
it at run time.  Values wider than that (``step * residual``) are passed as object arrays of
Python ints, which never wrap.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .errors import ConfigError

__all__ = [
    "RoundingMode",
    "FixedFormat",
    "RAND_BITS",
    "shift_right",
    "shift_left",
    "align",
    "saturate",
    "signed_range",
]

#: Number of random bits a stochastic rounding step consumes (see :func:`shift_right`).
RAND_BITS = 16


class RoundingMode(enum.IntEnum):
    """How a right shift treats the bits it drops.  The values are the register encoding."""

    #: Drop the bits: floor towards minus infinity (arithmetic shift).  Free in hardware.
    TRUNCATE = 0
    #: Round to nearest, ties to the even result.
    HALF_EVEN = 1
    #: Add a uniform random offset, then floor: unbiased (exactly, when the shift is at most
    #: :data:`RAND_BITS`; within ``2**-RAND_BITS`` of an ulp beyond that).
    STOCHASTIC = 2


@dataclass(frozen=True)
class FixedFormat:
    """A two's complement (or unsigned) fixed-point format ``<width, frac>``.

    Parameters
    ----------
    width : int
        Word length in bits, including the sign bit when ``signed``.
    frac : int
        Fraction bits: a word ``w`` stands for ``w / 2**frac``.  May exceed ``width`` (small
        values) or be negative (large values).
    signed : bool
        Two's complement when true.
    """

    width: int
    frac: int
    signed: bool = True

    def __post_init__(self):
        if not isinstance(self.width, int) or self.width < 1 or self.width > 256:
            raise ConfigError(f"fixed-point width must be an int in 1..256, found {self.width!r}")
        if not isinstance(self.frac, int):
            raise ConfigError(f"fixed-point fraction bits must be an int, found {self.frac!r}")

    @property
    def min_word(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_word(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    def to_float(self, word):
        """The real value of ``word`` (array or int) as float64."""
        return np.asarray(word, dtype=np.float64) * 2.0 ** (-self.frac)

    def from_float(self, value):
        """Nearest word to ``value`` (round half to even), saturated to the format's range."""
        scaled = np.rint(np.asarray(value, dtype=np.float64) * 2.0**self.frac)
        clipped = np.clip(scaled, self.min_word, self.max_word)
        if np.ndim(clipped) == 0:
            return int(clipped)
        return clipped.astype(np.int64)

    def __str__(self):
        return f"<{self.width},{self.frac}{'' if self.signed else ',u'}>"


def signed_range(width: int) -> tuple[int, int]:
    """``(min, max)`` of a ``width``-bit two's complement word."""
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray)


def _check_i64(value, what: str):
    """Assert an int64 array computation cannot have wrapped (values kept within 62 bits)."""
    if _is_array(value) and value.size and value.dtype != object:
        if value.dtype != np.int64:
            raise TypeError(f"{what}: expected an int64 or object array, found {value.dtype}")
        limit = 1 << 62
        if int(value.max()) >= limit or int(value.min()) < -limit:
            raise OverflowError(f"{what}: a value reached 2**62; the int64 golden path is unsafe")


def shift_left(value, shift: int):
    """Exact multiplication by ``2**shift`` (``shift >= 0``)."""
    if shift < 0:
        raise ValueError(f"shift_left needs shift >= 0, found {shift}")
    if _is_array(value) and value.dtype != object:
        _check_i64(value, "shift_left input")
        bound = 1 << (62 - shift) if shift < 62 else 0
        if value.size and (int(value.max()) >= bound or int(value.min()) < -bound):
            raise OverflowError("shift_left would leave 62 bits in the int64 golden path")
    return value << shift


def shift_right(value, shift: int, mode: RoundingMode = RoundingMode.TRUNCATE, rand=None):
    """Divide by ``2**shift`` (``shift >= 0``) and round the result to an integer.

    Parameters
    ----------
    value : int or int64 array
    shift : int
        Number of bits dropped.  ``0`` returns ``value`` unchanged in every mode.
    mode : RoundingMode
        ``TRUNCATE``: ``floor(value / 2**shift)``.
        ``HALF_EVEN``: nearest integer, ties to even.
        ``STOCHASTIC``: ``floor((value + offset) / 2**shift)`` where ``offset`` is ``rand``
        (``RAND_BITS`` uniform bits) aligned to the dropped bits: ``rand >> (RAND_BITS - shift)``
        when ``shift <= RAND_BITS``, else ``rand << (shift - RAND_BITS)``.
    rand : int or int64 array, optional
        Random integers in ``[0, 2**RAND_BITS)``; required for ``STOCHASTIC``.
    """
    if shift < 0:
        raise ValueError(f"shift_right needs shift >= 0, found {shift}")
    if shift == 0:
        return value
    mode = RoundingMode(mode)
    if mode is RoundingMode.TRUNCATE:
        return value >> shift
    if mode is RoundingMode.HALF_EVEN:
        floor = value >> shift
        rem = value - (floor << shift)
        half = 1 << (shift - 1)
        if _is_array(value) or _is_array(rem):
            up = (rem > half) | ((rem == half) & ((floor & 1) == 1))
            return floor + up.astype(np.int64)
        return floor + int(rem > half or (rem == half and (floor & 1) == 1))
    if rand is None:
        raise ValueError("stochastic rounding needs random bits")
    # Align the random bits with the dropped bits.
    offset = rand >> (RAND_BITS - shift) if shift <= RAND_BITS else rand << (shift - RAND_BITS)
    # Callers keep |value| + 2**shift below 2**62 (docs/ENGINE.md, "Why nothing overflows").
    return (value + offset) >> shift


def align(value, from_frac: int, to_frac: int, mode: RoundingMode = RoundingMode.TRUNCATE,
          rand=None):
    """Re-express ``value`` (``from_frac`` fraction bits) with ``to_frac`` fraction bits:
    an exact left shift when gaining bits, :func:`shift_right` with ``mode`` when losing them."""
    if to_frac >= from_frac:
        return shift_left(value, to_frac - from_frac)
    return shift_right(value, from_frac - to_frac, mode, rand)


def saturate(value, width: int, signed: bool = True):
    """Clamp ``value`` to the range of a ``width``-bit word; returns ``(clamped, saturated)``
    where ``saturated`` is a bool (or bool array) telling which values were clamped."""
    if signed:
        lo, hi = signed_range(width)
    else:
        lo, hi = 0, (1 << width) - 1
    if _is_array(value):
        # np.minimum/np.maximum rather than np.clip: same result, far less per-call overhead.
        clamped = np.minimum(np.maximum(value, lo), hi)
        return clamped, clamped != value
    clamped = min(max(value, lo), hi)
    return clamped, clamped != value
