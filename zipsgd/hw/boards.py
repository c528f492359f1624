"""Thin board tops: the engine and its host-link bridge on an ECP5 board.

Only this module calls ``platform.request``; the engine (``zipsgd/hw/top.py``) and the bridge
(``zipsgd/hw/hostlink.py``) stay platform-free.

A board top is: board clock -> ECP5 PLL (``EHXPLLL``, dividers from :func:`pll_dividers`)
-> the engine's ``sync`` domain, held in reset while a button is pressed or the PLL is not
locked; :class:`~zipsgd.hw.hostlink.LinkedEngine` (the bridge driving the engine's AXI4-Lite
and AXI4-Stream ports) with its UART on the board's serial pins (``docs/HOSTLINK.md``); LEDs
show the core's ``busy``, ``done`` and ``error`` (any error flag) and the link's activity.

Serial pins: the ULX3S and the ECPIX-5 have a USB serial bridge (FTDI) on the ``uart``
resource; the OrangeCrab has none (its USB port goes to the FPGA), so its top adds a ``uart``
resource on the Feather header pins 0 (RX, FPGA input) and 1 (TX), for a 3.3 V USB serial
adapter.

``ooc=True`` leaves out the PLL: the design runs straight from the board clock pin, whose
constraint is raised to the requested frequency, which measures the engine alone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from amaranth.build import Attrs, Pins, Resource, Subsignal
from amaranth.hdl import ClockDomain, Const, Instance, Module, ResetSignal, Signal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer

from ..spec.engine import BOARD_FREQ_MHZ, EngineParams
from ..spec.errors import ConfigError
from ..spec.link import DEFAULT_BAUD
from .hostlink import LinkedEngine, LinkParams

__all__ = ["BOARDS", "Board", "PllConfig", "pll_dividers", "board_platform", "ClockedTop",
           "EngineBoardTop"]

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
    uart: Resource | None = None  # added to the platform when it defines no "uart"


BOARDS = {
    "ulx3s-85f": Board("ulx3s-85f", "amaranth_boards.ulx3s:ULX3S_85F_Platform",
                       ("button_fire", 0), "led"),
    "orangecrab-85f": Board("orangecrab-85f",
                            "amaranth_boards.orangecrab_r0_2:OrangeCrabR0_2_85FPlatform",
                            ("button", 0), "rgb_led",
                            Resource("uart", 0, Subsignal("rx", Pins("0", dir="i", conn=("io", 0))),
                                     Subsignal("tx", Pins("1", dir="o", conn=("io", 0))),
                                     Attrs(IO_TYPE="LVCMOS33"))),
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


class ClockedTop(wiring.Component):
    """Base of the build tops (board and out of context): an engine build and its target
    clock, checked up front; no signature ports (a top requests pins from the platform)."""

    def __init__(self, params: EngineParams, freq_mhz: float):
        if not isinstance(params, EngineParams):
            raise TypeError(f"params must be EngineParams, found {params!r}")
        if not 1.0 <= float(freq_mhz) <= 400.0:
            raise ConfigError(f"freq_mhz must be in 1..400, found {freq_mhz!r}")
        self._params, self._freq = params, float(freq_mhz)
        super().__init__({})

    @property
    def params(self) -> EngineParams:
        return self._params

    @property
    def freq_mhz(self) -> float:
        return self._freq


class EngineBoardTop(ClockedTop):
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
    baud : int
        The host link's baud rate (the bridge's divisor is ``freq_mhz / baud``).

    Members
    -------
    None (a board top has no signature ports; it requests pins from the platform).
    """

    def __init__(self, params: EngineParams, *, board: str = "ulx3s-85f",
                 freq_mhz: float = BOARD_FREQ_MHZ, ooc: bool = False, baud: int = DEFAULT_BAUD):
        if board not in BOARDS:
            raise ConfigError(f"board must be one of {sorted(BOARDS)}, found {board!r}")
        self._board, self._ooc = board, ooc
        self._link = LinkParams.for_board(float(freq_mhz), baud)
        super().__init__(params, freq_mhz)

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
        # The reset, synchronized in a domain of its own, reaches the engine through a global
        # buffer (DCCA): a fabric net is too slow for its fan-out (HARDWARE.md, "Host link").
        m.domains.reset = cd_reset = ClockDomain("reset", local=True)
        m.d.comb += cd_reset.clk.eq(cd_sync.clk)
        m.submodules.rst_sync = ResetSynchronizer(button.i | ~locked, domain="reset")
        m.submodules.rst_buf = Instance("DCCA", i_CLKI=cd_reset.rst, i_CE=Const(1, 1),
                                        o_CLKO=cd_sync.rst)

        m.submodules.engine = engine = LinkedEngine(self._params, self._link)
        defined = {r.name for r in platform.resources.values()}
        if board.uart is not None and "uart" not in defined:
            platform.add_resources([board.uart])
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [engine.uart_rx.eq(rx.i), tx.o.eq(engine.uart_tx)]

        busy, done, error, activity = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [busy.eq(engine.busy), done.eq(engine.done), error.eq(engine.error),
                     activity.eq(engine.link_busy)]
        leds = [busy, done, error, activity, ~ResetSignal("sync")]
        if board.leds == "led":
            ports = [platform.request("led", k, dir="-") for k in range(len(leds))]
        else:
            rgb = platform.request("rgb_led", 0, dir="-")
            ports, leds = [rgb.r, rgb.g, rgb.b], [error, done, busy | activity]
        for k, (port, sig) in enumerate(zip(ports, leds, strict=True)):
            m.submodules[f"led_buf{k}"] = buf = io.Buffer("o", port)
            m.d.comb += buf.o.eq(sig)
        return m
