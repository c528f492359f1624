"""Variance-optimal quantization levels per feature (ZipML, ICML 2017, section 3).

**The objective**, as the paper states it (problem (8)): stochastic rounding of a value ``v`` in
``[l_i, l_{i+1}]`` onto the levels ``l_0 < ... < l_s`` that cover a feature's values has variance
``(l_{i+1} - v) * (v - l_i)``; the *mean variance* is its average over the feature's values
(:func:`mean_variance`, optionally weighted by counts).  A value on a level has variance 0, so it
does not matter which of two intervals a value on their shared level is counted in.

**Endpoints.** One rule everywhere: ``l_0`` is the feature's minimum and ``l_s`` its maximum, so
the levels cover exactly the values seen.  (Affine maps commute with the problem: the optimal
levels of ``a*x + c`` are ``a*l + c`` and the variance scales by ``a**2``, so levels found on raw
values map to scaled ones through the same offset and scale.)

**Solvers** for ``s + 1 = 2**b + 1`` levels, ``b`` = 1..8 (:data:`MIN_BITS`..:data:`MAX_BITS`).
All three choose levels among *candidate points* ``d_0 < ... < d_K`` (the endpoints fixed) by the
paper's dynamic program ``T(k, m) = min_{j < m} T(k-1, j) + V(j, m)``, where ``V(j, m)`` is the
total variance of the values in ``[d_j, d_m]``, computed in O(1) from prefix sums of counts,
values and squares (``V = -S2 + (a+b) S1 - a b n`` for ``[a, b]``):

``exact``
    Candidates are the feature's distinct values (the paper's Lemma 3: some optimum has every
    level on a value): O(k N**2) time and O(N**2) memory for N distinct values, so it is limited
    to :data:`MAX_EXACT_VALUES` of them (a :class:`~zipsgd.spec.errors.ConfigError` beyond).
``discretized``
    Candidates are the boundaries of ``M`` bins (``points``, default :data:`DEFAULT_POINTS`,
    an even number in :data:`MIN_POINTS`..:data:`MAX_POINTS`) holding each bin's exact count, sum
    and sum of squares: one O(N) pass, then O((k+1) M**2).  The bins are
    :class:`LevelStats`'s.
``approx2``
    The paper's almost-linear 2-approximation: a merging pass in the style of Acharya et al.
    (2015) cuts the candidates down to at most ``4s`` intervals (in each round adjacent
    intervals are paired, the ``s`` pairs whose merged variance is largest stay split and the
    others merge; O(K) per round, O(log K) rounds), then the dynamic program picks ``s`` of
    them: O(N log N + s**3).  Its result is within a factor 2 of the exact optimum on every
    input the tests try (``tests/host/test_levels.py``).

**Degenerate features** (every solver):

* a *constant* feature ``v`` (min = max) gets ``s + 1`` levels spanning a unit interval that
  ends at ``v`` when ``v >= 0`` (``l_i = v - (s - i)/s``) and starts at ``v`` when ``v < 0``
  (``l_i = v + i/s``): ``v`` is a level (variance 0), and a value in [-1, 1] keeps its levels in
  [-1, 1];
* *fewer candidates than levels* (``K < s``, e.g. a feature with 3 distinct values at b = 2):
  every candidate is a level (for ``exact`` the variance is then 0), and the missing levels are
  added one at a time at the midpoint of the widest gap (the leftmost of equal ones); an added
  level never increases any value's variance, so the levels stay optimal;
* non-finite values raise :class:`~zipsgd.spec.errors.DatasetError`; a bit count, method or
  ``points`` out of range raises :class:`~zipsgd.spec.errors.ConfigError` naming the expected
  range and the value found.

**Bounded memory** (:class:`LevelStats`): one pass over chunks of rows keeps, per column, the
distinct values and their counts while there are at most ``M`` of them (every method is then
exact), and otherwise a histogram of ``M`` equal bins with each bin's exact count and first and
second moments.  The grid starts on the range seen when the column outgrows ``M`` values; a
later value outside it doubles the bin width towards that side (bins merge pairwise, their
moments exactly) until the grid covers it.  The data then always straddle the grid's midpoint
and span at least a quarter of it, so at least ``M/4`` bins lie inside a feature's range.
Memory is O(M) per column whatever the row count.
"""

