"""fmax of engine v2's blocks, each placed and routed alone (nextpnr-ecp5, ECP5-85F speed 6,
125 MHz target) in the out-of-context harness (``zipsgd.hw.ooc.BlockOocTop``: every input a
flip-flop of an LFSR chain, every output registered), at placement seeds 1-3: a block that
misses 125 MHz alone cannot make it in the core.  W = 64, N_max = 8192.  The cell counts
include the harness (about a flip-flop per port bit).

Run: ``python -m benchmarks block_timing`` (about fifteen minutes; builds in ``build/blocks/``);
``python benchmarks/bench_block_timing.py segmented updater`` for some of the blocks.
"""

from __future__ import annotations

import sys
import time

from zipsgd.hw.synth import run_block
from zipsgd.hw.v2.gearbox import FieldGearbox
from zipsgd.hw.v2.lane import PRODUCT_WIDTH, Lane
from zipsgd.hw.v2.sample import SampleUnit
from zipsgd.hw.v2.sequencer import WindowSequencer
from zipsgd.hw.v2.trees import SegmentedSum
from zipsgd.hw.v2.updater import Updater
from zipsgd.spec.engine2 import EngineParams2

PARAMS = EngineParams2(64, 8192, 512)
SEEDS = (1, 2, 3)
TARGET_MHZ = 125.0
ADDRESS_BITS = (PARAMS.lane_capacity - 1).bit_length()

BLOCKS = {
    "lane (raw words)": lambda: Lane(PARAMS.lane_capacity, raw=True),
    "sample unit": lambda: SampleUnit(PARAMS.dot_width),
    "segmented sum": lambda: SegmentedSum(PARAMS.lanes, PRODUCT_WIDTH, PARAMS.dot_width),
    "gearbox": lambda: FieldGearbox(PARAMS.bus_width),
    "sequencer": lambda: WindowSequencer(PARAMS.lanes, ADDRESS_BITS),
    "updater": lambda: Updater(PARAMS),
}


def main(names=()):
    """Every block, or those whose name starts with one of ``names``."""
    print("| block | fmax seed 1 (MHz) | seeds 1-3 (MHz) | LUT4 | FF | MULT18X18D | DP16KD | "
          "build s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in BLOCKS.items():
        if names and not any(name.startswith(n) for n in names):
            continue
        fmax, used, seconds = [], {}, 0.0
        for seed in SEEDS:
            start = time.perf_counter()
            slug = name.split()[0]
            summary = run_block(make, out_dir=f"build/blocks/{slug}-s{seed}", seed=seed,
                                freq_mhz=TARGET_MHZ)
            seconds += time.perf_counter() - start
            fmax.append(min(c["fmax_mhz"] for c in summary["clocks"].values()))
            used = {k: v["used"] for k, v in summary["resources"].items()}
        print(f"| {name} | {fmax[0]:.1f} | {min(fmax):.1f} - {max(fmax):.1f} | "
              f"{used.get('LUT4', 0)} | {used.get('FF', 0)} | {used.get('MULT18X18D', 0)} | "
              f"{used.get('DP16KD', 0)} | {seconds / len(SEEDS):.0f} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
