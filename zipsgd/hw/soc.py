"""Engine v2 in a LiteX SoC with LiteDRAM (``docs/HARDWARE.md``, "The SoC").

The SoC has no CPU: the host reaches its bus through a bridge (LiteX's UART bridge on a board;
in simulation a Wishbone master on the top level's ports), uploads the packed stream into DRAM
(the bus's ``main_ram`` region), writes the engine's registers (the ``zipsgd`` region) and
starts a memory run, in which the engine's AXI4 master reads DRAM through a LiteDRAM port.

:func:`sim_soc` builds the simulation SoC: LiteDRAM's controller with its SDR SDRAM PHY model
(``SDRAMPHYModel``), the engine (its Amaranth-generated Verilog as an instance) and the host's
Wishbone master; it returns the Verilog of both and the SoC's CSR map.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from litedram import modules as litedram_modules
from litedram.frontend.axi import LiteDRAMAXI2Native
from litedram.init import get_sdram_phy_init_sequence
from litedram.phy.ecp5ddrphy import ECP5DDRPHY
from litedram.phy.model import SDRAMPHYModel
from liteeth.phy.model import LiteEthPHYModel
from litex.build.generic_platform import Pins, Subsignal
from litex.build.sim import SimPlatform
from litex.soc.integration.builder import Builder
from litex.soc.integration.soc import LiteXSoC, SoCRegion
from litex.soc.integration.soc_core import SoCCore
from litex.soc.interconnect import axi, stream, wishbone
from migen import (
    Array,
    Cat,
    ClockDomain,
    ClockSignal,
    If,
    Instance,
    Module,
    Mux,
    Record,
    Replicate,
    ResetSignal,
    Signal,
)

from ..spec.engine2 import EngineParams2
from ..spec.errors import ConfigError
from ..spec.registers import ADDR_WIDTH
from ..spec.soc import DFII, DFII_SEL, ENGINE_BASE, MAIN_RAM_BASE
from .v2.top import TOP_NAME2, export_verilog2

__all__ = ["SocBuild", "SimDram", "SIM_SDR16", "sim_soc", "add_engine", "csr_map", "dram_phy",
           "init_sequence", "quiet_litex", "AxiReadUpConverter", "ENGINE_BASE", "MAIN_RAM_BASE",
           "SIM_TOP", "SIM_UART_TOP", "SIM_ETH_TOP", "SIM_BRIDGES", "DFII_SEL",
           "etherbone_defaults"]

SIM_TOP = "zipsgd_soc"
SIM_UART_TOP = "zipsgd_soc_uart"
SIM_ETH_TOP = "zipsgd_soc_eth"
#: The simulated SoC's host bridges, and each one's top level.
SIM_BRIDGES = {"wishbone": SIM_TOP, "uart": SIM_UART_TOP, "etherbone": SIM_ETH_TOP}
#: The simulated SDRAM (8 MiB, SDR, 16 bits): small, so the model's memory is small.
SIM_SDRAM = "MT48LC4M16"
SIM_CLOCK_HZ = 50_000_000
#: Rows a simulated DDR3 module keeps (32 MiB at 8 banks x 1,024 columns x 16 bits; the
#: fewest that still give the address its bit 10, DDR3's precharge-all): the model's memory
#: stays small; the controller's timings and a sequential read's row changes are the module's
#: own.
SIM_DDR3_ROWS = 2048


@dataclass(frozen=True)
class SimDram:
    """A DRAM configuration of the simulated SoC: LiteDRAM's controller and its PHY model
    (``SDRAMPHYModel``) with ``module`` (a ``litedram.modules`` class), 16 bits wide, at
    ``clock_hz``.  ``phy`` is ``"sdr"`` (LiteDRAM's SDR PHY's settings, 1:1) or ``"ecp5ddr3"``
    (the ECP5 DDR3 PHY's own settings, 1:2: two DFI phases a cycle, its CAS latencies and read
    pipeline); a DDR3 module keeps :data:`SIM_DDR3_ROWS` rows."""

    name: str
    module: str
    phy: str
    clock_hz: int

    def make(self):
        """The module and the PHY model."""
        cls = getattr(litedram_modules, self.module)
        if self.phy == "sdr":
            module = cls(self.clock_hz, "1:1")
            return module, SDRAMPHYModel(module=module, data_width=16, clk_freq=self.clock_hz)
        cls = type(f"{self.module}_sim", (cls,), {"nrows": SIM_DDR3_ROWS})
        module = cls(self.clock_hz, "1:2")
        return module, SDRAMPHYModel(module=module, settings=_ecp5_ddr3_settings(self.clock_hz),
                                     clk_freq=self.clock_hz)


def _ecp5_ddr3_settings(clock_hz: float):
    """The settings LiteDRAM's ECP5 DDR3 PHY gives itself at ``clock_hz`` for a 16-bit part
    (the PHY made on stand-in pads, so they are its own; it is not in the design), as the
    model's: it has no delay taps to level."""
    pads = Record([("a", 13), ("ba", 3), ("ras_n", 1), ("cas_n", 1), ("we_n", 1),
                   ("cs_n", 1), ("dm", 2), ("dq", 16), ("dqs_p", 2), ("clk_p", 1),
                   ("cke", 1), ("odt", 1), ("reset_n", 1)])
    settings = ECP5DDRPHY(pads, sys_clk_freq=clock_hz).settings
    settings.phytype, settings.read_leveling = "SDRAMPHYModel", False
    return settings


