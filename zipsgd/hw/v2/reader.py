"""The engine's memory master: epochs of packed beats read from memory by AXI4 bursts
(``docs/HARDWARE.md``, "The memory reader").

A run reads ``epochs`` passes over ``beats`` beats from ``base`` and hands them on as the core's
beat stream, ``last`` on each epoch's final beat.  Bursts are INCR, at most ``READER_BURST`` beats,
never across a 4 KiB boundary, with up to ``READER_OUTSTANDING`` in flight.  A burst is issued only
when the FIFO has room for all the beats requested and not yet taken (``reserved``), so the R
channel is never stalled (``rready`` is 1) and the reads of the next epoch go on while the
core finishes this one.

A response other than OKAY (SLVERR, DECERR) sets ``error``: no burst is issued after it, the
beats still coming are dropped, and if the epoch being received had begun, a zero beat with
``last`` ends it (the core then stops with a framing error).  ``abort`` stops issuing and
drops what still comes.  ``busy`` holds until every burst issued has been answered.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, ResetInserter, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...spec.engine2 import READER_BURST, READER_OUTSTANDING
from ..axi import BURST_INCR, PAGE_BYTES, axi_read_signature
from ..fifo import BufferedFifo
from .gearbox import beat_layout

__all__ = ["MemoryReader", "ADDR_WIDTH"]

#: Byte address width.
ADDR_WIDTH = 32


class MemoryReader(wiring.Component):
    """AXI4 read master in front of the core's beat stream.

    Ports: ``start`` (a pulse, while not ``busy``: the FIFO is emptied and the run begins from
    ``base``, a multiple of W/8, with ``beats`` >= 1 per epoch and ``epochs`` >= 1, held
    during the run), ``abort``, ``busy``, ``error`` (sticky until the next ``start``),
    ``beats_out`` (the stream), ``bus`` (the AXI4 read channels); ``overrun``, a probe for
    the proofs: a beat written to a full FIFO (never).
    """

    def __init__(self, data_width: int, *, burst: int = READER_BURST,
                 outstanding: int = READER_OUTSTANDING):
        page_beats = PAGE_BYTES * 8 // data_width
        if not 1 <= burst <= min(256, page_beats) or burst & (burst - 1):
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"burst must be a power of two in 1..{min(256, page_beats)}, "
                             f"found {burst!r}")
        self.data_width, self.burst, self.outstanding = data_width, burst, outstanding
        self.depth = burst * outstanding
        super().__init__({
            "start": In(1), "abort": In(1),
            "base": In(ADDR_WIDTH), "beats": In(32), "epochs": In(32),
            "busy": Out(1), "error": Out(1), "overrun": Out(1),
            "beats_out": Out(stream.Signature(beat_layout(data_width))),
            "bus": Out(axi_read_signature(ADDR_WIDTH, data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        shift = (self.data_width // 8).bit_length() - 1            # log2(bytes per beat)
        fifo = BufferedFifo(self.data_width + 1, self.depth)
        m.submodules.fifo = ResetInserter(self.start)(fifo)
        reserved = Signal(range(self.depth + 1))     # beats issued, not yet taken or dropped
        outstanding = Signal(range(self.outstanding + 1))
        issued, n, issuing = self._issue(m, shift, reserved, outstanding)
        popped, dropped, pushed_end = Signal(), Signal(), Signal()
        # -- the R channel: every beat goes into the FIFO or is dropped ----------------------
        left_rx = Signal(32)                 # beats of the epoch being received still to come
        mid = Signal()                       # that epoch has begun
        dropping, end_pending = Signal(), Signal()
        beat = bus.rvalid & bus.rready
        bad = bus.rresp[1]
        m.d.comb += [bus.rready.eq(1), dropped.eq(beat & (dropping | bad)),
                     self.busy.eq(issuing | bus.arvalid | (outstanding != 0)
                                  | end_pending)]
        keep = beat & ~dropping & ~bad
        last = left_rx == 1
        m.d.comb += [fifo.w_en.eq(keep | pushed_end),
                     self.overrun.eq(fifo.w_en & ~fifo.w_rdy),
                     fifo.w_data.eq(Mux(pushed_end, 1 << self.data_width,
                                        bus.rdata | (last << self.data_width)))]
        with m.If(keep):
            m.d.sync += [left_rx.eq(Mux(last, self.beats, left_rx - 1)), mid.eq(~last)]
        with m.If(beat & bad & ~dropping):
            m.d.sync += [self.error.eq(1), dropping.eq(1), end_pending.eq(mid)]
        # (The ending beat is pushed a cycle after the error: R beats are dropped by then.)
        m.d.comb += pushed_end.eq(end_pending & dropping)
        with m.If(pushed_end):
            m.d.sync += [end_pending.eq(0), mid.eq(0)]
        with m.If(self.abort):
            m.d.sync += dropping.eq(1)
        m.d.comb += [self.beats_out.valid.eq(fifo.r_rdy), fifo.r_en.eq(self.beats_out.ready),
                     self.beats_out.payload.data.eq(fifo.r_data[:self.data_width]),
                     self.beats_out.payload.last.eq(fifo.r_data[self.data_width]),
                     popped.eq(fifo.r_rdy & self.beats_out.ready)]
        m.d.sync += reserved.eq(reserved + Mux(issued, n, 0) + pushed_end
                                - popped - dropped)
        m.d.sync += outstanding.eq(outstanding + issued - (beat & bus.rlast))
        with m.If(self.start):
            m.d.sync += [left_rx.eq(self.beats), mid.eq(0), dropping.eq(0), end_pending.eq(0),
                         self.error.eq(0), reserved.eq(0)]
        return m

    def _issue(self, m, shift, reserved, outstanding):
        """The AR channel: a burst of ``n`` beats from ``addr``, ``n`` the least of ``burst``,
        the beats to the page's end and the epoch's beats left, computed a cycle ahead from
        registers (``fresh`` once it is the current registers').  Returns the issue strobe,
        ``n`` and ``issuing``."""
        bus = self.bus
        page_beats = PAGE_BYTES >> shift
        addr, left = Signal(ADDR_WIDTH), Signal(32)       # the next burst's; beats left
        epochs = Signal(32)                                # epochs to request, this one too
        issuing, fresh = Signal(), Signal()
        n = Signal(range(self.burst + 1))
        to_page = page_beats - addr[shift:12]
        n_next = Mux(to_page < self.burst, to_page, self.burst)
        m.d.sync += n.eq(Mux(left < n_next, left, n_next))
        go = Signal()
        m.d.comb += go.eq(issuing & fresh & ~bus.arvalid & (outstanding < self.outstanding)
                          & (reserved + n <= self.depth))
        m.d.comb += [bus.arid.eq(0), bus.arsize.eq(shift), bus.arburst.eq(BURST_INCR)]
        m.d.sync += fresh.eq(~go)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += bus.arvalid.eq(0)
        with m.If(go):
            m.d.sync += [bus.arvalid.eq(1), bus.araddr.eq(addr), bus.arlen.eq(n - 1),
                         addr.eq(addr + (n << shift)), left.eq(left - n)]
            with m.If(left == n):                          # the epoch's last burst
                m.d.sync += [addr.eq(self.base), left.eq(self.beats), epochs.eq(epochs - 1)]
                with m.If(epochs == 1):
                    m.d.sync += issuing.eq(0)
        with m.If(self.abort | (self.bus.rvalid & self.bus.rresp[1])):
            m.d.sync += issuing.eq(0)
        with m.If(self.start):
            m.d.sync += [addr.eq(self.base), left.eq(self.beats), epochs.eq(self.epochs),
                         issuing.eq((self.beats != 0) & (self.epochs != 0)), fresh.eq(0)]
        return go, n, issuing
