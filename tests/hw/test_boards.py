"""Board tops (``zipsgd/hw/boards.py``) and the build flow (``zipsgd/hw/synth.py``).

Every board top is prepared with ``do_build=False`` (elaboration, pin requests, constraint
files; no tool runs).  The real Yosys/nextpnr/ecppack build is ``slow``.
"""

from __future__ import annotations

import gc
import os
import re
import time
import warnings
from pathlib import Path

import pytest
from amaranth.hdl import Cat, Mux, Signal, UnusedElaboratable

import zipsgd.cli as cli
from zipsgd.cli import main
from zipsgd.hw import synth
from zipsgd.hw.boards import BOARDS, EngineBoardTop, board_platform, pll_dividers
from zipsgd.spec.engine import EngineParams
from zipsgd.spec.errors import ConfigError

SMALL = EngineParams(bus_width=64, max_features=64, max_batch=4)
UART_PINS = {"ulx3s-85f": ("M1", "L4"), "orangecrab-85f": ("N17", "M18"),
             "ecpix5-85": ("R26", "R24")}

REPORT = {  # the shape of nextpnr-ecp5's --report output
    "fmax": {"$glbnet$clk": {"achieved": 87.5, "constraint": 100.0},
             "$glbnet$clk25": {"achieved": 300.0, "constraint": 25.0}},
    "utilization": {"TRELLIS_COMB": {"used": 4000, "available": 83640},
                    "TRELLIS_FF": {"used": 3000, "available": 83640},
                    "DP16KD": {"used": 168, "available": 208},
                    "MULT18X18D": {"used": 0, "available": 156},
                    "TRELLIS_IO": {"used": 7, "available": 365}},
}


@pytest.mark.parametrize("f_in, f_out", [(25, 100), (48, 100), (100, 100), (25, 50), (25, 125)])
def test_pll_dividers_in_range(f_in, f_out):
    pll = pll_dividers(f_in, f_out)
    assert abs(pll.f_out_mhz - f_out) <= 0.01 * f_out
    assert 400 <= pll.f_vco_mhz <= 800
    assert 3.125 <= f_in / pll.clki_div <= 400


def test_pll_25_to_100_is_exact():
    pll = pll_dividers(25, 100)
    assert (pll.clki_div, pll.clkfb_div, pll.f_out_mhz) == (1, 4, 100)


def test_pll_unreachable():
    with pytest.raises(ConfigError, match="no ECP5 PLL setting"):
        pll_dividers(25, 1000)


def test_unknown_board():
    with pytest.raises(ConfigError, match="board must be one of"):
        board_platform("arty")
    # The half-built top dies with the exception: collect it here, where its "created but
    # never used" warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ConfigError, match="board must be one of"):
            EngineBoardTop(SMALL, board="arty")
        with pytest.raises(ConfigError, match="baud"):
            EngineBoardTop(SMALL, freq_mhz=25, baud=12_000_000)
        gc.collect()


@pytest.mark.parametrize("board, ooc", [(board, False) for board in sorted(BOARDS)]
                         + [("ulx3s-85f", True)])
def test_board_top_prepares(board, ooc):
    plan = synth.build_plan(SMALL, board=board, freq_mhz=100, ooc=ooc)
    files = set(plan.files)
    assert {"top.il", "top.lpf", "top.ys", "build_top.sh"} <= files
    lpf = plan.files["top.lpf"]
    # The out-of-context top constrains the clock pin itself; a board top the PLL's net.
    assert f"FREQUENCY {'PORT' if ooc else 'NET'}" in lpf and "100000000.0 HZ" in lpf
    script = plan.files["build_top.sh"]
    assert "--report report.json --detailed-timing-report" in script
    il = plan.files["top.il"]
    assert ("EHXPLLL" in il) != ooc
    # Every limb product is an ECP5 multiplier with its own output register.
    multipliers = il.count("cell \\MULT18X18D ")
    assert multipliers > 0
    assert il.count('parameter \\REG_OUTPUT_CLK "CLK0"') == multipliers
    if not ooc:  # the host link's serial pins
        rx, tx = UART_PINS[board]
        assert re.search(rf'LOCATE COMP "uart_0__rx__io" SITE "{rx}"', lpf), lpf
        assert re.search(rf'LOCATE COMP "uart_0__tx__io" SITE "{tx}"', lpf), lpf


