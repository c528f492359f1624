"""The board SoCs (``zipsgd/hw/board_soc.py``): each board's LiteX target with the engine, its
DRAM and its bridges, written as a build the YoWASP tools run from its own folder."""

from __future__ import annotations

import json
import re

import pytest

from zipsgd.hw.board_soc import SOC_BOARDS, SOC_TOP, board_soc, run_soc_synth, write_board_soc
from zipsgd.hw.soc import ENGINE_BASE
from zipsgd.hw.v2.top import TOP_NAME2
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.errors import ConfigError

SMALL = EngineParams2(64, 64, 16)
MIB = 1 << 20
#: Each board's FPGA as nextpnr names it.
DEVICE = {"ulx3s-85f": "--85k --package CABGA381 --speed 6",
          "orangecrab-85f": "--85k --package CSFBGA285 --speed 8",
          "ecpix5-85": "--um5g-85k --package CABGA554 --speed 8"}
#: Each board's DRAM as LiteDRAM's module sizes it.
DRAM_BYTES = {"ulx3s-85f": 64 * MIB, "orangecrab-85f": 128 * MIB, "ecpix5-85": 512 * MIB}


@pytest.fixture(scope="module", params=sorted(SOC_BOARDS))
def written(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param)
    # (One board with each placer; one with router2, the others with engine v2's default.)
    placer = "static" if request.param == "orangecrab-85f" else "heap"
    router = {"router": "router2"} if request.param == "ecpix5-85" else {}
    return request.param, out, write_board_soc(request.param, out, SMALL, seed=3, placer=placer,
                                               **router)


def test_a_board_soc_is_a_folder_the_tools_run_in(written):
    board, out, facts = written
    names = {p.name for p in out.iterdir()}
    assert {f"{SOC_TOP}.v", "zipsgd_engine2.il", f"{SOC_TOP}.lpf", f"{SOC_TOP}.ys",
            f"build_{SOC_TOP}.sh", "csr.json", "soc.json"} <= names
    ys = (out / f"{SOC_TOP}.ys").read_text()
    # YoWASP's tools see only the folder: every file by a relative name.
    assert "/" not in "".join(line for line in ys.splitlines() if line.startswith("read_"))
    assert re.search(r"(?m)^read_rtlil zipsgd_engine2\.il$", ys)
    assert "abc -lut 4:7" in ys and "setattr -set keep 1" in ys and "RD_COLLISION_X_MASK" in ys
    script = (out / f"build_{SOC_TOP}.sh").read_text()
    assert '"$YOSYS"' in script and '"$NEXTPNR_ECP5"' in script and '"$ECPPACK"' in script
    assert DEVICE[board] in script
    assert "--seed 3" in script and script.count("--seed") == 1
    assert "--report report.json" in script
    static = facts["placer"] == "static"
    assert static == (board == "orangecrab-85f")
    assert ("--placer static" in script) == static
    assert ("--placer-heap-timingweight 40" in script) != static
    router2 = board == "ecpix5-85"
    assert facts["router"] == ("router2" if router2 else "router1")
    assert ("--router router2 --tmg-ripup" in script) == router2
    assert ("--router router1" in script) != router2 and "--router router1 --tmg" not in script
    assert json.loads((out / "soc.json").read_text()) == json.loads(json.dumps(facts))


def test_the_engines_reset_is_on_a_global_buffer(written):
    _, out, _ = written
    verilog = (out / f"{SOC_TOP}.v").read_text()
    dcca = re.search(r"\bDCCA\s+\w+\s*\((.*?)\);", verilog, re.S)
    assert dcca, "no DCCA in the SoC"
    assert re.search(r"\.CLKI\s*\(sys_rst\)", dcca.group(1))
    buffered = re.search(r"\.CLKO\s*\((\w+)\)", dcca.group(1)).group(1)
    engine = re.search(rf"\b{TOP_NAME2}\s+\w+\s*\((.*?)\);", verilog, re.S)
    assert re.search(rf"\.rst\s*\({buffered}\)", engine.group(1))


