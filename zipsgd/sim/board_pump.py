"""cocotb side of the simulated board: the engine with its host-link bridge
(:class:`~zipsgd.hw.hostlink.LinkedEngine`), its UART lines connected to a pseudo-terminal.

The test opens a pty, writes the path of its slave end to the file ``test_params()["ready"]``
and moves bytes until the file ``test_params()["stop"]`` exists: bytes the host writes to the
slave end are read from the master end (non-blocking) and sent bit by bit on ``uart_rx`` at the
bridge's divisor; a monitor decodes ``uart_tx`` and writes each byte to the master end.  So the
host driver opens a real serial device with pyserial.

``test_params()["pins"]`` names the top level's clock, active-high reset, UART input and output
and, optionally, a "bridge busy" output (the simulated board's, the default; the SoC's with its
UART bridge).

While the bridge is idle and the host has written nothing, the pump waits up to 2 ms of wall
time for the host before running 64 more cycles, so an idle simulation does not spin; while a
frame is in flight it never waits, so the bridge's gap timeout runs in simulated time.
"""

from __future__ import annotations

import os
import select
import tty

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge

from zipsgd.sim.runner import test_params

IDLE_CYCLES = 64
IDLE_WAIT_S = 0.002


#: The simulated board's pins (``LinkedEngine``).
BOARD_PINS = {"clk": "clk", "rst": "rst", "rx": "uart_rx", "tx": "uart_tx", "busy": "link_busy"}


async def _send_byte(clk, rx, byte: int, divisor: int) -> None:
    for bit in [0] + [(byte >> k) & 1 for k in range(8)] + [1]:
        rx.value = bit
        await ClockCycles(clk, divisor)


async def _monitor(clk, tx, master: int, divisor: int) -> None:
    """Decode ``tx`` (sampled in the middle of every bit) into the pty."""
    while True:
        await FallingEdge(tx)
        await ClockCycles(clk, divisor // 2)
        if tx.value:
            continue  # a glitch, not a start bit
        byte = 0
        for k in range(8):
            await ClockCycles(clk, divisor)
            byte |= int(tx.value) << k
        await ClockCycles(clk, divisor)
        if tx.value:  # stop bit
            os.write(master, bytes([byte]))


@cocotb.test()
async def board_pump(dut):
    p = test_params()
    divisor = p["divisor"]
    pins = p.get("pins", BOARD_PINS)
    clk, rst, rx, tx = (getattr(dut, pins[name]) for name in ("clk", "rst", "rx", "tx"))
    busy = getattr(dut, pins["busy"]) if pins.get("busy") else None
    Clock(clk, 10, unit="ns").start()
    rx.value = 1
    rst.value = 1
    await ClockCycles(clk, 4)
    rst.value = 0
    await ClockCycles(clk, 4)

    master, slave = os.openpty()
    tty.setraw(slave)  # no echo, no line editing, before the host opens it
    os.set_blocking(master, False)
    temp = p["ready"] + ".tmp"
    with open(temp, "w") as file:
        file.write(os.ttyname(slave))
    os.replace(temp, p["ready"])
    cocotb.start_soon(_monitor(clk, tx, master, divisor))

    while not os.path.exists(p["stop"]):
        try:
            data = os.read(master, 4096)
        except (BlockingIOError, OSError):
            data = b""
        for byte in data:
            await _send_byte(clk, rx, byte, divisor)
        if not data:
            if (busy is None or not busy.value) and tx.value:
                select.select([master], [], [], IDLE_WAIT_S)
            await ClockCycles(clk, IDLE_CYCLES)
    os.close(master)
    os.close(slave)
