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
from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...spec.engine2 import EngineParams2
from ...spec.errors import ConfigError
from ...spec.registers2 import MAP, ErrorBit2
from ..axi import axi_read_ports, connect_axi_read_ports
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
from .reader import ADDR_WIDTH, MemoryReader

__all__ = ["ZipsgdEngine2", "EngineControl2", "export_verilog2", "TOP_NAME2"]

TOP_NAME2 = "zipsgd_engine2"


class EngineControl2(wiring.Component):
    """Between the register file and the core.

    * A START is refused (START_WHILE_BUSY) while the core is busy, and (BAD_CONFIG) with a
      configuration that could not end an epoch or that the core's settings could not hold
      (WRAP above the build's lane capacity, STEP_ADDR not below WRAP, LAST_VALID above
      the lanes); otherwise it starts the core.
    * ``done`` is set by the core's end of epoch and cleared by START; the error flags are
      sticky until CLEAR_ERRORS; ``error_count`` counts every error event.
    * The model port: every access registers its index (the core's address comes from a
      register); a read answers ``MODEL_READ_LATENCY`` cycles after that register; an access
      while busy is answered at once, ignored, and sets MODEL_PORT_BUSY.
    * After a framing error the stream is drained up to its ``tlast`` (a stream that left its
      ``tlast`` out is not left stalled).
    * A memory run (CTRL.RUN): the reader is started with the core, and each epoch's end
      starts the next until RUN_EPOCHS are done; a framing error aborts the reader, a read
      error lets the epoch being read end (the reader ends it) and starts no other.  The run
      (``running``, and ``busy``) lasts until both the core and the reader are idle.
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
            # The memory reader.
            "reader_start": Out(1), "reader_abort": Out(1), "reader_busy": In(1),
            "reader_error": In(1), "running": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ctrl, status, p = self.ctrl, self.status, self.params
        busy = self.core_busy | self.running
        m.d.comb += [status.busy.eq(busy), status.running.eq(self.running)]
        # -- start -----------------------------------------------------------------------
        bad, bad_run = Signal(), Signal()
        beat = p.bus_width // 8 - 1
        m.d.sync += [bad.eq((ctrl.n_features == 0) | (ctrl.n_features > p.max_features)
                            | (ctrl.batches == 0) | (ctrl.wrap == 0) | (ctrl.last_valid == 0)
                            | (ctrl.field_width == 0)
                            # (What the core's narrower ports could not hold.)
                            | (ctrl.wrap > p.lane_capacity) | (ctrl.step_addr >= ctrl.wrap)
                            | (ctrl.last_valid > p.lanes)),
                     bad_run.eq(((ctrl.run_base & beat) != 0) | ((ctrl.run_bytes & beat) != 0)
                                | (ctrl.run_bytes == 0) | (ctrl.run_epochs == 0))]
        events = Signal(len(ErrorBit2))
        asked = ctrl.start | ctrl.run
        refused_busy = asked & busy
        refused_bad = asked & ~busy & (bad | (ctrl.run & bad_run))
        rose, read_rose = Signal(), Signal()
        was, read_was = Signal(), Signal()
        m.d.sync += [was.eq(self.core_framing), read_was.eq(self.reader_error)]
        m.d.comb += [rose.eq(self.core_framing & ~was),
                     read_rose.eq(self.reader_error & ~read_was)]
        self._run(m, asked & ~busy & ~bad, bad_run, rose)
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
                              | (refused_bad << ErrorBit2.BAD_CONFIG)
                              | (port_busy << ErrorBit2.MODEL_PORT_BUSY)
                              | (read_rose << ErrorBit2.READ_ERROR))
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
        with m.If(rose & ~seen_last & ~(self.took & self.took_last) & ~self.running):
            m.d.sync += self.draining.eq(1)
        with m.If(self.draining & self.took & self.took_last):
            m.d.sync += self.draining.eq(0)
        return m

    def _run(self, m, may_start, bad_run, framing_rose):
        """The start of an epoch (START, or RUN and each of its epochs) and the memory run."""
        ctrl, status = self.ctrl, self.status
        left = Signal(32)                    # epochs of the run still to start
        stopping = Signal()                  # the run starts no further epoch
        go_run = Signal()
        m.d.comb += go_run.eq(may_start & ctrl.run & ~bad_run)
        again = self.running & self.core_done & (left != 0) & ~stopping & ~self.reader_error
        m.d.comb += [self.core_start.eq((may_start & ctrl.start) | go_run | again),
                     self.reader_start.eq(go_run),
                     self.reader_abort.eq(self.running & framing_rose)]
        with m.If(again):
            m.d.sync += left.eq(left - 1)
        with m.If(self.running & self.core_done):
            m.d.sync += status.epochs_done.eq(status.epochs_done + 1)
        with m.If(self.running & (framing_rose | self.reader_error)):
            m.d.sync += stopping.eq(1)
        with m.If(self.running & ~self.core_busy & ~self.core_start & ~self.reader_busy
                  & ((left == 0) | stopping)):
            m.d.sync += self.running.eq(0)
        with m.If(go_run):
            m.d.sync += [self.running.eq(1), left.eq(ctrl.run_epochs - 1), stopping.eq(0),
                         status.epochs_done.eq(0)]


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
    m_axi_ar*, m_axi_r* : AXI4 read master
        The memory run's reads (CTRL.RUN; ``zipsgd/hw/v2/reader.py``): while a run is
        active its beats feed the core and the AXI4-Stream input is not taken.
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
            **axi_read_ports(ADDR_WIDTH, params.bus_width, "m_axi_"),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterFile(params=self.params, regmap=MAP)
        m.submodules.control = ctl = EngineControl2(self.params)
        m.submodules.core = core = Core2(self.params)
        m.submodules.reader = reader = MemoryReader(self.params.bus_width)
        connect_axil_ports(m, self, regs.axil, prefix="s_axil_")
        connect_axi_read_ports(m, self, reader.bus, "m_axi_")
        shift = (self.params.bus_width // 8).bit_length() - 1
        m.d.comb += [reader.start.eq(ctl.reader_start), reader.abort.eq(ctl.reader_abort),
                     reader.base.eq(regs.ctrl.run_base),
                     reader.beats.eq(regs.ctrl.run_bytes >> shift),
                     reader.epochs.eq(regs.ctrl.run_epochs),
                     ctl.reader_busy.eq(reader.busy), ctl.reader_error.eq(reader.error)]
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
        # The stream: the reader's during a memory run; else the input's, to the core or
        # dropped while draining.
        drain, run = ctl.draining, ctl.running
        m.d.comb += [core.beats.payload.data.eq(Mux(run, reader.beats_out.payload.data,
                                                    self.s_axis_tdata)),
                     core.beats.payload.last.eq(Mux(run, reader.beats_out.payload.last,
                                                    self.s_axis_tlast)),
                     core.beats.valid.eq(Mux(run, reader.beats_out.valid,
                                             self.s_axis_tvalid & ~drain)),
                     reader.beats_out.ready.eq(run & core.beats.ready),
                     self.s_axis_tready.eq(~run & (core.beats.ready | drain)),
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
