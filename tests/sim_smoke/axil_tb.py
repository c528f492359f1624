"""cocotb tests for ``AxiLiteRegs`` (see design.py) with cocotbext-axi's
AxiLiteMaster.  Unprefixed AXI-Lite ports -> ``AxiLiteBus.from_entity(dut)``."""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiLiteBus, AxiLiteMaster


async def setup(dut):
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    master = AxiLiteMaster(AxiLiteBus.from_entity(dut), dut.clk, dut.rst)
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 1)
    return master


@cocotb.test(timeout_time=100, timeout_unit="us")
async def axil_write_read(dut):
    """Each register holds its own value; reset value 0; wstrb merges bytes."""
    m = await setup(dut)
    assert await m.read_dword(0x4) == 0
    for i in range(4):
        await m.write_dword(4 * i, 0x1111_1111 * (i + 1))
    for i in range(4):
        assert await m.read_dword(4 * i) == 0x1111_1111 * (i + 1)
    await m.write(0x8 + 1, b"\xab\xcd")           # bytes 1,2 of reg2 (wstrb=0b0110)
    assert await m.read_dword(0x8) == 0x33CD_AB33
    # concurrent traffic: writes and reads interleaved by the master
    writes = [cocotb.start_soon(m.write_dword(4 * (i % 4), i)) for i in range(8)]
    for w in writes:
        await w
    assert [await m.read_dword(4 * i) for i in range(4)] == [4, 5, 6, 7]
