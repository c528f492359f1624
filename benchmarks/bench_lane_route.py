"""How hard engine v2's lanes are to route without the rest of the core: the lane array
(``benchmarks/lane_array.py``: the gearbox, ``L`` lanes with their block RAMs, the segmented
sum and the reduction tree) placed by nextpnr-ecp5's static placer and routed (ECP5-85F speed 6,
125 MHz target, seed 1) in the out-of-context harness: with ``router1``, the flow's router for
engine v2, at 8, 16 and 32 lanes (32: the W = 64 engine's), and with ``router2`` at 8 lanes
for comparison (its iterations and its overuse after the first; at 32 lanes it does not
converge, ``docs/results/synthesis.md``).  The lane array's fmax is not the engine's: its
gearbox feeds the lanes without the core's window stage.

Run: ``python -m benchmarks lane_route`` (about 25 minutes; builds in ``build/lane_route/``).
"""

from __future__ import annotations

import time

from benchmarks.lane_array import LaneArray
from zipsgd.hw.synth import ROUTER_V2, run_block

#: (bus width, router): the lanes are half the bus width.
RUNS = ((16, ROUTER_V2), (32, ROUTER_V2), (64, ROUTER_V2), (16, "router2"))
TARGET_MHZ = 125.0


def main():
    print("| lanes | router | LUT4 | DP16KD | routed | router s | router2 iterations | "
          "overuse after iteration 1 | fmax (MHz) | build s |")
    print("|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for width, router in RUNS:
        start = time.perf_counter()
        summary = run_block(lambda w=width: LaneArray(w),
                            out_dir=f"build/lane_route/w{width}-{router}", seed=1,
                            freq_mhz=TARGET_MHZ, placer="static", router=router)
        used = {k: v["used"] for k, v in summary["resources"].items()}
        overuse = summary["router_overuse"]
        seconds = summary["router_seconds"]
        fmax = min(c["fmax_mhz"] for c in summary["clocks"].values())
        print(f"| {width // 2} | {router} | {used.get('LUT4', 0)} | {used.get('DP16KD', 0)} | "
              f"{'yes' if seconds is not None else 'no'} | "
              f"{'-' if seconds is None else f'{seconds:.0f}'} | "
              f"{len(overuse) if overuse else '-'} | {overuse[0] if overuse else '-'} | "
              f"{fmax:.1f} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
