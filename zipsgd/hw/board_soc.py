"""Engine v2 in a LiteX SoC on a real board, and its bitstream build (``docs/HARDWARE.md``,
"The board SoCs").

Each SoC is the board's own LiteX target (``litex_boards.targets``: its clocking, its DRAM
module and PHY) with no CPU, no UART console, no timer and no L2 cache; LiteDRAM's controller;
the engine (its Amaranth Verilog as an instance, :func:`~zipsgd.hw.soc.add_engine`) with its
AXI4 master on a LiteDRAM port and its AXI4-Lite registers on the bus; and the host's bridges:
LiteX's UART bridge (UARTBone) on every board, Etherbone (LiteEth) also on the ECPIX-5.  A host
with ``litex_server`` and ``RemoteClient`` drives it as any LiteX SoC.

:func:`write_board_soc` writes the SoC's files (its Verilog, the engine's RTLIL, the board's
LPF, a Yosys script with the engine's build commands, the build script, ``csr.json`` and
``soc.json``, which the host driver reads); :func:`run_soc_synth` runs that script with the
YoWASP tools and reports fmax and use as ``zipsgd synth`` does for the engine alone.
"""

from __future__ import annotations

import importlib
import json
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil
from litex.soc.integration.builder import Builder
from migen import Signal

from ..spec.engine2 import BOARD_PARAMS2, EngineParams2
from ..spec.errors import ConfigError
from ..spec.soc import SYSTEM_CLOCK_HZ
from .soc import (
    ENGINE_BASE,
    SIM_SDR16,
    SimDram,
    add_engine,
    csr_map,
    dram_phy,
    etherbone_defaults,
    init_sequence,
    quiet_litex,
)
from .synth import (
    KEEP_REPLICAS,
    LUT_MAPPING,
    PLACER_V2,
    ROUTER_V2,
    UNDEFINED_COLLISIONS,
    nextpnr_options,
    require_timing,
    run_build_script,
    summarize,
    use_yowasp,
    write_summary,
)
from .v2.top import TOP_NAME2, ZipsgdEngine2

__all__ = ["SocBoard", "SOC_BOARDS", "SOC_TOP", "SOC_PARAMS", "SOC_BAUD", "board_soc",
           "write_board_soc", "run_soc_synth"]

#: The SoC's top-level module (and the stem of its build files).
SOC_TOP = "zipsgd_soc"
#: The engine a board SoC holds unless told otherwise.
SOC_PARAMS = BOARD_PARAMS2
#: The UART bridge's rate: every board's USB serial bridge (FT231X, FT2232H) and common 3.3 V
#: adapters reach it; at 10 bits a byte it uploads 100 kB/s.
SOC_BAUD = 1_000_000


@dataclass(frozen=True)
class SocBoard:
    """A board the SoC is built for: its ``litex_boards`` target module, the keyword
    arguments of that target's ``BaseSoC``, its system clock, its DRAM and its bridges.
    ``serial`` names a resource list in the board's platform module that adds the UART pins
    (a board with no USB serial bridge of its own).  ``sim`` is the simulated SoC's DRAM
    configuration that stands for the board's (its module's timings, its PHY's settings, its
    clock), in which its bandwidth is measured (``python -m benchmarks dram``)."""

    name: str
    target: str
    options: tuple
    clock_hz: float
    dram: str
    bridges: tuple
    sim: SimDram
    serial: str | None = None


SOC_BOARDS = {
    "ulx3s-85f": SocBoard(
        "ulx3s-85f", "litex_boards.targets.radiona_ulx3s",
        (("device", "LFE5U-85F"), ("sdram_module_cls", "AS4C32M16")),
        SYSTEM_CLOCK_HZ["ulx3s-85f"],
        "AS4C32M16 SDR SDRAM, 16 bits, 64 MiB", ("uart",), SIM_SDR16),
    "orangecrab-85f": SocBoard(
        "orangecrab-85f", "litex_boards.targets.gsd_orangecrab",
        (("device", "85F"), ("revision", "0.2"), ("sdram_device", "MT41K64M16")),
        SYSTEM_CLOCK_HZ["orangecrab-85f"],
        "MT41K64M16 DDR3, 16 bits, 128 MiB", ("uart",),
        SimDram("orangecrab-85f", "MT41K64M16", "ecp5ddr3", SYSTEM_CLOCK_HZ["orangecrab-85f"]),
        serial="feather_serial"),
    "ecpix5-85": SocBoard(
        "ecpix5-85", "litex_boards.targets.lambdaconcept_ecpix5",
        (("device", "85F"), ("with_etherbone", True)), SYSTEM_CLOCK_HZ["ecpix5-85"],
        "MT41K256M16 DDR3, 16 bits, 512 MiB", ("uart", "etherbone"),
        SimDram("ecpix5-85", "MT41K256M16", "ecp5ddr3", SYSTEM_CLOCK_HZ["ecpix5-85"])),
}


