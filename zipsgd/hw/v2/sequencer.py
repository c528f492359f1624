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


def sequence_reference(window: int, lanes: int, fields: int, g_log2: int, total: int):
    """(address, start, valid) of every lane in ``window``: the sequencer's definition."""
    out = []
    for k in range(lanes):
        p = window * lanes + k
        j = p % fields
        out.append((j >> g_log2, int(j == 0), int(p < total)))
    return out


class WindowSequencer(wiring.Component):
    """Per-lane addresses of the window on the output; ``advance`` moves to the next window.

    Settings (held while a stream runs): ``step`` = ``(L mod (n+1)) >> g_log2``, ``wrap`` =
    ``(n+1) >> g_log2``, ``g_log2``, ``last_window`` and ``last_valid`` (lanes valid in the
    final window, 1..L).  ``restart`` loads window 0; its addresses are ready ``L`` cycles later
    (``ready``).
    """

    def __init__(self, lanes: int, addr_width: int, window_width: int = 32):
        self.lanes = lanes
        self.addr_width = addr_width
        lw = (lanes - 1).bit_length()
        super().__init__({
            "restart": In(1), "advance": In(1),
            "step": In(addr_width + 1), "wrap": In(addr_width + 1), "g_log2": In(3),
            "last_window": In(window_width), "last_valid": In(lw + 1),
            "ready": Out(1),
            "addr": Out(addr_width).array(lanes),
            "start": Out(1).array(lanes),
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
        m.d.comb += final.eq(window == self.last_window)
        # One pair of adders per lane: a + step, and a + step - wrap (its sign is the wrap).
        back = Signal(signed(aw + 2))
        m.d.comb += back.eq(self.step - self.wrap)
        for k in range(lanes):
            a = Signal(aw + 1, name=f"a{k}")
            ahead = Signal(aw + 2, name=f"ahead{k}")
            wrapped = Signal(signed(aw + 3), name=f"wrapped{k}")
            m.d.comb += [ahead.eq(a + Mux(self.ready, self.step, 0)),
                         wrapped.eq(a + Mux(self.ready, back, -self.wrap))]
            nxt = Mux(wrapped[-1], ahead, wrapped[:aw + 1])
            with m.If(self.restart):
                m.d.sync += a.eq(k >> self.g_log2)
            with m.Elif(~self.ready | self.advance):
                m.d.sync += a.eq(nxt)
            cls = k & ((1 << self.g_log2) - 1)
            m.d.comb += [self.addr[k].eq(a), self.start[k].eq((a == 0) & (cls == 0)),
                         self.valid[k].eq(~final | (k < self.last_valid))]
        with m.If(self.restart):
            m.d.sync += [settle.eq(0), window.eq(0)]
        with m.Elif(~self.ready):
            m.d.sync += settle.eq(settle + 1)
        with m.Elif(self.advance):
            m.d.sync += window.eq(window + 1)
        return m
