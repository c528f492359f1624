"""Engine v2's core: packed beats in, one epoch of mini-batch SGD on the on-chip model
(``docs/HARDWARE.md``, "Engine v2"; bit-exact with ``zipsgd/golden/engine2.py``).

Data flow, for a *pass* (the lanes ``[lo, hi)`` of a window, decided in cycle ``c`` from the
window's flags):

* ``c + 1``: the pass's signals (its lanes, starts, ends, second-batch lanes, the pop) in
  registers beside the decision, which travel from there;
* ``c + 2`` (``_LAG``): the gearbox's fields and the sequencer's addresses reach the lanes,
  from the mirrors of the window stage;
* ``c + 8`` (``+ FORWARD_LATENCY``): the products reach the segmented sum (the labels, from the
  start lanes' levels);
* ``c + 17`` (``+ 18`` at W = 128: the segmented sum's ``latency``): each group closes at
  most one sample: dot product and label to its sample unit, with the next output of residual
  generator ``s mod R``;
* ``+ SAMPLE_LATENCY``: the scaled residual ``e`` of sample ``s`` is written into the residual
  ring;
* the lanes keep each field's second level and address in their *replay* memories; a pass is
  replayed (its gradient terms summed into the partials) once the residual of its last sample
  is in the ring;
* a batch whose gradient is complete is updated by the :class:`~.updater.Updater`, which writes
  the next model version's forward operands into the lanes' idle buffer.

Passes split a window only where a batch needs a model version that is not ready yet (EXACT:
the previous batch's update; DELAYED: the one before), so a pass holds at most two batches;
or, with samples shorter than a group, after each sample end (such a pass every second cycle).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine import DECAY_WIDTH, MODEL_STORAGE_WIDTH
from zipsgd.spec.engine2 import (
    LOSS_ACC_WIDTH,
    PARTIAL_REUSE,
    RESIDUAL_WIDTH,
    STEP_WIDTH,
    SUB_WORD_SHIFT,
    EngineParams2,
    core_settings,
    sub_words,
)
from zipsgd.spec.fixed import RAND_BITS

from ..arith import above, delay_line, popcount, replicas
from ..core import UNUSED_COLLISION_ATTRIBUTE
from ..rng import XorshiftBank
from .gearbox import SLOT_WIDTH, FieldGearbox, beat_layout, raw_bits
from .lane import FORWARD_LATENCY, GRADIENT_LATENCY, PRODUCT_WIDTH, TABLE_WIDTH, Lane
from .sample import LABEL_WIDTH, SampleUnit
from .sample import LATENCY as SAMPLE_LATENCY
from .sequencer import WindowSequencer
from .stage import MirrorStage, WindowStage
from .trees import GROUP, SegmentedSum
from .updater import MODEL_READ_LATENCY, Updater

__all__ = ["Core2", "MODEL_READ_LATENCY", "RING_DEPTH", "core_settings"]

_MARK = {UNUSED_COLLISION_ATTRIBUTE: 1}
#: Residuals a ring bank holds (sample ``s`` in bank ``s mod R``).
RING_DEPTH = 32
#: Cycles from a replay to its terms being in the partial memories.
_REPLAY_LATENCY = 2 + GRADIENT_LATENCY
#: Cycles from a pass's decision to its fields at the lanes (the mirrors' read): the
#: pass's signals go into registers beside the decision, and travel from there a cycle later.
_LAG = 2
#: The window stages' depth, and the flags' stage's ``hold_at``: the gearbox sees ``hold``
#: through a register, and a window of a beat taken before it stops is pushed a cycle later,
#: so ``_IN_FLIGHT`` pushes follow the cycle the stage reached ``HOLD_AT``; a mirror holds one
#: window more than the flags' stage (``_stage``).
STAGE_DEPTH = 8
_IN_FLIGHT = 2
HOLD_AT = STAGE_DEPTH - _IN_FLIGHT - 1
#: Cycles from a pass's decision to the lanes' levels (``first``, ``second``, ``f2``).
_LEVELS = _LAG + FORWARD_LATENCY - 1


def _settings(params: EngineParams2, aw: int) -> dict:
    mw = (params.max_features - 1).bit_length() + 1
    return {
        "field_width": In(4), "index_mask": In(8), "bit_select": In(8),
        "double_sampled": In(1),
        "per_feature": In(1), "raw": In(1), "short_samples": In(1),
        "g_log2": In(3), "wrap": In(aw + 1), "step_addr": In(aw + 1),
        "last_window": In(32), "last_valid": In(9),
        "n_features": In(mw), "batch_positions": In(32), "batches": In(32), "exact": In(1),
        "forward_frac": In(5), "step": In(STEP_WIDTH), "residual_shift": In(6),
        "rounding": In(2), "update_shift": In(6), "forward_shift": In(5),
        "model_width": In(6), "decay": In(DECAY_WIDTH), "threshold": In(31),
    }


class Core2(wiring.Component):
    """Engine v2 without its register file: settings as ports (held while ``busy``),
    ``start`` begins an epoch in the next cycle (``busy`` from then on), ``done`` pulses at its
    end; the status counts are the epoch's.  Beats are taken only while busy and up to the
    one with ``last``: a stream offered before its epoch's start waits, and so does the next
    epoch's while this one drains (a source may stream epoch after epoch).

    The host's ports (while idle): ``seed``/``seed_load``; the model (word ``m``);
    the level tables (feature ``j``, level ``q``; one shared table when ``per_feature`` is 0).
    """

    def __init__(self, params: EngineParams2):
        self.params = params
        _lanes, groups = params.lanes, params.lanes // GROUP
        aw = (params.lane_capacity - 1).bit_length()
        mw = (params.max_features - 1).bit_length() + 1
        super().__init__({
            "beats": In(stream.Signature(beat_layout(params.bus_width))),
            **_settings(params, aw),
            "start": In(1), "busy": Out(1), "done": Out(1), "framing_error": Out(1),
            "seed": In(32), "seed_load": In(1),
            "model_we": In(1), "model_addr": In(mw),
            "model_wdata": In(signed(MODEL_STORAGE_WIDTH)),
            "model_rdata": Out(signed(MODEL_STORAGE_WIDTH)),
            "level_we": In(1), "level_feature": In(mw), "level_index": In(8),
            "level_data": In(signed(TABLE_WIDTH)),
            "samples": Out(32), "beats_read": Out(32), "updates": Out(32),
            "loss_acc": Out(LOSS_ACC_WIDTH), "loss_saturated": Out(1),
            "residual_saturations": Out(32), "model_saturations": Out(32),
            "forward_saturations": Out(32),
        })
        self.groups = groups

    def elaborate(self, platform):
        m = Module()
        p = self.params
        lanes, units, groups = p.lanes, p.update_units, self.groups
        m.submodules.gearbox = gb = FieldGearbox(p.bus_width)
        m.submodules.seq = seq = WindowSequencer(lanes, (p.lane_capacity - 1).bit_length())
        m.submodules.segsum = seg = SegmentedSum(lanes, PRODUCT_WIDTH, p.dot_width)
        m.submodules.updater = upd = Updater(p)
        m.submodules.gens = gens = XorshiftBank(count=units + groups)
        self.lane = [Lane(p.lane_capacity, raw=k % 4 == 0) for k in range(lanes)]
        for k, lane in enumerate(self.lane):
            m.submodules[f"lane{k}"] = lane
        # An epoch begins the cycle after its ``start`` (``busy`` from then on): a register,
        # with a copy for each part it clears, so no one flip-flop's reset spans the die.
        parts = ["control", "gearbox", "sequencer", "flags", "samples", "replay", "updater",
                 "host"] + [f"stage{g}" for g in range(groups)]
        copies = replicas(m, "begin", self.start & ~self.busy, len(parts), reset_less=False)
        self._begin = dict(zip(parts, copies, strict=True))
        head = self._stage(m, gb, seq)
        ctl = self._control(m, gb, seq, head, upd)
        fwd = self._forward(m, head, ctl)
        self._samples(m, seg, gens, fwd, ctl)
        self._replay(m, head, fwd, ctl)
        self._updates(m, upd, gens, ctl)
        self._host(m, upd)
        return m

    # -- the window stages: the sequencer's flags beside the pass control, the gearbox's
    # slots and the sequencer's addresses beside each group of lanes, a cycle behind --------
    def _stage(self, m, gb, seq):
        """Windows pass through the flags' :class:`~.stage.WindowStage` beside the pass
        control, which pops it, and one :class:`~.stage.MirrorStage` beside each group of
        lanes, pushed a cycle after it and popped ``_LAG`` cycles after it, so that its head is
        the decided pass's window while the lanes read it (``docs/HARDWARE.md``, "The window
        stages").  No handshake crosses the die: the gearbox's windows are pushed as they come,
        and it takes beats while neither the flags' stage (``hold``) nor the sequencer
        (settling after a start) holds it, both seen through registers beside it.
        Returns the flags' head (``start``, ``end``, ``valid``, ``last``, ``final``) and the
        data heads (``slots``, ``addr``)."""
        lanes = self.params.lanes
        aw = (self.params.lane_capacity - 1).bit_length()
        h = _Bag()
        flags = m.submodules.flags = WindowStage(data.StructLayout({
            "start": lanes, "end": lanes, "valid": lanes, "last": 1, "final": 1}),
            depth=STAGE_DEPTH, hold_at=HOLD_AT)
        held, seq_ready = Signal(name="hold_gb"), Signal(name="seq_ready_gb")
        m.d.sync += [held.eq(flags.hold), seq_ready.eq(seq.ready & ~self._begin["gearbox"])]
        push = gb.windows.valid
        m.d.comb += [
            gb.windows.ready.eq(1), gb.hold.eq(held | ~seq_ready),
            flags.i.valid.eq(push),
            flags.i.payload.start.eq(Cat(*seq.start)), flags.i.payload.end.eq(Cat(*seq.end)),
            flags.i.payload.valid.eq(Cat(*seq.valid)),
            flags.i.payload.last.eq(gb.windows.payload.last),
            flags.i.payload.final.eq(seq.final),
            flags.clear.eq(self._begin["flags"]), seq.advance.eq(push),
        ]
        h.start, h.end, h.valid = flags.o.payload.start, flags.o.payload.end, \
            flags.o.payload.valid
        h.valid_window, h.last, h.final = flags.o.valid, flags.o.payload.last, \
            flags.o.payload.final
        h.pop = Signal()
        m.d.comb += flags.o.ready.eq(h.pop)
        # A mirror holds the flags' stage's windows as of a cycle ago and those popped there
        # but not here yet: HOLD_AT + _IN_FLIGHT + 1 = STAGE_DEPTH at most.  Its window and
        # addresses go into flip-flops (no enable), its push and pop into a copy per mirror.
        pops = replicas(m, "pop", delay_line(m, h.pop, _LAG - 1, "pop_r"), self.groups)
        # (A push in an epoch's first cycle is one the flags' stage drops with its clear.)
        pushes = replicas(m, "push", push & ~self._begin["flags"], self.groups)
        layout = data.StructLayout({"slots": data.ArrayLayout(SLOT_WIDTH, GROUP),
                                    "addr": data.ArrayLayout(aw, GROUP)})
        h.slots, h.addr = [], []
        for g in range(self.groups):
            st = m.submodules[f"stage{g}"] = MirrorStage(layout, depth=STAGE_DEPTH)
            window = Signal(layout, name=f"window{g}")
            m.d.comb += [st.push.eq(pushes[g]), st.i.eq(window),
                         st.pop.eq(pops[g]), st.clear.eq(self._begin[f"stage{g}"])]
            for i, k in enumerate(range(g * GROUP, (g + 1) * GROUP)):
                m.d.sync += [window.slots[i].eq(gb.windows.payload.slots[k]),
                             window.addr[i].eq(seq.addr[k])]
                h.slots.append(st.o.slots[i])
                h.addr.append(st.o.addr[i])
        return h

    # -- the epoch's control: start, passes, batches, versions ------------------------------
    def _control(self, m, gb, seq, h, upd):
        """Passes from small registers, each updated by one adder (``docs/HARDWARE.md``,
        "The pass control"): ``rest``, the lanes of the window not issued yet; ``rb1``/``rb2``,
        the next two batch boundaries from the window's first position; ``ahead``, the batches
        from the pass's first (``fb``) whose model version is ready; ``left``, the batches
        from ``fb`` to the end."""
        p = self.params
        lanes = p.lanes
        c = _Bag()
        c.running, c.refreshing = Signal(), Signal()
        c.fwd_done, c.ended = Signal(), Signal()
        # Batch of the first position of the pass decided a cycle ago: nothing in the decision
        # reads it, so it follows the decision a cycle late, from registers (``crossed_r``).
        c.fb = Signal(32)
        c.crossed_r = Signal(2)                # batches the last cycle's pass crossed
        c.version = Signal(32)                 # updates finished this epoch
        c.version_up = Signal()                # (set by the update control)
        c.ub = Signal(32)                      # the next batch to update
        c.started = Signal(32)                 # samples started by issued passes
        c.grad_done = Signal(32)               # batches whose gradient is in the partials
        c.s_replayed = Signal(32)              # started-count of the last replayed pass
        c.wp, c.rp = Signal(32), Signal(32)    # passes issued, passes replayed
        c.issue = Signal()
        # The last sub-word of a feature's partial (``sub_words(wrap) - 1``; a setting's
        # arithmetic, registered).
        c.last_sub = Signal(range(PARTIAL_REUSE))
        m.d.sync += c.last_sub.eq(0)
        for w in range(1, PARTIAL_REUSE):
            with m.If(self.wrap == w):
                m.d.sync += c.last_sub.eq(sub_words(w) - 1)
        rest = Signal(lanes)                   # lanes of the window not issued yet
        rb1, rb2 = Signal(33, name="rb1"), Signal(33, name="rb2")
        # The settings the decision reads, copied beside it (they hold while busy).  (The
        # per-lane masks read the same copies: the pass leaves through registers beside the
        # decision, so their loads are beside it too.)
        raw = replicas(m, "raw_ctl", self.raw, 1)[0]
        short = replicas(m, "short_samples_ctl", self.short_samples, 1)[0]
        exact = replicas(m, "exact_ctl", self.exact, 1)[0]
        ahead = Signal(signed(8))
        left = Signal(signed(34))
        pos_bits = (lanes - 1).bit_length()
        used = Signal(lanes)                   # the lanes that hold positions
        m.d.comb += used.eq(Mux(raw, int("0001" * (lanes // 4), 2), (1 << lanes) - 1))
        # Beats are taken only while an epoch runs and up to its beat with ``last``: a stream
        # sent before its start, or the next epoch's sent while this one drains, waits.
        taking = Signal(name="taking")         # (and ``running``: an error stops it)
        m.d.comb += [gb.beats.valid.eq(self.beats.valid & taking & c.running),
                     self.beats.ready.eq(gb.beats.ready & taking & c.running),
                     gb.beats.payload.eq(self.beats.payload)]
        with m.If(self.beats.valid & self.beats.ready & self.beats.payload.last):
            m.d.sync += taking.eq(0)
        m.d.comb += [gb.width.eq(self.field_width), gb.restart.eq(self._begin["gearbox"]),
                     seq.restart.eq(self._begin["sequencer"]), seq.step.eq(self.step_addr),
                     seq.wrap.eq(self.wrap), seq.g_log2.eq(self.g_log2), seq.raw.eq(self.raw),
                     seq.last_window.eq(self.last_window), seq.last_valid.eq(self.last_valid)]
        # The boundaries' steps, registered (settings): c batches crossed, the window left or
        # not: rb += c * bp - whole * P.
        bp = self.batch_positions
        positions = Mux(raw, lanes // 4, lanes)
        steps = [Signal(signed(34), name=f"rb_step{i}") for i in range(6)]
        m.d.sync += [steps[whole * 3 + n].eq(n * bp - (positions if whole else 0))
                     for whole in range(2) for n in range(3)]
        # ``rb + step < P`` and ``rb + step == P`` are ``rb < P - step`` and ``rb == P - step``:
        # a register against registered constants, with no adder before the decision's choice.
        # (Settings: two cycles after them, long before the epoch's first pass, after the
        # refresh.)
        marks = [Signal(signed(35), name=f"rb_mark{i}") for i in range(6)]
        m.d.sync += [mark.eq(positions - step) for mark, step in zip(marks, steps, strict=True)]

        # The forward buffers of batches fb and fb + 1: the parity of the version each reads
        # (EXACT: the batch's own; DELAYED: the one before, version 0 for batch 0), from fb's
        # low bit and a flag for fb = 0, registers.
        fb_zero = Signal()
        c.buf_a = Mux(exact, c.fb[0], ~fb_zero & ~c.fb[0])
        c.buf_b = Mux(exact, ~c.fb[0], c.fb[0])
        m.d.sync += [c.fb.eq(c.fb + c.crossed_r), fb_zero.eq(fb_zero & (c.crossed_r == 0))]
        # Every test the decision reads is a register, stepped with the register it tests
        # (``docs/HARDWARE.md``, "The pass control"): each outcome's next value is computed
        # beside the decision from registers, which only chooses among them.
        def below(value, bits):
            """value < P (value is never negative)."""
            return Mux(raw, value[bits - 2:] == 0, value[bits:] == 0)

        def at(value):
            """value == P."""
            return Mux(raw, value == lanes // 4, value == lanes)

        def ready(ahd, lft, second):
            """Batch fb (fb + 1 when ``second``) may go: its version is ready or it is past
            the stream's end."""
            return (~ahd[-1] & ahd[int(second):].any()) | lft[-1] | ~lft[int(second):].any()

        in1, in2, at1, at2 = (Signal(name=n) for n in ("in1", "in2", "at1", "at2"))
        ahead0, left0 = Signal.like(ahead), Signal.like(left)      # (an epoch's first values)
        m.d.comb += [ahead0.eq(Mux(exact, 1, 2)), left0.eq(self.batches)]
        ready_a, ready_b = Signal(name="ready_a"), Signal(name="ready_b")

        def after(rb, k, extra=0):
            """``rb`` is past lane ``k``'s position plus ``extra``: a constant per mode, so
            a look-up on ``rb``'s low bits, not a carry chain under the mode's choice."""
            low = rb[:pos_bits]
            return Mux(raw, above(low, k // 4 + extra), above(low, k + extra))

        # Per lane: its position is before rb1 (rb2).
        before1 = Cat(*(~in1 | after(rb1, k) for k in range(lanes)))
        before2 = Cat(*(~in2 | after(rb2, k) for k in range(lanes)))
        # The pass: the lanes left, up to the first batch that is not ready (the second
        # boundary at most: a third batch's version cannot be ready).  Whole: it takes every
        # lane left (``rest`` is a suffix of the used lanes, ``take`` a prefix of it and rb1
        # past rest's first lane, so this needs no ``take``).
        batch_lanes = Mux(in1 & ~ready_b, before1, Mux(in1, before2, (1 << lanes) - 1))
        whole_b = ~in1 | (ready_b & ~in2)
        # With samples shorter than a group a pass ends after its first sample end (a
        # boundary is a sample start, so that end never passes it): computed from registers
        # into registers (``take_s``, ``whole_s``, ``cross_s``), so such a pass goes every
        # second cycle at most, once they are ``fresh``.
        take_s, whole_s, cross_s = Signal(lanes, name="take_s"), Signal(name="whole_s"), \
            Signal(name="cross_s")
        fresh = Signal(name="fresh")
        ends = Cat(*h.end) & rest
        last_used = Mux(raw, 1 << (lanes - 4), 1 << (lanes - 1)) if lanes >= 4 else 1
        whole_now = ~(ends & ~last_used).any()
        end_before = Cat(*(ends[k] & after(rb1, k, 1) for k in range(lanes)))
        m.d.sync += [take_s.eq(rest & ~(_prefix_or(ends) << 1)[:lanes]),
                     whole_s.eq(whole_now),
                     cross_s.eq(Mux(in1, ~end_before.any(), whole_now & at1)),
                     fresh.eq(~c.issue & h.valid_window)]
        take = Signal(lanes)
        m.d.comb += take.eq(Mux(short, take_s, rest & batch_lanes))
        c.take = take
        whole = Signal()
        m.d.comb += whole.eq(Mux(short, whole_s, whole_b))
        # Boundaries crossed (whole samples: at rb1 when it is in the window and the pass
        # reaches it).
        cross1, cross2 = Signal(), Signal()
        m.d.comb += [cross1.eq(Mux(short, cross_s, in1 | at1)),
                     cross2.eq(~short & in1 & ready_b & (in2 | at2))]
        c.in1, c.before1, c.whole = in1, before1, whole
        # What the decision reads from far blocks is a copy beside it, a cycle late: the space
        # tests (registered where they are made, then copied: two passes more of margin), the
        # version step, ``running`` and ``refreshing`` (their copies are set by the start and
        # follow the originals a cycle late; an error is the decision's own framing error).
        space_far, space = Signal(), Signal(name="space_ctl")
        ring = RING_DEPTH * self.groups
        m.d.sync += [space_far.eq(((c.wp - c.rp) < self.params.lane_capacity - 10) &
                                  (c.started + 3 * self.groups + 4 <= c.s_replayed + ring - 2)),
                     space.eq(space_far)]
        running, refreshing = Signal(name="running_ctl"), Signal(name="refreshing_ctl")
        version_up = Signal(name="version_up_ctl")
        m.d.sync += [running.eq(c.running), refreshing.eq(c.refreshing),
                     version_up.eq(c.version_up)]
        window = h.valid_window
        m.d.comb += c.issue.eq(running & ~self.framing_error & ~refreshing & ~c.fwd_done
                               & window & ready_a & space & (fresh | ~short))
        crossed = Cat(cross1 & ~cross2, cross2)                 # 0, 1 or 2 batches
        c.crossed = crossed

        def choose(outcomes):
            """This cycle's outcome of six made beforehand (``steps``' order): the decision
            only chooses, in the last LUTs (no pass: the first)."""
            kept = Mux(cross2, outcomes[2], Mux(cross1, outcomes[1], outcomes[0]))
            left_window = Mux(cross2, outcomes[5], Mux(cross1, outcomes[4], outcomes[3]))
            return Mux(c.issue, Mux(whole, left_window, kept), outcomes[0])

        for rb, tin, tat in ((rb1, in1, at1), (rb2, in2, at2)):
            m.d.sync += [rb.eq(choose([rb + st for st in steps])),
                         tin.eq(choose([rb < mark for mark in marks])),
                         tat.eq(choose([rb == mark for mark in marks]))]
        gone = Mux(c.issue, crossed, 0)
        aheads = [ahead + version_up - d for d in range(3)]
        lefts = [left - d for d in range(3)]
        outcomes = list(zip(aheads, lefts, strict=True))
        m.d.sync += [ahead.eq(Array(aheads)[gone]), left.eq(Array(lefts)[gone]),
                     ready_a.eq(Array(ready(a, lf, False) for a, lf in outcomes)[gone]),
                     ready_b.eq(Array(ready(a, lf, True) for a, lf in outcomes)[gone]),
                     c.crossed_r.eq(gone)]
        with m.If(c.issue):
            m.d.sync += c.wp.eq(c.wp + 1)
            with m.If(whole):
                m.d.sync += rest.eq(used)
                with m.If(h.final):
                    m.d.sync += [c.fwd_done.eq(1), c.ended.eq(h.last)]
                with m.Elif(h.last):
                    m.d.sync += [self.framing_error.eq(1), c.running.eq(0)]
            with m.Else():
                m.d.sync += rest.eq(rest & ~take)
        # After the last window: one padding window may follow; it must end the stream.
        drop = c.running & c.fwd_done & ~c.ended & h.valid_window
        with m.If(drop):
            m.d.sync += c.ended.eq(1)
            with m.If(~h.last):
                m.d.sync += [self.framing_error.eq(1), c.running.eq(0)]
        m.d.comb += h.pop.eq((c.issue & whole) | drop)
        # (Last: a start sets the registers the passes step.)
        with m.If(self._begin["control"]):
            m.d.sync += [c.running.eq(1), taking.eq(1), c.refreshing.eq(1), c.fwd_done.eq(0),
                         running.eq(1), refreshing.eq(1), version_up.eq(0),
                         c.ended.eq(0), rest.eq(used), rb1.eq(bp), rb2.eq(bp << 1),
                         ahead.eq(ahead0), left.eq(left0), c.fb.eq(0),
                         in1.eq(below(bp, pos_bits)), at1.eq(at(bp)),
                         in2.eq(below(bp << 1, pos_bits)), at2.eq(at(bp << 1)),
                         ready_a.eq(ready(ahead0, left0, False)),
                         ready_b.eq(ready(ahead0, left0, True)),
                         fb_zero.eq(1), c.crossed_r.eq(0),
                         c.version.eq(0), c.ub.eq(0),
                         c.started.eq(0), c.grad_done.eq(0), c.s_replayed.eq(0),
                         c.wp.eq(0), c.rp.eq(0), self.framing_error.eq(0)]

        with m.If(gb.beats.valid & gb.beats.ready & c.running):
            m.d.sync += self.beats_read.eq(self.beats_read + 1)
        with m.If(self._begin["control"]):
            m.d.sync += self.beats_read.eq(0)
        # The epoch ends when every batch is updated and the stream has ended.
        finished = c.running & ~c.refreshing & c.fwd_done & c.ended & (c.ub == self.batches) \
            & ~upd.busy & (c.rp == c.wp)
        m.d.comb += self.busy.eq(c.running | self._begin["host"])
        m.d.sync += self.done.eq(finished)
        with m.If(finished):
            m.d.sync += c.running.eq(0)
        return c

    # -- the forward pass: lanes, labels, the segmented sum ---------------------------------
    def _forward(self, m, h, c):
        lanes = self.params.lanes
        slots = h.slots
        f = _Bag()
        f.valid = Signal(lanes)           # lanes of the issued pass
        f.second = Signal(lanes)          # lanes in the pass's second batch
        f.start = Signal(lanes)
        f.end = Signal(lanes)
        # The pass's signals into registers beside the decision (``*1``), the only loads of
        # its look-ups: every block that needs them reads these, a cycle later.
        f.valid1 = delay_line(m, f.valid, 1, "pass_valid")
        f.start1 = delay_line(m, f.start, 1, "pass_start")
        f.end1 = delay_line(m, f.end, 1, "pass_end")
        f.second1 = delay_line(m, f.second, 1, "pass_second")
        c.issue1 = delay_line(m, c.issue, 1, "pass_issue")
        # (A lane takes its field's validity a cycle after the field, which comes ``_LAG``
        # cycles after the decision; the buffer comes with the field, chosen from the pass's
        # second-batch lanes and the batch count, which follows the decision a cycle late.)
        valid1 = delay_line(m, f.valid1, _LAG, "fwd_valid")
        second = delay_line(m, f.second1, _LAG - 1, "fwd_second")
        buf_a, buf_b = Signal(name="buf_a"), Signal(name="buf_b")
        m.d.comb += [buf_a.eq(c.buf_a), buf_b.eq(c.buf_b)]
        buf_a, buf_b = (delay_line(m, b, _LAG - 1, f"{b.name}_r") for b in (buf_a, buf_b))
        buffers = Cat(*(Mux(second[k], buf_b, buf_a) for k in range(lanes)))
        # The lanes' settings, a copy per group of lanes (settings hold while busy, and an
        # epoch begins a cycle after its start).
        names = ("index_mask", "bit_select", "double_sampled", "per_feature", "raw")
        local = [{n: replicas(m, f"{n}_g{g}", getattr(self, n), 1)[0] for n in names}
                 for g in range(self.groups)]
        for k, lane in enumerate(self.lane):
            mine = local[k // GROUP]
            m.d.comb += [
                f.valid[k].eq(c.issue & h.valid[k] & c.take[k]),
                f.second[k].eq(c.in1 & ~c.before1[k]),
                f.start[k].eq(h.start[k] & f.valid[k]),
                f.end[k].eq(h.end[k] & f.valid[k]),
                lane.index_mask.eq(mine["index_mask"]), lane.bit_select.eq(mine["bit_select"]),
                lane.double.eq(mine["double_sampled"]), lane.per_feature.eq(mine["per_feature"]),
                lane.raw.eq(mine["raw"]),
                lane.fwd_valid.eq(valid1[k]), lane.fwd_slot.eq(slots[k]),
                lane.fwd_addr.eq(h.addr[k]),
                lane.buffer.eq(buffers[k]),
            ]
            if k % 4 == 0:
                m.d.comb += lane.raw_bits.eq(raw_bits([slots[k + i] for i in range(4)]))
        # Labels: the start lane's two levels (or raw word), with the levels.
        start2 = delay_line(m, f.start1, _LEVELS - 1, "start")
        labels = []
        for g in range(self.groups):
            group = range(g * GROUP, (g + 1) * GROUP)
            first = _or_words(Mux(start2[k], self.lane[k].first, 0) for k in group)
            second = _or_words(Mux(start2[k], self.lane[k].second, 0) for k in group)
            word = _or_words(Mux(start2[k], self.lane[k].f2, 0) for k in group if k % 4 == 0)
            label = Signal(signed(LABEL_WIDTH), name=f"label{g}")
            m.d.sync += label.eq(Mux(self.raw, word, first + second))
            labels.append(label)
        f.labels = labels
        return f

    # -- closing samples: residuals, the loss, the residual ring ----------------------------
    def _samples(self, m, seg, gens, f, c):
        p = self.params
        groups, units = self.groups, p.update_units
        products = _LAG + FORWARD_LATENCY       # from the decision to the lanes' products
        m.d.comb += seg.valid.eq(delay_line(m, c.issue1, products - 1, "issue"))
        starts = delay_line(m, f.start1, products - 1, "seg_start")
        ends = delay_line(m, f.end1, products - 1, "seg_end")
        for k, lane in enumerate(self.lane):
            m.d.comb += [seg.products[k].eq(lane.product), seg.starts[k].eq(starts[k]),
                         seg.ends[k].eq(ends[k])]
        for g in range(groups):
            m.d.comb += seg.labels[g].eq(f.labels[g])
        # Sample s (counted from the seed write, across epochs) takes residual generator
        # s mod R; the ring and the replay count samples of the epoch.
        closed = Signal(32)                  # samples closed this epoch
        drawn = Signal(max(1, (groups - 1).bit_length()))   # samples since the seed, mod R
        rlog = (groups - 1).bit_length()
        rank = 0
        steps = Signal(groups)
        ring_writes = []
        for g in range(groups):
            unit = m.submodules[f"sample{g}"] = SampleUnit(p.dot_width)
            s = Signal(32, name=f"s{g}")
            m.d.comb += s.eq(closed + rank)
            gen = (drawn + rank)[:rlog] if rlog else Const(0, 1)
            draw = _choose([gens.value[units + r] for r in range(groups)], gen)
            m.d.comb += [
                unit.valid.eq(seg.closed_valid[g]), unit.dot.eq(seg.closed[g]),
                unit.label.eq(seg.closed_label[g]), unit.rand.eq(draw[:RAND_BITS]),
                unit.raw.eq(self.raw), unit.forward_frac.eq(self.forward_frac),
                unit.step.eq(self.step), unit.residual_shift.eq(self.residual_shift),
                unit.rounding.eq(self.rounding),
            ]
            for r in range(groups):
                with m.If(seg.closed_valid[g] & (gen == r)):
                    m.d.comb += steps[r].eq(1)
            rank = rank + seg.closed_valid[g]
            ring_writes.append((unit, delay_line(m, s, SAMPLE_LATENCY, f"s{g}")))
        with m.If(self._begin["samples"]):
            m.d.sync += closed.eq(0)
        with m.Else():
            m.d.sync += closed.eq(closed + rank)
        with m.If(self.seed_load):
            m.d.sync += drawn.eq(0)
        with m.Else():
            m.d.sync += drawn.eq(drawn + rank)
        c.residual_steps = steps
        # The loss and the counts.  The units' terms are summed in a tree with a register per
        # level before the accumulator (the terms are never negative, so saturating the sum of
        # a cycle's terms is saturating them one by one; the epoch ends long after its last).
        loss = _sum_tree(m, [Mux(u.out_valid, u.loss, 0) for u, _ in ring_writes], "loss")
        acc = Signal(LOSS_ACC_WIDTH + 1)
        m.d.comb += acc.eq(self.loss_acc + loss)
        clips = popcount(Cat(*(u.out_valid & u.e_clipped for u, _ in ring_writes)))
        done = popcount(Cat(*(u.out_valid for u, _ in ring_writes)))
        lclip = Cat(*(u.out_valid & u.loss_clipped for u, _ in ring_writes)).any()
        with m.If(self._begin["samples"]):
            m.d.sync += [self.loss_acc.eq(0), self.loss_saturated.eq(0), self.samples.eq(0),
                         self.residual_saturations.eq(0)]
        with m.Else():
            m.d.sync += [self.loss_acc.eq(Mux(acc[-1], (1 << LOSS_ACC_WIDTH) - 1, acc)),
                         self.loss_saturated.eq(self.loss_saturated | acc[-1] | lclip),
                         self.samples.eq(self.samples + done),
                         self.residual_saturations.eq(self.residual_saturations + clips)]
        # The residual ring: bank s mod R, two read ports (samples S0 + i, i = 0..R).
        c.ring = []
        for b in range(groups):
            mem = memory.Memory(shape=signed(RESIDUAL_WIDTH), depth=RING_DEPTH, init=[],
                                attrs=_MARK)
            m.submodules[f"ring{b}"] = mem
            w = mem.write_port()
            c.ring.append((mem.read_port(), mem.read_port()))
            for unit, s in ring_writes:
                here = (s[:rlog] == b) if rlog else 1
                with m.If(unit.out_valid & here):
                    m.d.comb += [w.en.eq(1), w.addr.eq(s[rlog:]), w.data.eq(unit.e)]
        c.e_done = self.samples

    # -- replays: gradient terms into the partials --------------------------------------------
    def _replay(self, m, h, f, c):
        groups = self.groups
        aw = (self.params.lane_capacity - 1).bit_length()
        rlog = (groups - 1).bit_length()
        # Pass records (made a cycle after the issue from registers, written a cycle later):
        # the first sample count, the last sample, the groups with a start, the first batch's
        # parity, batches complete after it (``fb`` follows the decision a cycle late).
        start1 = delay_line(m, f.start1, _LAG - 1, "rec_start")
        issue1 = delay_line(m, c.issue1, _LAG - 1, "rec_issue")
        wp1 = delay_line(m, c.wp[:aw], _LAG, "rec_wp")
        last_pass = Signal()
        m.d.sync += last_pass.eq(c.whole & h.final)
        last_pass = delay_line(m, last_pass, _LAG - 1, "rec_last")
        fb, crossed = (delay_line(m, c.fb, _LAG - 1, "rec_fb"),
                       delay_line(m, c.crossed_r, _LAG - 1, "rec_crossed"))
        gstarts = Cat(*(start1[g * GROUP:(g + 1) * GROUP].any() for g in range(groups)))
        # The count of the pass's sample starts, registered in step with ``start1``: the tree
        # of adders and the 32-bit sums after it do not fit one cycle.
        assert _LAG >= 2
        valid_starts = Signal(range(len(start1) + 1), name="rec_count")
        m.d.sync += valid_starts.eq(popcount(delay_line(m, f.start1, _LAG - 2, "rec_early")))
        slast = Signal(32)
        m.d.comb += slast.eq(c.started + valid_starts - 1)
        done_batches = Mux(last_pass, self.batches, fb + crossed)
        record = Cat(c.started, slast, gstarts, fb[:1], done_batches)
        with m.If(issue1):
            m.d.sync += c.started.eq(c.started + valid_starts)
        record2 = delay_line(m, record, 1, "rec_data")
        issue1, wp1 = delay_line(m, issue1, 1, "rec_issue2"), delay_line(m, wp1, 1, "rec_wp2")
        # (The records' read never meets their write: a record is fetched once written.  The
        # replay memories' transparent read ports keep Yosys's default collision behaviour.)
        info = memory.Memory(shape=len(record), depth=self.params.lane_capacity, init=[])
        m.submodules.passes = info
        iw = info.write_port()
        ir = info.read_port()
        m.d.comb += [iw.en.eq(issue1), iw.addr.eq(wp1), iw.data.eq(record2)]
        # Per lane: the field's second level, address, validity and selects.  Written with
        # the lane's levels.
        wp2 = delay_line(m, c.wp[:aw], _LEVELS, "wp")
        issue2 = delay_line(m, c.issue1, _LEVELS - 1, "issue_r")
        # Per lane: a valid start in its group at or before it (from the registered starts).
        after = Signal(len(start1))
        for g in range(groups):
            seen = 0
            for k in range(g * GROUP, (g + 1) * GROUP):
                seen = seen | start1[k]
                m.d.comb += after[k].eq(seen)
        valid2, second2, after2 = (delay_line(m, f.valid1, _LEVELS - 1, "valid"),
                                   delay_line(m, f.second1, _LEVELS - 1, "second2"),
                                   delay_line(m, after, _LEVELS - _LAG, "after"))
        written = Signal(32)
        with m.If(self._begin["replay"]):
            m.d.sync += written.eq(0)
        with m.Elif(issue2):
            m.d.sync += written.eq(written + 1)
        # The window's sub-word t mod p (``sub_words``: 0 unless wrap < PARTIAL_REUSE), its
        # count stepped with the window's last pass, at the replay memories' write.
        window_end = delay_line(m, h.pop, _LEVELS, "window_end")
        sub = Signal(range(PARTIAL_REUSE))
        with m.If(self._begin["replay"]):
            m.d.sync += sub.eq(0)
        with m.Elif(window_end):
            m.d.sync += sub.eq(Mux(sub == c.last_sub, 0, sub + 1))
        sub_addr = Cat(Const(0, SUB_WORD_SHIFT), sub)
        # The records of the passes to replay, fetched ahead (a read, then a register) into a
        # queue, so that a replay is decided from registers: the queue's head is pass rp.
        fp = Signal(32)                        # the next record to fetch
        fetch = Signal()
        depth = 4
        queue = [Signal(len(record), name=f"record{i}") for i in range(depth)]
        full = Signal(depth)                   # entries held (a prefix of the queue)
        flight = Signal(range(3))              # fetched, not in the queue yet
        held = popcount(full)
        m.d.comb += [fetch.eq(c.running & (fp != written) & (held + flight <= depth - 1)),
                     ir.addr.eq(fp[:aw])]
        fetched = delay_line(m, fetch, 1, "fetched")
        landed = Signal(len(record))           # the record read two cycles ago, registered
        arrived = Signal()
        m.d.sync += [landed.eq(ir.data), arrived.eq(fetched)]
        head = queue[0]
        r_started, r_slast = head[:32], head[32:64]
        r_gstarts = head[64:64 + groups]
        r_fb = head[64 + groups:65 + groups]
        r_done = head[65 + groups:97 + groups]
        # Replay pass rp when its record is here and its last sample's residual is in the ring.
        replay = Signal()
        m.d.comb += replay.eq(c.running & full[0] & (c.e_done > r_slast))
        # The queue shifts on a replay; a record that arrives takes the first free entry
        # (``full`` is always a prefix: ones below the first free entry).
        kept = Mux(replay, full >> 1, full)
        for i in range(depth):
            now = Mux(replay, queue[i + 1], queue[i]) if i + 1 < depth else queue[i]
            lands = arrived & ~kept[i] & (kept[i - 1] if i else 1)
            m.d.sync += queue[i].eq(Mux(lands, landed, now))
        m.d.sync += full.eq(Mux(arrived, ((kept << 1) | 1)[:depth], kept))
        m.d.sync += flight.eq(flight + fetch - arrived)
        with m.If(fetch):
            m.d.sync += fp.eq(fp + 1)
        with m.If(replay):
            m.d.sync += [c.rp.eq(c.rp + 1), c.s_replayed.eq(r_started)]
        with m.If(self._begin["replay"]):
            m.d.sync += [fp.eq(0), full.eq(0), flight.eq(0), arrived.eq(0)]
        done_later = delay_line(m, Mux(replay, r_done, 0), _REPLAY_LATENCY, "done")
        with m.If(done_later > c.grad_done):
            m.d.sync += c.grad_done.eq(done_later)
        # Residuals of samples S0 + i (S0 = r_started - 1), read from the ring, chosen into
        # registers a cycle later: with the replay memories' words, two cycles after it.
        s0 = Signal(32)
        m.d.comb += s0.eq(r_started - 1)
        for b, (ra, rb) in enumerate(c.ring):
            # Port A: the i < R with (S0 + i) mod R = b; port B: i = R (bank S0 mod R).
            ia = (b - s0[:rlog])[:rlog] if rlog else 0
            m.d.comb += [ra.addr.eq((s0 + ia)[rlog:]), rb.addr.eq((s0 + groups)[rlog:])]
        values = []
        s0_1 = delay_line(m, s0[:rlog] if rlog else Const(0, 1), 1, "s0")
        for i in range(groups + 1):
            if i < groups:
                bank = (s0_1 + i)[:rlog] if rlog else 0
                values.append(_choose([ra.data for ra, _ in c.ring], bank))
            else:
                values.append(_choose([rb.data for _, rb in c.ring], s0_1))
        # Group g's samples: S0 + (starts in groups < g), and the next one after its start.
        gst = delay_line(m, r_gstarts, 1, "gstarts")
        fb2 = delay_line(m, r_fb, 2, "fb")
        rep2 = delay_line(m, replay, 2, "replay")
        bank_a, bank_b = fb2[0], ~fb2[0]
        rank = 0
        for g in range(groups):
            e_lo = Signal(signed(RESIDUAL_WIDTH), name=f"e_lo{g}")
            e_hi = Signal(signed(RESIDUAL_WIDTH), name=f"e_hi{g}")
            m.d.sync += [e_lo.eq(_choose(values, rank) if g else values[0]),
                         e_hi.eq(_choose(values, rank + 1) if g else values[1])]
            for k in range(g * GROUP, (g + 1) * GROUP):
                lane = self.lane[k]
                mem = memory.Memory(shape=len(lane.f2) + aw + 3,
                                    depth=self.params.lane_capacity, init=[])
                m.submodules[f"replay{k}"] = mem
                w = mem.write_port()
                r = mem.read_port(transparent_for=(w,))
                # (``f2_addr`` is the lane's ``fwd_addr`` _LEVELS - _LAG cycles on, with ``f2``.)
                m.d.comb += [w.en.eq(issue2), w.addr.eq(wp2),
                             w.data.eq(Cat(lane.f2, (lane.f2_addr | sub_addr)[:aw],
                                           valid2[k], second2[k], after2[k])),
                             r.addr.eq(c.rp[:aw])]
                word = delay_line(m, r.data, 1, f"replayed{k}")
                fw = len(lane.f2)
                f2, addr = word[:fw], word[fw:fw + aw]
                valid, second, after = word[fw + aw], word[fw + aw + 1], word[fw + aw + 2]
                m.d.comb += [lane.bwd_valid.eq(rep2 & valid), lane.bwd_second.eq(f2),
                             lane.bwd_addr.eq(addr), lane.bwd_e.eq(Mux(after, e_hi, e_lo)),
                             lane.bwd_bank.eq(Mux(second, bank_b, bank_a))]
            rank = rank + gst[g]

    # -- updates: refresh at the start, then each batch when its gradient is complete --------
    def _updates(self, m, upd, gens, c):
        p = self.params
        units = p.update_units
        for k, lane in enumerate(self.lane):
            m.d.comb += [lane.upd_addr.eq(upd.upd_addr), lane.upd_bank.eq(upd.upd_bank),
                         lane.upd_both.eq(upd.upd_both), lane.upd_enable.eq(upd.upd_enable[k]),
                         upd.partials[k].eq(lane.partial),
                         lane.xf_we.eq(upd.xf_we[k]), lane.xf_addr.eq(upd.xf_addr),
                         lane.xf_data.eq(upd.xf_data[k % units])]
        for name in ("n_features", "g_log2", "wrap", "update_shift", "forward_shift",
                     "model_width", "rounding", "decay", "threshold", "raw"):
            m.d.comb += getattr(upd, name).eq(getattr(self, name))
        m.d.comb += upd.last_sub.eq(c.last_sub)
        launched = Signal()
        begin = self._begin["updater"]
        m.d.comb += upd.clear.eq(begin)
        with m.If(begin):
            m.d.sync += launched.eq(0)
        # The updater's start and its pass's settings are registers (its ``busy`` follows a
        # cycle later, so nothing waits on it while ``start`` is pending).
        start, refresh, bank, buffer = Signal(), Signal(), Signal(), Signal()
        m.d.comb += [upd.start.eq(start), upd.refresh.eq(refresh), upd.bank.eq(bank),
                     upd.buffer.eq(buffer)]
        m.d.sync += start.eq(0)
        with m.If(c.refreshing & ~launched & ~upd.busy):
            m.d.sync += [start.eq(1), refresh.eq(1), buffer.eq(0), launched.eq(1)]
        with m.If(c.refreshing & launched & ~upd.busy & ~start):
            m.d.sync += c.refreshing.eq(0)
        # The comparisons are registers, a cycle late: an update may start once ``ub`` has
        # held still for a cycle (``settled``), and a late ``grad_done`` only delays it.
        updating, settled = Signal(), Signal()
        more, have = Signal(), Signal()
        m.d.sync += [more.eq(c.ub < self.batches), have.eq(c.grad_done > c.ub),
                     settled.eq(~updating)]
        go = c.running & ~c.refreshing & ~updating & settled & ~upd.busy & more & have
        with m.If(go):
            m.d.sync += [start.eq(1), refresh.eq(0), bank.eq(c.ub[0]), buffer.eq(~c.ub[0]),
                         updating.eq(1)]
        with m.If(updating & ~upd.busy & ~start):
            m.d.sync += [updating.eq(0), c.ub.eq(c.ub + 1), c.version.eq(c.ub + 1)]
            m.d.comb += c.version_up.eq(1)
        m.d.comb += [self.updates.eq(c.ub), self.model_saturations.eq(upd.model_saturations),
                     self.forward_saturations.eq(upd.forward_saturations)]
        # Generators: the seed load, then one step of each (its first output is ready).
        prime = Signal()
        m.d.sync += prime.eq(self.seed_load)
        m.d.comb += [gens.seed.eq(self.seed), gens.load.eq(self.seed_load),
                     gens.step.eq(Mux(prime, (1 << (units + self.groups)) - 1,
                                      Cat(upd.gen_step, c.residual_steps)))]
        m.d.comb += [upd.gen_value[u].eq(gens.value[u]) for u in range(units)]

    # -- the host's ports ----------------------------------------------------------------
    def _host(self, m, upd):
        m.d.comb += [upd.host_we.eq(self.model_we & ~self.busy), upd.host_addr.eq(self.model_addr),
                     upd.host_wdata.eq(self.model_wdata), self.model_rdata.eq(upd.host_rdata)]
        # The level writes: the port into registers, then each lane's write into registers
        # (a copy per group of lanes), which the lanes register again beside their tables.
        # (The settings it reads, and the lane-class mask, are registers beside it.)
        per_feature, g_log2 = (replicas(m, f"{n}_host", getattr(self, n), 1)[0]
                               for n in ("per_feature", "g_log2"))
        g_mask = Signal(8, name="level_g_mask")
        m.d.sync += g_mask.eq((Const(1, 8) << self.g_log2) - 1)
        we, feature_in = Signal(name="level_we_r"), Signal.like(self.level_feature)
        index, wdata = Signal.like(self.level_index), Signal.like(self.level_data)
        cls = Signal(8, name="level_class")
        m.d.sync += [we.eq(self.level_we & ~self.busy), feature_in.eq(self.level_feature),
                     index.eq(self.level_index), wdata.eq(self.level_data),
                     cls.eq(self.level_feature & g_mask)]
        feature = feature_in >> g_log2
        addr = Mux(per_feature, Cat(feature[:7], index[:4]), index)
        lane_we = Signal(len(self.lane), name="level_lane_we")
        copies = [(replicas(m, f"level_addr{g}", addr, 1)[0],
                   replicas(m, f"level_data{g}", wdata, 1)[0]) for g in range(self.groups)]
        for k, lane in enumerate(self.lane):
            mine = ~per_feature | ((k & g_mask) == cls)
            m.d.sync += lane_we[k].eq(we & mine)
            group_addr, group_data = copies[k // GROUP]
            m.d.comb += [lane.cb_we.eq(lane_we[k]), lane.cb_addr.eq(group_addr),
                         lane.cb_data.eq(group_data)]


class _Bag:
    """Signals shared by the core's parts."""


def _prefix_or(bits: Value) -> Value:
    """Bit ``k``: the OR of ``bits[0..k]``, in ``log2(len(bits))`` levels (Kogge-Stone)."""
    out = [bits[k] for k in range(len(bits))]
    d = 1
    while d < len(out):
        out = [out[k] | out[k - d] if k >= d else out[k] for k in range(len(out))]
        d <<= 1
    return Cat(*out)


def _sum_tree(m, values, name):
    """The sum of ``values`` (never negative), a register after each level of adders."""
    level = 0
    while len(values) > 1:
        pairs = []
        for i in range(0, len(values), 2):
            total = values[i] + values[i + 1] if i + 1 < len(values) else values[i]
            reg = Signal(len(Value.cast(total)), name=f"{name}{level}_{i // 2}")
            m.d.sync += reg.eq(total)
            pairs.append(reg)
        values, level = pairs, level + 1
    return values[0]


def _or_words(values):
    """Bitwise OR of words (each a word or 0: a one-hot choice)."""
    out = 0
    for v in values:
        out = out | v
    return out


def _choose(values, index):
    """``values[index]``, ``index`` below ``len(values)``."""
    return Array(values)[index]