def etherbone_address() -> dict:
    """A board's Etherbone bridge, ``soc.json``'s ``etherbone``: where it answers (``ip``,
    ``port``) and the most words a write record carries (``max_words``); LiteX's defaults,
    :func:`~zipsgd.hw.soc.etherbone_defaults`."""
    defaults = etherbone_defaults()
    return {key: defaults[key] for key in ("ip", "port", "max_words")}


def _board(board: str) -> SocBoard:
    if board not in SOC_BOARDS:
        raise ConfigError(f"board must be one of {sorted(SOC_BOARDS)}, found {board!r}")
    return SOC_BOARDS[board]


def board_soc(board: str, params: EngineParams2 = SOC_PARAMS, *, baud: int = SOC_BAUD,
              clock_hz: float | None = None):
    """The LiteX SoC of ``board`` (a key of :data:`SOC_BOARDS`) with the engine at ``params``
    and its UART bridge at ``baud``.

    Raises
    ------
    ConfigError
        Unknown board, or a rate or clock out of range.
    """
    spec = _board(board)
    clock_hz = spec.clock_hz if clock_hz is None else clock_hz
    if not (isinstance(baud, int) and 9600 <= baud <= clock_hz / 16):
        raise ConfigError(f"the UART bridge's rate must be an integer from 9600 to "
                          f"{clock_hz / 16:.0f} (the clock / 16), found {baud!r}")
    if not 20e6 <= clock_hz <= 100e6:
        raise ConfigError(f"the system clock must be 20 to 100 MHz, found {clock_hz / 1e6:g}")
    target = importlib.import_module(spec.target)
    soc = target.BaseSoC(toolchain="trellis", sys_clk_freq=clock_hz, cpu_type=None,
                         integrated_sram_size=0, with_uart=False, with_timer=False,
                         with_led_chaser=False, l2_size=0, **dict(spec.options))
    if spec.serial is not None:
        platform_module = importlib.import_module(type(soc.platform).__module__)
        soc.platform.add_extension(getattr(platform_module, spec.serial))
    soc.add_uartbone(uart_name="serial", baudrate=baud)
    soc.engine_irq = Signal()  # (no CPU: the host polls STATUS)
    add_engine(soc, params, global_reset=True)
    return soc


def _yosys_script(engine: str, soc: str) -> str:
    """The SoC's Yosys script: the engine's commands (its kept copies, its memories' undefined
    collisions, the ``abc`` LUT mapping) as in the engine's own build (``synth.py``)."""
    return "\n".join([
        f"read_rtlil {engine}",
        f"read_verilog {soc}",
        'attrmap -tocase keep -imap keep="true" keep=1 -imap keep="false" keep=0 -remove keep=0',
        f"hierarchy -top {SOC_TOP}",
        KEEP_REPLICAS,
        UNDEFINED_COLLISIONS,
        f"synth_ecp5 {LUT_MAPPING['synth_opts']} -top {SOC_TOP}",
        LUT_MAPPING["script_after_synth"].format(name=SOC_TOP),
        f"write_json {SOC_TOP}.json",
    ]) + "\n"


def _tool_line(script: str, tool: str) -> list[str]:
    for line in script.splitlines():
        words = shlex.split(line)
        if words and words[0] == tool:
            return words[1:]
    raise ConfigError(f"LiteX's build script has no {tool} command")


def _build_script(litex_script: str, seed: int, placer: str, router: str) -> str:
    """The build script: LiteX's device, package and packing options, the YoWASP tools
    (``$YOSYS``, ``$NEXTPNR_ECP5``, ``$ECPPACK``) and the engine's nextpnr options with
    ``placer`` and ``router``."""
    pnr = _tool_line(litex_script, "nextpnr-ecp5")
    keep, skip = [], False
    for word in pnr:  # (LiteX's --seed and --timing-allow-fail: ours are in nextpnr_options)
        if skip:
            skip = False
        elif word == "--seed":
            skip = True
        elif word != "--timing-allow-fail":
            keep.append(word)
    pack = _tool_line(litex_script, "ecppack")
    return "\n".join([
        "set -e",
        f'"$YOSYS" -q -l {SOC_TOP}.rpt {SOC_TOP}.ys',
        f'"$NEXTPNR_ECP5" {shlex.join(keep)} {nextpnr_options(placer, router)} --seed {seed} '
        f'-l {SOC_TOP}.tim',
        f'"$ECPPACK" {shlex.join(pack)}',
    ]) + "\n"