from __future__ import annotations

import numpy as np

from ..spec.engine2 import TABLE_BITS
from ..spec.errors import ConfigError, DatasetError
from ..spec.stream import LEVEL_DTYPE, LEVEL_ONE, Encoding, StreamLayout
from ..spec.stream import uniform_levels as uniform_table
from .quantize import level_intervals

__all__ = ["METHODS", "DEFAULT_POINTS", "MIN_POINTS", "MAX_POINTS", "MIN_BITS", "MAX_BITS",
           "MAX_EXACT_VALUES", "mean_variance", "optimal_levels", "uniform_levels",
           "LevelStats", "table_words", "table_levels", "solve_table", "LEVEL_CHOICES",
           "check_level_options", "table_variance", "level_summary"]

#: What ``--levels`` takes: the uniform table, or variance-optimal levels per column.
LEVEL_CHOICES = ("uniform", "optimal")
#: Solver names, for :func:`optimal_levels` and :meth:`LevelStats.solve`.
METHODS = ("exact", "discretized", "approx2")
#: Default number of bins ``M`` of the discretized solver and of :class:`LevelStats`.
DEFAULT_POINTS = 256
#: Allowed range of ``M`` (even numbers only: growing the grid merges bins in pairs).
MIN_POINTS, MAX_POINTS = 8, 4096
#: Allowed bit counts: ``2**b + 1`` levels.
MIN_BITS, MAX_BITS = 1, 8
#: The most distinct values the exact solver takes (its table has N**2 entries: 128 MiB here).
MAX_EXACT_VALUES = 4096


# --------------------------------------------------------------------------------------------
# The objective


def mean_variance(values, levels, weights=None) -> float:
    """Mean variance of stochastic rounding of ``values`` onto ``levels`` (problem (8)).

    Parameters
    ----------
    values : float array, shape ``(N,)``, every value within ``[levels[0], levels[-1]]``
    levels : float array, strictly increasing
    weights : float array, shape ``(N,)``, optional
        Counts (or weights >= 0) of the values; the mean is weighted by them.

    Raises
    ------
    ConfigError
        If the levels are not finite and strictly increasing, do not cover the values, or the
        weights do not match.
    DatasetError
        If a value is not finite.
    """
    values = _finite_1d(values, "values")
    levels = np.asarray(levels, dtype=np.float64).reshape(-1)
    if levels.size < 2 or not np.all(np.isfinite(levels)) or np.any(np.diff(levels) <= 0):
        raise ConfigError(f"expected at least 2 finite, strictly increasing levels, found "
                          f"{levels.tolist()}")
    weights = _weights(weights, values.shape[0])
    if values.size == 0:
        raise DatasetError("expected at least one value, found none")
    if values.min() < levels[0] or values.max() > levels[-1]:
        raise ConfigError(f"expected values within the levels' range [{levels[0]}, "
                          f"{levels[-1]}], found [{values.min()}, {values.max()}]")
    index = np.clip(np.searchsorted(levels, values, side="right") - 1, 0, levels.size - 2)
    variance = (levels[index + 1] - values) * (values - levels[index])
    return float(np.dot(weights, variance) / weights.sum())


def uniform_levels(low: float, high: float, bits: int) -> np.ndarray:
    """``2**bits + 1`` equally spaced levels from ``low`` to ``high`` (the baseline)."""
    _check_bits(bits)
    return np.linspace(low, high, (1 << bits) + 1)


# --------------------------------------------------------------------------------------------
# Candidates and the dynamic program


