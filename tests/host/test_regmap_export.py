"""Register map exports (:mod:`zipsgd.host.regmap_export`): the IP-XACT file read back by
peakrdl-ipxact's importer is the Python register map; the C header compiles."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from peakrdl_ipxact import IPXACTImporter
from systemrdl import RDLCompiler
from systemrdl.node import RegNode

from zipsgd.cli import main
from zipsgd.host.regmap_export import ADDRMAP_NAME, FORMATS, elaborate, export_registers
from zipsgd.spec.registers import REGISTERS
from zipsgd.spec.registers import register as python_register

_ACCESS = {"ro": (True, False), "rw": (True, True), "wo": (False, True), "w1c": (True, True)}


def _map_of(top) -> dict:
    """name -> (offset, (readable, writable), [(field, lsb, width, reset)]) of an elaborated
    address map."""
    result = {}
    for reg in (node for node in top.descendants() if isinstance(node, RegNode)):
        fields = [(f.inst_name, f.lsb, f.width, f.get_property("reset"))
                  for f in sorted(reg.fields(), key=lambda f: f.lsb)]
        result[reg.inst_name] = (reg.absolute_address, (reg.has_sw_readable, reg.has_sw_writable),
                                 fields)
    return result


def _python_map() -> dict:
    result = {}
    for reg in REGISTERS:
        no_reset = reg.param is not None or reg.name in ("CTRL", "MODEL_DATA")
        fields = [(f.name, f.lsb, f.width, None if no_reset else f.reset)
                  for f in sorted(reg.fields, key=lambda f: f.lsb)]
        result[reg.name] = (reg.offset, _ACCESS[reg.access], fields)
    return result


def test_ipxact_round_trips_to_the_python_register_map(tmp_path):
    path = export_registers("ipxact", tmp_path / "zipsgd_engine.xml")
    compiler = RDLCompiler()
    IPXACTImporter(compiler).import_file(str(path))
    top = compiler.elaborate().top
    assert top.inst_name.startswith(ADDRMAP_NAME)  # (the importer appends the memory map)
    assert _map_of(top) == _python_map()
    assert list(_map_of(top)) == [r.name for r in REGISTERS]  # offset order


def test_systemrdl_elaborates_to_the_python_register_map(tmp_path):
    path = export_registers("rdl", tmp_path / "regs.rdl")
    assert _map_of(elaborate(path)) == _python_map()
    step = elaborate(path).get_child_by_name("STEP")
    assert step.get_property("desc") == python_register("STEP").description


def test_write_one_to_clear_survives_the_round_trip(tmp_path):
    path = export_registers("ipxact", tmp_path / "zipsgd_engine.xml")
    compiler = RDLCompiler()
    IPXACTImporter(compiler).import_file(str(path))
    top = compiler.elaborate().top
    for reg in (node for node in top.descendants() if isinstance(node, RegNode)):
        clears = {str(f.get_property("onwrite")) for f in reg.fields()}
        expected = "OnWriteType.woclr" if python_register(reg.inst_name).access == "w1c" \
            else "None"
        assert clears == {expected}, reg.inst_name


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_header_compiles_and_has_every_register(tmp_path):
    path = export_registers("cheader", tmp_path / "zipsgd_engine.h")
    text = path.read_text()
    for reg in REGISTERS:
        assert f"ZIPSGD_ENGINE__{reg.name}__" in text
    subprocess.run(["cc", "-fsyntax-only", "-x", "c", str(path)], check=True)


def test_cli_export_regs_refuses_to_replace_without_force(tmp_path, capsys):
    out = tmp_path / "regs.xml"
    assert main(["export-regs", "--format", "ipxact", "-o", str(out)]) == 0
    before = out.read_bytes()
    assert main(["export-regs", "--format", "ipxact", "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
    assert main(["export-regs", "--format", "rdl", "-o", str(out), "--force"]) == 0
    assert out.read_text().startswith("// Generated from zipsgd/spec/registers.py")
    assert main(["export-regs", "--format", "verilog", "-o", str(out)]) == 2
    assert set(FORMATS) == {"rdl", "ipxact", "cheader"}