def test_summarize_and_table():
    summary = synth.summarize(REPORT)
    assert summary["timing_met"] is False
    assert summary["clocks"]["$glbnet$clk"] == {"fmax_mhz": 87.5, "target_mhz": 100.0,
                                                "met": False}
    assert summary["resources"]["LUT4"] == {"used": 4000, "available": 83640, "percent": 4.8}
    assert summary["resources"]["DP16KD"]["used"] == 168
    table = synth.format_table(summary)
    assert "| $glbnet$clk | 87.50 | 100.00 | NO |" in table
    assert "| MULT18X18D | 0 | 156 | 0.0 |" in table


def test_late_endpoints_grouped_by_signal():
    """With --detailed-timing-report nets, a failing build lists its late signals: the late
    inputs of each register (the latest arrival, the pin count), latest first, each against
    its own clock's period; a clock that meets its constraint lists nothing."""
    def net(driver, *ends):
        return {"driver": driver, "port": "F", "net": driver, "endpoints": [
            {"cell": cell, "port": port, "event": f"posedge {clock}", "delay": [1.0, arrival]}
            for cell, port, clock, arrival in ends]}

    report = dict(REPORT, detailed_net_timings=[
        net("a_LUT4_Z", ("engine.core.u5_x1_TRELLIS_FF_Q_3", "DI", "$glbnet$clk", 12.5),
            ("engine.core.u5_x1_TRELLIS_FF_Q", "DI", "$glbnet$clk", 11.0),
            ("engine.core.slow_LUT4_Z_A_PFUMX_Z", "C", "$glbnet$clk", 13.25)),
        net("b_LUT4_Z", ("engine.core.ok_TRELLIS_FF_Q", "DI", "$glbnet$clk", 9.5),
            ("engine.regs.latch_TRELLIS_FF_Q_2", "CE", "$glbnet$clk25", 30.0)),
    ])
    late = synth.summarize(report)["late_endpoints"]
    assert late == [
        {"signal": "engine.core.slow", "clock": "$glbnet$clk", "arrival_ns": 13.25,
         "period_ns": 10.0, "pins": 1},
        {"signal": "engine.core.u5_x1", "clock": "$glbnet$clk", "arrival_ns": 12.5,
         "period_ns": 10.0, "pins": 2},
    ]
    assert "| engine.core.u5_x1 | $glbnet$clk | 12.50 | 10.00 | 2 |" in \
        synth.format_table(synth.summarize(report))
    assert "late_endpoints" not in synth.summarize(REPORT)     # no net timings


def test_summarize_reads_file(tmp_path):
    import json

    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    assert synth.summarize(path) == synth.summarize(REPORT)


def test_router_overuse_per_iteration():
    log = ("Info: Running router2...\n"
           "Info:     iter=1 wires=222655 overused=17406 overuse=22078 archfail=NA\n"
           "Info: iter=2 steplen=0.5 a=1.6 penalty=[0.00]\n"
           "Info:     iter=2 wires=236797 overused=3896 overuse=3945 archfail=NA\n"
           "Info:     iter=3 wires=245626 overused=0 overuse=0 archfail=0\n")
    assert synth.router_overuse(log) == [22078, 3945, 0]
    assert synth.router_overuse("Info: Routing complete.\n") == []


def test_router_seconds_of_either_router():
    assert synth.router_seconds("Info: Routing complete.\nInfo: Router1 time 382.43s\n") == 382.43
    assert synth.router_seconds("Info: Router2 time 41.19s\n") == 41.19
    assert synth.router_seconds("Info:     iter=1 wires=2 overused=1 overuse=1\n") is None


