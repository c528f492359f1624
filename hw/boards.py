"""Thin board tops that put the engine on an ECP5 board for synthesis measurements.

Only this module calls ``platform.request``; the engine (``hw/top.py``) stays platform-free.

A board top is: board clock -> ECP5 PLL (``EHXPLLL``, dividers from :func:`pll_dividers`)
-> the engine's ``sync`` domain, held in reset while a button is pressed or the PLL is not
locked; LEDs show the core's ``busy``, ``done`` and ``error`` (any error flag).

The engine's bus ports are not wired to pins (there are not enough, and no host link exists
yet).  So that synthesis keeps all of the engine and the numbers are honest, every engine
input is driven by a register of a long shift chain fed by a 32-bit LFSR (nothing is
constant), and every engine output is registered and XOR-reduced to one LED (nothing is
unobserved).  The harness costs about one flip-flop per engine port bit plus an XOR tree.

``ooc=True`` leaves out the PLL: the engine runs straight from the board clock pin, whose
constraint is raised to the requested frequency, which measures the engine alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, ClockDomain, Instance, Module, ResetSignal, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In

from ..errors import ConfigError
from ..spec.engine import EngineParams
from .top import ZipsgdEngine

__all__ = ["BOARDS", "Board", "PllConfig", "pll_dividers", "board_platform", "EngineBoardTop"]

# ECP5 EHXPLLL limits (Lattice TN1263 / ecppll): PFD 3.125..400 MHz, VCO 400..800 MHz.
_PFD_MIN, _PFD_MAX = 3.125, 400.0
_VCO_MIN, _VCO_MAX = 400.0, 800.0


@dataclass(frozen=True)
class Board:
    """A supported board: its platform class and the resources the top uses."""

    name: str
    platform_path: str  # "module:Class" in amaranth_boards
    reset: tuple[str, int]  # an active-high (after inversion) button
    leds: str  # "led" (numbered single LEDs) or "rgb_led" (r, g, b of RGB LED 0)


BOARDS = {
    "ulx3s-85f": Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform",
                       ("button_fire", 0), "led"),
    "orangecrab-85f": Board("orangecrab-85f",
                            "amaranth_boards.orangecrab_r0_2:OrangeCrabR0_2_85FPlatform",
                            ("button", 0), "rgb_led"),
    "ecpix5-85": Board("ecpix5-85", "amaranth_boards.ecpix5:ECPIX585Platform",
                       ("rst", 0), "rgb_led"),
}


def board_platform(board: str):
    """A fresh platform instance for ``board`` (a key of :data:`BOARDS`).

    Raises
    ------
    ConfigError
        The board is unknown.
    """
    if board not in BOARDS:
        raise ConfigError(f"board must be one of {sorted(BOARDS)}, found {board!r}")
    import importlib

    module, cls = BOARDS[board].platform_path.split(":")
    return getattr(importlib.import_module(module), cls)()


@dataclass(frozen=True)
class PllConfig:
    """EHXPLLL dividers: ``f_out = f_in / clki_div * clkfb_div`` (feedback from CLKOP),
    ``f_vco = f_out * clkop_div``."""

    f_in_mhz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int

    @property
    def f_out_mhz(self) -> float:
        return self.f_in_mhz / self.clki_div * self.clkfb_div

    @property
    def f_vco_mhz(self) -> float:
        return self.f_out_mhz * self.clkop_div


def pll_dividers(f_in_mhz: float, f_out_mhz: float) -> PllConfig:
    """The EHXPLLL dividers whose output is closest to ``f_out_mhz`` (ties: highest VCO),
    searched like Project Trellis' ``ecppll``.

    Raises
    ------
    ConfigError
        No divider setting reaches within 1% of the requested frequency.
    """
    best = None
    for clki in range(1, 129):
        pfd = f_in_mhz / clki
        if not _PFD_MIN <= pfd <= _PFD_MAX:
            continue
        for clkfb in range(1, 81):
            out = pfd * clkfb
            for clkop in range(1, 129):
                vco = out * clkop
                if not _VCO_MIN <= vco <= _VCO_MAX:
                    continue
                key = (abs(out - f_out_mhz), -vco)
                if best is None or key < best[0]:
                    best = (key, PllConfig(f_in_mhz, clki, clkfb, clkop))
    if best is None or best[0][0] > 0.01 * f_out_mhz:
        raise ConfigError(f"no ECP5 PLL setting gives {f_out_mhz} MHz from {f_in_mhz} MHz")
    return best[1]


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


class _ObservedEngine(ZipsgdEngine):
    """:class:`ZipsgdEngine` plus the core's busy/done/any-error as plain signals for LEDs
    (the engine's bus ports do not carry them); the engine itself is unchanged."""

    def __init__(self, params: EngineParams):
        super().__init__(params)
        self.busy, self.done, self.error = Signal(), Signal(), Signal()

    def elaborate(self, platform):
        m = super().elaborate(platform)
        core = m.submodules.core
        m.d.comb += [self.busy.eq(core.busy), self.done.eq(core.done),
                     self.error.eq(core.error_flags.any())]
        return m


class EngineBoardTop(wiring.Component):
    """The engine on a board (see the module docstring).

    Parameters
    ----------
    params : EngineParams
    board : str
        A key of :data:`BOARDS`.
    freq_mhz : float
        Target engine clock.
    ooc : bool
        No PLL: clock the engine from the board clock pin constrained to ``freq_mhz``.

    Members
    -------
    None (a board top has no signature ports; it requests pins from the platform).
    """

    def __init__(self, params: EngineParams, *, board: str = "ulx3s-85f",
                 freq_mhz: float = 100.0, ooc: bool = False):
        if not isinstance(params, EngineParams):
            raise TypeError(f"params must be EngineParams, found {params!r}")
        if board not in BOARDS:
            raise ConfigError(f"board must be one of {sorted(BOARDS)}, found {board!r}")
        if not 1.0 <= float(freq_mhz) <= 400.0:
            raise ConfigError(f"freq_mhz must be in 1..400, found {freq_mhz!r}")
        self._params, self._board, self._freq, self._ooc = params, board, float(freq_mhz), ooc
        super().__init__({})

    @property
    def params(self) -> EngineParams:
        return self._params

    @property
    def freq_mhz(self) -> float:
        return self._freq

    def elaborate(self, platform):
        m = Module()
        board = BOARDS[self._board]
        m.submodules.clk_buf = clk = io.Buffer("i", platform.request(platform.default_clk,
                                                                     dir="-"))
        f_in = platform.default_clk_frequency / 1e6
        m.submodules.button_buf = button = io.Buffer("i", platform.request(*board.reset,
                                                                           dir="-"))

        m.domains.sync = cd_sync = ClockDomain("sync")
        locked = Signal()
        if self._ooc:
            m.d.comb += [cd_sync.clk.eq(clk.i), locked.eq(1)]
            # Raise the pin's constraint to the target (the board's oscillator is slower).
            platform.add_clock_constraint(cd_sync.clk, self._freq * 1e6)
        else:
            pll = pll_dividers(f_in, self._freq)
            m.submodules.pll = Instance(
                "EHXPLLL",
                a_FREQUENCY_PIN_CLKI=f"{f_in:g}",
                a_FREQUENCY_PIN_CLKOP=f"{pll.f_out_mhz:g}",
                a_ICP_CURRENT="12", a_LPF_RESISTOR="8",
                a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
                p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
                p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA",
                p_OUTDIVIDER_MUXB="DIVB", p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
                p_CLKI_DIV=pll.clki_div, p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=pll.clkop_div,
                p_CLKOP_CPHASE=pll.clkop_div - 1, p_CLKOP_FPHASE=0,
                p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=pll.clkfb_div,
                i_RST=0, i_STDBY=0, i_CLKI=clk.i, o_CLKOP=cd_sync.clk, i_CLKFB=cd_sync.clk,
                i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
                i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked,
            )
            platform.add_clock_constraint(cd_sync.clk, pll.f_out_mhz * 1e6)
        m.submodules.rst_sync = ResetSynchronizer(button.i | ~locked, domain="sync")

        m.submodules.engine = engine = _ObservedEngine(self._params)

        inputs = [getattr(engine, n) for n, mb in engine.signature.members.items()
                  if mb.flow == In]
        outputs = [getattr(engine, n) for n, mb in engine.signature.members.items()
                   if mb.flow != In]
        width = sum(len(s) for s in inputs)
        m.submodules.stimulus = stim = _Lfsr(width)
        offset = 0
        for sig in inputs:
            m.d.comb += sig.eq(stim.bits[offset:offset + len(sig)])
            offset += len(sig)
        observed = Signal(sum(len(s) for s in outputs))
        m.d.sync += observed.eq(Cat(*outputs))
        level = list(observed)  # pipelined XOR tree: four bits per LUT, a register per level
        while len(level) > 1:
            regs = [Signal(name=f"xor{len(level)}_{k}") for k in range(-(-len(level) // 4))]
            m.d.sync += [r.eq(Cat(*level[4 * k:4 * k + 4]).xor()) for k, r in enumerate(regs)]
            level = regs
        parity = level[0]

        busy, done, error = Signal(), Signal(), Signal()
        m.d.sync += [busy.eq(engine.busy), done.eq(engine.done), error.eq(engine.error)]
        leds = [busy, done, error, parity, ~ResetSignal("sync")]
        if board.leds == "led":
            ports = [platform.request("led", k, dir="-") for k in range(len(leds))]
        else:
            rgb = platform.request("rgb_led", 0, dir="-")
            ports, leds = [rgb.r, rgb.g, rgb.b], [error, done, busy ^ parity]
        for k, (port, sig) in enumerate(zip(ports, leds, strict=True)):
            m.submodules[f"led_buf{k}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(sig)
        return m