class _Candidates:
    """Candidate points ``d`` (strictly increasing) with the cumulative count, sum and sum of
    squares of the values below each, in the coordinate ``t = (x - d[0]) / (d[-1] - d[0])``
    (in [0, 1]: keeps the prefix sums' cancellation small).  The values in ``[d_j, d_m]`` have
    moments ``cum[m] - cum[j]`` (values *on* a candidate may be counted on either side: their
    variance is 0 in any interval they end)."""

    def __init__(self, points, count, total, squares):
        self.points = points
        self.count, self.total, self.squares = count, total, squares

    @classmethod
    def from_values(cls, values, weights) -> _Candidates:
        """Distinct values (sorted) with their total weights."""
        order = np.argsort(values, kind="stable")
        values, weights = values[order], weights[order]
        first = np.concatenate([[True], values[1:] != values[:-1]])
        distinct = values[first]
        counts = np.add.reduceat(weights, np.flatnonzero(first))
        return cls.from_bins(distinct, counts, counts * distinct, counts * distinct ** 2,
                             on_points=True)

    @classmethod
    def from_bins(cls, points, count, total, squares, *, on_points=False) -> _Candidates:
        """``on_points``: entry ``i`` holds the values *at* ``points[i]``; otherwise entry ``i``
        holds the values of bin ``[points[i], points[i+1])`` (one entry fewer than points).
        ``total`` and ``squares`` are sums of ``x`` and ``x**2`` in raw units."""
        low, span = points[0], points[-1] - points[0]
        span = span if span > 0 else 1.0
        # Sums in t = (x - low)/span from raw sums: sum t = (S1 - n low)/span, and likewise.
        t1 = (total - count * low) / span
        t2 = (squares - 2 * low * total + count * low * low) / span ** 2
        lead = 1 if on_points else 0  # values at points[i] count below point i
        zero = np.zeros(1 - lead)
        return cls(np.asarray(points, dtype=np.float64),
                   np.concatenate([zero, np.cumsum(count)]),
                   np.concatenate([zero, np.cumsum(t1)]),
                   np.concatenate([zero, np.cumsum(t2)]))

    @property
    def t(self) -> np.ndarray:
        span = self.points[-1] - self.points[0]
        return (self.points - self.points[0]) / (span if span > 0 else 1.0)

    def take(self, index) -> _Candidates:
        return _Candidates(self.points[index], self.count[index], self.total[index],
                           self.squares[index])

    def variance(self, j, m):
        """Total variance (in ``t`` units) of the values in ``[d_j, d_m]``; broadcasts."""
        t = self.t
        a, b = t[j], t[m]
        n = self.count[m] - self.count[j]
        s1 = self.total[m] - self.total[j]
        s2 = self.squares[m] - self.squares[j]
        return np.maximum(-s2 + (a + b) * s1 - a * b * n, 0.0)  # >= 0 up to rounding


def _dynamic_program(cand: _Candidates, intervals: int) -> np.ndarray:
    """Indices of the ``intervals + 1`` candidates (first and last included) minimising the
    total variance: the paper's ``T(k, m)`` recursion, O(intervals * K**2)."""
    size = cand.points.shape[0]
    if size - 1 <= intervals:
        return np.arange(size)
    j = np.arange(size)
    cost = cand.variance(j[:, None], j[None, :])
    cost[np.tril_indices(size)] = np.inf  # an interval needs j < m
    best = cost[0].copy()  # T(1, m)
    choice = np.zeros((intervals + 1, size), dtype=np.int64)
    buffer = np.empty_like(cost)
    for k in range(2, intervals + 1):
        np.add(best[:, None], cost, out=buffer)
        choice[k] = np.argmin(buffer, axis=0)
        best = buffer[choice[k], j]
    picked = [size - 1]
    for k in range(intervals, 1, -1):
        picked.append(int(choice[k][picked[-1]]))
    picked.append(0)
    return np.array(picked[::-1])


def _merge_candidates(cand: _Candidates, intervals: int) -> np.ndarray:
    """The merging pass of ``approx2``: indices of at most ``4 * intervals + 1`` candidates."""
    keep = np.arange(cand.points.shape[0])
    while keep.shape[0] - 1 > 4 * intervals:
        pairs = (keep.shape[0] - 1) // 2
        merged = cand.variance(keep[0:2 * pairs:2], keep[2:2 * pairs + 1:2])
        split = np.zeros(pairs, dtype=np.bool_)
        split[np.argpartition(merged, pairs - intervals)[pairs - intervals:]] = True
        drop = np.zeros(keep.shape[0], dtype=np.bool_)
        drop[1:2 * pairs:2] = ~split  # the middle point of every merged pair goes
        keep = keep[~drop]
    return keep