#: The ULX3S's DRAM configuration (its AS4C32M16 is a 16-bit SDR SDRAM on the same controller);
#: the SoC simulation's default.
SIM_SDR16 = SimDram("sdr16", SIM_SDRAM, "sdr", SIM_CLOCK_HZ)


def etherbone_defaults() -> dict:
    """An Etherbone bridge as LiteX's ``add_etherbone`` defaults make it, which the boards'
    targets and the simulated SoC keep: where it answers (``mac``, ``ip``, ``port``) and the
    most words one write record may carry (``max_words``)."""
    defaults = inspect.signature(LiteXSoC.add_etherbone).parameters
    # (A record's words pass one packet FIFO of buffer_depth words, which lets a record
    # through only whole: a longer one stalls the bridge for good. Simulated: 16 pass, 17
    # stall.)
    return {"mac": defaults["mac_address"].default, "ip": defaults["ip_address"].default,
            "port": defaults["udp_port"].default,
            "max_words": defaults["buffer_depth"].default}


@contextlib.contextmanager
def quiet_litex():
    """LiteX's INFO log (its banner, every region and CSR it adds) off while a SoC is made."""
    before = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(before)


def csr_map(csr_json: dict) -> dict:
    """``{name: address}`` of a LiteX ``csr.json``'s CSRs."""
    return {name: reg["addr"] for name, reg in csr_json["csr_registers"].items()}


@dataclass(frozen=True)
class SocBuild:
    """A generated SoC: ``verilog`` (the SoC's and the engine's, one text), ``csrs`` (the
    CSR map: ``{name: address}``), the DRAM's ``main_ram`` base and size, and its ``init``
    sequence, which the host replays through the DFII CSRs before the controller takes over:
    ``(address, bank, control, command, delay)`` rows, ``control`` the DFII control word
    (``None``: ``command`` is a command issued on phase 0), ``delay`` in clock cycles."""

    verilog: str
    csrs: dict
    main_ram_base: int
    main_ram_size: int
    init: tuple
    phy: dict


def dram_phy(soc) -> dict:
    """What the host needs of the SoC's DRAM PHY (``soc.json``'s ``phy``): its type, its data
    widths and DFI phases, the phases of its read and write commands, and whether it needs read
    leveling, with its read delay taps and bitslips (``zipsgd/host/leveling.py``)."""
    s = soc.sdram.controller.settings.phy
    leveling = bool(getattr(s, "read_leveling", False))
    return {"type": s.phytype, "memtype": s.memtype, "databits": s.databits,
            "dfi_databits": s.dfi_databits, "nphases": s.nphases, "rdphase": int(s.rdphase),
            "wrphase": int(s.wrphase), "read_leveling": leveling,
            "delays": int(getattr(s, "delays", 0)) if leveling else 0,
            "bitslips": int(getattr(s, "bitslips", 0)) if leveling else 0}


def _bits(text: str) -> int:
    return sum(DFII[name] for name in text.split("|"))


