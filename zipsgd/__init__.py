"""zipsgd: a streaming SGD engine for linear models trained on low-precision data.

Import root of the project; every module's import name is its path below this folder.  The
layers, each importing only those below it (``make lint`` checks it with import-linter):

* :mod:`zipsgd.spec` -- the one definition of every format, register, default and error type;
* :mod:`zipsgd.golden` -- the float reference and the bit-exact engine model;
* :mod:`zipsgd.hw` -- the Amaranth hardware;
* :mod:`zipsgd.host` -- datasets, scaling, quantization, packing, ``.zsgd`` files, training;
* :mod:`zipsgd.sim` -- cocotb + Verilator simulation;
* :mod:`zipsgd.backends` -- the training backends that run the generated engine;
* :mod:`zipsgd.cli` -- the ``zipsgd`` command.

The Python API: :func:`quantize`, :func:`load` and :class:`PackedData` (packed data sets), and
the scikit-learn estimators :class:`ZipSGDRegressor` and :class:`ZipSGDClassifier`.
"""

import importlib
import importlib.metadata

from .spec.errors import (
    ConfigError,
    DatasetError,
    LinkError,
    OutputError,
    OutputExistsError,
    StreamFormatError,
    ZipsgdError,
)

__all__ = ["ZipsgdError", "DatasetError", "StreamFormatError", "ConfigError",
           "OutputError", "OutputExistsError", "LinkError", "PackedData", "quantize", "load",
           "ZipSGDRegressor", "ZipSGDClassifier"]

#: The Python API, loaded when first used: the estimators import scikit-learn (about a second)
#: and the packing pipeline the data sources, which the hardware flow does not need.
_LAZY = {"PackedData": ".host.packed", "quantize": ".host.packed", "load": ".host.packed",
         "ZipSGDRegressor": ".host.estimators", "ZipSGDClassifier": ".host.estimators"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__version__ = importlib.metadata.version("zipsgd")
