"""zipsgd: a streaming SGD engine for linear models trained on low-precision data.

Import root of the project.  The subpackages are

* :mod:`zipsgd.spec` -- the one definition of every format (stream layout, fixed point,
  engine widths) that hardware, golden model, host and benches share;
* :mod:`zipsgd.host` -- datasets, scaling, quantization, packing, the ``.zsgd`` file format;
* :mod:`zipsgd.golden` -- the float reference and the bit-exact engine model;
* :mod:`zipsgd.hw` -- the Amaranth hardware;
* :mod:`zipsgd.sim` -- cocotb + Verilator simulation.
"""

__version__ = "0.1.0"
