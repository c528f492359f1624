"""The host's driver of engine v2 in a LiteX SoC (``zipsgd/hw/soc.py``): DRAM init, the upload
of a packed stream into DRAM, a memory run and the read-back, as bus operations.

The driver is written without I/O: each step is a generator that yields operations, ``("write",
address, value)``, ``("read", address)`` (sent back the word read) and ``("wait", cycles)``, so the
same code runs on a board (LiteX's ``RemoteClient`` through ``litex_server``) and against the
simulated SoC (a cocotb Wishbone master): :func:`execute` runs a step on any object with
``read``/``write``/``wait``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from ..spec import registers2 as regs
from ..spec.errors import ConfigError
from ..spec.registers2 import MAP

__all__ = ["dram_init", "upload", "engine_writes", "memory_run", "read_status", "read_model",
           "execute", "RUNNING", "Ops"]

Ops = Generator[tuple, int | None, None]
#: STATUS.RUNNING.
RUNNING = 1 << 5
_CTRL_RUN = 1 << 3


def dram_init(csrs: dict, init: Iterable[tuple], hardware_control: int) -> Ops:
    """Replay the DRAM's init sequence through the DFII CSRs, then hand the DRAM to the
    controller."""
    for address, bank, control, command, delay in init:
        yield ("write", csrs["sdram_dfii_pi0_address"], address)
        yield ("write", csrs["sdram_dfii_pi0_baddress"], bank)
        if control is not None:
            yield ("write", csrs["sdram_dfii_control"], control)
        else:
            yield ("write", csrs["sdram_dfii_pi0_command"], command)
            yield ("write", csrs["sdram_dfii_pi0_command_issue"], 1)
        if delay:
            yield ("wait", delay)
    yield ("write", csrs["sdram_dfii_control"], hardware_control)


def upload(address: int, data: bytes) -> Ops:
    """Write ``data`` at ``address`` as little-endian 32-bit words (padded with zeros)."""
    if address % 4:
        raise ConfigError(f"an upload address must be a multiple of 4, found {address:#x}")
    data = bytes(data) + bytes(-len(data) % 4)
    for i in range(0, len(data), 4):
        yield ("write", address + i, int.from_bytes(data[i:i + 4], "little"))


def engine_writes(base: int, pairs: Iterable[tuple[int, int]]) -> Ops:
    """Register writes ``(offset, value)`` to the engine at ``base``."""
    for offset, value in pairs:
        yield ("write", base + offset, value & 0xFFFF_FFFF)


def memory_run(base: int, stream_address: int, nbytes: int, epochs: int, bus_width: int,
               poll: int = 64) -> Ops:
    """Start a memory run of ``epochs`` epochs over ``nbytes`` at ``stream_address`` (the
    engine's view of the bus address) and wait for its end; returns nothing (read the status
    with :func:`read_status`)."""
    yield from engine_writes(base, regs.run_writes(stream_address, nbytes, epochs, bus_width))
    yield ("write", base + MAP.register("CTRL").offset, _CTRL_RUN)
    status = MAP.register("STATUS").offset
    while True:
        word = yield ("read", base + status)
        if not word & RUNNING:
            return
        yield ("wait", poll)


def read_status(base: int) -> Generator[tuple, int, dict]:
    """The status registers, decoded (``registers2.decode_status``)."""
    words = {}
    for offset in regs.status_offsets():
        words[offset] = yield ("read", base + offset)
    return regs.decode_status(words)


def read_model(base: int, n: int) -> Generator[tuple, int, list[int]]:
    """Model words ``0..n-1``, signed."""
    yield ("write", base + MAP.register("MODEL_INDEX").offset, 0)
    data = MAP.register("MODEL_DATA").offset
    out = []
    for _ in range(n):
        word = yield ("read", base + data)
        out.append(word - (1 << 32) if word >> 31 else word)
    return out


def execute(ops: Generator, bus):
    """Run ``ops`` on ``bus`` (``read(address)``, ``write(address, value)``, ``wait(cycles)``);
    returns the generator's result."""
    reply = None
    try:
        while True:
            op = ops.send(reply)
            reply = None
            if op[0] == "write":
                bus.write(op[1], op[2])
            elif op[0] == "read":
                reply = bus.read(op[1])
            else:
                bus.wait(op[1])
    except StopIteration as stop:
        return stop.value
