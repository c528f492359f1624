"""A lane array for Yosys cost measurement (``bench_lane_cost``): the gearbox, the sequencer,
``L`` lanes (raw words on every fourth), the segmented sum, the residual choice of the gradient
pass and the reduction tree of engine v2, wired as the engine wires them, with the control
inputs left free so that synthesis keeps every path."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from zipsgd.hw.v2.gearbox import FieldGearbox, beat_layout, raw_bits
from zipsgd.hw.v2.lane import FORWARD_LATENCY, PRODUCT_WIDTH, Lane
from zipsgd.hw.v2.sequencer import WindowSequencer
from zipsgd.hw.v2.trees import GROUP, ReductionTree, SegmentedSum
from zipsgd.spec.engine2 import PARTIAL_WIDTH, RESIDUAL_WIDTH


class LaneArray(wiring.Component):
    def __init__(self, bus_width, capacity=512, dot_width=42):
        self.bus_width, self.capacity, self.dot_width = bus_width, capacity, dot_width
        self.lanes = bus_width // 2
        groups = self.lanes // GROUP
        super().__init__({"beat": In(beat_layout(bus_width)), "beat_valid": In(1),
                          "width": In(4), "ctrl": In(64),
                          "e": In(signed(RESIDUAL_WIDTH)).array(groups + 1),
                          "out": Out(64)})

    def elaborate(self, platform):
        m = Module()
        lanes, ctrl = self.lanes, self.ctrl
        aw = (self.capacity - 1).bit_length()
        m.submodules.gearbox = gb = FieldGearbox(self.bus_width)
        m.d.comb += [gb.beats.payload.eq(self.beat), gb.beats.valid.eq(self.beat_valid),
                     gb.width.eq(self.width), gb.windows.ready.eq(1), gb.restart.eq(ctrl[0])]
        m.submodules.seq = seq = WindowSequencer(lanes, aw)
        m.d.comb += [seq.restart.eq(ctrl[0]), seq.advance.eq(gb.windows.valid),
                     seq.step.eq(ctrl[1:11]), seq.wrap.eq(ctrl[11:21]), seq.g_log2.eq(ctrl[21:24]),
                     seq.last_window.eq(ctrl[24:56]), seq.last_valid.eq(ctrl[56:62])]
        m.submodules.seg = seg = SegmentedSum(lanes, PRODUCT_WIDTH, self.dot_width)
        m.submodules.red = red = ReductionTree(lanes, PARTIAL_WIDTH)
        slots = gb.windows.payload.slots
        for k in range(lanes):
            lane = Lane(self.capacity, raw=(k % 4 == 0))
            m.submodules[f"lane{k}"] = lane
            m.d.comb += [lane.index_mask.eq(ctrl[:8]), lane.bit_select.eq(ctrl[8:16]),
                         lane.double.eq(ctrl[16]), lane.per_feature.eq(ctrl[17]),
                         lane.buffer.eq(ctrl[18]), lane.raw.eq(ctrl[19]),
                         lane.fwd_valid.eq(gb.windows.valid & seq.valid[k]),
                         lane.fwd_slot.eq(slots[k]), lane.fwd_addr.eq(seq.addr[k])]
            if k % 4 == 0:
                m.d.comb += lane.raw_bits.eq(raw_bits([slots[k + i] for i in range(4)]))
            start, end = seq.start[k], seq.end[k]
            for i in range(FORWARD_LATENCY):
                delayed = Signal(name=f"start{k}_d{i}")
                delayed_end = Signal(name=f"end{k}_d{i}")
                m.d.sync += [delayed.eq(start), delayed_end.eq(end)]
                start, end = delayed, delayed_end
            m.d.comb += [seg.products[k].eq(lane.product), seg.starts[k].eq(start),
                         seg.ends[k].eq(end)]
            # The gradient pass: the replayed second level and address (a delay line stands in
            # for the replay memory), and the residual of the lane's sample in its group.
            f2, addr, before = lane.f2, seq.addr[k], seq.start[k]
            for i in range(4):
                d2 = Signal.like(f2, name=f"f2_{k}_{i}")
                da = Signal.like(addr, name=f"a_{k}_{i}")
                db = Signal(name=f"b_{k}_{i}")
                m.d.sync += [d2.eq(f2), da.eq(addr), db.eq(before)]
                f2, addr, before = d2, da, db
            g = k // GROUP
            m.d.comb += [lane.bwd_valid.eq(ctrl[60]), lane.bwd_second.eq(f2),
                         lane.bwd_e.eq(Mux(before, self.e[g], self.e[g + 1])),
                         lane.bwd_addr.eq(addr), lane.bwd_bank.eq(ctrl[61]),
                         lane.upd_addr.eq(ctrl[30:30 + aw]), lane.upd_bank.eq(~ctrl[61]),
                         lane.upd_enable.eq(ctrl[(k + 2) % 64]), lane.upd_both.eq(ctrl[63]),
                         lane.xf_we.eq(ctrl[k % 64]), lane.xf_addr.eq(ctrl[:aw + 1]),
                         lane.xf_data.eq(ctrl[:18]), lane.cb_we.eq(ctrl[(k + 1) % 64]),
                         lane.cb_addr.eq(ctrl[:11]), lane.cb_data.eq(ctrl[11:20]),
                         red.partials[k].eq(lane.partial)]
        x = 0
        for g in range(lanes // GROUP):
            m.d.comb += seg.labels[g].eq(Cat(*(slots[g * GROUP + i] for i in range(2))))
            x = x ^ seg.closed[g] ^ seg.closed_valid[g] ^ seg.closed_label[g]
        acc = Signal(64)
        m.d.sync += acc.eq(x ^ red.total ^ Cat(seq.ready))
        m.d.comb += self.out.eq(acc)
        return m