def test_a_board_soc_holds_the_engine_the_dram_and_the_bridges(written):
    board, out, facts = written
    assert facts["main_ram_size"] == DRAM_BYTES[board]
    assert facts["engine_base"] == ENGINE_BASE and facts["params"]["max_features"] == 64
    assert {"sdram_dfii_control", "sdram_dfii_pi0_command"} <= set(facts["csrs"])
    assert facts["init"] and facts["init"][0][2] is not None
    verilog = (out / f"{SOC_TOP}.v").read_text()
    assert re.search(r"(?m)^zipsgd_engine2 zipsgd_engine2\($", verilog)
    assert "uartbone" in verilog
    assert ("etherbone" in verilog) == (board == "ecpix5-85")
    if board == "ecpix5-85":  # where the host's --port udp reaches it
        assert facts["etherbone"] == {"ip": "192.168.1.50", "port": 1234, "max_words": 16}
    else:
        assert "etherbone" not in facts
    if board != "ulx3s-85f":  # DDR3: the ECP5 PHY's read delays, for the host's leveling
        assert any(name.startswith("ddrphy_rdly_dq") for name in facts["csrs"])
        assert facts["phy"] == {"type": "ECP5DDRPHY", "memtype": "DDR3", "databits": 16,
                                "dfi_databits": 64, "nphases": 2, "rdphase": 0, "wrphase": 1,
                                "read_leveling": True, "delays": 8, "bitslips": 4}
        assert {"sdram_dfii_pi1_wrdata", "sdram_dfii_pi1_rddata", "ddrphy_burstdet_seen",
                "ddrphy_dly_sel"} <= set(facts["csrs"])
    else:
        assert facts["phy"]["type"] == "GENSDRPHY" and not facts["phy"]["read_leveling"]


def test_the_orangecrab_bridge_is_on_the_feather_header(written):
    board, out, _ = written
    if board != "orangecrab-85f":
        pytest.skip("the OrangeCrab's bridge")
    lpf = (out / f"{SOC_TOP}.lpf").read_text()
    assert re.search(r'LOCATE COMP "serial_rx" SITE "N17"', lpf)    # Feather pin 0
    assert re.search(r'LOCATE COMP "serial_tx" SITE "M18"', lpf)    # Feather pin 1


@pytest.mark.parametrize("kwargs, names", [
    ({"board": "de10-nano"}, "board must be one of"),
    ({"baud": 4_000_000}, "from 9600 to 3125000"),
    ({"baud": 9599}, "from 9600"),
    ({"clock_hz": 150e6}, "20 to 100 MHz"),
])
def test_bad_settings_are_named(kwargs, names):
    kwargs = {"board": "ulx3s-85f"} | kwargs
    with pytest.raises(ConfigError, match=names):
        board_soc(kwargs.pop("board"), SMALL, **kwargs)


def test_a_bad_seed_is_named_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="seed must be an integer >= 0, found -1"):
        write_board_soc("ulx3s-85f", tmp_path / "soc", SMALL, seed=-1)
    with pytest.raises(ConfigError, match=r"placer must be one of \['heap', 'static'\], "
                                          r"found 'sa'"):
        write_board_soc("ulx3s-85f", tmp_path / "soc", SMALL, placer="sa")
    with pytest.raises(ConfigError, match=r"router must be one of \['router1', 'router2'\], "
                                          r"found 'router3'"):
        write_board_soc("ulx3s-85f", tmp_path / "soc", SMALL, router="router3")
    assert not (tmp_path / "soc").exists()


@pytest.mark.slow
def test_the_ulx3s_soc_builds_a_bitstream(tmp_path):
    """The whole flow with a small engine (about 10 minutes): a bitstream and its figures."""
    summary = run_soc_synth("ulx3s-85f", SMALL, out_dir=tmp_path, check=False)
    assert (tmp_path / f"{SOC_TOP}.bit").stat().st_size > 100_000
    assert summary["clocks"] and summary["resources"]["DP16KD"]["used"] > 0
