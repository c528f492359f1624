"""Synchronous FIFOs with a registered output, cycle for cycle Amaranth's
``amaranth.lib.fifo.SyncFIFOBuffered``, with the inner FIFO's "not empty" as a register.

Amaranth's buffered FIFO reads its memory when ``inner_level != 0`` and its output register is
free or being read; that test is a wide OR of the level in front of the memory's read enable,
the read pointer's and the level's enables, all in the cycle of the consumer's late ``r_en``
(``docs/HARDWARE.md``, "Pipeline": "The FIFOs between the paths").  Here ``inner_nonempty``
is a flip-flop that always equals ``inner_level != 0``: its next value is chosen by the same
late enables among values made from registers (``inner_level != 1`` is the only comparison, of
a register with a constant).

``BufferedFifo``'s output register is the memory's own read register (for a block RAM, its
output latch: 5.8 ns from the clock to the pins on an ECP5).  ``FabricOutputFifo`` has the
same ports and the same behaviour, cycle for cycle, with its output in fabric flip-flops.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module, Mux, Signal
from amaranth.lib.memory import Memory


def _next_level(level, nonempty, grows, shrinks):
    """(level, nonempty) of the next cycle, both chosen by the enables among values made from
    registers; ``nonempty`` stands for ``level != 0``."""
    return (Mux(grows, level + 1, Mux(shrinks, level - 1, level)),
            Mux(grows, 1, Mux(shrinks, level != 1, nonempty)))


class _FifoPorts(Elaboratable):
    def __init__(self, width: int, depth: int, *, distributed: bool = False):
        if depth < 2 or depth & (depth - 1):
            self._MustUse__silence = True    # (not built: no "created but never used")
            raise ValueError(f"{type(self).__name__} depth must be a power of two >= 2, "
                             f"not {depth}")
        self.width, self.depth, self.distributed = width, depth, distributed
        self.w_en, self.w_data, self.w_rdy = Signal(), Signal(width), Signal()
        self.r_en, self.r_data, self.r_rdy = Signal(), Signal(width), Signal()
        self.level = Signal(range(depth + 2))
        self.inner_level = Signal(range(depth + 1))
        self.inner_nonempty = Signal()

    def _storage(self, m, write, read):
        """The memory with its write pointer (advanced by ``write``, which stores ``w_data``)
        and read pointer (advanced by ``read``, which loads the memory's read register);
        returns that register's value."""
        m.submodules.storage = storage = Memory(
            shape=self.width, depth=self.depth, init=[],
            attrs={"ram_style": "distributed"} if self.distributed else None)
        w_port = storage.write_port()
        r_port = storage.read_port(domain="sync")
        produce = Signal(range(self.depth))
        consume = Signal(range(self.depth))
        m.d.comb += [w_port.addr.eq(produce), w_port.data.eq(self.w_data), w_port.en.eq(write),
                     r_port.addr.eq(consume), r_port.en.eq(read)]
        # (Pointers wrap by their width: depth is a power of two.)
        with m.If(write):
            m.d.sync += produce.eq(produce + 1)
        with m.If(read):
            m.d.sync += consume.eq(consume + 1)
        return r_port.data

    @property
    def register_copies(self) -> list:
        """(register, what it stands for) pairs, equal in every reachable state."""
        return [(self.inner_nonempty, self.inner_level != 0)]

    @property
    def invariants(self) -> list:
        """Facts of every reachable state (the formal harnesses assert them)."""
        return [self.inner_level <= self.depth]


class BufferedFifo(_FifoPorts):
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

    def elaborate(self, platform):
        m = Module()
        do_write = self.w_en & self.w_rdy
        do_read = self.inner_nonempty & (~self.r_rdy | self.r_en)
        m.d.comb += [
            self.w_rdy.eq(self.inner_level != self.depth),
            self.r_data.eq(self._storage(m, do_write, do_read)),
            self.level.eq(self.inner_level + self.r_rdy),
        ]
        # Both outcomes of the level and its flag from registers; the enables only choose.
        level, nonempty = _next_level(self.inner_level, self.inner_nonempty,
                                      do_write & ~do_read, do_read & ~do_write)
        m.d.sync += [self.inner_level.eq(level), self.inner_nonempty.eq(nonempty)]
        with m.If(do_read):
            m.d.sync += self.r_rdy.eq(1)
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


class FabricOutputFifo(_FifoPorts):
    """``BufferedFifo``'s ports, capacity and behaviour, cycle for cycle, with ``r_data`` a
    fabric register instead of the memory's read register.

    The memory is read a cycle ahead into its read register (``prefetched``, "the prefetch
    stage"), and the output register loads from there, placed beside the memory.  A word that
    would have come straight from the memory to the output (it was written in the cycle
    before, into an otherwise empty FIFO) comes instead from ``recent``, a copy of the
    previous cycle's ``w_data``: the memory cannot deliver it in time through two registers.

    The words that ``BufferedFifo`` holds in its memory are here in the memory or the prefetch
    stage: ``inner_level`` and ``inner_nonempty`` count both, as there.  ``memory_level`` (and
    its flag ``memory_nonempty``) counts the memory's alone.  When the prefetch stage is empty
    the memory holds at most the one word written in the cycle before (it would have been
    prefetched otherwise), which is then ``recent``'s.
    """

    def __init__(self, width: int, depth: int, *, distributed: bool = False):
        super().__init__(width, depth, distributed=distributed)
        self.memory_level = Signal(range(depth + 1))
        self.memory_nonempty = Signal()
        self.prefetched = Signal()
        self.wrote = Signal()       # a write in the cycle before (for the invariant)

    @property
    def register_copies(self) -> list:
        return [*super().register_copies, (self.memory_nonempty, self.memory_level != 0),
                (self.inner_level, self.memory_level + self.prefetched)]

    @property
    def invariants(self) -> list:
        return [*super().invariants,
                self.prefetched | (self.memory_level == 0)
                | ((self.memory_level == 1) & self.wrote)]

    def elaborate(self, platform):
        m = Module()
        recent = Signal(self.width, reset_less=True)
        output = Signal(self.width, reset_less=True)

        do_write = self.w_en & self.w_rdy
        output_free = ~self.r_rdy | self.r_en
        # A word leaves the memory when the prefetch stage is empty or moves on: into that stage,
        # or, if it is empty and the output free (``bypass``), to the output from ``recent``.
        take = self.memory_nonempty & (~self.prefetched | output_free)
        bypass = output_free & ~self.prefetched
        prefetch_stage = self._storage(m, do_write, take)
        m.d.comb += [
            self.w_rdy.eq(self.inner_level != self.depth),
            self.r_data.eq(output),
            self.level.eq(self.inner_level + self.r_rdy),
        ]
        m.d.sync += [recent.eq(self.w_data), self.wrote.eq(do_write)]
        memory_level, memory_nonempty = _next_level(
            self.memory_level, self.memory_nonempty, do_write & ~take, take & ~do_write)
        # A word leaves the inner part (memory and prefetch stage) when the output takes one.
        leaves = output_free & self.inner_nonempty
        inner_level, inner_nonempty = _next_level(
            self.inner_level, self.inner_nonempty, do_write & ~leaves, leaves & ~do_write)
        m.d.sync += [self.memory_level.eq(memory_level),
                     self.memory_nonempty.eq(memory_nonempty),
                     self.inner_level.eq(inner_level), self.inner_nonempty.eq(inner_nonempty)]
        m.d.sync += self.prefetched.eq(Mux(take & ~bypass, 1,
                                           Mux(output_free, 0, self.prefetched)))
        with m.If(output_free):
            m.d.sync += [self.r_rdy.eq(self.inner_nonempty),
                         output.eq(Mux(self.prefetched, prefetch_stage, recent))]
        return m
