"""A lane array for Yosys cost measurement (``bench_lane_cost``): the gearbox, ``L`` lanes, the
segmented sum and the reduction tree of engine v2, wired as the engine wires them, with the
control inputs left free so that synthesis keeps every path."""
from amaranth.hdl import Cat, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zipsgd.hw.v2.gearbox import FieldGearbox, beat_layout
from zipsgd.hw.v2.lane import PARTIAL_WIDTH, PRODUCT_WIDTH, Lane
from zipsgd.hw.v2.trees import ReductionTree, SegmentedSum


class LaneArray(wiring.Component):
    def __init__(self, bus_width, capacity=512, dot_width=41):
        self.bus_width, self.capacity, self.dot_width = bus_width, capacity, dot_width
        L = bus_width // 2
        self.L = L
        super().__init__({"beat": In(beat_layout(bus_width)), "beat_valid": In(1),
                          "width": In(4), "ctrl": In(64), "e": In(signed(18)).array(L // 8 + 1),
                          "out": Out(64)})

    def elaborate(self, platform):
        m = Module()
        L = self.L
        m.submodules.gearbox = gb = FieldGearbox(self.bus_width)
        m.d.comb += [gb.beats.payload.eq(self.beat), gb.beats.valid.eq(self.beat_valid),
                     gb.width.eq(self.width), gb.windows.ready.eq(1)]
        m.submodules.seg = seg = SegmentedSum(L, PRODUCT_WIDTH, self.dot_width)
        m.submodules.ra = ra = ReductionTree(L, PARTIAL_WIDTH)
        aw = (self.capacity - 1).bit_length()
        ctrl = self.ctrl
        for k in range(L):
            lane = Lane(self.capacity, raw=(k % 4 == 0))
            m.submodules[f"lane{k}"] = lane
            addr = Signal(aw, name=f"addr{k}")
            start = Signal(name=f"start{k}")
            # Per-lane feature address: +L/A per window, restart after a sample start.
            with m.If(gb.windows.valid):
                m.d.sync += addr.eq(addr + ctrl[:8])
            with m.If(start):
                m.d.sync += addr.eq(k - ctrl[8:13])
            m.d.comb += start.eq(ctrl[13 + k % 32])
            slot = gb.windows.payload.slots[k]
            m.d.comb += [lane.fwd.valid.eq(gb.windows.valid), lane.fwd.slot.eq(slot),
                         lane.fwd.addr.eq(addr), lane.fwd.level_addr.eq(Cat(slot[6:], addr[:7])),
                         lane.buffer.eq(ctrl[50]), lane.spacing.eq(ctrl[51:59]),
                         lane.top_mask.eq(ctrl[20:28]), lane.raw_mode.eq(ctrl[59])]
            if k % 4 == 0:
                m.d.comb += lane.raw_word.eq(Cat(*(gb.windows.payload.slots[k + i][:8]
                                                   for i in range(3)))[6:])
            m.d.comb += [seg.products[k].eq(lane.product), seg.starts[k].eq(start)]
            # The gradient pass replays the second levels (a delay line stands in for the
            # replay memory) with the e of the sample in the lane's group.
            f2 = lane.second
            for i in range(4):
                d = Signal.like(f2, name=f"f2_{k}_{i}")
                m.d.sync += d.eq(f2)
                f2 = d
            g = k // 8
            e = Signal(signed(18), name=f"e{k}")
            m.d.comb += e.eq(Mux2(ctrl[k % 64], self.e[g], self.e[g + 1]))
            m.d.comb += [lane.bwd_valid.eq(ctrl[60]), lane.bwd_second.eq(f2), lane.bwd_e.eq(e),
                         lane.bwd_addr.eq(addr), lane.sum_bank.eq(ctrl[62]),
                         lane.upd_addr.eq(ctrl[30:30 + aw]),
                         lane.tag.eq(ctrl[63]),
                         lane.xf_we.eq(ctrl[k % 64]), lane.xf_addr.eq(ctrl[:aw + 1]),
                         lane.xf_data.eq(ctrl[:18]),
                         lane.cb_we.eq(ctrl[(k + 1) % 64]), lane.cb_addr.eq(ctrl[:11]),
                         lane.cb_data.eq(ctrl[11:20])]
            m.d.comb += ra.partials[k].eq(lane.partial)
        acc = Signal(64)
        x = 0
        for g in range(L // 8):
            x = x ^ seg.closed[g] ^ seg.closed_valid[g]
        m.d.sync += acc.eq(x ^ ra.total)
        m.d.comb += self.out.eq(acc)
        return m


def Mux2(sel, a, b):
    from amaranth.hdl import Mux
    return Mux(sel, b, a)
