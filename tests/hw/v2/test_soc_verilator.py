"""Engine v2 in the simulated LiteX SoC (LiteDRAM's controller with its SDR SDRAM model, the
engine's AXI4 master on a LiteDRAM port, its registers on the SoC bus) under Verilator and
cocotb: the host's driver initializes the DRAM, uploads each run's stream, runs its epochs from
DRAM and reads the model back, bit for bit against the golden model."""

from __future__ import annotations

from zipsgd.hw.board_soc import SOC_BOARDS
from zipsgd.hw.soc import ENGINE_BASE, sim_soc
from zipsgd.sim.engine2_sim import memory_runs
from zipsgd.sim.soc_sim import run_soc
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.registers import ADDR_WIDTH

PARAMS = EngineParams2(64, 4096, 512)


def test_soc_memory_runs(tmp_path, sim_options):
    report = run_soc(PARAMS, memory_runs(), tmp_path, **sim_options)
    assert [r["epochs"] for r in report] == [r["epochs"] for r in memory_runs()]
    assert all(r["cycles"] >= r["beats"] * r["epochs"] for r in report)


def test_soc_map():
    soc = sim_soc(EngineParams2(64, 64, 16))
    assert soc.main_ram_size == 8 << 20 and ENGINE_BASE % (1 << ADDR_WIDTH) == 0
    assert {"sdram_dfii_control", "sdram_dfii_pi0_command"} <= set(soc.csrs)
    assert soc.init and soc.init[0][2] is not None           # the CKE control word first
    # No date or revision in the text: the simulation's build is cached by its hash.
    assert sim_soc(EngineParams2(64, 64, 16)).verilog == soc.verilog


def test_ddr3_soc_memory_runs(tmp_path, sim_options):
    """The OrangeCrab's DRAM configuration (its DDR3 module under the ECP5 PHY's settings, 1:2:
    a 128-bit native word): the engine's reads go through ``AxiReadUpConverter``, whose
    bursts start at either half of a word and end anywhere; bit-exact as on the SDRAM."""
    dram = SOC_BOARDS["orangecrab-85f"].sim
    report = run_soc(PARAMS, memory_runs(), tmp_path, dram=dram, **sim_options)
    assert [r["epochs"] for r in report] == [r["epochs"] for r in memory_runs()]
    soc = sim_soc(PARAMS, dram=dram)
    assert soc.main_ram_size == 32 << 20 and "engine_upconverter" in soc.verilog
