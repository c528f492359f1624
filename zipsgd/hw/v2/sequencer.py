"""The window sequencer: for every window, each lane's feature address, sample start and
validity (dense mode, ``docs/HARDWARE.md``, "Engine v2: stream-order lanes").

Lane ``k`` holds the features ``j = k (mod g)`` (``g = 2**g_log2`` divides ``n + 1`` and
``L``) at address ``j >> g_log2``.  Window ``t`` puts position ``p = tL + k`` on lane ``k``:
feature ``j = p mod (n + 1)``.  From one window to the next ``j`` grows by
``L mod (n + 1)`` and wraps once at most, so each lane keeps its address and adds a constant.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..arith import REPLICA_ATTRIBUTE

__all__ = ["WindowSequencer", "sequence_reference"]


def sequence_reference(window: int, lanes: int, fields: int, g_log2: int, total: int,
                       raw: bool = False):
    """(address, start, end, valid) of every lane in ``window``: the sequencer's definition.

    In ``raw`` mode only every fourth lane holds a field (a raw32 word, its four 8-bit chunks
    on lanes ``4m .. 4m+3``): lane ``4m`` is position ``window * lanes / 4 + m``; the other
    lanes are never valid and never start or end a sample."""
    out = []
    per = lanes // 4 if raw else lanes
    for k in range(lanes):
        if raw and k % 4:
            out.append((0, 0, 0, 0))
            continue
        p = window * per + (k // 4 if raw else k)
        j = p % fields
        out.append((j >> g_log2, int(j == 0), int(j == fields - 1), int(p < total)))
    return out


class WindowSequencer(wiring.Component):
    """Per-lane addresses of the window on the output; ``advance`` moves to the next window.

    Settings (held while a stream runs): ``step`` = ``(P mod (n+1)) >> g_log2`` with ``P``
    the positions of a window (``L``, or ``L/4`` in ``raw`` mode), ``wrap`` =
    ``(n+1) >> g_log2``, ``g_log2``, ``raw``, ``last_window`` and ``last_valid`` (positions
    valid in the final window, 1..P).  ``restart`` loads window 0; its addresses are ready
    ``L`` cycles later (``ready``).  ``end[k]``: lane ``k`` holds a sample's last field (the
    next position starts one).
    """

    def __init__(self, lanes: int, addr_width: int, window_width: int = 32):
        self.lanes = lanes
        self.addr_width = addr_width
        lw = (lanes - 1).bit_length()
        super().__init__({
            "restart": In(1), "advance": In(1),
            "step": In(addr_width + 1), "wrap": In(addr_width + 1), "g_log2": In(3), "raw": In(1),
            "last_window": In(window_width), "last_valid": In(lw + 1),
            "ready": Out(1), "final": Out(1),
            "addr": Out(addr_width).array(lanes),
            "start": Out(1).array(lanes),
            "end": Out(1).array(lanes),
            "valid": Out(1).array(lanes),
        })
        self._window_width = window_width

    def elaborate(self, platform):
        m = Module()
        lanes, aw = self.lanes, self.addr_width
        window_next = Signal(self._window_width)       # the window's number + 1
        settle = Signal(range(lanes + 1))
        ready = Signal()
        m.d.comb += self.ready.eq(ready)
        final = Signal()
        m.d.comb += self.final.eq(final)
        move = Signal()
        m.d.comb += move.eq(~ready | self.advance)
        # Each group of eight lanes has its own registered copy of the constants its adders
        # and zero tests use (one register would fan out to every lane): ready, a + step and
        # a + step - wrap (its sign says whether the address wraps), and the next address is
        # 0 when a + step is wrap (or 0, with step 0); while settling, a - wrap until below
        # wrap, and 0 when a is wrap or 0.  Made from ``ready``'s next value, so never late.
        ready_next = Signal()
        m.d.comb += ready_next.eq(~self.restart & (ready | (settle == lanes - 1)))
        copies = lanes // 8 + 1
        consts = []
        for c in range(copies):
            inc = Signal(aw + 1, name=f"inc_dup{c}", attrs={REPLICA_ATTRIBUTE: 1})
            dec = Signal(signed(aw + 2), name=f"dec_dup{c}", attrs={REPLICA_ATTRIBUTE: 1})
            to_zero = Signal(aw + 1, name=f"to_zero_dup{c}", attrs={REPLICA_ATTRIBUTE: 1})
            at_zero = Signal(name=f"at_zero_dup{c}", attrs={REPLICA_ATTRIBUTE: 1})
            m.d.sync += [inc.eq(Mux(ready_next, self.step, 0)),
                         dec.eq(Mux(ready_next, self.step - self.wrap, -self.wrap)),
                         to_zero.eq(Mux(ready_next, self.wrap - self.step, self.wrap)),
                         at_zero.eq(Mux(ready_next, self.step == 0, 1))]
            consts.append((inc, dec, to_zero, at_zero))
        # Lanes 0..L-1, and lane L (the next window's lane 0, for the last lane's ``end``).
        # Each keeps its address and whether it is 0, both registered.
        zero = []
        for k in range(lanes + 1):
            inc, dec, to_zero, at_zero = consts[min(k // 8, copies - 1)]
            a = Signal(aw + 1, name=f"a{k}")
            z = Signal(name=f"z{k}")
            ahead = Signal(aw + 2, name=f"ahead{k}")
            wrapped = Signal(signed(aw + 3), name=f"wrapped{k}")
            m.d.comb += [ahead.eq(a + inc), wrapped.eq(a + dec)]
            nxt = Signal(aw + 1, name=f"next{k}")
            m.d.comb += nxt.eq(Mux(wrapped[-1], ahead, wrapped[:aw + 1]))
            next_zero = (a == to_zero) | ((a == 0) & at_zero)
            position = Mux(self.raw, k // 4, k)          # the lane's position in the window
            first = Signal(aw + 1, name=f"first{k}")
            m.d.comb += first.eq(position >> self.g_log2)
            with m.If(self.restart):
                m.d.sync += [a.eq(first), z.eq(first == 0)]
            with m.Elif(move):
                m.d.sync += [a.eq(nxt), z.eq(next_zero)]
            zero.append(z)
            if k == lanes:
                break
            cls = position & ((1 << self.g_log2) - 1)
            used = 1 if k % 4 == 0 else ~self.raw
            m.d.comb += [self.addr[k].eq(a), self.start[k].eq(z & (cls == 0) & used),
                         self.valid[k].eq((~final | (position < self.last_valid)) & used)]
        # Lane L is position L (L/4 raw), a multiple of g: its zero starts the next window.
        next_start = zero[lanes]
        for k in range(lanes):
            quant_end = self.start[k + 1] if k + 1 < lanes else next_start
            if k % 4:
                m.d.comb += self.end[k].eq(~self.raw & quant_end)
            else:
                raw_end = self.start[k + 4] if k + 4 < lanes else next_start
                m.d.comb += self.end[k].eq(Mux(self.raw, raw_end, quant_end))
        with m.If(self.restart):
            m.d.sync += [settle.eq(0), window_next.eq(1),
                         final.eq(self.last_window == 0)]
        with m.Elif(~ready):
            m.d.sync += settle.eq(settle + 1)
        with m.Elif(self.advance):
            m.d.sync += [window_next.eq(window_next + 1),
                         final.eq(window_next == self.last_window)]
        m.d.sync += ready.eq(ready_next)
        return m