def init_sequence(soc) -> tuple:
    """The DRAM's init sequence as :class:`SocBuild` rows (from LiteDRAM's own)."""
    settings = soc.sdram.controller.settings
    rows, _ = get_sdram_phy_init_sequence(settings.phy, settings.timing)
    return tuple((a, ba, _bits(cmd) if cmd.startswith("DFII_CONTROL") else None,
                  None if cmd.startswith("DFII_CONTROL") else _bits(cmd), delay)
                 for _, a, ba, cmd, delay in rows)


class _Crg(Module):
    def __init__(self, clk, rst):
        self.clock_domains.cd_sys = ClockDomain()
        self.comb += [self.cd_sys.clk.eq(clk), self.cd_sys.rst.eq(rst)]


class AxiReadUpConverter(Module):
    """The read channels of a narrow AXI4 master (``narrow``) on a wider slave (``wide``), for
    any burst: the burst's address aligned down to a wide beat, its length in wide beats, and
    of the wide beats only the narrow beats the burst asked for (the halves before its address
    in the first, after its end in the last are dropped), ``last`` on its last.  Each burst's
    first position and length wait in a FIFO (``depth`` bursts outstanding), so bursts follow
    each other with no idle cycle.  (LiteDRAM's port up-converter keeps one command in flight,
    and LiteX's AXI converter assumes aligned bursts of whole wide beats.)  Writes are not
    carried: the engine only reads."""

    def __init__(self, narrow, wide, depth: int = 8):
        ratio = len(wide.r.data) // len(narrow.r.data)
        assert ratio > 1 and ratio * len(narrow.r.data) == len(wide.r.data)
        shift = (len(narrow.r.data) // 8).bit_length() - 1     # log2 of a narrow beat's bytes
        k = ratio.bit_length() - 1
        info = stream.SyncFIFO([("start", k), ("count", 9)], depth)
        self.submodules.info = info
        first = Signal(k)
        self.comb += [
            first.eq(narrow.ar.addr[shift:shift + k]),
            wide.ar.addr.eq(Cat(Replicate(0, shift + k), narrow.ar.addr[shift + k:])),
            wide.ar.len.eq((first + narrow.ar.len) >> k),
            wide.ar.size.eq(shift + k), wide.ar.burst.eq(narrow.ar.burst),
            wide.ar.id.eq(narrow.ar.id),
            wide.ar.valid.eq(narrow.ar.valid & info.sink.ready),
            narrow.ar.ready.eq(wide.ar.ready & info.sink.ready),
            info.sink.valid.eq(narrow.ar.valid & wide.ar.ready),
            info.sink.start.eq(first), info.sink.count.eq(narrow.ar.len + 1),
        ]
        # The burst at the FIFO's head: ``fresh`` until its first beat leaves.
        fresh, pos, left = Signal(reset=1), Signal(k), Signal(9)
        at, remaining = Signal(k), Signal(9)
        last_half, last_beat = Signal(), Signal()
        n = len(narrow.r.data)
        halves = [wide.r.data[i * n:(i + 1) * n] for i in range(ratio)]
        self.comb += [
            at.eq(Mux(fresh, info.source.start, pos)),
            remaining.eq(Mux(fresh, info.source.count, left)),
            last_beat.eq(remaining == 1), last_half.eq(at == ratio - 1),
            narrow.r.valid.eq(info.source.valid & wide.r.valid),
            narrow.r.data.eq(Array(halves)[at]),
            narrow.r.resp.eq(wide.r.resp), narrow.r.id.eq(wide.r.id),
            narrow.r.last.eq(last_beat),
            wide.r.ready.eq(info.source.valid & narrow.r.ready & (last_half | last_beat)),
            info.source.ready.eq(narrow.r.valid & narrow.r.ready & last_beat),
        ]
        self.sync += If(narrow.r.valid & narrow.r.ready,
                        fresh.eq(last_beat), pos.eq(at + 1), left.eq(remaining - 1))


def _engine(soc, params: EngineParams2, global_reset: bool = False) -> None:
    """The engine: its AXI4 master on a LiteDRAM port, its AXI4-Lite registers on the bus.  A
    DRAM whose native word is wider than the engine's (DDR3 at 1:2: 128 bits) gets a port of
    its own width behind :class:`AxiReadUpConverter`.  ``global_reset`` (an ECP5 build):
    the engine's reset is the system reset through a global buffer (``DCCA``)."""
    w = params.bus_width
    reset = ResetSignal()
    if global_reset:
        # The reset reaches most of the engine's flip-flops: as a fabric net its thousands
        # of arcs from one driver kept router1 ripping up (docs/HARDWARE.md, "The board SoCs").
        reset = Signal()
        soc.specials += Instance("DCCA", i_CLKI=ResetSignal(), i_CE=1, o_CLKO=reset)
    master = axi.AXIInterface(data_width=w, address_width=32, id_width=1)
    native = soc.sdram.crossbar.controller.data_width
    origin = soc.bus.regions["main_ram"].origin
    if native > w:
        wide = axi.AXIInterface(data_width=native, address_width=32, id_width=1)
        soc.submodules.engine_upconverter = AxiReadUpConverter(master, wide)
        soc.comb += [wide.aw.valid.eq(0), wide.w.valid.eq(0), wide.b.ready.eq(1)]
        port = soc.sdram.crossbar.get_port(data_width=native)
        soc.submodules.engine_dram = LiteDRAMAXI2Native(wide, port, base_address=origin)
    else:
        port = soc.sdram.crossbar.get_port(data_width=w)
        soc.submodules.engine_dram = LiteDRAMAXI2Native(master, port, base_address=origin)
    regs = axi.AXILiteInterface(data_width=32, address_width=32)
    soc.bus.add_slave("zipsgd", regs, SoCRegion(origin=ENGINE_BASE, size=1 << ADDR_WIDTH,
                                                cached=False))
    low = ADDR_WIDTH
    soc.specials += Instance(
        TOP_NAME2,
        i_clk=ClockSignal(), i_rst=reset,
        i_s_axis_tdata=0, i_s_axis_tvalid=0, i_s_axis_tlast=0, o_s_axis_tready=Signal(),
        i_s_axil_awaddr=regs.aw.addr[:low], i_s_axil_awvalid=regs.aw.valid,
        o_s_axil_awready=regs.aw.ready,
        i_s_axil_wdata=regs.w.data, i_s_axil_wstrb=regs.w.strb, i_s_axil_wvalid=regs.w.valid,
        o_s_axil_wready=regs.w.ready,
        o_s_axil_bresp=regs.b.resp, o_s_axil_bvalid=regs.b.valid, i_s_axil_bready=regs.b.ready,
        i_s_axil_araddr=regs.ar.addr[:low], i_s_axil_arvalid=regs.ar.valid,
        o_s_axil_arready=regs.ar.ready,
        o_s_axil_rdata=regs.r.data, o_s_axil_rresp=regs.r.resp, o_s_axil_rvalid=regs.r.valid,
        i_s_axil_rready=regs.r.ready,
        o_m_axi_arid=master.ar.id, o_m_axi_araddr=master.ar.addr, o_m_axi_arlen=master.ar.len,
        o_m_axi_arsize=master.ar.size, o_m_axi_arburst=master.ar.burst,
        o_m_axi_arvalid=master.ar.valid, i_m_axi_arready=master.ar.ready,
        i_m_axi_rid=master.r.id, i_m_axi_rdata=master.r.data, i_m_axi_rresp=master.r.resp,
        i_m_axi_rlast=master.r.last, i_m_axi_rvalid=master.r.valid,
        o_m_axi_rready=master.r.ready,
        o_irq=soc.engine_irq)
    # The engine only reads: its write channels stay idle.
    soc.comb += [master.aw.valid.eq(0), master.w.valid.eq(0), master.b.ready.eq(1)]


#: (Migen names the signals a function makes after it: ``_engine`` names the engine's ports
#: ``*_engine_*`` in every SoC.)
add_engine = _engine


class _SimSoc(SoCCore):
    def __init__(self, params: EngineParams2, bridge: str = "wishbone", baud: int = 0,
                 dram: SimDram = SIM_SDR16):
        if bridge == "wishbone":
            host_io = ("host", 0,
                       Subsignal("adr", Pins(30)), Subsignal("dat_w", Pins(32)),
                       Subsignal("dat_r", Pins(32)), Subsignal("sel", Pins(4)),
                       Subsignal("cyc", Pins(1)), Subsignal("stb", Pins(1)),
                       Subsignal("ack", Pins(1)), Subsignal("we", Pins(1)),
                       Subsignal("err", Pins(1)))
        elif bridge == "uart":
            host_io = ("serial", 0, Subsignal("tx", Pins(1)), Subsignal("rx", Pins(1)))
        else:  # LiteEth's PHY model: Ethernet frames as bytes, one a cycle, no preamble or CRC
            host_io = ("eth", 0, *(Subsignal(f"{end}_{what}", Pins(8 if what == "data" else 1))
                                   for end in ("source", "sink")
                                   for what in ("valid", "ready", "data")))
        io = [("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1)), ("irq", 0, Pins(1)), host_io]
        platform = SimPlatform("SIM", io)
        self.crg = _Crg(platform.request("sys_clk"), platform.request("sys_rst"))
        SoCCore.__init__(self, platform, clk_freq=dram.clock_hz, cpu_type=None,
                         integrated_rom_size=0, integrated_sram_size=0, with_uart=False,
                         with_timer=False, with_ctrl=False, ident="")
        module, self.sdrphy = dram.make()
        self.add_sdram("sdram", phy=self.sdrphy, module=module, l2_cache_size=0)
        if bridge == "wishbone":
            # The host's Wishbone master, on the top level's ports.
            host = wishbone.Interface(data_width=32, adr_width=30)
            pads = platform.request("host")
            self.comb += [host.adr.eq(pads.adr), host.dat_w.eq(pads.dat_w),
                          host.sel.eq(pads.sel), host.cyc.eq(pads.cyc), host.stb.eq(pads.stb),
                          host.we.eq(pads.we), pads.dat_r.eq(host.dat_r),
                          pads.ack.eq(host.ack), pads.err.eq(host.err)]
            self.bus.add_master("host", host)
        elif bridge == "uart":
            self.add_uartbone(uart_name="serial", baudrate=baud)
        else:
            # (The board's addresses: add_etherbone's defaults, as the ECPIX-5's target keeps.)
            self.ethphy = LiteEthPHYModel(platform.request("eth"))
            self.add_etherbone(phy=self.ethphy, with_timing_constraints=False)
        self.engine_irq = platform.request("irq")
        _engine(self, params)


def sim_soc(params: EngineParams2, bridge: str = "wishbone", divisor: int = 16,
            dram: SimDram = SIM_SDR16) -> SocBuild:
    """The simulation SoC's Verilog with the engine's, and its CSR map, with ``dram``'s DRAM
    configuration.  Its top level
    (``zipsgd_soc``) has ``sys_clk``, ``sys_rst``, ``irq`` and the host's bridge: with
    ``bridge="wishbone"`` a Wishbone master's ``host_*`` ports; with ``bridge="uart"`` LiteX's
    UART bridge on ``serial_tx``/``serial_rx`` at ``divisor`` clock cycles a bit (top
    ``zipsgd_soc_uart``); with ``bridge="etherbone"`` LiteEth's Etherbone bridge at the board's
    addresses behind LiteEth's PHY model, ``eth_sink_*`` (frames in) and ``eth_source_*``
    (frames out; top ``zipsgd_soc_eth``)."""
    if bridge not in SIM_BRIDGES:
        raise ConfigError(f"the simulated SoC's bridge is one of {', '.join(SIM_BRIDGES)}, "
                          f"found {bridge!r}")
    if not (isinstance(divisor, int) and divisor >= 8):
        raise ConfigError(f"the UART bridge's divisor must be an integer >= 8, found {divisor!r}")
    with quiet_litex():
        soc = _SimSoc(params, bridge, dram.clock_hz // divisor, dram)
        top = SIM_BRIDGES[bridge]
        with tempfile.TemporaryDirectory(prefix="zipsgd-soc-") as tmp:
            builder = Builder(soc, output_dir=tmp, compile_software=False, compile_gateware=False,
                              csr_json=str(Path(tmp) / "csr.json"))
            builder.build(build=False, run=False)
            csr = json.loads((Path(tmp) / "csr.json").read_text())
            text = soc.platform.get_verilog(soc, name=top).main_source
            # (Without LiteX's dates and revision, the text, and so the simulation's cache key,
            # is the same from build to build.)
            stamps = ("Auto-Generated by LiteX on", "// Date ", "// LiteX sha1 ")
            soc_verilog = "\n".join(line for line in text.splitlines()
                                     if not any(stamp in line for stamp in stamps))
    engine = export_verilog2(params)[f"{TOP_NAME2}.v"]
    ram = soc.bus.regions["main_ram"]
    return SocBuild(soc_verilog + "\n" + engine, csr_map(csr), ram.origin, ram.size,
                    init_sequence(soc), dram_phy(soc))
