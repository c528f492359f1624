"""``hw.cellcount``: the LUT4-equivalent count, and a block's cells from Yosys alone."""

from __future__ import annotations

from zipsgd.hw.cellcount import cell_counts, lut4_equivalent
from zipsgd.hw.v2.stage import MirrorStage


def test_lut4_equivalent_counts_carries_and_lut_ram():
    assert lut4_equivalent({"LUT4": 10, "CCU2C": 3, "TRELLIS_DPR16X4": 2}) == 10 + 6 + 12
    assert lut4_equivalent({}) == 0


def test_a_mirror_stage_is_lut_ram():
    """The window stages' mirrors hold their entries in LUT RAM, four bits a cell, not in
    flip-flops (``docs/HARDWARE.md``, "The window stages")."""
    counts = cell_counts(MirrorStage(16, depth=8))
    assert counts["TRELLIS_DPR16X4"] == 4
    assert counts["TRELLIS_FF"] <= 8             # the two pointers
    assert counts["lut4_eq"] == lut4_equivalent(counts) >= 24
