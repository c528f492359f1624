"""Backends: what a training run trains on, as objects found by name in one registry.

A backend is one of three kinds (:attr:`Backend.kind`):

``"float"``
    float64 mini-batch SGD on the unquantized scaled data (:mod:`zipsgd.golden.float_sgd`).
``"golden"``
    a bit-exact engine model on the packed stream: ``golden`` runs engine v1
    (:class:`zipsgd.golden.engine.GoldenEngine`, uniform levels), ``golden2`` engine v2
    (:class:`zipsgd.golden.engine2.GoldenEngine2`, numerics v2, uniform levels or a level
    table: :attr:`Backend.numerics` 2 and :attr:`Backend.levels`).
``"engine"``
    the golden model, and the same epochs on the generated engine, checked against it bit for
    bit after every epoch: the backend's :meth:`EngineBackend.run_epochs` runs the epochs
    (:class:`EpochJob`) and returns the status registers and model words it read back.

``float``, ``golden`` and ``golden2`` are defined here.  The backends that run the generated
engine live above this layer (``zipsgd.backends``: ``verilator``, ``board``, ``board-sim``) and
register by the ``zipsgd.backends`` entry-point group of the package metadata, which is how a
backend from another package joins too: :func:`get_backend` loads one by name when a run asks
for it, so the host package never imports the layers above it.
"""

from __future__ import annotations

import abc
import importlib.metadata
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from ..spec.engine import EngineParams, RunConfig
from ..spec.engine2 import MAX_BATCH2, EngineParams2, LanePlan, RunConfig2
from ..spec.errors import ConfigError

__all__ = ["Backend", "FloatBackend", "GoldenBackend", "Golden2Backend", "EngineBackend",
           "EpochJob", "EpochJob2", "Engine2Backend",
           "ENTRY_POINT_GROUP", "backend_names", "get_backend"]

#: The entry-point group in which backends register (``pyproject.toml``).
ENTRY_POINT_GROUP = "zipsgd.backends"
KINDS = ("float", "golden", "engine")


class Backend(abc.ABC):
    """A training backend: its registry name and kind (see the module docstring)."""

    name: ClassVar[str]
    kind: ClassVar[str]
    #: The engine numerics the backend runs (``docs/ENGINE.md``): 1, or 2 ("Engine v2").
    numerics: ClassVar[int] = 1
    #: Whether it decodes through a level table (``.zsgd`` ``levels`` = 1, ``--levels``).
    levels: ClassVar[bool] = False

    def check(self, settings) -> None:  # noqa: B027 (most backends need nothing)
        """Raise :class:`ConfigError` if ``settings`` (a ``TrainSettings``) cannot run here."""


class FloatBackend(Backend):
    """float64 mini-batch SGD on the unquantized scaled data."""

    name = "float"
    kind = "float"


class GoldenBackend(Backend):
    """The bit-exact engine model on the packed stream."""

    name = "golden"
    kind = "golden"


class Golden2Backend(Backend):
    """The bit-exact model of engine v2 (numerics v2) on the packed stream, with uniform levels
    or a level table."""

    name = "golden2"
    kind = "golden"
    numerics = 2
    levels = True

    def check(self, settings) -> None:
        if settings.batch_size > MAX_BATCH2:
            raise ConfigError(f"golden2: batch size must be at most B_max={MAX_BATCH2} (engine "
                              f"v2), found {settings.batch_size}")


class EpochJob:
    """One epoch for an engine backend: the register settings, the payload in the v1 beat
    layout the current engine reads (:func:`~zipsgd.spec.stream.pack_beats_v1`), the samples
    in it, and whether to (re)write the seed register before it."""

    def __init__(self, config: RunConfig, payload: np.ndarray, samples: int,
                 write_seed: bool = False):
        self.config = config
        self.payload = np.ascontiguousarray(payload, dtype=np.uint8)
        self.samples = samples
        self.write_seed = write_seed


class EngineBackend(Backend):
    """A backend that runs the generated engine; the driver checks it against the golden
    model after every epoch."""

    kind = "engine"

    @abc.abstractmethod
    def run_epochs(self, settings, params: EngineParams, jobs: list[EpochJob],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        """Run ``jobs`` in order from ``initial_model``; per epoch a dict with ``status`` (the
        decoded status registers, :func:`zipsgd.spec.registers.decode_status_words`),
        ``model_words`` and ``wall_s``.  ``progress(epochs_done)`` as epochs finish."""


class EpochJob2:
    """One epoch for an engine v2 backend: the run's settings and lane plan, the packed stream
    (``docs/FORMAT.md``, version 2: :func:`~zipsgd.spec.stream.pack_stream`), whether to
    (re)write the seed register before it, and the level table to load before it (``None``:
    keep the loaded one; rows ``l_0 .. l_(2**b)``, one row for a shared table)."""

    def __init__(self, config: RunConfig2, plan: LanePlan, payload: np.ndarray,
                 write_seed: bool = False, levels: np.ndarray | None = None,
                 per_feature: bool = False):
        self.config, self.plan = config, plan
        self.payload = np.ascontiguousarray(payload, dtype=np.uint8)
        self.write_seed = write_seed
        self.levels = None if levels is None else np.asarray(levels, dtype=np.int64)
        self.per_feature = per_feature


class Engine2Backend(Backend):
    """A backend that runs engine v2 (numerics v2, level tables); the driver checks it against
    the golden model of engine v2 after every epoch."""

    kind = "engine"
    numerics = 2
    levels = True

    def check(self, settings) -> None:
        Golden2Backend().check(settings)

    @abc.abstractmethod
    def run_epochs(self, settings, params: EngineParams2, jobs: list[EpochJob2],
                   initial_model: np.ndarray,
                   progress: Callable[[int], None] | None = None) -> list[dict]:
        """Run ``jobs`` in order from ``initial_model``; per epoch a dict with ``status`` (the
        decoded status registers, :func:`zipsgd.spec.registers2.decode_status`),
        ``model_words`` and ``wall_s``.  ``progress(epochs_done)`` as epochs finish."""


_BUILTIN: dict[str, type[Backend]] = {"float": FloatBackend, "golden": GoldenBackend,
                                       "golden2": Golden2Backend}


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def backend_names() -> tuple[str, ...]:
    """Every registered backend's name (nothing is imported to list them)."""
    return tuple(dict.fromkeys([*_BUILTIN, *_entry_points()]))


def get_backend(name: str) -> Backend:
    """The backend registered as ``name``.

    Raises
    ------
    ConfigError
        If no backend has that name.
    """
    if name in _BUILTIN:
        return _BUILTIN[name]()
    entry = _entry_points().get(name)
    if entry is None:
        raise ConfigError(f"backend must be one of {', '.join(backend_names())}, found {name!r}")
    factory = entry.load()
    backend = factory()
    if not isinstance(backend, Backend) or backend.kind not in KINDS or backend.name != name:
        raise TypeError(f"entry point {entry.value} for backend {name!r} made {backend!r}, "
                        f"not a Backend named {name!r}")
    return backend
