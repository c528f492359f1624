"""cocotb bench for engine v2 in the simulated LiteX SoC (``zipsgd/hw/soc.py``): the host's
driver (``zipsgd/host/soc.py``) runs on a Wishbone master at the SoC's top level: the DRAM's
init sequence, the upload of each run's packed stream into DRAM (LiteDRAM's controller and
its SDR SDRAM model), the engine's settings, level tables and model, a memory run, and the
status and model read back and compared with the golden model bit for bit.

``test_params``: ``params`` (``EngineParams2`` fields), ``runs`` (as the engine's bench),
``csrs``, ``init``, ``main_ram_base``, ``engine_base``, ``dfii_sel``.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from zipsgd.host import soc as driver
from zipsgd.sim.core2_sim import prepare_run, random_fields
from zipsgd.sim.runner import test_params
from zipsgd.spec import registers2 as regs
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.registers import ENGINE_ID
from zipsgd.spec.stream import pack_stream


class WishboneHost:
    """A classic Wishbone master on the ``host_*`` ports, one access at a time."""

    def __init__(self, dut):
        self.dut = dut
        self.cycles = 0
        for name in ("cyc", "stb", "we"):
            getattr(dut, f"host_{name}").value = 0
        dut.host_sel.value = 0xF

    async def _access(self, address: int, value: int | None) -> int:
        dut = self.dut
        assert address % 4 == 0, hex(address)
        dut.host_adr.value = address >> 2
        dut.host_we.value = int(value is not None)
        dut.host_dat_w.value = value or 0
        dut.host_cyc.value = 1
        dut.host_stb.value = 1
        for _ in range(10_000):
            await RisingEdge(dut.sys_clk)
            await ReadOnly()
            if int(dut.host_ack.value) or int(dut.host_err.value):
                break
        else:
            raise AssertionError(f"no answer from {address:#x}")
        assert not int(dut.host_err.value), f"bus error at {address:#x}"
        word = int(dut.host_dat_r.value)
        await RisingEdge(dut.sys_clk)
        dut.host_cyc.value = 0
        dut.host_stb.value = 0
        return word

    async def run(self, ops):
        """Execute the driver's operations (``zipsgd.host.soc``); returns its result."""
        reply = None
        try:
            while True:
                op = ops.send(reply)
                reply = None
                if op[0] == "write":
                    await self._access(op[1], op[2])
                elif op[0] == "write_block":
                    for k, word in enumerate(op[2]):
                        await self._access(op[1] + 4 * k, word)
                elif op[0] == "read":
                    reply = await self._access(op[1], None)
                else:
                    await ClockCycles(self.dut.sys_clk, op[1])
        except StopIteration as stop:
            return stop.value


@cocotb.test()
async def soc_memory_runs(dut):
    spec = test_params()
    params = EngineParams2(**spec["params"])
    base, ram = spec["engine_base"], spec["main_ram_base"]
    Clock(dut.sys_clk, 20, unit="ns").start()
    host = WishboneHost(dut)
    dut.sys_rst.value = 1
    await ClockCycles(dut.sys_clk, 8)
    dut.sys_rst.value = 0
    await ClockCycles(dut.sys_clk, 8)
    await host.run(driver.dram_init(spec["csrs"], spec["init"], spec["dfii_sel"]))
    assert await host._access(base + regs.MAP.register("ID").offset, None) == ENGINE_ID
    report = []
    offset = 0x1000
    for run in spec["runs"]:
        setup = prepare_run(params, run)
        cfg = setup.config
        pairs = regs.config_writes(cfg, setup.plan, per_feature=setup.per_feature, seed=True)
        if setup.table is not None:
            pairs += regs.level_writes(setup.table if setup.per_feature else setup.table[:1])
        await host.run(driver.engine_writes(base, pairs))
        await host.run(driver.engine_writes(
            base, [(regs.MAP.register("MODEL_INDEX").offset, 0)]
            + [(regs.MAP.register("MODEL_DATA").offset, int(w)) for w in setup.model]))
        fields, layout = random_fields(setup.rng, cfg, run["samples"], params.bus_width,
                                       setup.per_feature)
        data = pack_stream(fields, layout).tobytes()
        await host.run(driver.upload(ram + offset, data))
        clock = _Counter(dut)
        start = clock.count
        await host.run(driver.memory_run(base, ram + offset, len(data), run["epochs"],
                                         params.bus_width))
        dut_cycle = clock.count - start
        for _ in range(run["epochs"]):
            want = setup.golden.run_epoch_fields(fields)
        got = await host.run(driver.read_status(base))
        assert got["done"] and not got["error_flags"], (run, got)
        checks = {"epochs_done": run["epochs"], "samples": want.samples,
                  "updates": want.updates, "loss": want.loss_acc,
                  "beats": len(data) * 8 // params.bus_width}
        assert {k: got[k] for k in checks} == checks, (run, got, checks)
        words = await host.run(driver.read_model(base, cfg.n_features))
        assert words == setup.golden.model.tolist(), (run, "model words differ")
        report.append({"run": run, "beats": checks["beats"], "epochs": run["epochs"],
                       "cycles": dut_cycle, "cycles_busy": got["cycles_busy"]})
        offset += (len(data) + 0xFFF) & ~0xFFF
    path = os.environ.get("ZIPSGD_SIM_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump(report, f)


class _Counter:
    """Clock cycles since it was made."""

    def __init__(self, dut):
        self.count = 0
        cocotb.start_soon(self._tick(dut))

    async def _tick(self, dut):
        while True:
            await RisingEdge(dut.sys_clk)
            self.count += 1
