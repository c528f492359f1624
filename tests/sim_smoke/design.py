"""Tiny Amaranth designs used to prove the cocotb+Verilator toolchain.

``AxisAdder``: AXI4-Stream, one register stage, m.tdata = s.tdata + ``add``
(the constant for ``add=0`` is a pure passthrough), full throughput
(``s_axis_tready = ~m_axis_tvalid | m_axis_tready``), tlast forwarded.

``AxiLiteRegs``: AXI4-Lite slave with ``n_regs`` 32-bit RW registers at
byte offsets 0,4,8,...; wstrb honoured; OKAY responses only (out-of-range
addresses wrap).  One outstanding write and one outstanding read.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class AxisAdder(wiring.Component):
    def __init__(self, width: int = 32, add: int = 0):
        self._add = add
        self._width = width
        super().__init__({
            "s_axis_tdata": In(width),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "s_axis_tlast": In(1),
            "m_axis_tdata": Out(width),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
            "m_axis_tlast": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.s_axis_tready.eq(~self.m_axis_tvalid | self.m_axis_tready)
        with m.If(self.s_axis_tready):
            m.d.sync += [
                self.m_axis_tvalid.eq(self.s_axis_tvalid),
                self.m_axis_tdata.eq((self.s_axis_tdata + self._add)[: self._width]),
                self.m_axis_tlast.eq(self.s_axis_tlast),
            ]
        return m


class AxiLiteRegs(wiring.Component):
    def __init__(self, n_regs: int = 4, addr_width: int = 8):
        self._n = n_regs
        super().__init__({
            "awaddr": In(addr_width), "awvalid": In(1), "awready": Out(1),
            "wdata": In(32), "wstrb": In(4), "wvalid": In(1), "wready": Out(1),
            "bresp": Out(2), "bvalid": Out(1), "bready": In(1),
            "araddr": In(addr_width), "arvalid": In(1), "arready": Out(1),
            "rdata": Out(32), "rresp": Out(2), "rvalid": Out(1), "rready": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        sel_bits = max(1, (self._n - 1).bit_length())
        regs = [Signal(32, name=f"reg{i}") for i in range(self._n)]

        # Write: take AW and W together, only when no response is pending.
        do_write = Signal()
        m.d.comb += [
            do_write.eq(self.awvalid & self.wvalid & ~self.bvalid),
            self.awready.eq(do_write),
            self.wready.eq(do_write),
            self.bresp.eq(0),
        ]
        wsel = self.awaddr[2:2 + sel_bits]
        with m.If(do_write):
            m.d.sync += self.bvalid.eq(1)
            for i, r in enumerate(regs):
                with m.If(wsel == i):
                    for b in range(4):
                        with m.If(self.wstrb[b]):
                            m.d.sync += r[8 * b: 8 * b + 8].eq(self.wdata[8 * b: 8 * b + 8])
        with m.Elif(self.bready):
            m.d.sync += self.bvalid.eq(0)

        # Read: accept AR when no read data pending (or it is being taken).
        m.d.comb += [
            self.arready.eq(~self.rvalid | self.rready),
            self.rresp.eq(0),
        ]
        rsel = self.araddr[2:2 + sel_bits]
        with m.If(self.arready):
            m.d.sync += self.rvalid.eq(self.arvalid)
            with m.Switch(rsel):
                for i, r in enumerate(regs):
                    with m.Case(i):
                        m.d.sync += self.rdata.eq(r)
                with m.Default():
                    m.d.sync += self.rdata.eq(0)
        return m
