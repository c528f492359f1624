"""Lane cost of engine v2 from Yosys alone (issue goal: <= 300 LUT4-equivalents, carry cells
counted as two, and <= 2 MULT18X18D per lane): the lane array at ``L`` and ``2 L`` lanes, and
the difference divided by ``L``.  Each build is Yosys ``synth_ecp5`` only (about a minute).

Run: ``python -m benchmarks lane_cost``.
"""

from __future__ import annotations

import time

from zipsgd.hw.cellcount import cell_counts

from .lane_array import LaneArray

#: (bus width, lanes) pairs measured: W = 2 L.
SIZES = ((32, 16), (64, 32), (128, 64))


def main():
    rows = []
    for bus_width, lanes in SIZES:
        start = time.perf_counter()
        counts = cell_counts(LaneArray(bus_width), "lane_array")
        rows.append((lanes, counts, time.perf_counter() - start))
    print("| lanes | LUT4 | CCU2C | LUT4-eq | FF | MULT18X18D | DP16KD | Yosys s |")
    print("|---|---|---|---|---|---|---|---|")
    for lanes, c, seconds in rows:
        print(f"| {lanes} | {c['LUT4']} | {c['CCU2C']} | {c['lut4_eq']} | {c['TRELLIS_FF']} | "
              f"{c['MULT18X18D']} | {c['DP16KD']} | {seconds:.0f} |")
    print()
    print("| L -> 2L | LUT4-eq per lane | FF per lane | MULT18X18D per lane | DP16KD per lane |")
    print("|---|---|---|---|---|")
    for (l1, c1, _), (l2, c2, _) in zip(rows, rows[1:], strict=False):
        step = l2 - l1
        print(f"| {l1} -> {l2} | {(c2['lut4_eq'] - c1['lut4_eq']) / step:.0f} | "
              f"{(c2['TRELLIS_FF'] - c1['TRELLIS_FF']) / step:.0f} | "
              f"{(c2['MULT18X18D'] - c1['MULT18X18D']) / step:.1f} | "
              f"{(c2['DP16KD'] - c1['DP16KD']) / step:.1f} |")
