"""A synchronous FIFO with a registered output, cycle for cycle Amaranth's
``amaranth.lib.fifo.SyncFIFOBuffered``, with the inner FIFO's "not empty" as a register.

Amaranth's buffered FIFO reads its memory when ``inner_level != 0`` and its output register is
free or being read; that test is a wide OR of the level in front of the memory's read enable,
the read pointer's and the level's enables, all in the cycle of the consumer's late ``r_en``
(``docs/HARDWARE.md``, "Pipeline": "The FIFOs between the paths").  Here ``inner_nonempty``
is a flip-flop that always equals ``inner_level != 0``: its next value is chosen by the same
late enables among values made from registers (``inner_level != 1`` is the only comparison, of
a register with a constant).
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib.memory import Memory


class BufferedFifo(Elaboratable):
    """``width``-bit words, ``depth`` of them (a power of two, at least 2: the pointers wrap
    by their width) in a memory and one more in the output register (Amaranth's FIFO of
    depth ``d`` has ``d - 1`` in its memory).  Ports as ``SyncFIFOBuffered``'s: ``w_en``,
    ``w_data``, ``w_rdy``; ``r_en``, ``r_data``, ``r_rdy``; ``level`` (words held, the output
    register's included).  A write when ``w_rdy`` is low is lost (the caller admits by ``level``).

    A word written in cycle ``t`` is in the memory from ``t + 1`` and at the output (``r_rdy``)
    from ``t + 2``, as in Amaranth's FIFO: the engine's cycle counts do not change with it.
    ``inner_nonempty`` (a register) equals ``inner_level != 0`` in every reachable state (the
    formal harnesses assert it, ``formal_taps["register_copies"]``).

    With ``distributed``, the memory is marked for LUT RAM (Yosys's ``ram_style``): its read
    enable then loads fabric flip-flops that can sit beside the reader, where a block RAM's
    enable pin is wherever the block RAM is.
    """

    def __init__(self, width: int, depth: int, *, distributed: bool = False):
        if depth < 2 or depth & (depth - 1):
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"BufferedFifo depth must be a power of two >= 2, not {depth}")
        self.width, self.depth, self.distributed = width, depth, distributed
        self.w_en, self.w_data, self.w_rdy = Signal(), Signal(width), Signal()
        self.r_en, self.r_data, self.r_rdy = Signal(), Signal(width), Signal()
        self.level = Signal(range(depth + 2))
        self.inner_level = Signal(range(depth + 1))
        self.inner_nonempty = Signal()

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        m.submodules.storage = storage = Memory(
            shape=self.width, depth=depth, init=[],
            attrs={"ram_style": "distributed"} if self.distributed else None)
        w_port = storage.write_port()
        r_port = storage.read_port(domain="sync")
        produce = Signal(range(depth))
        consume = Signal(range(depth))

        do_write = self.w_en & self.w_rdy
        do_read = self.inner_nonempty & (~self.r_rdy | self.r_en)
        m.d.comb += [
            self.w_rdy.eq(self.inner_level != depth),
            w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(do_write),
            r_port.addr.eq(consume), r_port.en.eq(do_read), self.r_data.eq(r_port.data),
            self.level.eq(self.inner_level + self.r_rdy),
        ]
        # (Pointers wrap by their width: depth is a power of two.)
        with m.If(do_write):
            m.d.sync += produce.eq(produce + 1)
        with m.If(do_read):
            m.d.sync += consume.eq(consume + 1)
        # Both outcomes of the level and its flag from registers; the enables only choose.
        grows, shrinks = do_write & ~do_read, do_read & ~do_write
        m.d.sync += [
            self.inner_level.eq(Mux(grows, self.inner_level + 1,
                                    Mux(shrinks, self.inner_level - 1, self.inner_level))),
            self.inner_nonempty.eq(Mux(grows, 1, Mux(shrinks, self.inner_level != 1,
                                                     self.inner_nonempty))),
        ]
        with m.If(do_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m
