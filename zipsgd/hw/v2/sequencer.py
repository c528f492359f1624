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
        window = Signal(self._window_width)
        settle = Signal(range(lanes + 1))
        m.d.comb += self.ready.eq(settle == lanes)
        final = Signal()
        m.d.comb += [final.eq(window == self.last_window), self.final.eq(final)]
        # One pair of adders per lane: a + step, and a + step - wrap (its sign is the wrap).
        back = Signal(signed(aw + 2))
        m.d.comb += back.eq(self.step - self.wrap)
        for k in range(lanes):
            raw_lane = k % 4 == 0
            a = Signal(aw + 1, name=f"a{k}")
            ahead = Signal(aw + 2, name=f"ahead{k}")
            wrapped = Signal(signed(aw + 3), name=f"wrapped{k}")
            m.d.comb += [ahead.eq(a + Mux(self.ready, self.step, 0)),
                         wrapped.eq(a + Mux(self.ready, back, -self.wrap))]
            nxt = Mux(wrapped[-1], ahead, wrapped[:aw + 1])
            position = Mux(self.raw, k // 4, k)          # the lane's position in the window
            with m.If(self.restart):
                m.d.sync += a.eq(position >> self.g_log2)
            with m.Elif(~self.ready | self.advance):
                m.d.sync += a.eq(nxt)
            cls = position & ((1 << self.g_log2) - 1)
            used = 1 if raw_lane else ~self.raw
            m.d.comb += [self.addr[k].eq(a), self.start[k].eq((a == 0) & (cls == 0) & used),
                         self.valid[k].eq((~final | (position < self.last_valid)) & used)]
            if k == 0:
                # Lane 0 of the next window starts a sample: the window's last position ends one.
                next_start = Signal()
                m.d.comb += next_start.eq(nxt == 0)
        for k in range(lanes):
            quant_end = self.start[k + 1] if k + 1 < lanes else next_start
            if k % 4:
                m.d.comb += self.end[k].eq(~self.raw & quant_end)
            else:
                raw_end = self.start[k + 4] if k + 4 < lanes else next_start
                m.d.comb += self.end[k].eq(Mux(self.raw, raw_end, quant_end))
        with m.If(self.restart):
            m.d.sync += [settle.eq(0), window.eq(0)]
        with m.Elif(~self.ready):
            m.d.sync += settle.eq(settle + 1)
        with m.Elif(self.advance):
            m.d.sync += window.eq(window + 1)
        return m
