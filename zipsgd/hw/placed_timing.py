"""The longest paths of a placed ECP5 design, before routing.

nextpnr reports a placed design's estimated fmax but no path (``--no-route``), and a design
too congested to route in reasonable time never gets one.  This walks the placed netlist
(``nextpnr-ecp5 --write``) with nextpnr's own placement estimate for every net
(``Arch::predictDelay``: 0.12 ns x (3 + the tiles beyond five + twice those within five), per
axis, at speed 6; no delay on carry and slice-internal links) and nominal cell delays, and
returns the worst endpoints with their paths.  Its times rank paths like nextpnr's estimate;
they are not a timing sign-off (``docs/HARDWARE.md``, "Timing").
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

__all__ = ["net_estimate_ns", "placed_paths", "wire_length"]

#: nextpnr's per-unit estimate at speed 6 (``120 - 22 * speed`` ps, speed 6 is 0).
UNIT_NS = 0.120
#: Sequential cells: paths start at their outputs and end at their inputs.
_SEQUENTIAL = {"TRELLIS_FF", "DP16KD", "PDPW16KD", "MULT18X18D", "ALU54B", "TRELLIS_IO",
               "DCCA", "EHXPLLL", "IOLOGIC", "SIOLOGIC", "TRELLIS_RAMW"}
#: A distributed RAM's write pins (its read, A-D to F, is a look-up).
_RAM_WRITE = {"WD", "WAD0", "WAD1", "WAD2", "WAD3", "WRE"}
#: A slice half's outputs and the inputs that reach them (the carry, FCI, aside).
_FEEDS = {"F": {"A", "B", "C", "D"}, "FCO": {"A", "B", "C", "D"},
          "OFX": {"A", "B", "C", "D", "M", "F1", "FXA", "FXB"}}
#: Cells whose outputs are not paths: clock buffers (the reset of a harness), constants.
_NOT_SOURCES = {"DCCA", "EHXPLLL", "VHI", "VLO", "TRELLIS_RAMW"}
_CLOCK_PORTS = {"CLK", "WCK", "CLKA", "CLKB", "CLKI", "CLKW", "CLKR", "CLK0", "CLK1", "CLK2",
                "CLK3"}
#: Nominal delays (ns): clock to output, setup, through a LUT or carry cell.
_LAUNCH = {"TRELLIS_FF": 0.45, "DP16KD": 4.6, "PDPW16KD": 4.6, "MULT18X18D": 1.0}
_SETUP = {"TRELLIS_FF": 0.1, "DP16KD": 0.2, "PDPW16KD": 0.2, "MULT18X18D": 3.5}


def net_estimate_ns(driver: tuple[int, int], sink: tuple[int, int], driver_port: str = "",
                    sink_port: str = "") -> float:
    """nextpnr-ecp5's placement estimate of a net from ``driver`` to ``sink`` (tile x, y)."""
    if (driver_port == "FCO" and sink_port == "FCI") or sink_port in ("FXA", "FXB") or \
            (driver_port == "F" and sink_port == "DI"):
        return 0.0
    dx, dy = abs(driver[0] - sink[0]), abs(driver[1] - sink[1])
    units = 3 + max(dx - 5, 0) + max(dy - 5, 0) + 2 * (min(dx, 5) + min(dy, 5))
    return UNIT_NS * units


def wire_length(placed: str | Path | dict, prefix: str = "engine.") -> dict[str, int]:
    """Each block's share of a placed design's wiring: the half-perimeter (in tiles) of every
    net's bounding box, summed by the block of the net's driver (the submodule after
    ``prefix``, digits dropped, so that ``lane3`` counts as ``lane``; ``(own)`` for the cells
    of ``prefix``'s own module, ``(top)`` for those outside it), largest first, with the
    total under ``"total"``.  The placer minimizes this
    figure, and a change to a block shows in it after placement alone, before the router's
    hour (``docs/HARDWARE.md``, "Routing the lanes")."""
    design = placed if isinstance(placed, dict) else json.loads(Path(placed).read_text())
    cells = design["modules"]["top"]["cells"]
    pins, owner = collections.defaultdict(list), {}
    for name, cell in cells.items():
        bel = re.match(r"X(\d+)/Y(\d+)", cell.get("attributes", {}).get("NEXTPNR_BEL", ""))
        if not bel:
            continue
        at = (int(bel.group(1)), int(bel.group(2)))
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            if port in _CLOCK_PORTS:
                continue
            for bit in bits:
                if isinstance(bit, str):             # a constant
                    continue
                pins[bit].append(at)
                if directions.get(port) == "output":
                    block = re.match(re.escape(prefix) + r"(?:([A-Za-z_]+)\d*\.)?", name)
                    owner[bit] = "(top)" if not block else block.group(1) or "(own)"
    total = collections.Counter()
    for bit, at in pins.items():
        if bit in owner and len(at) > 1:
            xs, ys = [p[0] for p in at], [p[1] for p in at]
            total[owner[bit]] += max(xs) - min(xs) + max(ys) - min(ys)
    shares = dict(total.most_common())
    shares["total"] = sum(total.values())
    return shares


def _through(cell_type: str, pin: str, out: str) -> float:
    if cell_type == "TRELLIS_COMB":
        if pin == "FCI":
            return 0.05 if out == "FCO" else 0.25
        return {"FCO": 0.4, "OFX": 0.35}.get(out, 0.25)
    return 0.1


