"""Packed data sets as objects: :func:`quantize` arrays into a :class:`PackedData`, ``.save``
it as a ``.zsgd`` file, :func:`load` one back.

A :class:`PackedData` holds a ``.zsgd`` header and its payload in memory, and reads like a
:class:`~zipsgd.host.zsgd_file.StreamFile` (both are
:class:`~zipsgd.host.zsgd_file.EpochStreams`), so training takes either.  :func:`quantize` runs
the same scale-quantize-pack pipeline as ``zipsgd quantize``
(:func:`~zipsgd.host.pack.packed_stream`), so a saved object is byte for byte the file the
command writes from the same data.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..spec.stream import StreamLayout
from .datasets import ArraySource, DataSource
from .levels import DEFAULT_POINTS
from .pack import packed_stream
from .quantize import dequantize_fields
from .scaling import Scaler
from .train import TrainSettings
from .zsgd_file import EpochStreams, StreamFile, StreamHeader, write_stream

__all__ = ["PackedData", "quantize", "quantize_source", "load"]

_RUN = TrainSettings()  # the run defaults: encoding, bits, bus width, seed


class PackedData(EpochStreams):
    """A packed data set in memory: a ``.zsgd`` header and ``header.epoch_count`` streams.

    Members
    -------
    header : StreamHeader
    name : str
        What reports call the data.
    """

    def __init__(self, header: StreamHeader, payload, name: str = "arrays"):
        payload = np.frombuffer(bytes(payload), dtype=np.uint8) \
            if isinstance(payload, (bytes, bytearray, memoryview)) else \
            np.ascontiguousarray(payload, dtype=np.uint8)
        if payload.shape != (header.payload_bytes,):
            raise ValueError(f"payload: expected {header.payload_bytes} bytes, found "
                             f"{payload.size}")
        payload.setflags(write=False)
        self.header, self.name, self._payload = header, name, payload
        self.payload_crc32 = zlib.crc32(memoryview(payload))

    @property
    def n_samples(self) -> int:
        return self.header.n_samples

    @property
    def n_features(self) -> int:
        """Features per sample (an intercept column included)."""
        return self.header.n_features

    @property
    def scaler(self) -> Scaler:
        """What maps original samples to the scaled ones packed here, and models back."""
        h = self.header
        return Scaler.from_table(h.offsets, h.scales, intercept=h.intercept)

    def iter_epoch_chunks(self, index: int) -> Iterator[np.ndarray]:
        if not 0 <= index < self.header.epoch_count:
            raise IndexError(f"epoch index {index} outside 0..{self.header.epoch_count - 1}")
        size = self.header.epoch_bytes
        yield self._payload[index * size:(index + 1) * size]

    def dequantized(self, index: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The scaled ``(labels, features)`` that stored epoch ``index`` stands for, as the
        engine decodes them (:func:`~zipsgd.host.quantize.dequantize_fields`)."""
        fields = np.concatenate(list(self.iter_fields(index)))
        return dequantize_fields(fields, self.layout, self.header.levels)

    def save(self, path, force: bool = False) -> Path:
        """Write the ``.zsgd`` file ``path``, atomically; returns its path.

        Raises
        ------
        OutputError, OutputExistsError
            If ``path`` cannot be published, or exists and not ``force``.
        """
        write_stream(path, self.header, [self._payload], force)
        return Path(path)

    def __repr__(self):
        h = self.header
        return (f"PackedData({self.name!r}: {h.n_samples} samples x {h.n_features} features, "
                f"{h.layout}, {h.epoch_count} epoch(s))")


def quantize_source(source: DataSource, *, bits: int = _RUN.bits,
                    encoding: str = _RUN.encoding, bus_width: int = _RUN.bus_width,
                    seed: int = _RUN.seed, epochs: int = 1, epoch_first: int = 0,
                    scaling=None, intercept: bool = False, levels: str | None = None,
                    levels_method: str = "discretized",
                    levels_points: int = DEFAULT_POINTS) -> PackedData:
    """Scale, quantize and pack ``epochs`` epochs of ``source`` into memory (the pipeline of
    :func:`~zipsgd.host.pack.pack_source`; ``scaling`` None: maxabs, or minmax with
    ``levels="optimal"``, as ``zipsgd quantize``).

    Raises
    ------
    DatasetError, ConfigError
        As :func:`~zipsgd.host.pack.pack_source`.
    """
    layout = StreamLayout.make(encoding, bits, bus_width)
    if scaling is None:
        scaling = "minmax" if levels == "optimal" else "maxabs"
    header, payload = packed_stream(source, layout, seed=seed, epochs=epochs,
                                    epoch_first=epoch_first, scaling=scaling,
                                    add_intercept=intercept, progress=False, levels=levels,
                                    levels_method=levels_method, levels_points=levels_points)
    return PackedData(header, np.concatenate(list(payload)), source.name)


def quantize(X, y, *, bits: int = _RUN.bits, encoding: str = _RUN.encoding,
             bus_width: int = _RUN.bus_width, seed: int = _RUN.seed, epochs: int = 1,
             scaling=None, intercept: bool = False, levels: str | None = None,
             levels_method: str = "discretized", levels_points: int = DEFAULT_POINTS,
             name: str = "arrays") -> PackedData:
    """Scale the samples ``X`` (shape ``(n, d)``) and labels ``y`` (shape ``(n,)``) to [-1, 1],
    quantize them (double sampling by default, fresh randomness per epoch) and pack them.

    Parameters
    ----------
    bits : int
        Interval-index bits b, 1..8 (ignored for raw32, which is 32-bit fixed point).
    encoding : str
        ``double``, ``single`` or ``raw32``.
    bus_width : int
        Bits per stream beat: 64, 128, 256 or 512.
    seed : int
        Quantization seed, 0..2**64-1.
    epochs : int
        Independently quantized epochs to store.
    scaling : str, optional
        ``maxabs`` or ``minmax``; none given: maxabs, or minmax with ``levels="optimal"``
        (which needs it).
    intercept : bool
        Append a constant-1 feature.
    levels : None, ``"uniform"`` or ``"optimal"``
        A level table in the header (``zipsgd quantize --levels``; ``docs/LEVELS.md``); None:
        no table (uniform levels, what the v1 engine reads).  Data with a table train on a
        backend that decodes level tables (``golden2``).
    levels_method, levels_points : str, int
        The solver of optimal levels (``exact``, ``discretized`` or ``approx2``) and its
        ``M``, as ``--levels-method`` and ``--levels-points``.

    Raises
    ------
    DatasetError
        For arrays that are not finite real numbers of matching shapes, or a constant label.
    ConfigError
        For parameters out of range.
    """
    return quantize_source(ArraySource(y, X, name), bits=bits, encoding=encoding,
                           bus_width=bus_width, seed=seed, epochs=epochs, scaling=scaling,
                           intercept=intercept, levels=levels, levels_method=levels_method,
                           levels_points=levels_points)


def load(path) -> PackedData:
    """Read a ``.zsgd`` file into memory (header and payload checked: CRCs, sizes).

    Raises
    ------
    StreamFormatError
        For a missing, unreadable, malformed or corrupt file.
    """
    stream = StreamFile(path)
    payload = np.concatenate([stream.epoch_payload(k) for k in range(stream.header.epoch_count)])
    return PackedData(stream.header, payload, stream.name)
