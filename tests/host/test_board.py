"""The board-link driver (``zipsgd/host/board.py``) against a software bridge, with faults injected
on
the wire; reply handling fuzzed with Hypothesis (only ``LinkError`` escapes)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zipsgd.host.board import BoardLink, contiguous_runs
from zipsgd.host.train import TrainSettings
from zipsgd.spec import link
from zipsgd.spec import registers as regs
from zipsgd.spec.engine import EngineParams
from zipsgd.spec.errors import ConfigError, LinkError
from zipsgd.spec.link import Code, Command, Reply

# Derandomized in the normal suite; random, with the "fuzz" profile's count, in the long run
# (HYPOTHESIS_PROFILE=fuzz, as `make fuzz` sets).
FUZZ = (settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
        if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else
        settings(derandomize=True, database=None, max_examples=40, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow]))
FAST = {"timeout": 0.05, "quiet": 0.005}


class SoftBridge:
    """The bridge's behaviour in Python: a register dictionary (ID and BUS_WIDTH preset, a
    MODEL_DATA port that advances MODEL_INDEX), a gap timeout when a write leaves a frame
    incomplete, and faults for the next write: ``corrupt`` flips a payload bit, ``drop``
    loses a byte."""

    def __init__(self):
        self.regs = {0x000: 0x5A534744, 0x004: 1, 0x008: 64, 0x00C: 1024, 0x010: 64,
                     0x014: 32}
        self.model = [0] * 16
        self.parser = link.RequestParser()
        self.out = bytearray()
        self.corrupt = self.drop = False
        self.executed = []

    def write(self, data: bytes) -> None:
        data = bytearray(data)
        if self.corrupt:
            data[6] ^= 0x04
            self.corrupt = False
        if self.drop:
            del data[4]
            self.drop = False
        for frame in self.parser.feed(bytes(data)):
            if frame is None:
                self._reply(0, 0, Code.BAD_CRC, bytes(2))
            else:
                self._execute(frame)
        if self.parser.in_frame:  # the gap timer runs out
            self.parser.reset()
            self._reply(0, 0, Code.GAP_TIMEOUT, bytes(2))

    def _reply(self, command, seq, code, payload=b""):
        self.out += link.encode_reply(Reply(command, seq, code, payload))

    def _execute(self, frame):
        code = link.check_request(frame, 64)
        if code != Code.OK:
            detail = frame.command if code == Code.BAD_COMMAND else 0
            return self._reply(frame.command, frame.seq, code, detail.to_bytes(2, "little"))
        self.executed.append(frame.command)
        p = frame.payload
        addr = int.from_bytes(p[:2], "little")
        step, addr = (4 if addr & link.ADDR_INCREMENT else 0), addr & link.ADDR_MASK
        out = b""
        if frame.command == Command.READ:
            for _ in range(int.from_bytes(p[2:4], "little")):
                out += self._access(addr).to_bytes(4, "little")
                addr += step
        elif frame.command == Command.WRITE:
            for k in range(2, len(p), 4):
                self._access(addr, int.from_bytes(p[k:k + 4], "little"))
                addr += step
        self._reply(frame.command, frame.seq, Code.OK, out)

    def _access(self, addr, value=None):
        if addr == 0x0C4:
            index = self.regs.get(0x0C0, 0)
            self.regs[0x0C0] = index + 1
            if value is not None:
                self.model[index] = value
            return self.model[index] & 0xFFFF_FFFF
        if value is not None:
            self.regs[addr] = value
        return self.regs.get(addr, 0)

    def read(self, size: int) -> bytes:
        data = bytes(self.out[:size])
        del self.out[:size]
        return data

    def close(self):
        pass


def test_registers_model_and_identity():
    bridge = SoftBridge()
    board = BoardLink(bridge, **FAST)
    params = board.identify()
    assert params == EngineParams(64, 1024, 64, 32)
    board.write_model([1, -2, 3])
    assert board.read_model(3).tolist() == [1, -2, 3]
    board.write_pairs([(0x40, 7), (0x44, 8), (0x50, 9)])
    assert board.read_offsets([0x40, 0x44, 0x50]) == {0x40: 7, 0x44: 8, 0x50: 9}
    assert board.read_reg("FORMAT") == regs.decode("FORMAT", 7)


def test_contiguous_runs():
    assert contiguous_runs([0x24, 0x28, 0x2C, 0x80, 0x84, 0x90]) == [(0x24, 3), (0x80, 2),
                                                                     (0x90, 1)]
    assert contiguous_runs(range(0, 4 * 600, 4)) == [(0, 511), (4 * 511, 89)]


@pytest.mark.parametrize("fault, name", [("corrupt", "BAD_CRC"), ("drop", "GAP_TIMEOUT")])
def test_fault_raises_clear_error_then_link_recovers(fault, name):
    bridge = SoftBridge()
    board = BoardLink(bridge, retries=0, **FAST)
    setattr(bridge, fault, True)
    with pytest.raises(LinkError, match=rf"read of 1 word\(s\) at 0x000: the board answered "
                                        rf"{name}: .*nothing was executed"):
        board.read(0)
    assert board.read(0) == [0x5A534744]


@pytest.mark.parametrize("fault", ["corrupt", "drop"])
def test_not_executed_requests_are_resent(fault):
    bridge = SoftBridge()
    board = BoardLink(bridge, retries=1, **FAST)
    setattr(bridge, fault, True)
    board.write(0x0C4, [5])   # MODEL_DATA: must run exactly once
    assert bridge.model[0] == 5 and bridge.regs[0x0C0] == 1
    assert bridge.executed == [Command.WRITE] and board.resyncs == 1


def test_errors_that_a_resend_cannot_fix():
    board = BoardLink(SoftBridge(), retries=3, **FAST)
    with pytest.raises(LinkError, match="BAD_COMMAND: unknown command"):
        board.request(0x7E, b"", "test")
    with pytest.raises(LinkError, match="BAD_LENGTH"):
        board.request(Command.READ, b"\x00\x00\x00\x00", "test")


def test_no_reply_and_wrong_engine():
    class Silent(SoftBridge):
        def write(self, data):
            pass

    with pytest.raises(LinkError, match="no reply within 0.05 s"):
        BoardLink(Silent(), **FAST).read(0)
    bridge = SoftBridge()
    bridge.regs[0] = 0x12345678
    with pytest.raises(LinkError, match="ID register reads 0x12345678"):
        BoardLink(bridge, **FAST).identify()


def test_board_backend_needs_a_port():
    with pytest.raises(ConfigError, match="--port"):
        TrainSettings(backend="board")


class Noise:
    """A transport that answers with arbitrary bytes."""

    def __init__(self, chunks):
        self.chunks = list(chunks)

    def write(self, data):
        pass

    def read(self, size):
        return self.chunks.pop(0) if self.chunks else b""

    def close(self):
        pass


@given(st.lists(st.one_of(st.binary(max_size=40), st.builds(
    lambda seq, code, payload: link.encode_reply(Reply(Command.READ, seq, code, payload)),
    st.integers(0, 3), st.integers(0, 255), st.binary(max_size=12))), max_size=6))
@FUZZ
def test_fuzz_replies_only_link_error_escapes(chunks):
    board = BoardLink(Noise(chunks), timeout=0.02, quiet=0.001, retries=1)
    try:
        words = board.read(0x24, 2, increment=True)
    except LinkError:
        return
    assert len(words) == 2


def test_cli_board_errors_exit_2(tmp_path, capsys):
    from zipsgd.cli import main
    from zipsgd.host.datasets import open_source
    from zipsgd.host.pack import pack_source

    path = tmp_path / "s.zsgd"
    pack_source(open_source("synthetic:4:16:1"), path, TrainSettings().layout(), epochs=1,
                seed=1, progress=False)
    assert main(["train", str(path), "--backend", "board", "--epochs", "1"]) == 2
    assert "needs the serial port (--port)" in capsys.readouterr().err
    missing = str(tmp_path / "ttyNONE")
    assert main(["train", str(path), "--backend", "board", "--port", missing,
                 "--epochs", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("zipsgd: error: cannot open serial port") and missing in err
    assert "\n" not in err
