"""Out-of-context build top: the engine alone, for fmax and resource sweeps.

The engine's bus ports (``W`` + ~80 inputs, ~40 outputs) do not fit on pins at ``W`` >= 256,
so this top puts a register on every port instead ("registered I/O") and keeps the design
honest without pins:

* every engine input is a flip-flop of one long shift chain fed by a free-running 32-bit LFSR
  (nothing is constant, so Yosys can remove nothing);
* every engine output is registered and folded by a pipelined XOR tree (four bits per LUT, a
  register per level) into one LED (nothing is unobserved).

All harness paths are one LUT deep, so they never set fmax; the harness costs about one
flip-flop per port bit.  The engine's reset (one of the inputs) goes through a global buffer,
as on the board tops.  The engine runs straight from the board's clock pin (no PLL), whose
constraint :func:`zipsgd.hw.synth.build_plan` raises to the target frequency in the LPF.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockDomain, Const, Instance, Module, ResetInserter, Signal, Value
from amaranth.lib import io, wiring
from amaranth.lib.wiring import In

from ..spec.engine import OOC_FREQ_MHZ, EngineParams
from .boards import ClockedTop
from .top import ZipsgdEngine

__all__ = ["BlockOocTop", "EngineOocTop", "registered_harness"]


class _Lfsr(wiring.Component):
    """A free-running 32-bit Galois LFSR (taps 32, 22, 2, 1) feeding a shift chain."""

    def __init__(self, width: int):
        self._width = width
        super().__init__({"bits": wiring.Out(width)})

    def elaborate(self, platform):
        m = Module()
        state = Signal(32, init=1)
        feedback = state[0]
        m.d.sync += state.eq((state >> 1) ^ (feedback * 0x80200003))
        chain = Signal(self._width)
        m.d.sync += chain.eq((chain << 1) | feedback)
        m.d.comb += self.bits.eq(chain)
        return m


def xor_fold(m, bits) -> Signal:
    """A registered XOR tree over ``bits`` (four inputs per LUT, one register per level)."""
    level = list(bits)
    while len(level) > 1:
        regs = [Signal(name=f"xor{len(level)}_{k}") for k in range(-(-len(level) // 4))]
        m.d.sync += [r.eq(Cat(*level[4 * k:4 * k + 4]).xor()) for k, r in enumerate(regs)]
        level = regs
    return level[0]


def registered_harness(m: Module, platform, block: wiring.Component) -> None:
    """Put ``block`` in ``m`` with every input driven by the LFSR chain and every output
    registered and XOR-folded into one LED; the block's reset is one of the inputs, through a
    global buffer as on the board tops (HARDWARE.md, "Host link")."""
    m.submodules.clk_buf = clk = io.Buffer("i", platform.request(platform.default_clk,
                                                                 dir="-"))
    m.domains.sync = cd_sync = ClockDomain("sync", reset_less=True)
    m.d.comb += cd_sync.clk.eq(clk.i)
    inputs, outputs = [], []
    for _path, member, value in block.signature.flatten(block):
        (inputs if member.flow == In else outputs).append(Value.cast(value))
    m.submodules.stimulus = stim = _Lfsr(sum(len(s) for s in inputs) + 8)
    reset_source, block_reset = Signal(), Signal()
    m.d.sync += reset_source.eq(stim.bits[-8:].all())
    m.submodules.reset_buf = Instance("DCCA", i_CLKI=reset_source, i_CE=Const(1, 1),
                                      o_CLKO=block_reset)
    m.submodules.engine = ResetInserter(block_reset)(block)
    offset = 0
    for sig in inputs:
        m.d.comb += sig.eq(stim.bits[offset:offset + len(sig)])
        offset += len(sig)
    observed = Signal(sum(len(s) for s in outputs))
    m.d.sync += observed.eq(Cat(*outputs))
    m.submodules.led_buf = led = io.Buffer("o", platform.request("led", 0, dir="-")
                                           if "led" in _resource_names(platform)
                                           else platform.request("rgb_led", 0, dir="-").r)
    m.d.comb += led.o.eq(xor_fold(m, observed))


class EngineOocTop(ClockedTop):
    """:class:`~zipsgd.hw.top.ZipsgdEngine` with registered, LFSR-driven inputs and
    XOR-folded outputs, clocked from the board's clock pin.

    Parameters
    ----------
    params : EngineParams
    freq_mhz : float
        The target clock (the build plan writes it as the pin's constraint).
    """

    def __init__(self, params: EngineParams, *, freq_mhz: float = OOC_FREQ_MHZ):
        super().__init__(params, freq_mhz)

    def elaborate(self, platform):
        m = Module()
        registered_harness(m, platform, ZipsgdEngine(self._params))
        return m


class BlockOocTop(wiring.Component):
    """Any component in the same harness, for one block's fmax and cost out of context.

    Parameters
    ----------
    make_block : callable
        Returns the component (called at elaboration, so that one top elaborates once).
    freq_mhz : float
        The target clock.
    """

    def __init__(self, make_block, *, freq_mhz: float = OOC_FREQ_MHZ):
        self._make, self.freq_mhz = make_block, float(freq_mhz)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        registered_harness(m, platform, self._make())
        return m


def _resource_names(platform) -> set[str]:
    return {name for name, _ in platform.resources}
