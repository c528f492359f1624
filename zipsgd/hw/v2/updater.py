"""The update pass of engine v2: a batch's gradient from the lanes' partial memories, the model
words through ``U`` update units, the new forward operands back to the lanes.

Lane ``k`` holds the features ``j = k (mod g)`` at address ``j >> log2(g)`` (``g = 2**g_log2``,
``docs/HARDWARE.md``, "Engine v2").  The pass reads one address ``a`` of every lane per cycle;
the fold tree adds the lanes of each class ``k mod U``.  With ``g >= U`` (*wide*) a cycle
updates ``U`` features ``j = a g + q U + u`` (unit ``u``), the lanes whose class ``k mod g`` is
not ``q U + u`` reading as 0, and ``q`` runs over ``g / U`` cycles per address; with ``g < U``
(*narrow*) unit 0 updates one feature ``j = a g + q`` per cycle from the sum of every lane.
Feature ``j`` is model word ``m = j - 1``; ``j = 0`` (the label) has the forward operand 0, so
its lanes add nothing to a dot product.  The model memory is ``U`` banks, ``j`` in bank
``j mod U`` at ``j // U``.

Random bits: model word ``m`` takes the next output of update generator ``m mod U`` (the
generators step when used, in order of ``m``); after the last word the generators that an
update of ``ceil(n / U)`` rounds steps more often are stepped once (``docs/ENGINE.md``).

A *refresh* pass computes every forward operand from the model as it is (gradient, decay and
threshold 0, no draws, no counts, no model writes): at the start of an epoch.
"""

from __future__ import annotations

import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from zipsgd.spec.engine import DECAY_WIDTH, MODEL_STORAGE_WIDTH
from zipsgd.spec.engine2 import (
    FORWARD_WIDTH,
    PARTIAL_REUSE,
    PARTIAL_WIDTH,
    SUB_WORD_SHIFT,
    EngineParams2,
)

from ..arith import any_of, delay_line, popcount
from ..core import UNUSED_COLLISION_ATTRIBUTE
from .lane import PARTIAL_LATENCY
from .trees import FoldTree
from .update import LATENCY as UNIT_LATENCY
from .update import UpdateUnit

__all__ = ["Updater", "lane_classes", "MODEL_READ_LATENCY"]

_MARK = {UNUSED_COLLISION_ATTRIBUTE: 1}
#: Cycles from a model read's address to its word: the address into each piece's own
#: register (beside its block RAM), the read into a flip-flop (0 unless its piece is the one
#: read), then two levels of ORs of four pieces.
_READ_LATENCY = 5
#: Cycles from ``host_addr`` to that word on ``host_rdata`` (the address is registered first).
MODEL_READ_LATENCY = _READ_LATENCY + 1
#: Model words a piece of a bank holds: one DP16KD (512 x 36).
_PIECE_BITS = 9
_PIECE = 1 << _PIECE_BITS


