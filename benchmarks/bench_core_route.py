"""How far ``router1`` gets with engine v2's core: ``Core2`` (W = 64, N_max = 8192, B_max =
512) placed by nextpnr-ecp5's static placer (85F, speed 6, target 125 MHz, seed 1) out of
context, its placement's wiring by block (``zipsgd.hw.placed_timing.wire_length``), then the
same netlist placed again and routed by ``router1`` for at most ``ZIPSGD_CORE_ROUTE_MINUTES``
minutes (default 150; the core has routed in 106 minutes of routing): the arcs left after
every hundred thousand iterations and at the end
(``zipsgd.hw.synth.router_progress``), or the fmax if it routes.  A change to the core is
judged by these figures (``docs/HARDWARE.md``, "Routing the lanes").

Run: ``python -m benchmarks core_route`` (about two and a half hours: two placements and the
route; builds in ``build/core_route/``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from zipsgd.hw.synth import ROUTER_V2, BuildError, router_progress, run_block
from zipsgd.hw.v2.core import Core2
from zipsgd.spec.engine2 import EngineParams2

TARGET_MHZ = 125.0
STEP = 100_000


def _core():
    return Core2(EngineParams2(64, 8192, 512))


def main():
    minutes = float(os.environ.get("ZIPSGD_CORE_ROUTE_MINUTES", "150"))
    placed = run_block(_core, out_dir="build/core_route/placed", seed=1, freq_mhz=TARGET_MHZ,
                       route=False, placer="static", router=ROUTER_V2)
    used = {k: v["used"] for k, v in placed["resources"].items()}
    print(f"placement: {used.get('LUT4', 0)} TRELLIS_COMB, {used.get('FF', 0)} FF, "
          f"{used.get('DP16KD', 0)} DP16KD, "
          f"{placed['build_seconds']:.0f} s")
    wires = placed["wire_length"]
    print("| block | wiring (tiles) | share |")
    print("|---|---:|---:|")
    for block, tiles in wires.items():
        if block != "total":
            print(f"| {block} | {tiles:,} | {100 * tiles / wires['total']:.1f} % |")
    print(f"| total | {wires['total']:,} | |", flush=True)

    out = Path("build/core_route/routed")
    try:
        routed = run_block(_core, out_dir=out, seed=1, freq_mhz=TARGET_MHZ, placer="static",
                           router=ROUTER_V2, timeout_s=60 * minutes)
    except BuildError:
        routed = None
    log = (out / "top.tim").read_text()
    progress = router_progress(log)
    arcs = re.search(r"Routing (\d+) arcs", log)
    print(f"router1: {int(arcs.group(1)) if arcs else 0:,} arcs to route")
    print("| iterations | arcs left | router's seconds |")
    print("|---:|---:|---:|")
    for iterations, left, seconds in progress:
        if iterations % STEP == 0 or (iterations, left, seconds) == progress[-1]:
            print(f"| {iterations:,} | {left:,} | {seconds:.0f} |")
    if routed is None:
        print(f"not routed within {minutes:g} minutes")
    else:
        fmax = min(c["fmax_mhz"] for c in routed["clocks"].values())
        print(f"routed in {routed['router_seconds']:.0f} s of routing: {fmax:.1f} MHz")


if __name__ == "__main__":
    main()
