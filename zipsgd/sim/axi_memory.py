"""A memory for the engine's AXI4 read master under cocotb: cocotbext-axi's ``AxiRamRead``
with DRAM-like timing (each burst's data starts 20-100 cycles after its address, random;
bursts in order, several addresses accepted ahead), optional stalls of both channels
(``arready`` low, gaps between R beats) and read errors on chosen addresses."""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.triggers import Event, RisingEdge
from cocotbext.axi import AxiRamRead
from cocotbext.axi.constants import AxiResp

from .stress import make_pattern

__all__ = ["DramRead"]


class DramRead(AxiRamRead):
    """``AxiRamRead`` whose bursts each wait ``latency`` cycles (uniform in the range given)
    from their AR; up to ``ahead`` ARs are taken before the first is answered.  A beat whose
    byte address is in ``fail`` is answered SLVERR (with zero data)."""

    def __init__(self, bus, clock, reset=None, *, size: int, seed: int = 1,
                 latency: tuple[int, int] = (20, 100), ahead: int = 8, fail=()):
        self.rng = random.Random(seed)
        self.latency, self.fail = latency, set(fail)
        self.cycle = 0
        self._queue: deque = deque()
        self._arrived = Event()
        super().__init__(bus, clock, reset, size=size)
        self.ar_channel.queue_occupancy_limit = ahead
        cocotb.start_soon(self._count())

    def pauses(self, probability: float, seed: int) -> None:
        """Stall the AR channel (``arready`` low) and the R channel (no beat) each cycle with
        ``probability``, seeded; 0: no stalls."""
        for k, channel in enumerate((self.ar_channel, self.r_channel)):
            pattern = make_pattern({"kind": "bernoulli", "p": probability, "seed": seed * 2 + k}
                                   if probability else None)
            channel.set_pause_generator(pattern.pauses() if pattern else None)
            if pattern is None:
                channel.pause = False     # (cocotbext-axi keeps the last pause value)

    async def _count(self):
        while True:
            await RisingEdge(self.clock)
            self.cycle += 1

    async def _accept(self):
        while True:
            ar = await self.ar_channel.recv()
            self._queue.append((self.cycle + self.rng.randint(*self.latency), ar))
            self._arrived.set()

    async def _process_read(self):
        accept = cocotb.start_soon(self._accept())
        try:
            while True:
                while not self._queue:
                    self._arrived.clear()
                    await self._arrived.wait()
                ready, ar = self._queue.popleft()
                while self.cycle < ready:
                    await RisingEdge(self.clock)
                await self._answer(ar)
        finally:
            accept.cancel()

    async def _answer(self, ar):
        addr, beats = int(ar.araddr), int(ar.arlen) + 1
        assert int(ar.arburst) == 1 and 1 << int(ar.arsize) == self.byte_lanes, ar
        assert 0x1000 - (addr & 0xFFF) >= beats * self.byte_lanes, "a burst crosses 4 KiB"
        for n in range(beats):
            r = self.r_channel._transaction_obj()
            r.rid, r.rlast = int(ar.arid), int(n == beats - 1)
            word = addr + n * self.byte_lanes
            if word in self.fail:
                r.rresp, r.rdata = AxiResp.SLVERR, 0
            else:
                r.rresp = AxiResp.OKAY
                r.rdata = int.from_bytes(self.read(word % self.size, self.byte_lanes),
                                         "little")
            await self.r_channel.send(r)