def write_board_soc(board: str, out_dir, params: EngineParams2 = SOC_PARAMS, *,
                    baud: int = SOC_BAUD, clock_hz: float | None = None, seed: int = 1,
                    placer: str = PLACER_V2, router: str = ROUTER_V2) -> dict:
    """Write ``board``'s SoC into ``out_dir``: its Verilog, the engine's RTLIL, the LPF, the
    Yosys and build scripts, ``csr.json`` and ``soc.json``; return ``soc.json``'s content (board,
    clock, rate, engine parameters, DRAM, the engine's and DRAM's bus addresses, the CSR map
    and the DRAM's init sequence).  Nothing runs.

    Raises
    ------
    ConfigError
        As :func:`board_soc`; or ``seed`` not an integer >= 0, or ``placer`` or ``router`` not
        one of ``PLACERS`` or ``ROUTERS`` (``zipsgd/hw/synth.py``).
    """
    if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
        raise ConfigError(f"seed must be an integer >= 0, found {seed!r}")
    nextpnr_options(placer, router)
    spec = _board(board)
    with quiet_litex():
        soc = board_soc(board, params, baud=baud, clock_hz=clock_hz)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # (The engine as RTLIL, as its own build reads it: its memories' read ports stay
    # synchronous, which marking their collisions undefined needs; from Verilog, Yosys
    # asserts.)
    engine_il = f"{TOP_NAME2}.il"
    (out / engine_il).write_text(rtlil.convert(ZipsgdEngine2(params), name=TOP_NAME2,
                                               emit_src=False))
    with tempfile.TemporaryDirectory(prefix="zipsgd-soc-", dir=out) as tmp, quiet_litex():
        builder = Builder(soc, output_dir=tmp, gateware_dir=tmp, compile_software=False,
                          compile_gateware=False, csr_json=str(Path(tmp) / "csr.json"))
        builder.build(build_name=SOC_TOP, run=False)
        made = Path(tmp)
        litex_script = (made / f"build_{SOC_TOP}.sh").read_text()
        for name in (f"{SOC_TOP}.v", f"{SOC_TOP}.lpf", "csr.json",
                     *(p.name for p in made.glob("*.init"))):
            (made / name).replace(out / name)
    (out / f"{SOC_TOP}.ys").write_text(_yosys_script(engine_il, f"{SOC_TOP}.v"))
    (out / f"build_{SOC_TOP}.sh").write_text(_build_script(litex_script, seed, placer, router))
    csr = json.loads((out / "csr.json").read_text())
    ram = soc.bus.regions["main_ram"]
    facts = {"board": spec.name, "clock_hz": soc.sys_clk_freq, "baud": baud,
             "bridges": list(spec.bridges), "dram": spec.dram, "seed": seed, "placer": placer,
             "router": router,
             "params": {"bus_width": params.bus_width, "max_features": params.max_features,
                        "max_batch": params.max_batch},
             "main_ram_base": ram.origin, "main_ram_size": ram.size,
             "engine_base": ENGINE_BASE, "csrs": csr_map(csr),
             "init": [list(row) for row in init_sequence(soc)], "phy": dram_phy(soc)}
    if "etherbone" in spec.bridges:
        facts["etherbone"] = etherbone_address()
    (out / "soc.json").write_text(json.dumps(facts, indent=1) + "\n")
    return facts


def run_soc_synth(board: str, params: EngineParams2 = SOC_PARAMS, *, out_dir="build/soc",
                  baud: int = SOC_BAUD, clock_hz: float | None = None, seed: int = 1,
                  check: bool = True, timeout_s: float | None = None,
                  placer: str = PLACER_V2, router: str = ROUTER_V2) -> dict:
    """Write ``board``'s SoC (:func:`write_board_soc`) and build its bitstream
    (``out_dir/zipsgd_soc.bit``) with the YoWASP tools; return the :func:`summarize` result
    with how it was made (also in ``out_dir/summary.json``).

    Raises
    ------
    ConfigError
        As :func:`write_board_soc`.
    BuildError
        A tool failed (the message names its log).
    TimingError
        ``check`` and a clock missed its constraint.
    """
    started = time.monotonic()
    facts = write_board_soc(board, out_dir, params, baud=baud, clock_hz=clock_hz, seed=seed,
                            placer=placer, router=router)
    written = time.monotonic()
    use_yowasp()
    out = Path(out_dir)
    run_build_script(f"build_{SOC_TOP}.sh", out,
                     f"see {out}/{SOC_TOP}.rpt (Yosys) and {out}/{SOC_TOP}.tim (nextpnr)",
                     timeout_s)
    summary = summarize(out / "report.json") | {
        key: facts[key] for key in ("board", "clock_hz", "baud", "bridges", "dram", "seed",
                                    "placer", "router", "params", "main_ram_size")}
    summary.update({"build_seconds": round(time.monotonic() - started, 1),
                    "elaborate_seconds": round(written - started, 1),
                    "bitstream": f"{SOC_TOP}.bit"})  # (in the summary's folder)
    write_summary(out, summary)
    if check:
        require_timing(summary, out)
    return summary
