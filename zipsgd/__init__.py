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
"""

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
           "OutputError", "OutputExistsError", "LinkError"]

__version__ = importlib.metadata.version("zipsgd")
