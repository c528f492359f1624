"""How hard engine v2's lanes are to route without the rest of the core: the lane array
(``benchmarks/lane_array.py``: the gearbox, ``L`` lanes with their block RAMs, the segmented
sum and the reduction tree) placed by nextpnr-ecp5's static placer and routed by ``router2``
(ECP5-85F speed 6, 125 MHz target, seed 1) in the out-of-context harness, at 8 and 16 lanes.
The figure that matters is ``router2``'s iterations and its overuse after the first, a rough
measure of the lanes' crowding around their memories (``docs/HARDWARE.md``, "Routing the
lanes").  The lane array's fmax is not the engine's: its gearbox
feeds the lanes without the core's window stage.

Run: ``python -m benchmarks lane_route`` (about eight minutes; builds in
``build/lane_route/``).  32 lanes do not finish in reasonable time.
"""

from __future__ import annotations

import time

from benchmarks.lane_array import LaneArray
from zipsgd.hw.synth import run_block

BUS_WIDTHS = (16, 32)          # 8 and 16 lanes
TARGET_MHZ = 125.0


def main():
    print("| lanes | LUT4 | DP16KD | router2 iterations | overuse after iteration 1 | "
          "fmax (MHz) | build s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for width in BUS_WIDTHS:
        start = time.perf_counter()
        summary = run_block(lambda w=width: LaneArray(w), out_dir=f"build/lane_route/w{width}",
                            seed=1, freq_mhz=TARGET_MHZ, placer="static")
        used = {k: v["used"] for k, v in summary["resources"].items()}
        overuse = summary["router_overuse"]
        fmax = min(c["fmax_mhz"] for c in summary["clocks"].values())
        print(f"| {width // 2} | {used.get('LUT4', 0)} | {used.get('DP16KD', 0)} | "
              f"{len(overuse)} | {overuse[0] if overuse else 0} | {fmax:.1f} | "
              f"{time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
