"""Engine v2 as a block-design IP: AXI4-Stream slave for the packed beats, AXI4-Lite slave for
the registers of ``docs/REGISTERS2.md`` (``zipsgd/spec/registers2.py``).

:class:`ZipsgdEngine2` wires :class:`~zipsgd.hw.regfile.RegisterFile` (engine v2's map) to
:class:`~.core.Core2` through :class:`EngineControl2`, which owns the status the map reads
(sticky errors, the done flag, the busy-cycle count), checks a start's configuration, answers
the model port and drains a stream after a framing error.
"""

from __future__ import annotations

import json

from amaranth.back import verilog
from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...spec.engine2 import EngineParams2
from ...spec.errors import ConfigError
from ...spec.registers2 import MAP, ErrorBit2
from ..regfile import (
    RegisterFile,
    axil_ports,
    connect_axil_ports,
    ctrl_signature,
    level_port_signature,
    model_index_width,
    model_port_signature,
    status_signature,
)
from ..top import port_description
from .core import MODEL_READ_LATENCY, Core2

__all__ = ["ZipsgdEngine2", "EngineControl2", "export_verilog2", "TOP_NAME2"]

TOP_NAME2 = "zipsgd_engine2"


class EngineControl2(wiring.Component):
    """Between the register file and the core.

    * A START is refused (START_WHILE_BUSY) while the core is busy, and (BAD_CONFIG) with a
      configuration that could not end an epoch; otherwise it starts the core.
    * ``done`` is set by the core's end of epoch and cleared by START; the error flags are
      sticky until CLEAR_ERRORS; ``error_count`` counts every error event.
    * The model port: every access registers its index (the core's address comes from a
      register); a read answers ``MODEL_READ_LATENCY`` cycles after that register; an access
      while busy is answered at once, ignored, and sets MODEL_PORT_BUSY.
    * After a framing error the stream is drained up to its ``tlast`` (a stream that left its
      ``tlast`` out is not left stalled).
    """

    def __init__(self, params: EngineParams2):
        self.params = params
        super().__init__({
            "ctrl": In(ctrl_signature(MAP)), "status": Out(status_signature(MAP)),
            "model": In(model_port_signature(params=params)),
            "levels": In(level_port_signature(params=params, regmap=MAP)),
            # To the core and from it.
            "core_start": Out(1), "core_busy": In(1), "core_done": In(1),
            "core_framing": In(1),
            "model_addr": Out(model_index_width(params)),
            "model_we": Out(1), "model_wdata": Out(32), "model_rdata": In(32),
            # The stream: beats taken (``took``, ``took_last``) and the drain.
            "took": In(1), "took_last": In(1), "draining": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ctrl, status, p = self.ctrl, self.status, self.params
        m.d.comb += status.busy.eq(self.core_busy)
        # -- start -----------------------------------------------------------------------
        bad = Signal()
        m.d.sync += bad.eq((ctrl.n_features == 0) | (ctrl.n_features > p.max_features)
                           | (ctrl.batches == 0) | (ctrl.wrap == 0) | (ctrl.last_valid == 0)
                           | (ctrl.field_width == 0))
        events = Signal(len(ErrorBit2))
        refused_busy = ctrl.start & self.core_busy
        m.d.comb += self.core_start.eq(ctrl.start & ~self.core_busy & ~bad)
        rose = Signal()
        was = Signal()
        m.d.sync += was.eq(self.core_framing)
        m.d.comb += rose.eq(self.core_framing & ~was)
        # -- the model port ----------------------------------------------------------------
        port = self.model
        wait = Signal(range(MODEL_READ_LATENCY + 2))
        port_busy = (port.read | port.write) & self.core_busy
        m.d.sync += [self.model_we.eq(port.write & ~self.core_busy), port.rvalid.eq(0)]
        with m.If(port.read | port.write):
            m.d.sync += [self.model_addr.eq(port.index), self.model_wdata.eq(port.wdata)]
        with m.If(port.read & self.core_busy):
            m.d.sync += [port.rvalid.eq(1), port.rdata.eq(0)]
        with m.Elif(port.read):
            m.d.sync += wait.eq(MODEL_READ_LATENCY + 1)
        with m.If(wait != 0):
            m.d.sync += wait.eq(wait - 1)
            with m.If(wait == 1):
                m.d.sync += [port.rvalid.eq(1), port.rdata.eq(self.model_rdata)]
        # -- errors, done, counters ------------------------------------------------------------
        m.d.comb += events.eq(Const(0, len(events))
                              | (rose << ErrorBit2.FRAMING)
                              | (refused_busy << ErrorBit2.START_WHILE_BUSY)
                              | ((ctrl.start & ~self.core_busy & bad) << ErrorBit2.BAD_CONFIG)
                              | (port_busy << ErrorBit2.MODEL_PORT_BUSY))
        m.d.sync += status.error_flags.eq(status.error_flags | events)
        with m.If(ctrl.clear_errors):
            m.d.sync += status.error_flags.eq(events)
        with m.If(events.any()):
            m.d.sync += status.error_count.eq(status.error_count + 1)
        with m.If(self.core_done):
            m.d.sync += status.done.eq(1)
        with m.If(self.core_busy):
            m.d.sync += status.cycles_busy.eq(status.cycles_busy + 1)
        with m.If(self.core_start):
            m.d.sync += [status.done.eq(0), status.cycles_busy.eq(0)]
        # -- the drain: after a framing error, beats up to tlast are taken and dropped ----------
        seen_last = Signal()
        with m.If(self.took & self.took_last):
            m.d.sync += seen_last.eq(1)
        with m.If(self.core_start):
            m.d.sync += seen_last.eq(0)
        with m.If(rose & ~seen_last & ~(self.took & self.took_last)):
            m.d.sync += self.draining.eq(1)
        with m.If(self.draining & self.took & self.took_last):
            m.d.sync += self.draining.eq(0)
        return m


class ZipsgdEngine2(wiring.Component):
    """Engine v2 with standard bus interfaces.

    Members
    -------
    s_axis_tdata : In(bus_width)
    s_axis_tvalid, s_axis_tlast : In(1)
    s_axis_tready : Out(1)
        The packed stream of an epoch (``docs/FORMAT.md``, version 2); ``tlast`` on its last
        beat.
    s_axil_* : AXI4-Lite slave
        The registers of ``docs/REGISTERS2.md``.
    irq : Out(1)
        Interrupt, active-high level: an IRQ_STATUS event enabled in IRQ_ENABLE.
    """

    def __init__(self, params: EngineParams2):
        if not isinstance(params, EngineParams2):
            raise TypeError(f"params must be EngineParams2, found {params!r}")
        self.params = params
        super().__init__({
            "s_axis_tdata": In(params.bus_width), "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1), "s_axis_tlast": In(1),
            **axil_ports("s_axil_"),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterFile(params=self.params, regmap=MAP)
        m.submodules.control = ctl = EngineControl2(self.params)
        m.submodules.core = core = Core2(self.params)
        connect_axil_ports(m, self, regs.axil, prefix="s_axil_")
        m.d.comb += self.irq.eq(regs.irq)
        wiring.connect(m, regs.ctrl, ctl.ctrl)
        wiring.connect(m, ctl.status, regs.status)
        wiring.connect(m, regs.model, ctl.model)
        wiring.connect(m, regs.levels, ctl.levels)
        # The core's settings are the configuration fields of the same names.
        for name in MAP.config_members():
            if hasattr(core, name):
                m.d.comb += getattr(core, name).eq(getattr(regs.ctrl, name))
        m.d.comb += [core.seed.eq(regs.ctrl.seed), core.seed_load.eq(regs.ctrl.seed_write),
                     core.start.eq(ctl.core_start), ctl.core_busy.eq(core.busy),
                     ctl.core_done.eq(core.done), ctl.core_framing.eq(core.framing_error)]
        m.d.comb += [core.model_addr.eq(ctl.model_addr), core.model_we.eq(ctl.model_we),
                     core.model_wdata.eq(ctl.model_wdata), ctl.model_rdata.eq(core.model_rdata)]
        m.d.comb += [core.level_we.eq(regs.levels.write),
                     core.level_feature.eq(regs.levels.feature),
                     core.level_index.eq(regs.levels.level),
                     core.level_data.eq(regs.levels.wdata)]
        status = ctl.status
        m.d.comb += [status.loss.eq(core.loss_acc), status.loss_saturated.eq(core.loss_saturated),
                     status.beats.eq(core.beats_read), status.samples.eq(core.samples),
                     status.updates.eq(core.updates),
                     status.model_saturations.eq(core.model_saturations),
                     status.residual_saturations.eq(core.residual_saturations),
                     status.forward_saturations.eq(core.forward_saturations)]
        # The stream: to the core, or dropped while draining.
        drain = ctl.draining
        m.d.comb += [core.beats.payload.data.eq(self.s_axis_tdata),
                     core.beats.payload.last.eq(self.s_axis_tlast),
                     core.beats.valid.eq(self.s_axis_tvalid & ~drain),
                     self.s_axis_tready.eq(core.beats.ready | drain),
                     ctl.took.eq(self.s_axis_tvalid & self.s_axis_tready),
                     ctl.took_last.eq(self.s_axis_tlast)]
        return m


def export_verilog2(params: EngineParams2, name: str = TOP_NAME2) -> dict[str, str]:
    """The engine's files: ``{"NAME.v": Verilog, "NAME.json": ports and parameters}``."""
    if not name.isidentifier() or not name.isascii():
        raise ConfigError(f"the module name must be a Verilog identifier (letters, digits, _), "
                          f"found {name!r}")
    engine = ZipsgdEngine2(params)
    text = verilog.convert(engine, name=name, emit_src=False)
    return {f"{name}.v": text,
            f"{name}.json": json.dumps(port_description(engine, name, "docs/REGISTERS2.md",
                                                        engine=2), indent=1) + "\n"}
