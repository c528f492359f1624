"""An 8N1 UART: receiver and transmitter with a build-time baud divisor (clocks per bit).

Platform-free: ``rx``/``tx`` are plain signals (idle high); the board top wires them to pins.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..spec.errors import ConfigError

__all__ = ["UartRx", "UartTx", "check_divisor"]


def check_divisor(divisor) -> int:
    """The divisor must leave room to sample the middle of a bit (at least 4 clocks)."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or not 4 <= divisor < 1 << 24:
        raise ConfigError(f"UART divisor (clocks per bit) must be an integer in 4..2**24-1, "
                          f"found {divisor!r}")
    return divisor


class UartRx(wiring.Component):
    """Receiver: a falling edge starts a byte; every bit is sampled in its middle.

    Members
    -------
    rx : In(1)
        The line (asynchronous; synchronized here).
    data : Out(8), valid : Out(1)
        A received byte, ``valid`` for one cycle (no back-pressure).
    frame_error : Out(1)
        One cycle: a stop bit read 0 (the byte is dropped).
    """

    def __init__(self, divisor: int):
        self._divisor = check_divisor(divisor)
        super().__init__({"rx": In(1, init=1), "data": Out(8), "valid": Out(1),
                          "frame_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        d = self._divisor
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(d))
        bit = Signal(range(10))
        shift = Signal(8)
        m.d.sync += [self.valid.eq(0), self.frame_error.eq(0)]
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += [timer.eq(d // 2 - 1), bit.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(d - 1), bit.eq(bit + 1)]
                    with m.If(bit == 0):
                        with m.If(line):  # a glitch, not a start bit
                            m.next = "IDLE"
                    with m.Elif(bit <= 8):
                        m.d.sync += shift.eq((shift >> 1) | (line << 7))
                    with m.Else():
                        m.d.sync += [self.data.eq(shift), self.valid.eq(line),
                                     self.frame_error.eq(~line)]
                        # A 0 stop bit is a break or noise: wait for the idle line.
                        m.next = "IDLE"
                        with m.If(~line):
                            m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """Transmitter.

    Members
    -------
    data : In(8), valid : In(1), ready : Out(1)
        A byte is taken when ``valid & ready``; ``ready`` while idle.
    tx : Out(1)
        The line (idle high).
    """

    def __init__(self, divisor: int):
        self._divisor = check_divisor(divisor)
        super().__init__({"data": In(8), "valid": In(1), "ready": Out(1),
                          "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        d = self._divisor
        timer = Signal(range(d))
        bits = Signal(range(11))
        shift = Signal(10, init=0x3FF)
        m.d.comb += [self.ready.eq(bits == 0), self.tx.eq(shift[0])]
        with m.If(bits == 0):
            with m.If(self.valid):
                m.d.sync += [shift.eq((1 << 9) | (self.data << 1)), bits.eq(10),
                             timer.eq(d - 1)]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += [shift.eq((shift >> 1) | (1 << 9)), bits.eq(bits - 1), timer.eq(d - 1)]
        return m
