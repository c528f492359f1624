"""AXI4 read channels (the engine's memory master, ``zipsgd/hw/v2/reader.py``).

Only what a read master needs: AR and R with INCR bursts and a one-bit ID (always 0, so the
responses come back in order).  A top level exposes them as ``m_axi_araddr`` ... with
:func:`axi_read_ports` and :func:`connect_axi_read_ports`; cocotbext-axi finds them with
``AxiReadBus.from_prefix(dut, "m_axi")``.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BURST_INCR", "RESP_OKAY", "ID_WIDTH", "PAGE_BYTES", "axi_read_signature",
           "axi_read_ports", "connect_axi_read_ports"]

#: ARBURST of an incrementing burst.
BURST_INCR = 1
#: RRESP OKAY; bit 1 set is SLVERR (2) or DECERR (3).
RESP_OKAY = 0
ID_WIDTH = 1
#: A burst may not cross a 4 KiB boundary (AXI4, A3.4.1).
PAGE_BYTES = 4096


def axi_read_signature(addr_width: int, data_width: int) -> wiring.Signature:
    """AXI4's read channels seen from the master (a master takes ``Out(...)``).

    Members
    -------
    arid, araddr, arlen, arsize, arburst, arvalid, arready
        The read address channel (``arlen`` is the burst's beats minus one).
    rid, rdata, rresp, rlast, rvalid, rready
        The read data channel.

    Raises
    ------
    ValueError
        If a width is out of range.
    """
    if not isinstance(addr_width, int) or not 12 <= addr_width <= 64:
        raise ValueError(f"addr_width must be an integer in 12..64, found {addr_width!r}")
    if data_width not in (32, 64, 128, 256, 512):
        raise ValueError(f"data_width must be 32, 64, 128, 256 or 512, found {data_width!r}")
    return wiring.Signature({
        "arid": Out(ID_WIDTH), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
        "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
        "rid": In(ID_WIDTH), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
        "rvalid": In(1), "rready": Out(1),
    })


def axi_read_ports(addr_width: int, data_width: int, prefix: str = "m_axi_"
                   ) -> dict[str, wiring.Member]:
    """Flat master-side members ``{prefix + name: member}`` for a top-level signature."""
    sig = axi_read_signature(addr_width, data_width)
    return {prefix + name: member for name, member in sig.members.items()}


def connect_axi_read_ports(m: Module, top, bus, prefix: str = "m_axi_") -> None:
    """Wire the flat ports ``top.<prefix><name>`` to the master interface ``bus``."""
    for name, member in bus.signature.members.items():
        port, inner = getattr(top, prefix + name), getattr(bus, name)
        if member.flow == Out:
            m.d.comb += port.eq(inner)
        else:
            m.d.comb += inner.eq(port)
