"""Where the engine v2 core's logic goes, from Yosys alone: ``Core2`` (W = 64, N_max = 8192,
B_max = 512) synthesized flat (the build's figure) and without flattening (each block with
everything below it; cross-boundary optimization lost, so the blocks sum a little higher).
Each Yosys run takes one to two minutes.  Goal 2 of the engine v2 issue: at most 50 % of the
ECP5-85F's LUT4 and 60 % of its MULT18X18D.

Run: ``python -m benchmarks core_cost``.
"""

from __future__ import annotations

import time

from zipsgd.hw.cellcount import block_counts, cell_counts
from zipsgd.hw.v2.core import Core2
from zipsgd.spec.engine2 import EngineParams2

#: The ECP5-85F's LUT4 (TRELLIS_COMB sites) and MULT18X18D.
LUT4_85F, MULT_85F = 83_640, 156
PARAMS = EngineParams2(64, 8192, 512)


def main():
    start = time.perf_counter()
    flat = cell_counts(Core2(PARAMS))
    blocks = block_counts(Core2(PARAMS))
    seconds = time.perf_counter() - start
    print(f"Core2 W = {PARAMS.bus_width}, N_max = {PARAMS.max_features}, "
          f"B_max = {PARAMS.max_batch} (Yosys {seconds:.0f} s)")
    print()
    print("| block | instances | LUT4-eq | per instance | FF | LUT RAM | MULT18X18D | DP16KD |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, c in sorted(blocks.items(), key=lambda item: -item[1]["lut4_eq"]):
        print(f"| {name} | {c['instances']} | {c['lut4_eq']:,} | "
              f"{c['lut4_eq'] // c['instances']:,} | {c['TRELLIS_FF']:,} | "
              f"{c['TRELLIS_DPR16X4']} | {c['MULT18X18D']} | {c['DP16KD']} |")
    total = sum(c["lut4_eq"] for c in blocks.values())
    print(f"| blocks' sum | | {total:,} | | | | | |")
    print(f"| **flat** | | **{flat['lut4_eq']:,}** ({100 * flat['lut4_eq'] / LUT4_85F:.0f} % "
          f"of the 85F) | | {flat['TRELLIS_FF']:,} | {flat['TRELLIS_DPR16X4']} | "
          f"{flat['MULT18X18D']} "
          f"({100 * flat['MULT18X18D'] / MULT_85F:.0f} %) | {flat['DP16KD']} |")
