"""Engine v2's SoC reached through its Etherbone bridge (LiteEth), as the ECPIX-5 is: the SoC
simulated by Verilator behind LiteEth's PHY model, a simulated wire (``zipsgd/sim/eth_pump.py``)
between it and a UDP socket, ``litex_server --udp`` and ``RemoteClient``; training bit-exact
with engine v2's golden model.  The wire's frames are checked on their own first."""

from __future__ import annotations

import os
import socket
from dataclasses import replace

import pytest

from zipsgd.backends.soc import SocSimBackend
from zipsgd.host.soc import RemoteBus, litex_server
from zipsgd.host.train import TrainSettings, load_scaled, train_in_memory
from zipsgd.sim.eth_pump import arp_frame, ipv4_checksum, parse_frame, udp_frame
from zipsgd.sim.soc_sim import simulated_soc
from zipsgd.spec.engine2 import EngineParams2
from zipsgd.spec.errors import LinkError
from zipsgd.spec.registers import ENGINE_ID

SETTINGS = TrainSettings(backend="soc-sim", bits=3, epochs=2, batch_size=16, step_size=0.25,
                         max_features=4096, max_batch=512, seed=4)

#: ``litex_server`` binds its UDP socket to every address at the port it sends to; the wire's
#: socket binds the same port at another loopback address, which both may only with
#: SO_REUSEADDR.  This gives it to every UDP socket of the test's Python children.
REUSE_ADDR = '''import socket
_bind = socket.socket.bind


def bind(self, address):
    if self.type == socket.SOCK_DGRAM:
        self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return _bind(self, address)


socket.socket.bind = bind
'''


def test_ipv4_checksum_of_a_known_header():
    header = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")
    assert ipv4_checksum(header) == 0xB861


def test_frames_round_trip():
    frame = udp_frame(0x10E2D5000000, 0x020000000001, "192.168.1.100", "192.168.1.50", 1234,
                      1234, b"\x4e\x6f\x10\x44payload")
    assert frame[:6] == bytes.fromhex("10e2d5000000") and frame[12:14] == b"\x08\x00"
    assert ipv4_checksum(frame[14:34]) == 0  # a valid header sums to all ones
    kind, fields = parse_frame(frame)
    assert kind == "udp" and fields == {"src_ip": "192.168.1.100", "dst_ip": "192.168.1.50",
                                        "src_port": 1234, "dst_port": 1234,
                                        "payload": b"\x4e\x6f\x10\x44payload"}
    # The SoC pads short frames to 60 bytes: the payload ends where UDP's length says.
    kind, fields = parse_frame(udp_frame(1, 2, "10.0.0.1", "10.0.0.2", 5, 6, b"ab") + bytes(20))
    assert fields["payload"] == b"ab"
    kind, fields = parse_frame(arp_frame(1, 0x10E2D5000000, "192.168.1.50", 0,
                                         "192.168.1.100"))
    assert kind == "arp" and fields == {"op": 1, "sender_mac": 0x10E2D5000000,
                                        "sender_ip": "192.168.1.50",
                                        "target_ip": "192.168.1.100"}
    reply = arp_frame(2, 0x020000000001, "192.168.1.100", 0x10E2D5000000, "192.168.1.50")
    assert reply[:6] == bytes.fromhex("10e2d5000000") and parse_frame(reply)[1]["op"] == 2
    assert parse_frame(b"short") is None
    assert parse_frame(frame[:14] + bytes(10)) is None  # an IPv4 header cut short


@pytest.fixture
def reusable_udp_ports(tmp_path, monkeypatch):
    (tmp_path / "sitecustomize.py").write_text(REUSE_ADDR)
    paths = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.setattr(SocSimBackend, "bridge", "etherbone")


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEADDR"), reason="needs SO_REUSEADDR")
def test_training_through_etherbone_is_bit_exact(reusable_udp_ports):
    data = load_scaled("synthetic:6:200:2")
    report = train_in_memory(data, SETTINGS)
    golden = train_in_memory(data, replace(SETTINGS, backend="golden2"))
    assert report["bit_exact"] is True and report["model_words"] == golden["model_words"]
    assert all(e["upload_seconds"] > 0 and e["cycles"] >= e["beats"] for e in report["epochs"])


@pytest.mark.skipif(not hasattr(socket, "SO_REUSEADDR"), reason="needs SO_REUSEADDR")
def test_a_write_record_longer_than_the_bridge_takes_stalls_it(reusable_udp_ports):
    """``soc.json``'s ``max_words`` is the longest record the bridge passes: a record of that
    many words goes through, one word more stalls the bridge for good (so ``RemoteBus``
    splits records at it)."""
    params = EngineParams2(64, 4096, 512)
    with simulated_soc(params, bridge="etherbone") as (link, facts), \
            litex_server(link, facts["baud"], etherbone=facts["etherbone"]) as port:
        words = facts["etherbone"]["max_words"]
        scratch = facts["engine_base"] + 0x100  # (no register there: writes are dropped)
        with RemoteBus(port=port, timeout_s=10, max_words=words + 1) as bus:
            bus.write_block(scratch, list(range(words)))
            assert bus.read(facts["engine_base"]) == ENGINE_ID
            bus.write_block(scratch, list(range(words + 1)))
            with pytest.raises(LinkError, match="did not answer"):
                bus.read(facts["engine_base"])
