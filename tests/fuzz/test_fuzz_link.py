"""The board-link frame parser (``zipsgd.spec.link``) under fuzzed input.

The link's own tests fuzz it too and run in the long run (``make fuzz``): the parsers never
raise on arbitrary bytes and frames survive noise and chunking
(``tests/hw/test_hostlink_protocol.py``), and the host driver lets only ``LinkError`` out on
arbitrary replies (``tests/host/test_board.py``).  Added here: intact frames whose header
fields say anything (commands, lengths up to and past the buffer) mixed with noise, as the
bridge meets them: each is parsed to exactly that frame or dropped as overlong, and the
bridge's request checks answer every parsed frame with a code, never an exception.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from zipsgd.spec import link
from zipsgd.spec.link import Code, Frame

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import fuzz_settings

PAYLOADS = st.one_of(st.binary(max_size=40), st.integers(0, 3).map(lambda n: bytes(4 * n + 2)),
                     st.sampled_from([bytes(link.MAX_PAYLOAD), bytes(link.MAX_PAYLOAD - 1)]))


def overlong_frame(command: int, seq: int, length: int) -> bytes:
    """A frame whose LEN field is beyond the buffer (its bytes never follow)."""
    return bytes([link.SOF, command, seq]) + length.to_bytes(2, "little")


@fuzz_settings(200)
@given(frames=st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255), PAYLOADS,
                                 st.integers(0, 9)), max_size=6),
       noise=st.binary(max_size=20), bus_width=st.sampled_from([64, 128, 256, 512]),
       chunk=st.integers(1, 64))
def test_request_frames_parse_and_check(frames, noise, bus_width, chunk):
    noise = noise.replace(bytes([link.SOF]), b"")
    data, expected = b"", []
    for command, seq, payload, kind in frames:
        if kind == 0:
            length = link.MAX_PAYLOAD + 1 + seq
            data += noise + overlong_frame(command, seq, length)
            expected.append(None)
        else:
            frame = Frame(command, seq, payload)
            data += noise + link.encode_request(frame)
            expected.append(frame)
    parser = link.RequestParser()
    got = []
    for start in range(0, len(data), chunk):
        got += parser.feed(data[start:start + chunk])
    assert got == expected
    assert parser.overlong == expected.count(None)
    for frame in got:
        if frame is not None:
            assert link.check_request(frame, bus_width) in set(Code)
