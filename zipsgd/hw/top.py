"""The engine as a block-design IP: AXI4-Stream slave for samples, AXI4-Lite slave for control.

:class:`ZipsgdEngine` wires the register file (``zipsgd/hw/regfile.py``) to the core
(``zipsgd/hw/core.py``); :func:`export_verilog` makes its Verilog and a JSON description of its
ports and parameters.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from amaranth.back import verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..spec.engine import EngineParams
from ..spec.errors import ConfigError
from .core import SgdCore
from .regfile import RegisterFile, axil_ports, connect_axil_ports

__all__ = ["ZipsgdEngine", "export_verilog", "port_description", "TOP_NAME"]

TOP_NAME = "zipsgd_engine"

class ZipsgdEngine(wiring.Component):
    """The streaming SGD engine with standard bus interfaces.

    Parameters
    ----------
    params : EngineParams

    Members
    -------
    s_axis_tdata : In(bus_width)
    s_axis_tvalid, s_axis_tlast : In(1)
    s_axis_tready : Out(1)
        The packed sample stream (``docs/FORMAT.md``), one sample per packet.
    s_axil_* : AXI4-Lite slave
        The registers of ``docs/REGISTERS.md`` (12-bit addresses, 32-bit data).
    irq : Out(1)
        Interrupt, active-high level: an IRQ_STATUS event enabled in IRQ_ENABLE.
    """

    def __init__(self, params: EngineParams):
        if not isinstance(params, EngineParams):
            raise TypeError(f"params must be EngineParams, found {params!r}")
        self._params = params
        super().__init__({
            "s_axis_tdata": In(params.bus_width), "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1), "s_axis_tlast": In(1),
            **axil_ports("s_axil_"),
            "irq": Out(1),
        })

    @property
    def params(self) -> EngineParams:
        return self._params

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterFile(params=self._params)
        m.submodules.core = core = SgdCore(self._params)
        connect_axil_ports(m, self, regs.axil, prefix="s_axil_")
        m.d.comb += self.irq.eq(regs.irq)
        m.d.comb += [core.s_data.eq(self.s_axis_tdata), core.s_valid.eq(self.s_axis_tvalid),
                     core.s_last.eq(self.s_axis_tlast), self.s_axis_tready.eq(core.s_ready)]
        wiring.connect(m, regs.ctrl, core.ctrl)
        wiring.connect(m, core.status, regs.status)
        m.d.comb += [core.model_index.eq(regs.model.index), core.model_wdata.eq(regs.model.wdata),
                     core.model_write.eq(regs.model.write), core.model_read.eq(regs.model.read)]
        # The model port's answer is registered (a cycle more per MODEL_DATA read), so that the
        # memory's output and bank choice end at a flip-flop, not at RDATA's choice.
        answer_data, answer_valid = Signal(32), Signal()
        m.d.sync += [answer_data.eq(core.model_rdata), answer_valid.eq(core.model_rvalid)]
        m.d.comb += [regs.model.rdata.eq(answer_data), regs.model.rvalid.eq(answer_valid)]
        return m


def port_description(component, top: str = TOP_NAME, registers: str = "docs/REGISTERS.md",
                     **extra) -> dict:
    """Ports (name, direction, width) and parameters of an engine (v1 or v2: any component
    with these bus interfaces and a ``params`` dataclass), as JSON-ready data; ``extra`` keys
    join the description."""
    ports = [{"name": "clk", "direction": "input", "width": 1},
             {"name": "rst", "direction": "input", "width": 1}]
    for name, member in component.signature.members.items():
        ports.append({"name": name, "direction": "input" if member.flow == In else "output",
                      "width": len(getattr(component, name))})
    return {"top": top, **extra, "params": asdict(component.params),
            "lanes": component.params.lanes,
            "clock": "clk (rising edge)", "reset": "rst (synchronous, active high)",
            "interfaces": {"s_axis": "AXI4-Stream slave (tdata, tvalid, tready, tlast)",
                           "s_axil": f"AXI4-Lite slave, 12-bit address, 32-bit data "
                                     f"({registers})",
                           "irq": "interrupt, active-high level (IRQ_ENABLE, IRQ_STATUS)"},
            "ports": ports}


def export_verilog(params: EngineParams, name: str = TOP_NAME) -> dict[str, str]:
    """The engine's files: ``{"NAME.v": Verilog, "NAME.json": ports and parameters}`` (the
    caller publishes them).  Every module name starts with ``NAME``, so engines of different
    configurations, each exported with its own name, can live in one design."""
    if not name.isidentifier() or not name.isascii():
        raise ConfigError(f"the module name must be a Verilog identifier (letters, digits, _), "
                          f"found {name!r}")
    engine = ZipsgdEngine(params)
    text = verilog.convert(engine, name=name, emit_src=False)
    return {f"{name}.v": text,
            f"{name}.json": json.dumps(port_description(engine, name), indent=1) + "\n"}