def _fill(levels: np.ndarray, count: int) -> np.ndarray:
    """Add midpoints of the widest gaps (leftmost first) until there are ``count`` levels."""
    levels = list(levels)
    while len(levels) < count:
        gaps = np.diff(levels)
        i = int(np.argmax(gaps))
        levels.insert(i + 1, levels[i] + gaps[i] / 2)
    return np.array(levels)


def _constant_levels(value: float, count: int) -> np.ndarray:
    steps = np.arange(count) / (count - 1)
    levels = value + steps if value < 0 else value - steps[::-1]
    levels[0 if value < 0 else -1] = value
    return levels


def _solve(cand: _Candidates, bits: int, method: str) -> np.ndarray:
    intervals = 1 << bits
    if cand.points.shape[0] == 1:
        return _constant_levels(float(cand.points[0]), intervals + 1)
    if method == "approx2":
        cand = cand.take(_merge_candidates(cand, intervals))
    levels = cand.points[_dynamic_program(cand, intervals)]
    return _fill(levels, intervals + 1)


# --------------------------------------------------------------------------------------------
# In-memory solver


def optimal_levels(values, bits: int, *, method: str = "exact", points: int = DEFAULT_POINTS,
                   weights=None) -> np.ndarray:
    """Variance-optimal levels of one feature's values held in memory.

    Parameters
    ----------
    values : float array, shape ``(N,)``
    bits : int
        1..8: ``2**bits + 1`` levels, the first the minimum value and the last the maximum.
    method : ``"exact"``, ``"discretized"`` or ``"approx2"``
    points : int
        ``M``, the bins of ``discretized`` (ignored by the others).
    weights : float array, optional
        Counts of the values.

    Returns
    -------
    float64 array, shape ``(2**bits + 1,)``, strictly increasing.

    Raises
    ------
    ConfigError, DatasetError
        As the module documentation says.
    """
    _check_bits(bits)
    _check_method(method)
    values = _finite_1d(values, "values")
    if values.size == 0:
        raise DatasetError("expected at least one value, found none")
    weights = _weights(weights, values.shape[0])
    if method == "discretized":
        stats = _Column(_check_points(points))
        stats.add_histogram(values, weights)
        return _solve(stats.candidates(), bits, method)
    cand = _Candidates.from_values(values, weights)
    if method == "exact" and cand.points.shape[0] > MAX_EXACT_VALUES:
        raise ConfigError(f"the exact solver takes at most {MAX_EXACT_VALUES} distinct values, "
                          f"found {cand.points.shape[0]}: use discretized or approx2")
    return _solve(cand, bits, method)


# --------------------------------------------------------------------------------------------
# Bounded-memory statistics pass