def lane_classes(m, lanes: int, units: int, g_log2, raw, wide, name: str):
    """A function of ``q``: ``L`` enables, lane ``k``'s class (its position mod ``g``; raw32
    words sit on every fourth lane) is one of this cycle's (``q``).  Each lane's class is a
    register (settings hold while busy), so an enable is one equality with ``q``."""
    shift = (units - 1).bit_length()
    classes = []
    for k in range(lanes):
        cls = Mux(raw, k // 4, k) & ((Const(1, 16) << g_log2) - 1)
        reg = Signal(range(lanes), name=f"{name}{k}")
        m.d.sync += reg.eq(Mux(wide, cls >> shift, cls))
        classes.append(reg)

    def enables(q):
        return Cat(*(cls == q for cls in classes))

    return enables


class Updater(wiring.Component):
    """The update pass (``start`` with ``refresh``, ``bank``, ``buffer``; ``busy`` until its
    last write).  Settings are held while busy."""

    def __init__(self, params: EngineParams2):
        self.params = params
        lanes, units = params.lanes, params.update_units
        self.capacity = params.lane_capacity
        aw = (self.capacity - 1).bit_length()
        self.bank_depth = -(-(params.max_features + 1) // units)
        mw = (params.max_features - 1).bit_length() + 1
        super().__init__({
            # Settings.
            "n_features": In(mw), "g_log2": In(6), "wrap": In(aw + 1), "raw": In(1),
            "last_sub": In(range(PARTIAL_REUSE)),
            "update_shift": In(6), "forward_shift": In(5), "model_width": In(6),
            "rounding": In(2), "decay": In(DECAY_WIDTH), "threshold": In(31),
            # Control.
            "start": In(1), "refresh": In(1), "bank": In(1), "buffer": In(1),
            "busy": Out(1),
            # The lanes.
            "upd_addr": Out(aw), "upd_bank": Out(1), "upd_both": Out(1),
            "upd_enable": Out(lanes),
            "partials": In(signed(PARTIAL_WIDTH)).array(lanes),
            "xf_we": Out(lanes), "xf_addr": Out(aw + 1),
            "xf_data": Out(signed(FORWARD_WIDTH)).array(units),
            # The update generators (the engine's bank): outputs, and a step per generator.
            "gen_value": In(32).array(units), "gen_step": Out(units),
            # The host's port to the model (while idle): word ``m``.
            "host_we": In(1), "host_addr": In(mw), "host_wdata": In(signed(MODEL_STORAGE_WIDTH)),
            "host_rdata": Out(signed(MODEL_STORAGE_WIDTH)),
            # Counts (cleared by ``clear``).
            "clear": In(1), "model_saturations": Out(32), "forward_saturations": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        lanes, units = p.lanes, p.update_units
        ushift = (units - 1).bit_length()
        jw = len(self.n_features) + 1
        # Settings' arithmetic is registered (settings hold while busy; ``start`` comes at
        # least a cycle after they are written).
        g = Signal(range(lanes + 1))
        wide = Signal()
        subs = Signal(range(lanes + 1))           # cycles per address
        last_a = Signal.like(self.wrap)
        m.d.sync += [g.eq(Const(1, 7) << self.g_log2), last_a.eq(self.wrap - 1)]
        # Raw32 words sit on every fourth lane, all in one fold class: one feature per cycle.
        wide_now = (self.g_log2 >= ushift) & ~self.raw
        m.d.sync += wide.eq(wide_now)
        m.d.comb += subs.eq(Mux(wide, g >> ushift, g))
        per = Mux(wide, units, 1)                 # features per cycle

        # -- issue: (a, q, s) and the first feature j0 = a g + q * per ----------------------
        # ``s`` runs over a feature's sub-words (``last_sub`` 0 unless wrap < PARTIAL_REUSE),
        # at address a + (s << SUB_WORD_SHIFT): the units sum them before their update.
        issuing, a, q, j0 = Signal(), Signal.like(self.upd_addr), Signal(range(lanes + 1)), \
            Signal(jw)
        sub = Signal(range(PARTIAL_REUSE))
        last_s = Signal()
        m.d.comb += last_s.eq(sub == self.last_sub)
        draining = Signal(range(64))
        pad = Signal()
        refresh, bank, buffer = Signal(), Signal(), Signal()
        busy = Signal()
        # A refresh clears both partial memories (the update clears each word it reads).
        lane_class = lane_classes(m, lanes, units, self.g_log2, self.raw, wide_now, "lane_class")
        classes = lane_class(q)
        sub_addr = Cat(Const(0, SUB_WORD_SHIFT), sub)
        m.d.comb += [self.busy.eq(busy), self.upd_addr.eq((a | sub_addr)[:len(a)]),
                     self.upd_bank.eq(bank), self.upd_both.eq(refresh),
                     self.upd_enable.eq(Mux(issuing, classes, 0))]
        with m.If(self.start & ~busy):
            m.d.sync += [issuing.eq(1), busy.eq(1), a.eq(0), q.eq(0), j0.eq(0), sub.eq(0),
                         refresh.eq(self.refresh), bank.eq(self.bank), buffer.eq(self.buffer)]
        with m.Elif(issuing):
            m.d.sync += sub.eq(Mux(last_s, 0, sub + 1))
            with m.If(last_s):
                last_q = q + 1 == subs
                m.d.sync += [j0.eq(j0 + per), q.eq(Mux(last_q, 0, q + 1))]
                with m.If(last_q):
                    m.d.sync += a.eq(a + 1)
                    with m.If(a == last_a):
                        m.d.sync += [issuing.eq(0), pad.eq(~refresh)]
        with m.If(pad):
            m.d.sync += pad.eq(0)
        tail = PARTIAL_LATENCY + (lanes - 1).bit_length() + 1 + UNIT_LATENCY + 2
        with m.If(issuing | pad):
            m.d.sync += draining.eq(tail)
        with m.Elif(draining != 0):
            m.d.sync += draining.eq(draining - 1)
        with m.If(busy & ~issuing & ~pad & (draining == 1)):
            m.d.sync += busy.eq(0)

        # -- the sums: partials PARTIAL_LATENCY cycles after the address, then the fold tree --
        m.submodules.fold = fold = FoldTree(lanes, units, PARTIAL_WIDTH)
        m.d.comb += [fold.partials[k].eq(self.partials[k]) for k in range(lanes)]
        select = PARTIAL_LATENCY + fold.latency   # cycles from issue to the fold tree's sums
        stage = select + 1                        # ... and to the units' input registers

        in_j0 = delay_line(m, j0, stage, "j0")
        # The model words, read _READ_LATENCY cycles ahead of the sums: each bank is pieces
        # of one block RAM's depth, each read into its own flip-flops, then two levels of
        # ORs (no look-up after a block RAM).
        read_j0 = delay_line(m, j0, select - _READ_LATENCY, "read_j0")
        # The host's word m is feature j = m + 1: registered, with its write.
        host_j, host_we = Signal(jw), Signal()
        host_wdata = Signal.like(self.host_wdata)
        m.d.sync += [host_j.eq(self.host_addr + 1), host_we.eq(self.host_we),
                     host_wdata.eq(self.host_wdata)]
        # Wide: unit b's feature is j0 + b, in bank b at j0 / U; narrow: j0 in its bank.
        read_addr = Signal(jw)
        m.d.comb += read_addr.eq(Mux(busy, read_j0 >> ushift, host_j >> ushift))
        banks, read = [], []
        pieces = -(-self.bank_depth // _PIECE)
        for b in range(units):
            ports = []
            # (The piece's choice, two cycles after the address, beside the read.)
            piece = delay_line(m, read_addr[_PIECE_BITS:], 2, f"read_piece{b}")
            for i in range(pieces):
                mem = memory.Memory(shape=signed(MODEL_STORAGE_WIDTH), depth=_PIECE, init=[],
                                    attrs=_MARK)
                m.submodules[f"model{b}_{i}"] = mem
                r, w = mem.read_port(), mem.write_port()
                # (Each piece's address and write from its own registers, beside it.)
                m.d.comb += r.addr.eq(delay_line(m, read_addr[:_PIECE_BITS], 1,
                                                 f"read_addr{b}_{i}"))
                # The word, or 0 unless its piece is the one read: the flip-flops' reset.
                word = Signal(signed(MODEL_STORAGE_WIDTH), name=f"model_word{b}_{i}")
                m.d.sync += word.eq(Mux(piece == i, r.data, 0))
                ports.append((r, w, word))
            # Then an OR of up to four pieces per register, twice (more than 16 pieces, in
            # simulation builds larger than an 85F holds: wider ORs, the same two levels).
            words = [x for _, _, x in ports]
            fan = max(4, math.isqrt(len(words) - 1) + 1)
            for level in range(2):
                words = [_or_register(m, words[i:i + fan], f"model_or{b}_{level}_{i // fan}")
                         for i in range(0, len(words), fan)]
            assert len(words) == 1
            banks.append(ports)
            read.append(words[0])
        host_bank = delay_line(m, host_j[:ushift] if ushift else Const(0, 1),
                               _READ_LATENCY, "host_bank")
        m.d.comb += self.host_rdata.eq(_choose(read, host_bank))

        # -- the units ---------------------------------------------------------------------
        # Each unit's feature j = j0 + u, whether it is one to update, the label, and its
        # generator are decided at issue and travel with it; the gradient, word and random
        # bits are chosen into the unit's input registers.
        gw = p.gradient_width
        outs = []
        step_bits = Signal(units)
        sel_bank = delay_line(m, j0[:ushift] if ushift else Const(0, 1), select, "sel_bank")
        for u in range(units):
            unit = m.submodules[f"unit{u}"] = UpdateUnit(gw)
            j = Signal(jw, name=f"j{u}")
            m.d.comb += j.eq(j0 + u)
            flags = Signal(3 + max(1, ushift), name=f"flags{u}")
            # Model word m = j - 1 takes generator (j - 1) mod U; a feature is updated with
            # its last sub-word.
            m.d.sync += flags.eq(Cat(issuing & last_s & Mux(wide, 1, u == 0)
                                     & (j <= self.n_features),
                                     j == 0, sub == 0,
                                     (j - 1)[:ushift] if ushift else Const(0, 1)))
            late = delay_line(m, flags, select - 1, f"unit_flags{u}")   # (beside the sums)
            active, label, first = late[0], late[1], late[2]
            gen = late[3:3 + max(1, ushift)]
            draw = active & ~label & ~refresh
            for i in range(units):
                with m.If(draw & (gen == i)):
                    m.d.comb += step_bits[i].eq(1)
            gradient = Mux(wide, fold.sums[u], fold.total)
            word = Mux(wide, read[u], _choose(read, sel_bank))
            in_gradient = Signal(signed(gw), name=f"in_gradient{u}")
            in_word = Signal(signed(MODEL_STORAGE_WIDTH), name=f"in_word{u}")
            in_rand = Signal(32, name=f"in_rand{u}")
            in_active = Signal(name=f"in_active{u}")
            # (The sum of the feature's sub-words so far: only the last one's is used.)
            so_far = Mux(first, 0, in_gradient)
            m.d.sync += [in_gradient.eq(Mux(label | refresh, 0, so_far + gradient[:gw])),
                         in_word.eq(word), in_rand.eq(_choose(list(self.gen_value), gen)),
                         in_active.eq(active)]
            m.d.comb += [
                unit.valid.eq(in_active),
                unit.gradient.eq(in_gradient), unit.word.eq(in_word), unit.rand.eq(in_rand),
                unit.update_shift.eq(self.update_shift), unit.forward_shift.eq(self.forward_shift),
                unit.model_width.eq(self.model_width), unit.rounding.eq(self.rounding),
                unit.decay.eq(Mux(refresh, 0, self.decay)),
                unit.threshold.eq(Mux(refresh, 0, self.threshold)),
            ]
            outs.append((unit, delay_line(m, in_j0 + u, UNIT_LATENCY, f"out_j{u}")))
        # After the last word: the generators whose last round had no word step once.
        # Generator i pads when 0 < n mod U <= i (equalities: no comparison is constant).
        n_mod = self.n_features[:ushift] if ushift else Const(0, 1)
        pad_bits = Cat(*(any_of(n_mod == c for c in range(1, i + 1)) for i in range(units)))
        # (In the cycle after the last word's draw: the pad travels with the issue pipeline.)
        pad_late = delay_line(m, pad, select, "pad")
        m.d.comb += self.gen_step.eq(step_bits | Mux(pad_late, pad_bits, 0))

        # -- writes: the model (not in a refresh) and the forward operands ------------------
        out_q = delay_line(m, q, stage + UNIT_LATENCY, "out_q")
        out_a = delay_line(m, a, stage + UNIT_LATENCY, "out_a")
        # Every issued feature's forward operand is written, a padding feature's (``j > n``,
        # never updated: its unit is idle) as 0, so its products add nothing.
        out_issued = delay_line(m, issuing & last_s, stage + UNIT_LATENCY, "out_issued")
        out_valid = outs[0][0].out_valid
        m.d.comb += [self.xf_addr.eq(Cat(out_a, buffer)),
                     self.xf_we.eq(Mux(out_issued, lane_class(out_q), 0))]
        for u, (unit, _) in enumerate(outs):
            m.d.comb += self.xf_data[u].eq(Mux(wide, unit.forward, outs[0][0].forward))
        out_j0 = outs[0][1]
        for b, ports in enumerate(banks):
            unit, j = outs[b]
            here = (out_j0[:ushift] == b) if ushift else 1
            enable = Mux(busy, ~refresh & Mux(wide, unit.out_valid, out_valid & here),
                         host_we & ((host_j[:ushift] == b) if ushift else 1))
            addr = Mux(busy, Mux(wide, j >> ushift, out_j0 >> ushift), host_j >> ushift)
            data = Mux(busy, Mux(wide, unit.new_word, outs[0][0].new_word), host_wdata)
            for i, (_, w, _) in enumerate(ports):
                port = delay_line(m, Cat(enable & (addr[_PIECE_BITS:] == i),
                                         addr[:_PIECE_BITS], data), 1, f"write{b}_{i}")
                m.d.comb += [w.en.eq(port[0]), w.addr.eq(port[1:1 + _PIECE_BITS]),
                             w.data.eq(port[1 + _PIECE_BITS:])]
        # Counts: a word that saturated (not in a refresh; the label word never does).
        mclips = Cat(*(unit.out_valid & unit.model_clipped for unit, _ in outs))
        fclips = Cat(*(unit.out_valid & unit.forward_clipped for unit, _ in outs))
        with m.If(self.clear):
            m.d.sync += [self.model_saturations.eq(0), self.forward_saturations.eq(0)]
        with m.Elif(~refresh):
            m.d.sync += [self.model_saturations.eq(self.model_saturations + popcount(mclips)),
                         self.forward_saturations.eq(self.forward_saturations
                                                     + popcount(fclips))]
        return m


def _or_register(m, values, name: str) -> Signal:
    """The OR of ``values`` (at most one nonzero) into a register."""
    out = Signal.like(values[0], name=name)
    value = values[0]
    for v in values[1:]:
        value = value | v
    m.d.sync += out.eq(value)
    return out


def _choose(values, index):
    """``values[index]`` (no choice for one value)."""
    return values[0] if len(values) == 1 else Array(values)[index]
