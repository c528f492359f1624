"""cocotb side of the simulated SoC with its Etherbone bridge: LiteEth's PHY model (Ethernet
frames as bytes, one a clock cycle, no preamble or CRC) connected to a UDP socket on the
loopback, so that the host reaches the SoC as it reaches a board: ``litex_server --udp`` and
``RemoteClient``.

The pump stands for the wire and the host's network stack.  It binds a UDP socket at
``test_params()["udp"]`` (``ip``, ``port``: where ``litex_server`` sends), writes ``ready`` and,
until the file ``stop`` exists:

* wraps each datagram it receives into an Ethernet/IPv4/UDP frame from the host (``host``:
  ``mac``, ``ip``) to the SoC (``soc``: ``mac``, ``ip``, ``port``) and sends it on ``eth_sink_*``;
* answers the SoC's ARP requests for the host's address;
* unwraps the SoC's UDP frames to the host from ``eth_source_*`` and sends their payload to
  the loopback port the host's datagrams came from (``litex_server``'s socket).

``litex_server`` binds its socket to every address at the same port it sends to, so the pump's
more specific binding at another loopback address receives what it sends; both sockets need
``SO_REUSEADDR`` for that (the test's environment gives ``litex_server`` its own).
"""

from __future__ import annotations

import os
import select
import socket
import struct
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from zipsgd.sim.runner import test_params

__all__ = ["udp_frame", "arp_frame", "parse_frame", "ipv4_checksum"]

ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_ARP = 0x0806
IP_PROTOCOL_UDP = 17
#: The shortest frame on the wire without its CRC: a sender pads shorter ones with zeros
#: (LiteEth's ARP receiver waits for the end of a frame past its 28-byte header).
MIN_FRAME = 60
#: Idle cycles between two frames on the wire (Ethernet's inter-frame gap, in bytes).
GAP_CYCLES = 12
IDLE_CYCLES = 64
IDLE_WAIT_S = 0.002


def _mac(value: int) -> bytes:
    return value.to_bytes(6, "big")


def _ip(text: str) -> bytes:
    return socket.inet_aton(text)


def _padded(frame: bytes) -> bytes:
    return frame + bytes(max(0, MIN_FRAME - len(frame)))


def ipv4_checksum(header: bytes) -> int:
    """The one's-complement sum of the header's 16-bit words (its checksum field zero)."""
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def udp_frame(dst_mac: int, src_mac: int, src_ip: str, dst_ip: str, src_port: int,
              dst_port: int, payload: bytes) -> bytes:
    """An Ethernet II frame holding an IPv4 UDP datagram (UDP checksum 0: none), padded to
    :data:`MIN_FRAME` bytes."""
    udp = struct.pack("!HHHH", src_port, dst_port, 8 + len(payload), 0) + payload
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64,
                         IP_PROTOCOL_UDP, 0, _ip(src_ip), _ip(dst_ip))
    header = header[:10] + struct.pack("!H", ipv4_checksum(header)) + header[12:]
    return _padded(_mac(dst_mac) + _mac(src_mac) + struct.pack("!H", ETHERTYPE_IPV4) + header
                   + udp)


def arp_frame(op: int, sender_mac: int, sender_ip: str, target_mac: int, target_ip: str
              ) -> bytes:
    """An ARP request (``op`` 1, broadcast) or reply (2, to ``target_mac``) for IPv4, padded to
    :data:`MIN_FRAME` bytes."""
    dst = 0xFFFFFFFFFFFF if op == 1 else target_mac
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETHERTYPE_IPV4, 6, 4, op, _mac(sender_mac),
                       _ip(sender_ip), _mac(target_mac), _ip(target_ip))
    return _padded(_mac(dst) + _mac(sender_mac) + struct.pack("!H", ETHERTYPE_ARP) + body)


