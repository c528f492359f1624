"""The quantize-and-pack pipeline: a data source becomes a ``.zsgd`` file of packed epochs.

Pass 1 reads the source once for the column statistics (skipped for in-memory sources) and
fixes the scale table; then, for every epoch ``k`` stored, a pass re-reads the source chunk by
chunk, scales it, quantizes it with :func:`~zipsgd.host.quantize.epoch_rng` ``(seed,
epoch_first + k)`` -- fresh randomness per epoch, the paper's *refetching* -- packs it back to
back (stream format v2, :class:`~zipsgd.spec.stream.StreamPacker`, which carries the partial
last beat of a chunk into the next) and appends it to the file.  Memory stays bounded by a
chunk, whatever the size of the source; the file appears (atomically) only when complete.

Because the quantizer's generator is consumed sample by sample in stream order, the payload
does not depend on the chunk size: epoch ``e`` of a file is byte-identical to
:func:`quantize_epoch` of the same scaled data with the same ``(seed, e)``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from ..spec.errors import ConfigError, DatasetError
from ..spec.stream import (
    StreamLayout,
    StreamPacker,
    check_n_features,
    pack_stream,
    uniform_levels,
)
from .datasets import DataSource
from .levels import DEFAULT_POINTS, LevelStats, check_level_options, solve_table
from .output import check_output
from .quantize import epoch_rng, quantize_table
from .scaling import ColumnStats, Scaler
from .zsgd_file import MAX_EPOCHS, MAX_SAMPLES, Scaling, StreamHeader, write_stream

__all__ = ["CHUNK_BYTES", "default_chunk_rows", "pack_source", "packed_stream", "quantize_epoch"]

#: Target size of one chunk of float64 samples (label included) read from a source.
CHUNK_BYTES = 16 << 20
_MAX_U32 = (1 << 32) - 1
_MAX_U64 = (1 << 64) - 1


def default_chunk_rows(n_features: int) -> int:
    """Rows of ``n_features`` features (plus the label) in about :data:`CHUNK_BYTES` of float64."""
    return max(1, CHUNK_BYTES // (8 * (n_features + 1)))


def quantize_epoch(labels_scaled, features_scaled, layout: StreamLayout, seed: int,
                   epoch: int, levels=None) -> np.ndarray:
    """Quantize and pack one epoch of scaled in-memory samples.

    Parameters
    ----------
    labels_scaled : float array, shape ``(n,)``, values in [-1, 1]
    features_scaled : float array, shape ``(n, n_features)``, values in [-1, 1]
    layout : StreamLayout
    seed, epoch : int
        Select the generator :func:`~zipsgd.host.quantize.epoch_rng` ``(seed, epoch)``.
    levels : int16 array, optional
        The file's level table: quantize onto its levels (``word / 256``).

    Returns
    -------
    uint8 array: the v2 stream, ``layout.stream_bytes(n_features, n)`` bytes, identical to
    the payload of epoch ``epoch`` of a file packed from the same data with ``seed``.
    """
    fields = quantize_table(labels_scaled, features_scaled, layout, epoch_rng(seed, epoch),
                            levels)
    return pack_stream(fields, layout)


def _check_range(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not low <= value <= high:
        raise ConfigError(f"{name} must be an integer in {low}..{high}, found {value!r}")
    return int(value)


def _progress_bar(enabled: bool, total: int | None, desc: str) -> tqdm:
    # Only for a person watching: never into logs, pipes or captured test output.
    return tqdm(total=total, desc=desc, unit="row", unit_scale=True, leave=False,
                disable=not (enabled and sys.stderr.isatty()))


def packed_stream(source: DataSource, layout: StreamLayout, *, seed: int = 0, epochs: int = 1,
                  epoch_first: int = 0, scaling=Scaling.MAXABS, add_intercept: bool = False,
                  chunk_rows: int | None = None, progress: bool = True,
                  levels: str | None = None, levels_method: str = "discretized",
                  levels_points: int = DEFAULT_POINTS
                  ) -> tuple[StreamHeader, Iterator[np.ndarray]]:
    """Scale, quantize and pack ``epochs`` epochs of ``source``: the statistics pass runs now
    and fixes the header; the payload comes chunk by chunk from the returned iterator (one
    pass of the source per epoch).  Parameters as :func:`pack_source`.

    Raises
    ------
    DatasetError, ConfigError
        As :func:`pack_source` (the iterator raises DatasetError for a source that changed).
    """
    seed = _check_range("seed", seed, 0, _MAX_U64)
    epochs = _check_range("epochs", epochs, 1, MAX_EPOCHS)
    epoch_first = _check_range("epoch_first", epoch_first, 0, _MAX_U32 - epochs + 1)
    scaling = Scaling.parse(scaling)
    if chunk_rows is None:
        chunk_rows = default_chunk_rows(source.n_features + add_intercept)

    check_level_options(levels, levels_method, levels_points, layout, scaling)
    with _progress_bar(progress, source.n_samples, "statistics") as bar:
        if levels == "optimal":
            level_stats = LevelStats.from_source(source, points=levels_points,
                                                 chunk_rows=chunk_rows, progress=bar.update)
            stats = ColumnStats(*level_stats.range(), level_stats.rows)
        else:
            stats = ColumnStats.from_source(source, chunk_rows, progress=bar.update)
    if stats.count > MAX_SAMPLES:
        raise DatasetError(f"{source.name}: expected at most {MAX_SAMPLES} samples, "
                           f"found {stats.count}")
    scaler = Scaler.from_stats(stats, scaling, intercept=add_intercept)
    offsets, scales = scaler.table()
    n_features = check_n_features(scaler.n_weights)
    table = None
    if levels == "optimal":
        table = solve_table(level_stats, layout.bits, levels_method, offsets=scaler.offsets,
                            scales=scaler.scales, intercept=add_intercept)
    elif levels == "uniform":
        table = uniform_levels(layout.bits, n_features)
    header = StreamHeader(layout, n_features, stats.count, seed, scaling, offsets, scales,
                          epoch_first, epochs, intercept=add_intercept, levels=table)
    layout = header.layout          # (per-feature tables pad long samples: ``sample_fields``)

    def payload() -> Iterator[np.ndarray]:
        with _progress_bar(progress, stats.count * epochs, "quantize") as bar:
            for k in range(epochs):
                rng = epoch_rng(seed, epoch_first + k)
                packer = StreamPacker(layout, header.n_features)
                written = 0
                for labels, features in source.iter_chunks(chunk_rows):
                    yield packer.pack(quantize_table(*scaler.transform(labels, features),
                                                     layout, rng, table))
                    written += labels.shape[0]
                    bar.update(labels.shape[0])
                yield packer.finish()
                if written != stats.count:
                    raise DatasetError(f"{source.name}: expected {stats.count} samples as in "
                                       f"the statistics pass, found {written} (did the input "
                                       "change?)")

    return header, payload()


def pack_source(source: DataSource, out_path, layout: StreamLayout, *, seed: int = 0,
                epochs: int = 1, epoch_first: int = 0, scaling=Scaling.MAXABS,
                add_intercept: bool = False, force: bool = False,
                chunk_rows: int | None = None, progress: bool = True, levels: str | None = None,
                levels_method: str = "discretized",
                levels_points: int = DEFAULT_POINTS) -> StreamHeader:
    """Scale, quantize and pack ``epochs`` epochs of ``source`` into the file ``out_path``.

    Parameters
    ----------
    source : DataSource
        Read ``1 + epochs`` times (once fewer if it is in memory).
    out_path : path-like
        The ``.zsgd`` file to write (atomically: complete or not at all).
    layout : StreamLayout
    seed : int
        Quantization seed, 0..2**64-1, stored in the header.
    epochs : int
        Epochs to store, 1..``MAX_EPOCHS``: each quantized independently.
    epoch_first : int
        Index of the first stored epoch (so several files can hold consecutive epochs).
    scaling : Scaling or str
        ``maxabs`` or ``minmax`` (:mod:`zipsgd.host.scaling`).
    add_intercept : bool
        Append a constant-1.0 feature after scaling (offset 0 / scale 1 in the table); the
        header's ``n_features`` counts it.
    force : bool
        Replace an existing ``out_path``.
    chunk_rows : int, optional
        Rows read per chunk; default :func:`default_chunk_rows` (about 16 MiB of float64).
        Does not change the output.
    progress : bool
        Show a progress bar on standard error, only if it is a terminal.
    levels : None, ``"uniform"`` or ``"optimal"``
        None: no level table (uniform levels, the v1 engine's stream).  ``"uniform"``: the
        uniform table in the header (the same fields).  ``"optimal"``: the statistics pass also
        keeps :class:`~zipsgd.host.levels.LevelStats` (O(``levels_points``) per column), the
        levels are solved per column with ``levels_method`` at the layout's bits, mapped
        through the (minmax) scaling and rounded to the table
        (:func:`~zipsgd.host.levels.solve_table`); the epochs are quantized onto the table.
    levels_method, levels_points : the solver and its ``M`` (``docs/LEVELS.md``).

    Returns
    -------
    StreamHeader
        The header written.

    Raises
    ------
    OutputError, OutputExistsError
        If ``out_path`` cannot be published, or exists and not ``force`` (checked before any
        pass, and again when it is published: an existing file is kept).
    DatasetError
        For bad input data (including a constant label) or a source that changes between
        passes.
    ConfigError
        For parameters out of range (levels: :func:`~zipsgd.host.levels.check_level_options`;
        ``exact`` on a column with more than ``levels_points`` distinct values), or more
        features than the format holds.
    """
    out_path = Path(out_path)
    check_level_options(levels, levels_method, levels_points, layout, Scaling.parse(scaling))
    check_output(out_path, force)  # fail before the passes, not after them
    header, payload = packed_stream(source, layout, seed=seed, epochs=epochs,
                                    epoch_first=epoch_first, scaling=scaling,
                                    add_intercept=add_intercept, chunk_rows=chunk_rows,
                                    progress=progress, levels=levels,
                                    levels_method=levels_method, levels_points=levels_points)
    write_stream(out_path, header, payload, force)
    return header