class _Column:
    """One column's statistics: distinct values and counts, or an ``M``-bin histogram whose bin
    ``i`` covers ``[origin + i*width, origin + (i+1)*width)`` and keeps its count and the sums
    of ``x - edge`` and ``(x - edge)**2`` about its left edge (small numbers, exact merges)."""

    def __init__(self, points: int):
        self.points = points
        self.values = np.empty(0)
        self.counts = np.empty(0)
        self.hist = None  # (count, sum, sum of squares) arrays once the column outgrows M values
        self.origin = self.width = 0.0
        self.low, self.high = np.inf, -np.inf

    def add(self, values: np.ndarray) -> None:
        self.low, self.high = min(self.low, values.min()), max(self.high, values.max())
        if self.hist is not None:
            self._add_to_bins(values, np.ones_like(values))
            return
        distinct, counts = np.unique(values, return_counts=True)
        merged, where = np.unique(np.concatenate([self.values, distinct]), return_inverse=True)
        total = np.zeros(merged.shape[0])
        np.add.at(total, where, np.concatenate([self.counts, counts]))
        self.values, self.counts = merged, total
        if merged.shape[0] > self.points:
            values, counts = self.values, self.counts
            self.values = self.counts = np.empty(0)
            self.add_histogram(values, counts)

    def add_histogram(self, values: np.ndarray, weights: np.ndarray) -> None:
        """Start the histogram on the range of ``values`` and bin them."""
        self.low, self.high = min(self.low, values.min()), max(self.high, values.max())
        self.origin, self.width = self.low, (self.high - self.low) / self.points
        if self.width == 0:  # one distinct value: keep it exactly
            self.values, self.counts = np.array([self.low]), np.array([weights.sum()])
            return
        while self.origin + self.points * self.width < self.high:  # rounding must not grow it
            self.width = np.nextafter(self.width, np.inf)
        self.hist = (np.zeros(self.points), np.zeros(self.points), np.zeros(self.points))
        self._add_to_bins(values, weights)

    def _add_to_bins(self, values, weights) -> None:
        while values.min() < self.origin or values.max() > self.origin + self.points * self.width:
            self._grow(left=values.min() < self.origin)
        index = np.clip(np.floor((values - self.origin) / self.width).astype(np.int64), 0,
                        self.points - 1)
        offset = values - (self.origin + index * self.width)
        for acc, add in zip(self.hist, (weights, weights * offset, weights * offset ** 2),
                            strict=True):
            acc += np.bincount(index, add, minlength=self.points)

    def _grow(self, left: bool) -> None:
        """Double the bin width towards one side, merging bins pairwise."""
        m, old_width = self.points, self.width
        origin = self.origin - m * old_width if left else self.origin
        count, total, squares = self.hist
        shift = (self.origin + np.arange(m) * old_width) - (origin + (np.arange(m) // 2 + (
            m // 2 if left else 0)) * 2 * old_width)
        moved = (count, total + count * shift, squares + 2 * shift * total + count * shift ** 2)
        target = np.arange(m) // 2 + (m // 2 if left else 0)
        self.hist = tuple(np.bincount(target, part, minlength=m) for part in moved)
        self.origin, self.width = origin, 2 * old_width

    def candidates(self) -> _Candidates:
        if self.hist is None:
            return _Candidates.from_values(self.values, self.counts)
        count, total, squares = self.hist
        edges = self.origin + np.arange(self.points + 1) * self.width
        first = int(np.flatnonzero(count)[0])
        last = int(np.flatnonzero(count)[-1])
        # Bins first..last; the outer boundaries become the exact minimum and maximum.
        points = edges[first:last + 2].copy()
        points[0], points[-1] = self.low, self.high
        count, total, squares = (a[first:last + 1] for a in (count, total, squares))
        left = edges[first:last + 1]
        raw_total = total + count * left
        raw_squares = squares + 2 * left * total + count * left ** 2
        # A boundary that does not lie strictly inside (low, high) (the maximum on a grid edge)
        # is dropped; its bin joins the previous one (the values there lie on the maximum).
        inside = np.concatenate([[True], points[1:-1] < self.high, [True]])
        inside[1:-1] &= points[1:-1] > self.low
        cut = np.flatnonzero(inside[:-1])
        sums = [np.add.reduceat(a, cut) for a in (count, raw_total, raw_squares)]
        return _Candidates.from_bins(points[inside], *sums)


class LevelStats:
    """The statistics pass for per-column levels: feed chunks of rows, then :meth:`solve`.

    Columns are the label (column 0) and the features, in the order of
    :func:`~zipsgd.host.quantize.quantize_fields`.  Memory is O(``points``) per column; the
    result does not depend on how the rows are chunked as long as every column keeps at most
    ``points`` distinct values (otherwise the histogram's grid depends on the first values
    seen, see the module documentation).

    Parameters
    ----------
    n_features : int
        Feature columns (the label comes on top).
    points : int
        ``M``: an even number in 8..4096 (default 256).

    Raises
    ------
    ConfigError
        For ``points`` out of range or a chunk of the wrong shape.
    """

    def __init__(self, n_features: int, *, points: int = DEFAULT_POINTS):
        if not isinstance(n_features, (int, np.integer)) or n_features < 1:
            raise ConfigError(f"n_features must be an integer >= 1, found {n_features!r}")
        self.points = _check_points(points)
        self.rows = 0
        self._columns = [_Column(self.points) for _ in range(int(n_features) + 1)]

    @property
    def n_features(self) -> int:
        return len(self._columns) - 1

    def update(self, labels, features) -> None:
        """Add a chunk: ``labels`` ``(r,)`` and ``features`` ``(r, n_features)``."""
        table = np.column_stack([np.asarray(labels, dtype=np.float64).reshape(-1),
                                 np.asarray(features, dtype=np.float64)])
        if table.shape[1] != len(self._columns):
            raise ConfigError(f"expected {self.n_features} feature columns, found "
                              f"{table.shape[1] - 1}")
        if not np.all(np.isfinite(table)):
            row, column = np.argwhere(~np.isfinite(table))[0]
            raise DatasetError(f"row {self.rows + row} (0-based, over all updates): expected "
                               f"finite values, found {table[row, column]} in column {column} "
                               "(0 = label)")
        if table.shape[0] == 0:
            return
        for column, stats in enumerate(self._columns):
            stats.add(table[:, column])
        self.rows += table.shape[0]

    @classmethod
    def from_source(cls, source, *, points: int = DEFAULT_POINTS, chunk_rows: int = 65536,
                    progress=None):
        """One pass over a :class:`~zipsgd.host.datasets.DataSource` (``progress``, if given,
        is called with the row count of every chunk)."""
        stats = cls(source.n_features, points=points)
        for labels, features in source.iter_chunks(chunk_rows):
            stats.update(labels, features)
            if progress is not None:
                progress(labels.shape[0])
        return stats

    def range(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-column minimum and maximum seen (label first)."""
        return (np.array([c.low for c in self._columns]),
                np.array([c.high for c in self._columns]))

    def solve(self, bits: int, method: str = "discretized") -> np.ndarray:
        """Levels of every column: float64 array ``(n_features + 1, 2**bits + 1)``, label row 0.

        ``exact`` is accepted only while every column still holds its distinct values (at most
        ``points`` of them); ``discretized`` and ``approx2`` work on either form.

        Raises
        ------
        ConfigError
            For bits or method out of range, ``exact`` on a histogram, or no rows seen.
        """
        _check_bits(bits)
        _check_method(method)
        if self.rows == 0:
            raise ConfigError("expected at least one row before solving, found none")
        binned = [j for j, c in enumerate(self._columns) if c.hist is not None]
        if method == "exact" and binned:
            raise ConfigError(f"the exact solver needs every column's distinct values, found "
                              f"column {binned[0]} (0 = label) with more than {self.points}: "
                              "use discretized or approx2, or more points")
        return np.stack([_solve(c.candidates(), bits, method) for c in self._columns])


# --------------------------------------------------------------------------------------------
# Checks


def _check_bits(bits) -> int:
    if not isinstance(bits, (int, np.integer)) or not MIN_BITS <= bits <= MAX_BITS:
        raise ConfigError(f"bits must be an integer in {MIN_BITS}..{MAX_BITS}, found {bits!r}")
    return int(bits)


def _check_method(method) -> str:
    if method not in METHODS:
        raise ConfigError(f"levels method must be one of {', '.join(METHODS)}, found "
                          f"{method!r}")
    return method


def _check_points(points) -> int:
    if (not isinstance(points, (int, np.integer)) or not MIN_POINTS <= points <= MAX_POINTS
            or points % 2):
        raise ConfigError(f"levels points M must be an even integer in {MIN_POINTS}.."
                          f"{MAX_POINTS}, found {points!r}")
    return int(points)


def _finite_1d(values, what: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(values)):
        bad = int(np.flatnonzero(~np.isfinite(values))[0])
        raise DatasetError(f"expected finite {what}, found {values[bad]} at index {bad}")
    return values


def _weights(weights, size: int) -> np.ndarray:
    if weights is None:
        return np.ones(size)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if (weights.shape[0] != size or not np.all(np.isfinite(weights)) or np.any(weights < 0)
            or (size and weights.sum() <= 0)):
        raise ConfigError(f"expected {size} finite weights >= 0 with a positive sum, found "
                          f"{weights.shape[0]}")
    return weights



# --------------------------------------------------------------------------------------------
# Level tables: the solvers' levels in the file's fixed-point format


def table_words(levels, constant=None) -> np.ndarray:
    """Round levels on scaled values (rows ``(2**b + 1,)``, within [-1, 1]) to a level table.

    Every row becomes int16 words ``value * 256`` (:data:`~zipsgd.spec.stream.LEVEL_ONE` = 256):

    * the first and last words are ``-256`` and ``+256`` whatever the solver's endpoints (with
      minmax scaling these *are* the column's minimum and maximum, so nothing is lost);
    * interior word ``i`` is ``rint(256 * l_i)`` clamped to ``[-256 + i, 256 - (s - i)]``
      (room for the words on either side), then raised to ``word[i-1] + 1`` where it does not
      exceed its left neighbour.  Each word stays within its clamp range, so the row strictly
      increases and ends at +256; a word moves from its rounded value only where levels lie
      closer than 1/256 (at ``b = 8`` every row is the uniform one);
    * a row marked in ``constant`` (a column whose minimum equals its maximum: a constant
      feature, 0 after minmax scaling, or the intercept column, 1) gets the uniform row, which
      holds -1, 0 and +1 exactly: the column's value is on a level and has variance 0.

    Raises
    ------
    ConfigError
        If the levels are not finite, or the rows do not have ``2**b + 1`` entries, b = 1..8.
    """
    levels = np.asarray(levels, dtype=np.float64)
    if levels.ndim != 2 or levels.shape[1] - 1 not in [1 << b for b in range(MIN_BITS,
                                                                             MAX_BITS + 1)]:
        raise ConfigError(f"expected levels of shape (columns, 2**b + 1), b = {MIN_BITS}.."
                          f"{MAX_BITS}, found {levels.shape}")
    if not np.all(np.isfinite(levels)):
        row, entry = np.argwhere(~np.isfinite(levels))[0]
        raise ConfigError(f"levels row {row} (0 = label), entry {entry}: expected a finite "
                          f"value, found {levels[row, entry]}")
    s = levels.shape[1] - 1
    i = np.arange(s + 1)
    words = np.clip(np.rint(levels * LEVEL_ONE), -LEVEL_ONE + i, LEVEL_ONE - (s - i))
    words[:, 0], words[:, -1] = -LEVEL_ONE, LEVEL_ONE
    for k in range(1, s):  # a collision moves the later word up (its clamp leaves room)
        words[:, k] = np.maximum(words[:, k], words[:, k - 1] + 1)
    if constant is not None:
        uniform = (2 * i - s) * (LEVEL_ONE // s)
        words[np.asarray(constant, dtype=bool)] = uniform
    return words.astype(LEVEL_DTYPE)


def table_levels(words) -> np.ndarray:
    """The level values a table decodes to (``word / 256``, exact in float64): what the host
    quantizes onto, so that both samples are unbiased with respect to the stored levels."""
    return np.asarray(words, dtype=np.float64) / LEVEL_ONE


def solve_table(stats: LevelStats, bits: int, method: str = "discretized", *,
                offsets=None, scales=None, intercept: bool = False) -> np.ndarray:
    """The level table of the columns ``stats`` saw, for values scaled by ``(x - offset) /
    scale`` (the scaler's table, label first; none given: the values are already scaled).

    The levels are solved on the raw values and mapped through the scaling (the problem
    commutes with affine maps), then rounded by :func:`table_words`; constant columns get the
    uniform row, and with ``intercept`` a uniform row is appended for the intercept column.

    Raises
    ------
    ConfigError
        As :meth:`LevelStats.solve` and :func:`table_words`.
    """
    levels = stats.solve(bits, method)
    low, high = stats.range()
    if offsets is not None:
        offsets = np.asarray(offsets, dtype=np.float64)[:, None]
        scales = np.asarray(scales, dtype=np.float64)[:, None]
        levels = (levels - offsets) / scales
    constant = low == high
    if intercept:
        levels = np.vstack([levels, np.linspace(-1.0, 1.0, levels.shape[1])])
        constant = np.append(constant, True)
    return table_words(np.clip(levels, -1.0, 1.0), constant)


def check_level_options(levels, method: str, points: int, layout: StreamLayout,
                        scaling=None) -> None:
    """Refuse level options that cannot run, before any pass over the data.

    ``levels`` is None (no table), ``"uniform"`` or ``"optimal"``; optimal levels need
    ``scaling`` minmax (the table's rows run from -1 to +1: with minmax scaling those are
    each column's minimum and maximum), given as a string or enum name.

    Raises
    ------
    ConfigError
        Naming the option and the value found.
    """
    if levels is None:
        return
    if levels not in LEVEL_CHOICES:
        raise ConfigError(f"levels must be one of {', '.join(LEVEL_CHOICES)}, found {levels!r}")
    if layout.encoding is Encoding.RAW32:
        raise ConfigError(f"--levels {levels} with raw32: expected double or single encoding "
                          "(raw32 values have no levels)")
    _check_method(method)
    _check_points(points)
    if levels == "optimal" and layout.bits > TABLE_BITS:
        raise ConfigError(f"--levels optimal solves a table per feature, which engine v2 holds "
                          f"at b <= {TABLE_BITS} (2**{TABLE_BITS} levels a feature), found "
                          f"--bits {layout.bits}; use --levels uniform above b = {TABLE_BITS}")
    if levels == "optimal" and scaling is not None \
            and str(getattr(scaling, "name", scaling)).lower() != "minmax":
        raise ConfigError(f"--levels optimal scales every column with minmax (so the table's "
                          f"-1 and +1 are its minimum and maximum), found scaling "
                          f"{str(getattr(scaling, 'name', scaling)).lower()}")


def table_variance(chunks, scaler, table) -> tuple[np.ndarray, np.ndarray]:
    """Mean variance per column (label first) of stochastic rounding onto a level table and onto
    the uniform table, over the rows of ``chunks`` (raw ``(labels, features)`` blocks, e.g. a
    source's ``iter_chunks``) scaled by ``scaler``; exact, in one pass of bounded memory.

    Returns ``(stored, uniform)``, float64 arrays ``(n_features + 1,)`` in scaled units.
    """
    table = np.asarray(table)
    bits = (table.shape[1] - 1).bit_length() - 1
    tables = (table_levels(table), table_levels(uniform_table(bits, table.shape[0] - 1)))
    totals, rows = [np.zeros(table.shape[0]), np.zeros(table.shape[0])], 0
    for labels, features in chunks:
        values = np.column_stack(scaler.transform(labels, features))
        for total, levels in zip(totals, tables, strict=True):
            index, prob = level_intervals(values, levels, bits)
            gap = np.diff(levels, axis=1)[np.arange(values.shape[1]), index]
            total += (gap * gap * prob * (1 - prob)).sum(axis=0)
        rows += values.shape[0]
    if rows == 0:
        raise DatasetError("expected at least one row to measure the variance, found none")
    return totals[0] / rows, totals[1] / rows


def level_summary(table, ends: int = 3) -> list[dict]:
    """Per row of a level table (label first): the first and last ``ends`` levels (every
    level, and ``last`` empty, when there are at most ``2 * ends + 1``) and the least and
    median spacing, as values (``word / 256``)."""
    levels = table_levels(table)
    rows = []
    for j, row in enumerate(levels):
        gaps = np.diff(row)
        short = row.size <= 2 * ends + 1
        rows.append({"column": "label" if j == 0 else f"feature {j}",
                     "first": row.tolist() if short else row[:ends].tolist(),
                     "last": [] if short else row[-ends:].tolist(),
                     "min_spacing": float(gaps.min()), "median_spacing": float(np.median(gaps))})
    return rows