def parse_frame(frame: bytes) -> tuple[str, dict] | None:
    """``("arp", {op, sender_mac, sender_ip, target_ip})`` or ``("udp", {src_ip, dst_ip,
    src_port, dst_port, payload})``; None for anything else or a frame cut short."""
    if len(frame) < 14:
        return None
    (ethertype,) = struct.unpack("!H", frame[12:14])
    body = frame[14:]
    if ethertype == ETHERTYPE_ARP and len(body) >= 28:
        _, _, _, _, op, sender_mac, sender_ip, _, target_ip = struct.unpack(
            "!HHBBH6s4s6s4s", body[:28])
        return "arp", {"op": op, "sender_mac": int.from_bytes(sender_mac, "big"),
                       "sender_ip": socket.inet_ntoa(sender_ip),
                       "target_ip": socket.inet_ntoa(target_ip)}
    if ethertype != ETHERTYPE_IPV4 or len(body) < 20 or body[9] != IP_PROTOCOL_UDP:
        return None
    ihl = (body[0] & 0xF) * 4
    (total,) = struct.unpack("!H", body[2:4])
    udp = body[ihl:total]
    if len(udp) < 8:
        return None
    src_port, dst_port, length, _ = struct.unpack("!HHHH", udp[:8])
    return "udp", {"src_ip": socket.inet_ntoa(body[12:16]),
                   "dst_ip": socket.inet_ntoa(body[16:20]), "src_port": src_port,
                   "dst_port": dst_port, "payload": bytes(udp[8:length])}


class _Wire:
    """The pump's state: frames queued for the SoC, and what to do with the SoC's frames."""

    def __init__(self, p: dict, sock: socket.socket):
        self.soc, self.host, self.sock = p["soc"], p["host"], sock
        self.to_soc: deque[bytes] = deque()
        self.host_port = None  # the loopback port the host's datagrams come from

    def from_host(self, payload: bytes, port: int) -> None:
        self.host_port = port
        self.to_soc.append(udp_frame(self.soc["mac"], self.host["mac"], self.host["ip"],
                                     self.soc["ip"], port, self.soc["port"], payload))

    def from_soc(self, frame: bytes) -> None:
        parsed = parse_frame(frame)
        if parsed is None:
            return
        kind, fields = parsed
        if kind == "arp":
            if fields["op"] == 1 and fields["target_ip"] == self.host["ip"]:
                self.to_soc.append(arp_frame(2, self.host["mac"], self.host["ip"],
                                             fields["sender_mac"], fields["sender_ip"]))
        elif fields["dst_ip"] == self.host["ip"] and self.host_port is not None:
            # (Etherbone answers at its own port, which litex_server also sends from on a
            # board; here the host's port is the loopback's free one.)
            self.sock.sendto(fields["payload"], ("127.0.0.1", self.host_port))


async def _monitor(dut, wire: _Wire) -> None:
    """Collect the SoC's frames from ``eth_source_*`` (a frame ends when ``valid`` falls)."""
    clk, valid, data = dut.sys_clk, dut.eth_source_valid, dut.eth_source_data
    while True:
        await RisingEdge(valid)
        frame = bytearray()
        while True:
            await ReadOnly()
            if not valid.value:
                break
            frame.append(int(data.value))
            await RisingEdge(clk)
        wire.from_soc(bytes(frame))


async def _send(dut, frame: bytes) -> None:
    clk = dut.sys_clk
    for byte in frame:
        dut.eth_sink_valid.value = 1
        dut.eth_sink_data.value = byte
        await RisingEdge(clk)
    dut.eth_sink_valid.value = 0
    await ClockCycles(clk, GAP_CYCLES)


@cocotb.test()
async def eth_pump(dut):
    p = test_params()
    clk = dut.sys_clk
    Clock(clk, 10, unit="ns").start()
    dut.eth_sink_valid.value = 0
    dut.eth_sink_data.value = 0
    dut.sys_rst.value = 1
    await ClockCycles(clk, 4)
    dut.sys_rst.value = 0
    await ClockCycles(clk, 4)

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((p["udp"]["ip"], p["udp"]["port"]))
    sock.setblocking(False)
    wire = _Wire(p, sock)
    temp = p["ready"] + ".tmp"
    with open(temp, "w") as file:
        file.write("udp")
    os.replace(temp, p["ready"])
    cocotb.start_soon(_monitor(dut, wire))

    while not os.path.exists(p["stop"]):
        try:
            payload, (_, port) = sock.recvfrom(65536)
            wire.from_host(payload, port)
        except BlockingIOError:
            pass
        while wire.to_soc:
            await _send(dut, wire.to_soc.popleft())
        if not dut.eth_source_valid.value:
            select.select([sock], [], [], IDLE_WAIT_S)
        await ClockCycles(clk, IDLE_CYCLES)
    sock.close()