def test_router_progress_of_router1():
    log = """Info: Routing 173908 arcs.
Info:            |   (re-)routed arcs  |   delta    | remaining|       time spent     |
Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|
Info:       1000 |      441        558 |  441   558 |    173467|       5.28       5.28|
Info:       2000 |      637       1362 |  294   706 |    172974|       1.38       6.67|
Info:     545000 |   206779     332221 |  555   445 |     11568|      29.45    5427.12|
"""
    assert synth.router_progress(log) == [(1000, 173467, 5.28), (2000, 172974, 6.67),
                                          (545000, 11568, 5427.12)]
    assert synth.router_progress("Info:     iter=1 wires=2 overused=1 overuse=1\n") == []


def test_use_yowasp_sets_environment(monkeypatch):
    # setenv first so that monkeypatch restores the variables (use_yowasp edits os.environ
    # directly; a leaked YOSYS would make Amaranth's Verilog export use the YoWASP Yosys).
    for var in synth.TOOLS:
        monkeypatch.setenv(var, "unset-by-test")
    env = synth.use_yowasp()
    import os

    for var, exe in synth.TOOLS.items():
        assert os.environ[var] == env[var] and env[var].endswith(exe)


def test_cli_timing_failure_exits_1(monkeypatch, capsys, tmp_path):
    summary = synth.summarize(REPORT)

    assert not summary["timing_met"]

    def fake(params, **kwargs):
        assert kwargs["check_timing"] is False  # judged once the folder is published
        return summary

    monkeypatch.setattr(synth, "run_synth", fake)
    status = main(["synth", "--engine", "1", "-o", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert status == 1
    assert "| LUT4 | 4000 |" in out
    assert "timing not met" in err


def test_cli_unknown_board_exits_2(capsys, tmp_path):
    assert main(["synth", "--board", "arty", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'arty'" in err and "ulx3s-85f" in err


@pytest.mark.slow
def test_real_build_ulx3s(tmp_path):
    """Yosys + nextpnr + ecppack on the ULX3S-85F with a small engine (minutes)."""
    summary = synth.run_synth(SMALL, board="ulx3s-85f", freq_mhz=50, out_dir=tmp_path,
                              check_timing=False)
    assert (tmp_path / "top.bit").exists()
    assert summary["resources"]["LUT4"]["used"] > 1000
    assert summary["clocks"]


def test_seed_reaches_nextpnr():
    script = synth.build_plan(SMALL, seed=7).files["build_top.sh"]
    assert "--seed 7" in script
    assert "--seed" not in synth.build_plan(SMALL).files["build_top.sh"]
    # The router's timing-driven rip-up is on in every build (zipsgd/hw/synth.py, NEXTPNR_OPTIONS).
    assert "--router router2 --tmg-ripup" in script


def test_placer_reaches_nextpnr(tmp_path):
    heap = synth.build_plan(SMALL).files["build_top.sh"]
    static = synth.build_plan(SMALL, placer="static", seed=2).files["build_top.sh"]
    assert "--placer-heap-timingweight 40" in heap and "--placer static" not in heap
    assert "--placer static" in static and "--placer-heap" not in static
    assert "--router router2 --tmg-ripup" in static and "--seed 2" in static
    for run in (lambda: synth.run_synth(SMALL, placer="sa", out_dir=tmp_path / "a"),
                lambda: synth.run_block(lambda: None, placer="sa", out_dir=tmp_path / "b"),
                lambda: synth.run_seed_sweep(SMALL, [1], placer="sa", out_dir=tmp_path / "c")):
        with pytest.raises(ConfigError, match=r"placer must be one of \['heap', 'static'\], "
                                              r"found 'sa'"):
            run()
    assert not any(tmp_path.iterdir())


def test_router_reaches_nextpnr(tmp_path):
    """router1 (engine v2's builds) drops router2's timing-driven rip-up; engine v1's builds
    keep router2 unless told."""
    assert "--router router2 --tmg-ripup" in synth.build_plan(SMALL).files["build_top.sh"]
    one = synth.build_plan(SMALL, router="router1", placer="static").files["build_top.sh"]
    assert "--router router1" in one and "router2" not in one and "--tmg-ripup" not in one
    assert "--placer static" in one
    assert synth.ROUTER_V1 == "router2" and synth.ROUTER_V2 == "router1"
    for run in (lambda: synth.run_synth(SMALL, router="router3", out_dir=tmp_path / "a"),
                lambda: synth.run_block(lambda: None, router="router3", out_dir=tmp_path / "b"),
                lambda: synth.run_seed_sweep(SMALL, [1], router="router3",
                                             out_dir=tmp_path / "c")):
        with pytest.raises(ConfigError, match=r"router must be one of \['router1', "
                                              r"'router2'\], found 'router3'"):
            run()
    assert not any(tmp_path.iterdir())


def test_cli_bad_router_exits_2(capsys, tmp_path):
    assert main(["synth", "--router", "router3", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--router" in err and "'router3'" in err and "Traceback" not in err


def test_cli_default_placer_of_each_engine(monkeypatch, capsys, tmp_path):
    seen = {}

    def fake_v1(params, **kwargs):
        seen[1] = kwargs["placer"]
        return synth.summarize(REPORT)

    def fake_v2(board, params, **kwargs):
        seen[2] = kwargs["placer"], kwargs["router"]
        return synth.summarize(REPORT)

    monkeypatch.setattr(synth, "run_synth", fake_v1)
    monkeypatch.setattr(cli, "run_soc_synth", fake_v2)
    main(["synth", "--engine", "1", "-o", str(tmp_path / "v1")])
    main(["synth", "-o", str(tmp_path / "v2")])
    main(["synth", "--engine", "2", "--placer", "heap", "-o", str(tmp_path / "v2h")])
    capsys.readouterr()
    assert seen[1] == synth.PLACER_V1 == "heap"
    assert seen[2] == ("heap", synth.ROUTER_V2)
    seen.clear()
    main(["synth", "--engine", "2", "-o", str(tmp_path / "v2s")])
    assert seen[2] == (synth.PLACER_V2, synth.ROUTER_V2) == ("static", "router1")


@pytest.mark.parametrize("flag", [["--lanes", "4"], ["--ooc"], ["--seeds", "1-2"]])
def test_cli_engine_1_options_refused_by_the_default_soc_build(monkeypatch, capsys, tmp_path,
                                                                 flag):
    """``zipsgd synth`` builds engine v2's SoC unless told ``--engine 1``; engine v1's options
    are refused before anything is built."""
    calls = []
    monkeypatch.setattr(cli, "run_soc_synth", lambda *a, **k: calls.append(a))
    assert main(["synth", *flag, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"takes no {flag[0]} (only --engine 1 does)" in err
    assert calls == [] and list(tmp_path.iterdir()) == []


def test_cli_bad_placer_exits_2(capsys, tmp_path):
    assert main(["synth", "--placer", "sa", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "--placer" in err and "'sa'" in err and "Traceback" not in err


def test_cli_negative_seed_exits_2(capsys, tmp_path):
    assert main(["synth", "--engine", "1", "--seed", "-1", "-o", str(tmp_path / "out")]) == 2
    assert "seed must be an integer >= 0, found -1" in capsys.readouterr().err


def _flip_flops_after_synthesis(tmp_path, script_after_read: str) -> int:
    """TRELLIS_FF cells of a small design with four replicas of one bit, each choosing its own
    bank's word, after Yosys ``synth_ecp5`` (YoWASP)."""
    import json
    import subprocess

    from amaranth import Module
    from amaranth.back import rtlil

    from zipsgd.hw.arith import replicas

    m = Module()
    choice, words = Signal(), [Signal(4, name=f"word{b}") for b in range(4)]
    out = Signal(16)
    copies = replicas(m, "choice", choice, 4)
    m.d.sync += out.eq(Cat(*(Mux(copies[b], words[b], ~words[b]) for b in range(4))))
    (tmp_path / "t.il").write_text(rtlil.convert(m, ports=[choice, out, *words]))
    env = synth.use_yowasp()
    subprocess.run([env["YOSYS"], "-q", "-p", f"read_rtlil t.il; {script_after_read}; "
                    "synth_ecp5 -top top -json t.json"], cwd=tmp_path, check=True)
    cells = json.loads((tmp_path / "t.json").read_text())["modules"]["top"]["cells"]
    return sum(cell["type"] == "TRELLIS_FF" for cell in cells.values())


def test_synthesis_keeps_replicas(tmp_path, monkeypatch):
    for var in synth.TOOLS:   # use_yowasp edits os.environ: restore it afterwards
        monkeypatch.setenv(var, "unset-by-test")
    # 16 output bits and the four copies; without the script the copies merge into one.
    assert _flip_flops_after_synthesis(tmp_path, synth.KEEP_REPLICAS) == 16 + 4
    assert _flip_flops_after_synthesis(tmp_path, "") == 16 + 1
    assert synth.KEEP_REPLICAS in synth.build_plan(SMALL).files["top.ys"]


def _collision_logic_after_synthesis(tmp_path, script_after_read: str, reads: int) -> int:
    """TRELLIS_FF cells around one marked 1024 x 32 memory (block RAMs) with ``reads`` read
    ports and a write port, after Yosys ``synth_ecp5`` (YoWASP): the flip-flops of the bypass
    that keeps a colliding read's old word."""
    import json
    import subprocess

    from amaranth import Module
    from amaranth.back import rtlil
    from amaranth.lib import memory

    from zipsgd.hw.core import UNUSED_COLLISION_ATTRIBUTE

    m = Module()
    m.submodules.bank = mem = memory.Memory(shape=32, depth=1024, init=[],
                                            attrs={UNUSED_COLLISION_ATTRIBUTE: 1})
    wr = mem.write_port()
    wa, wd, we = Signal(10), Signal(32), Signal()
    m.d.comb += [wr.addr.eq(wa), wr.data.eq(wd), wr.en.eq(we)]
    ports = [wa, wd, we]
    for k in range(reads):
        rd = mem.read_port()
        ra, out = Signal(10, name=f"ra{k}"), Signal(32, name=f"out{k}")
        m.d.comb += [rd.addr.eq(ra), out.eq(rd.data)]
        ports += [ra, out]
    (tmp_path / "t.il").write_text(rtlil.convert(m, ports=ports))
    env = synth.use_yowasp()
    subprocess.run([env["YOSYS"], "-q", "-p", f"read_rtlil t.il; {script_after_read}; "
                    "synth_ecp5 -top top -noabc9 -json t.json"], cwd=tmp_path, check=True)
    cells = json.loads((tmp_path / "t.json").read_text())["modules"]["top"]["cells"]
    assert sum(cell["type"] == "DP16KD" for cell in cells.values()) >= reads
    return sum(cell["type"] == "TRELLIS_FF" for cell in cells.values())


@pytest.mark.parametrize("reads", [1, 2])    # (the model banks; the gradient banks)
def test_synthesis_leaves_marked_collisions_undefined(tmp_path, monkeypatch, reads):
    for var in synth.TOOLS:   # use_yowasp edits os.environ: restore it afterwards
        monkeypatch.setenv(var, "unset-by-test")
    # Without the script Yosys keeps the old word with a bypass (tens of flip-flops per read).
    assert _collision_logic_after_synthesis(tmp_path, synth.UNDEFINED_COLLISIONS, reads) == 0
    assert _collision_logic_after_synthesis(tmp_path, "", reads) > 32 * reads
    assert synth.UNDEFINED_COLLISIONS in synth.build_plan(SMALL).files["top.ys"]


@pytest.mark.parametrize("ooc, hz", [(False, "50000000.0 HZ"), (True, "100000000.0 HZ")])
def test_default_target_clock(ooc, hz):
    # A board build targets the clock its default build meets; out of context, the goal.
    from zipsgd.spec.engine import BOARD_FREQ_MHZ, OOC_FREQ_MHZ

    assert (BOARD_FREQ_MHZ, OOC_FREQ_MHZ) == (50.0, 100.0)
    assert hz in synth.build_plan(SMALL, ooc=ooc).files["top.lpf"]


@pytest.mark.parametrize(("text", "seeds"), [
    ("1-3,8", [1, 2, 3, 8]), ("5", [5]), ("0-1, 1-2", [0, 1, 2]), ("9,2", [9, 2])])
def test_parse_seeds(text, seeds):
    assert synth.parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "1,,2", "1-"])
def test_parse_seeds_rejects(text):
    with pytest.raises(ConfigError, match=f"found {re.escape(repr(text))}$"):
        synth.parse_seeds(text)


def _fake_builds(monkeypatch, fmax_by_seed: dict[int, float], ran: list[int]):
    """Replace the tools with a script runner that writes each seed's report (fmax from
    ``fmax_by_seed``) and bitstream, after checking that the seed reached nextpnr.  The tool
    variables the sweep sets are restored afterwards (a leaked ``YOSYS`` would make later
    Verilog exports in this process use the YoWASP Yosys)."""
    import json

    for var in synth.TOOLS:
        monkeypatch.setenv(var, "unset-by-test")

    def run(plan, out, timeout_s=None, live=None):
        assert out.is_absolute()   # (plan.extract in another thread changes the directory)
        seed = int(re.search(r"--seed (\d+)", (out / f"{plan.script}.sh").read_text())[1])
        ran.append(seed)
        if fmax_by_seed[seed] is None:
            raise synth.BuildError(f"the build was stopped after {timeout_s / 60:g} minutes")
        report = dict(REPORT, fmax={"$glbnet$clk": {"achieved": fmax_by_seed[seed],
                                                    "constraint": 100.0}})
        (out / "report.json").write_text(json.dumps(report))
        (out / "top.bit").write_bytes(bytes([seed]))

    monkeypatch.setattr(synth, "_run_script", run)


def test_seed_sweep_stops_at_the_first_that_meets_timing(monkeypatch, tmp_path):
    ran = []
    _fake_builds(monkeypatch, {1: 90.0, 2: 101.5, 3: 120.0, 4: 99.0}, ran)
    summary = synth.run_seed_sweep(SMALL, [1, 2, 3, 4], out_dir=tmp_path, freq_mhz=100)
    assert ran == [1, 2]
    assert summary["seed"] == 2 and summary["timing_met"]
    assert [(r["seed"], r["fmax_mhz"]) for r in summary["sweep"]] == [(1, 90.0), (2, 101.5)]
    assert (tmp_path / "top.bit").read_bytes() == bytes([2])
    import json

    assert json.loads((tmp_path / "summary.json").read_text())["seed"] == 2
    assert "| 2 | 101.50 | yes |" in synth.format_table(summary)


@pytest.mark.parametrize("jobs", [1, 2])
def test_seed_sweep_keeps_the_best_when_none_meets_timing(monkeypatch, tmp_path, jobs):
    ran = []
    _fake_builds(monkeypatch, {3: 90.0, 7: 97.25, 8: 93.0}, ran)
    monkeypatch.chdir(tmp_path.parent)     # a relative output folder, as the CLI's default
    with pytest.raises(synth.TimingError, match="97.25 MHz < 100.00 MHz") as failed:
        synth.run_seed_sweep(SMALL, [3, 7, 8], jobs=jobs, out_dir=tmp_path.name,
                             freq_mhz=100)
    assert sorted(ran) == [3, 7, 8]
    assert failed.value.summary["seed"] == 7
    assert (tmp_path / "top.bit").read_bytes() == bytes([7])
    assert [r["seed"] for r in failed.value.summary["sweep"]] == [3, 7, 8]


@pytest.mark.parametrize("jobs", [1, 2])
def test_seed_sweep_goes_on_past_a_build_that_fails(monkeypatch, tmp_path, jobs):
    ran = []
    _fake_builds(monkeypatch, {1: None, 2: 98.0, 3: 101.0, 4: 99.0}, ran)
    summary = synth.run_seed_sweep(SMALL, [1, 2, 3, 4], jobs=jobs, out_dir=tmp_path,
                                   freq_mhz=100, seed_minutes=0.5)
    assert summary["seed"] == 3 and summary["timing_met"]
    first = summary["sweep"][0]
    assert first["seed"] == 1 and first["fmax_mhz"] is None and not first["timing_met"]
    assert "stopped after 0.5 minutes" in first["error"]
    assert "| 1 | - | no build: the build was stopped after 0.5 minutes |" \
        in synth.format_table(summary)
    assert (tmp_path / "top.bit").read_bytes() == bytes([3])


def test_seed_sweep_with_no_build_finished_raises(monkeypatch, tmp_path):
    _fake_builds(monkeypatch, {5: None, 6: None}, [])
    with pytest.raises(synth.BuildError, match="no seed's build finished: seed 5: the build "
                                               "was stopped after 1 minutes; seed 6: "):
        synth.run_seed_sweep(SMALL, [5, 6], out_dir=tmp_path, seed_minutes=1)


def test_a_build_past_its_time_limit_is_stopped_with_its_tools(tmp_path):
    """``_run_script`` with a limit: the script and what it started are stopped."""
    import types

    (tmp_path / "build_top.sh").write_text("sleep 60 &\necho $! > child.pid\nwait\n")
    started = time.monotonic()
    with pytest.raises(synth.BuildError, match=r"stopped after 0\.01 minutes \(the limit\)"):
        synth._run_script(types.SimpleNamespace(script="build_top"), tmp_path, timeout_s=0.6)
    assert time.monotonic() - started < 30
    assert _wait_until_gone(int((tmp_path / "child.pid").read_text())), \
        "the script's child process was not stopped"


def _wait_until_gone(pid: int) -> bool:
    for _ in range(50):          # (the signal is delivered; the process may take a moment)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_build_stopped_from_another_thread_stops_its_tools(tmp_path):
    """What a sweep does on an interrupt: the main thread stops the scripts its workers run
    (they are in ``live`` while they run), and each worker's build fails."""
    import threading
    import types

    (tmp_path / "build_top.sh").write_text("sleep 60 &\necho $! > child.pid\nwait\n")
    live, errors = set(), []

    def worker():
        try:
            synth._run_script(types.SimpleNamespace(script="build_top"), tmp_path, live=live)
        except synth.BuildError as error:
            errors.append(str(error))

    thread = threading.Thread(target=worker)
    thread.start()
    for _ in range(100):
        if live and (tmp_path / "child.pid").exists():
            break
        time.sleep(0.05)
    for process in list(live):
        synth._stop(process)
    thread.join(timeout=30)
    assert not thread.is_alive() and not live
    assert errors and "the build failed (exit status" in errors[0]
    assert _wait_until_gone(int((tmp_path / "child.pid").read_text()))


def test_a_failing_build_script_raises_build_error(tmp_path):
    import types

    (tmp_path / "build_top.sh").write_text("exit 3\n")
    with pytest.raises(synth.BuildError, match="exit status 3"):
        synth._run_script(types.SimpleNamespace(script="build_top"), tmp_path)


@pytest.mark.parametrize(("args", "message"), [
    (["--seeds", "x"], "seeds must be integers >= 0"),
    (["--seeds", "1-3", "--jobs", "0"], "jobs must be an integer >= 1, found 0"),
    (["--seeds", "1-3", "--seed-minutes", "0"], "seed minutes must be > 0, found 0.0"),
    (["--seed-minutes", "5"], "--seed-minutes limits each seed of --seeds; found it (5) "
                              "without --seeds"),
    (["--seed", "1", "--seeds", "2"], "not allowed with argument"),
])
def test_cli_bad_seeds_exit_2(capsys, tmp_path, args, message):
    assert main(["synth", "--engine", "1", *args, "-o", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The build folder is published whole, never in place of another without --force


def _fake_build(calls, *, fail=None, meanwhile=None):
    """A stand-in for ``synth.run_synth`` that writes a bitstream into its folder."""
    def fake(params, *, out_dir, **kwargs):
        calls.append(Path(out_dir))
        (Path(out_dir) / "top.bit").write_text("new")
        if meanwhile is not None:
            meanwhile()
        if fail is not None:
            raise fail
        return synth.summarize(REPORT) | {"board": kwargs["board"]}
    return fake


def test_cli_refuses_an_existing_build_folder_before_building(monkeypatch, capsys, tmp_path):
    calls = []
    monkeypatch.setattr(synth, "run_synth", _fake_build(calls))
    out = tmp_path / "out"
    out.mkdir()
    (out / "top.bit").write_text("old")
    assert main(["synth", "--engine", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out} exists; pass --force" in err
    assert calls == [] and (out / "top.bit").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_cli_force_replaces_the_whole_folder(monkeypatch, capsys, tmp_path):
    calls = []
    monkeypatch.setattr(synth, "run_synth", _fake_build(calls))
    out = tmp_path / "build" / "out"  # the parent is made
    for _ in range(2):
        main(["synth", "--engine", "1", "-o", str(out), "--force", "--freq", "1"])
        (out / "stale.txt").write_text("from the earlier build")
    main(["synth", "--engine", "1", "-o", str(out), "--force", "--freq", "1"])
    capsys.readouterr()
    assert calls[-1] != out and calls[-1].parent == out.parent  # built beside, then published
    assert sorted(p.name for p in out.iterdir()) == ["top.bit"]
    assert sorted(p.name for p in out.parent.iterdir()) == ["out"]  # no temporary left


def test_cli_failed_build_keeps_its_logs_and_publishes_nothing(monkeypatch, capsys, tmp_path):
    calls = []
    failure = synth.BuildError("the build failed (exit status 1)")
    monkeypatch.setattr(synth, "run_synth", _fake_build(calls, fail=failure))
    out = tmp_path / "out"
    assert main(["synth", "--engine", "1", "-o", str(out)]) == 1
    assert "the build failed" in capsys.readouterr().err
    assert not out.exists() and (calls[0] / "top.bit").exists()


def test_cli_bad_input_during_the_build_leaves_no_folder(monkeypatch, capsys, tmp_path):
    calls = []
    monkeypatch.setattr(synth, "run_synth", _fake_build(calls, fail=ConfigError("bad thing")))
    assert main(["synth", "--engine", "1", "-o", str(tmp_path / "out")]) == 2
    assert "bad thing" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_folder_made_during_the_build_is_not_replaced(monkeypatch, capsys, tmp_path):
    out = tmp_path / "out"

    def race():
        out.mkdir()
        (out / "top.bit").write_text("someone else's")

    calls = []
    monkeypatch.setattr(synth, "run_synth", _fake_build(calls, meanwhile=race))
    assert main(["synth", "--engine", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "was created while this output was written" in err
    assert str(calls[0]) in err and (calls[0] / "top.bit").read_text() == "new"
    assert (out / "top.bit").read_text() == "someone else's"
