"""The host-link protocol definition (``zipsgd/spec/link.py``): CRC, frames, parsers, the
document.  The parsers are fuzzed with Hypothesis: a derandomized, small set in the normal
suite; a long run with ``HYPOTHESIS_PROFILE=fuzz pytest tests/hw/test_hostlink_protocol.py
tests/host/test_board.py -k fuzz``."""

from __future__ import annotations

import binascii
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zipsgd.spec import link
from zipsgd.spec.errors import LinkError
from zipsgd.spec.link import Code, Command, Frame, Reply

DOC = Path(__file__).resolve().parents[2] / "docs" / "HOSTLINK.md"
# Derandomized in the normal suite; random, with the "fuzz" profile's count, in the long run
# (HYPOTHESIS_PROFILE=fuzz, as `make fuzz` sets).
FUZZ = (settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
        if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else
        settings(derandomize=True, database=None, max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow]))


def test_crc_is_ccitt_false():
    """CRC-16/CCITT-FALSE: polynomial 0x1021, initial 0xFFFF, MSB first, no final XOR.  The
    check value of reveng's catalogue, and values worked by hand from the definition."""
    assert link.crc16(b"123456789") == 0x29B1
    assert link.crc16(b"") == 0xFFFF                  # the initial value, unreflected
    assert link.crc16(b"\x00") == 0xE1F0              # 0xFF00 shifted through 0x1021
    assert link.crc16(b"\xff\xff") == 0x0000          # cancels the initial value
    assert link.crc16(b"A") == 0xB915
    assert link.CRC.residue() == 0                    # what the bridge and parsers test for
    for data in (b"", b"\x5a", b"123456789", bytes(range(256))):
        assert link.crc16(data + link.crc16(data).to_bytes(2, "big")) == 0
        # An independent implementation: the standard library's CRC-CCITT (poly 0x1021, MSB
        # first) from the same initial value.
        assert link.crc16(data) == binascii.crc_hqx(data, 0xFFFF)


def test_frame_residue_is_zero_and_lengths():
    frame = link.encode_request(Frame(Command.WRITE, 3, link.encode_write(0xC4, [1, 2])))
    assert frame[0] == link.SOF and link.crc16(frame[1:]) == 0
    assert len(frame) == 10 + 7
    reply = link.encode_reply(Reply(Command.READ, 3, Code.OK, bytes(8)))
    assert len(reply) == 8 + 8 and link.crc16(reply[1:]) == 0


@given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=300),
       st.binary(max_size=40))
@FUZZ
def test_roundtrip_with_noise_between_frames(command, seq, payload, noise):
    noise = noise.replace(bytes([link.SOF]), b"")
    request = Frame(command, seq, payload)
    reply = Reply(command, seq, Code.OK, payload)
    assert link.RequestParser().feed(noise + link.encode_request(request)) == [request]
    parser = link.ReplyParser()
    data = noise + link.encode_reply(reply) + link.encode_reply(reply)
    got = []
    for k in range(0, len(data), 7):  # arbitrary chunking
        got += parser.feed(data[k:k + 7])
    assert got == [reply, reply] and not parser.in_frame


def test_payload_encoders_check_their_input():
    assert link.encode_read(0x80, 2, increment=True) == b"\x80\x80\x02\x00"
    assert link.encode_write(0x40, [0x01020304]) == b"\x40\x00\x04\x03\x02\x01"
    assert link.encode_beats([0x0102], [True], 64) == b"\x02\x01" + bytes(6) + b"\x01"
    for call, message in ((lambda: link.encode_read(0x42), "multiple of 4"),
                          (lambda: link.encode_read(0x40, 0), "1..511"),
                          (lambda: link.encode_write(0x40, []), "1..511"),
                          (lambda: link.encode_beats([1] * 228, [0] * 228, 64), "1..227"),
                          (lambda: link.encode_beats([1], [], 64), "tlast"),
                          (lambda: link.encode_request(Frame(1, 0, bytes(2049))), "2048")):
        with pytest.raises(LinkError, match=message):
            call()


@pytest.mark.parametrize("frame, code", [
    (Frame(Command.READ, 0, link.encode_read(0, 511)), Code.OK),
    (Frame(Command.READ, 0, b"\x00\x00\x00\x02"), Code.BAD_LENGTH),     # COUNT 512
    (Frame(Command.READ, 0, b"\x00\x00\x01"), Code.BAD_LENGTH),
    (Frame(Command.WRITE, 0, bytes(6)), Code.OK),
    (Frame(Command.WRITE, 0, bytes(7)), Code.BAD_LENGTH),
    (Frame(Command.STREAM, 0, bytes(18)), Code.OK),
    (Frame(Command.STREAM, 0, bytes(17)), Code.BAD_LENGTH),
    (Frame(Command.STREAM, 0, b""), Code.BAD_LENGTH),
    (Frame(0, 0, b""), Code.BAD_COMMAND),
])
def test_check_request(frame, code):
    assert link.check_request(frame, 64) == code


@given(st.lists(st.binary(max_size=64), max_size=20))
@FUZZ
def test_fuzz_parsers_never_raise(chunks):
    """Arbitrary bytes give frames or None (a bad frame), never an exception."""
    for parser in (link.RequestParser(), link.ReplyParser()):
        for chunk in chunks:
            for item in parser.feed(chunk):
                assert item is None or isinstance(item, (Frame, Reply))


def test_doc_is_current():
    assert DOC.read_text() == link.render(), \
        "docs/HOSTLINK.md is stale: python -m zipsgd.spec.link > docs/HOSTLINK.md"
