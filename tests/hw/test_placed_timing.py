"""``hw.placed_timing``: nextpnr's placement estimate per net, the longest path through a
small placed netlist, constants and clock buffers ignored."""

from __future__ import annotations

import pytest

from zipsgd.hw.placed_timing import net_estimate_ns, placed_paths, wire_length


def cell(kind, x, y, ports):
    return {"type": kind, "attributes": {"NEXTPNR_BEL": f"X{x}/Y{y}/SLICEA"},
            "port_directions": {p: d for p, (d, _) in ports.items()},
            "connections": {p: bits for p, (_, bits) in ports.items()}}


def test_net_estimate_is_nextpnrs_formula():
    assert net_estimate_ns((0, 0), (0, 0)) == pytest.approx(0.36)
    assert net_estimate_ns((0, 0), (10, 0)) == pytest.approx(0.12 * (3 + 5 + 10))
    assert net_estimate_ns((3, 4), (33, 44)) == pytest.approx(0.12 * (3 + 25 + 35 + 20))
    assert net_estimate_ns((0, 0), (40, 0), "FCO", "FCI") == 0.0
    assert net_estimate_ns((0, 0), (40, 0), "F", "DI") == 0.0


def test_longest_path_through_a_placed_netlist():
    cells = {
        "a": cell("TRELLIS_FF", 0, 0, {"CLK": ("input", [1]), "Q": ("output", [2])}),
        "k": cell("TRELLIS_FF", 0, 1, {"CLK": ("input", [1]), "Q": ("output", [5])}),
        "lut": cell("TRELLIS_COMB", 10, 0, {"A": ("input", [2]), "B": ("input", [5]),
                                            "C": ("input", ["0"]), "F": ("output", [3])}),
        # (An enable: a LUT's output into its own slice's flip-flop, DI, costs nothing.)
        "b": cell("TRELLIS_FF", 20, 0, {"CLK": ("input", [1]), "CE": ("input", [3]),
                                        "Q": ("output", [4])}),
        "near": cell("TRELLIS_FF", 0, 0, {"CLK": ("input", [1]), "DI": ("input", [2]),
                                          "Q": ("output", [6])}),
        # A clock buffer's output (a harness's reset) starts no path.
        "gbuf": cell("DCCA", 50, 50, {"CLKO": ("output", [7])}),
        "r": cell("TRELLIS_FF", 0, 90, {"CLK": ("input", [1]), "LSR": ("input", [7]),
                                        "Q": ("output", [8])}),
    }
    design = {"modules": {"top": {"cells": cells}}}
    worst = placed_paths(design, count=5)
    assert [w["endpoint"] for w in worst] == ["b", "near"]
    # The later of the LUT's inputs (from k, a tile further) sets its output.
    expected = 0.45 + net_estimate_ns((0, 1), (10, 0)) + 0.25 + \
        net_estimate_ns((10, 0), (20, 0)) + 0.1
    assert worst[0]["ns"] == pytest.approx(expected, abs=0.01)
    assert [step["cell"] for step in worst[0]["path"]] == ["k", "lut"]
    assert placed_paths(design, count=5, match=r"^near\.")[0]["endpoint"] == "near"


def test_a_slices_mux_halves_are_no_loop():
    # Half A's F feeds half B's F1 (B's OFX = mux(F, F1)), and B's OFX feeds A's FXA (A's OFX):
    # cell by cell a loop, pin by pin none.
    cells = {
        "q": cell("TRELLIS_FF", 0, 0, {"CLK": ("input", [1]), "Q": ("output", [2])}),
        "a": cell("TRELLIS_COMB", 1, 0, {"A": ("input", [2]), "FXA": ("input", [4]),
                                         "F": ("output", [3]), "OFX": ("output", [5])}),
        "b": cell("TRELLIS_COMB", 1, 0, {"A": ("input", [2]), "F1": ("input", [3]),
                                         "OFX": ("output", [4])}),
        "d": cell("TRELLIS_FF", 1, 0, {"CLK": ("input", [1]), "M": ("input", [5]),
                                       "Q": ("output", [6])}),
    }
    worst = placed_paths({"modules": {"top": {"cells": cells}}}, count=1)
    assert worst[0]["endpoint"] == "d"
    assert [step["cell"] for step in worst[0]["path"]] == ["q", "a", "b", "a"]


def test_wire_length_by_the_drivers_block():
    cells = {
        "engine.lane3.q": cell("TRELLIS_FF", 0, 0, {"CLK": ("input", [1]), "Q": ("output", [2])}),
        "engine.lane12.q": cell("TRELLIS_FF", 5, 5, {"CLK": ("input", [1]), "Q": ("output", [3])}),
        "engine.updater.a": cell("TRELLIS_COMB", 10, 2, {"A": ("input", [2]), "B": ("input", [3]),
                                                          "C": ("input", ["1"]),
                                                          "F": ("output", [4])}),
        "engine.updater.d": cell("TRELLIS_FF", 10, 9, {"CLK": ("input", [1]), "M": ("input", [4]),
                                                        "Q": ("output", [5])}),
        "harness": cell("TRELLIS_FF", 40, 40, {"CLK": ("input", [1]), "M": ("input", [5]),
                                               "Q": ("output", [6])}),
        "engine.e_lo2": cell("TRELLIS_FF", 40, 41, {"CLK": ("input", [1]), "M": ("input", [6]),
                                                    "Q": ("output", [7])}),
        "engine.lane0.f": cell("TRELLIS_FF", 40, 44, {"CLK": ("input", [1]), "M": ("input", [7]),
                                                      "Q": ("output", [8])}),
        # (The clock's net and a net without sinks add nothing.)
        "clk": cell("DCCA", 60, 60, {"CLKO": ("output", [1])}),
    }
    shares = wire_length({"modules": {"top": {"cells": cells}}})
    # lane: 0,0 -> 10,2 (12) and 5,5 -> 10,2 (8); updater: 10,2 -> 10,9 (7) and
    # 10,9 -> 40,40 (61); the core's own register e_lo2 (3), the harness (1).
    assert shares == {"updater": 68, "lane": 20, "(own)": 3, "(top)": 1, "total": 92}
    assert list(shares)[:2] == ["updater", "lane"]
