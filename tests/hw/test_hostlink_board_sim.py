"""The simulated board (``--backend board-sim``): the host driver speaks, through pyserial and a
pseudo-terminal, to the bridge and the engine in Verilator.  Training is bit-exact with the
golden model; a wrong checksum, a lost byte and bad frames give a clear ``LinkError`` and the
next transaction succeeds.  One Verilator build (cached by its Verilog hash)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from zipsgd.host.board import BoardLink, SerialTransport
from zipsgd.host.datasets import open_source
from zipsgd.host.pack import pack_source
from zipsgd.host.train import TrainSettings, train_stream_file
from zipsgd.host.zsgd_file import StreamFile
from zipsgd.sim.board_sim import simulated_board
from zipsgd.spec.engine import SIM_MAX_BATCH, SIM_MAX_FEATURES, sim_params
from zipsgd.spec.errors import LinkError
from zipsgd.spec.link import Command

# The engine build the other simulation tests use (W = 64, N_max = 1024, B_max = 64).
SETTINGS = TrainSettings(backend="board-sim", bits=3, epochs=3, batch_size=8, step_size=0.25,
                         max_features=SIM_MAX_FEATURES, max_batch=SIM_MAX_BATCH, seed=4)
PARAMS = sim_params(64)


def test_training_on_the_simulated_board_is_bit_exact(tmp_path):
    path = tmp_path / "s.zsgd"
    pack_source(open_source("synthetic:8:32:2"), path, SETTINGS.layout(), epochs=2, seed=8,
                progress=False)
    report = train_stream_file(StreamFile(path), SETTINGS)
    golden = train_stream_file(StreamFile(path), replace(SETTINGS, backend="golden"))
    assert report["bit_exact"] is True
    assert [e["bit_exact"] for e in report["epochs"]] == [True] * 3
    assert report["model_words"] == golden["model_words"]
    for board, reference in zip(report["epochs"], golden["epochs"], strict=True):
        assert board["engine_loss"] == reference["engine_loss"]
        assert board["beats"] == reference["beats"] and board["cycles"] >= board["beats"]


class Faulty(SerialTransport):
    """The serial port with one fault on the next write: a flipped payload bit or a lost
    byte."""

    fault = None

    def write(self, data: bytes) -> None:
        data = bytearray(data)
        if self.fault == "corrupt":
            data[-3] ^= 0x01
        elif self.fault == "drop":
            del data[len(data) // 2]
        self.fault = None
        super().write(bytes(data))


def test_bad_frames_give_clear_errors_and_the_link_recovers():
    with simulated_board(PARAMS) as port:
        wire = Faulty(port, 115200)
        board = BoardLink(wire, retries=0, timeout=10.0, quiet=0.3)
        try:
            assert board.identify() == PARAMS
            checks = [("corrupt", "BAD_CRC"), ("drop", "GAP_TIMEOUT")]
            for value, (fault, name) in enumerate(checks, start=1):
                wire.fault = fault
                with pytest.raises(LinkError, match=rf"write of 1 word\(s\) at 0x0C0: the "
                                                    rf"board answered {name}"):
                    board.write_reg("MODEL_INDEX", index=value)
                # Not executed; the next transactions work.
                assert board.read_reg("MODEL_INDEX") == {"index": value - 1}
                board.write_reg("MODEL_INDEX", index=value)
                assert board.read_reg("MODEL_INDEX") == {"index": value}
            with pytest.raises(LinkError, match="BAD_COMMAND: unknown command"):
                board.request(0x7E, b"\x01", "a bad command")
            with pytest.raises(LinkError, match="BAD_LENGTH"):
                board.request(Command.STREAM, bytes(5), "a burst of part of a beat")
            with pytest.raises(LinkError, match=r"NOT_READY: .*\(detail 0\)"):
                board.stream([1, 2], [0, 1])   # no epoch started
            with pytest.raises(LinkError, match=r"BUS_ERROR: .*\(detail 2\)"):
                board.write(0x0C0, [0, 0, 0], increment=True)   # 0x0C8 is unmapped
            assert board.identify() == PARAMS
            wire.fault = "drop"
            board.retries = 1   # with a retry, a lost byte costs one resend and no error
            board.write_reg("MODEL_INDEX", index=5)
            assert board.read_reg("MODEL_INDEX") == {"index": 5}
        finally:
            board.close()