def placed_paths(placed: str | Path | dict, count: int = 10,
                 match: str | None = None) -> list[dict]:
    """The ``count`` worst endpoints of a placed design (one per start and end pair; a
    distributed RAM's write is an endpoint, its read a look-up), each
    ``{"ns", "endpoint", "port", "path"}`` with ``path`` a list of ``{"ns", "cell", "type",
    "port", "tile"}`` from the start; ``match`` (a regular expression) keeps the endpoints
    whose ``cell.port`` it finds."""
    design = placed if isinstance(placed, dict) else json.loads(Path(placed).read_text())
    cells = design["modules"]["top"]["cells"]
    tile, ins, outs = {}, collections.defaultdict(list), collections.defaultdict(list)
    driver, sinks = {}, collections.defaultdict(list)
    for name, cell in cells.items():
        bel = re.match(r"X(\d+)/Y(\d+)", cell.get("attributes", {}).get("NEXTPNR_BEL", ""))
        tile[name] = (int(bel.group(1)), int(bel.group(2))) if bel else (0, 0)
        directions = cell.get("port_directions", {})
        for port, bits in cell["connections"].items():
            for bit in bits:
                if isinstance(bit, str):             # a constant
                    continue
                if directions.get(port) == "output":
                    driver[bit] = (name, port)
                    outs[name].append((port, bit))
                else:
                    sinks[bit].append((name, port))
                    ins[name].append((port, bit))
    ram = {name for name, cell in cells.items()
           if cell["type"] == "TRELLIS_COMB" and cell["connections"].get("WCK")}

    def endpoint(name, port):
        return cells[name]["type"] in _SEQUENTIAL or (name in ram and port in _RAM_WRITE)

    def feeds(name, pin, out):
        """Input ``pin`` of a look-up cell reaches output ``out`` (a slice's halves feed each
        other's muxes, F1 and FXA/FXB to OFX, so cell by cell they would be a loop)."""
        if pin in _CLOCK_PORTS or endpoint(name, pin):
            return False
        if cells[name]["type"] != "TRELLIS_COMB":
            return True
        return pin in _FEEDS.get(out, ()) or (pin == "FCI" and out in ("F", "FCO"))

    arrival, via, pin_arrival = {}, {}, {}
    # Per look-up output: the inputs with a driver it still waits for.
    pending = {(name, out): sum(1 for pin, bit in ins[name] if bit in driver
                                and feeds(name, pin, out))
               for name, cell in cells.items() if cell["type"] not in _SEQUENTIAL
               for out, _ in outs[name]}
    waiting = collections.defaultdict(list)       # (cell, input) -> outputs it feeds
    for (name, out) in pending:
        for pin, _ in ins[name]:
            if feeds(name, pin, out):
                waiting[(name, pin)].append(out)
    ready = collections.deque(key for key, n in pending.items() if n == 0)
    never = float("-inf")

    def reach(bit):
        """Carry ``bit``'s arrival to its sinks' pins; queue the outputs it completes."""
        src, src_port = driver[bit]
        for name, port in sinks[bit]:
            if port in _CLOCK_PORTS:
                continue
            t = arrival[bit] + net_estimate_ns(tile[src], tile[name], src_port, port)
            if t > pin_arrival.get((name, port), (never,))[0]:
                pin_arrival[(name, port)] = (t, bit)
            for out in waiting.get((name, port), ()):
                pending[(name, out)] -= 1
                if pending[(name, out)] == 0:
                    ready.append((name, out))

    for name, cell in cells.items():
        if cell["type"] in _SEQUENTIAL:
            for port, bit in outs[name]:
                arrival[bit] = never if cell["type"] in _NOT_SOURCES else \
                    _LAUNCH.get(cell["type"], 0.5)
                via[bit] = (name, port, None)
                reach(bit)
    out_bits = {(name, port): bit for name in cells for port, bit in outs[name]}
    while ready:
        name, out = ready.popleft()
        bit = out_bits[(name, out)]
        best, best_pin = never, None
        for pin, _ in ins[name]:
            if (name, pin) in pin_arrival and feeds(name, pin, out):
                t = pin_arrival[(name, pin)][0] + _through(cells[name]["type"], pin, out)
                if t > best:
                    best, best_pin = t, pin
        arrival[bit], via[bit] = best, (name, out, best_pin)
        reach(bit)
    pattern = re.compile(match) if match else None
    ends = sorted(((t + _SETUP.get(cells[name]["type"], 0.1), name, port, bit)
                   for (name, port), (t, bit) in pin_arrival.items()
                   if endpoint(name, port) and port not in _CLOCK_PORTS
                   and t > 0 and (pattern is None or pattern.search(f"{name}.{port}"))),
                  reverse=True)
    out, seen = [], set()
    for t, name, port, bit in ends:
        if len(out) >= count:
            break
        path = []
        while bit is not None:
            cell, cell_port, pin = via[bit]
            path.append({"ns": round(arrival[bit], 2), "cell": cell,
                         "type": cells[cell]["type"], "port": cell_port, "tile": tile[cell]})
            bit = pin_arrival[(cell, pin)][1] if pin is not None else None
        path.reverse()
        key = (path[0]["cell"], name)
        if key in seen:
            continue
        seen.add(key)
        out.append({"ns": round(t, 2), "endpoint": name, "port": port, "path": path})
    return out
