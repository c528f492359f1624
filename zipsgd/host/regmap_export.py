"""Exports of the one register map (:mod:`zipsgd.spec.registers`) for other people's designs:
SystemRDL, IP-XACT (IEEE 1685-2014) and a C header.

The SystemRDL text is written from :data:`~zipsgd.spec.registers.REGISTERS`; the PeakRDL tools
(``systemrdl-compiler`` elaborates it, ``peakrdl-ipxact`` and ``peakrdl-cheader`` export it) make
the other two, so all three describe the same map.  Register accesses map to software access
``r`` (``ro``), ``rw`` and ``w`` (``wo``).  Identity registers whose value is a build parameter
(:attr:`~zipsgd.spec.registers.Register.param`) and the registers without a defined reset value
(CTRL, MODEL_DATA) carry no reset.  The engine's interrupt output and per-configuration names are
not part of this map yet.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from peakrdl_cheader.exporter import CHeaderExporter
from peakrdl_ipxact import IPXACTExporter
from systemrdl import RDLCompiler
from systemrdl.node import AddrmapNode

from ..spec.registers import ADDR_WIDTH, DATA_WIDTH, ENGINE_VERSION, REGISTERS, Register
from .output import atomic_output, check_output

__all__ = ["FORMATS", "ADDRMAP_NAME", "systemrdl_text", "elaborate", "export_registers"]

#: The formats :func:`export_registers` writes.
FORMATS = ("rdl", "ipxact", "cheader")
#: The address map's (and the C header's prefix) name.
ADDRMAP_NAME = "zipsgd_engine"
_SOFTWARE_ACCESS = {"ro": "r", "rw": "rw", "wo": "w", "w1c": "rw"}
_HARDWARE_ACCESS = {"ro": "w", "rw": "r", "wo": "r", "w1c": "w"}
#: Extra field properties of an access kind (SystemRDL): write-1-to-clear bits.
_ON_WRITE = {"w1c": " onwrite = woclr;"}
_NO_RESET = ("CTRL", "MODEL_DATA")


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _register_text(reg: Register) -> str:
    lines = ["    reg {", f"        name = {_string(reg.name)};",
             f"        desc = {_string(reg.description)};", f"        regwidth = {DATA_WIDTH};"]
    for f in reg.fields:
        reset = "" if reg.param is not None or reg.name in _NO_RESET else f" = {f.reset:#x}"
        lines.append(f"        field {{ sw = {_SOFTWARE_ACCESS[reg.access]}; "
                     f"hw = {_HARDWARE_ACCESS[reg.access]};{_ON_WRITE.get(reg.access, '')} "
                     f"desc = {_string(f.description)}; }} "
                     f"{f.name}[{f.msb}:{f.lsb}]{reset};")
    lines.append(f"    }} {reg.name} @ {reg.offset:#05x};")
    return "\n".join(lines)


def systemrdl_text() -> str:
    """The register map as a SystemRDL 2.0 source."""
    body = "\n".join(_register_text(reg) for reg in REGISTERS)
    return (f"// Generated from zipsgd/spec/registers.py (register map version {ENGINE_VERSION})."
            f"\n// AXI4-Lite, {DATA_WIDTH}-bit data, {ADDR_WIDTH}-bit byte address.\n"
            f"addrmap {ADDRMAP_NAME} {{\n"
            f"    name = \"zipsgd SGD engine\";\n"
            f"    desc = \"Control and status registers of the zipsgd engine "
            f"(docs/REGISTERS.md).\";\n"
            f"{body}\n}};\n")


def elaborate(rdl_path) -> AddrmapNode:
    """Compile and elaborate a SystemRDL file; returns its top address map."""
    compiler = RDLCompiler()
    compiler.compile_file(str(rdl_path))
    return compiler.elaborate().top


def export_registers(fmt: str, path, force: bool = False) -> Path:
    """Write the register map as ``fmt`` (one of :data:`FORMATS`) to ``path``, atomically.

    Raises
    ------
    ValueError
        For an unknown format.
    OutputError, OutputExistsError
        If ``path`` cannot be published, or exists and not ``force``.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, found {fmt!r}")
    check_output(path, force)
    with tempfile.TemporaryDirectory(prefix="zipsgd-regs-") as folder:
        source = Path(folder) / f"{ADDRMAP_NAME}.rdl"
        source.write_text(systemrdl_text())
        target = Path(folder) / Path(path).name  # (the C header's guard is named after it)
        if fmt == "rdl":
            elaborate(source)  # (only a map the compiler accepts is written)
            target = source
        elif fmt == "ipxact":
            IPXACTExporter(vendor="zipsgd", library="zipsgd").export(elaborate(source),
                                                                     str(target))
        else:
            CHeaderExporter().export(elaborate(source), str(target))
        text = target.read_text()
    with atomic_output(path, force, mode="w") as file:
        file.write(text)
    return Path(path)
