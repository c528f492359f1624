"""The host link: the framed protocol a host speaks over a UART to the board's bridge.

One definition for the bridge (``zipsgd/hw/hostlink.py``), the host driver
(``zipsgd/host/board.py``) and ``docs/HOSTLINK.md`` (rendered by :func:`render`; a test checks the
file equals it).

Every frame, in both directions, is::

    SOF | header | payload | CRC-16 (big-endian)

A request's header is ``CMD SEQ LEN_LO LEN_HI``; a reply's is ``CMD SEQ CODE LEN_LO LEN_HI``
(the request's command and sequence number echoed).  The CRC covers every byte after SOF up to
the end of the payload, so running the CRC over the whole frame after SOF, CRC bytes included,
leaves 0 (the CRC's residue: no reflection and no final XOR).  The CRC is one object,
:data:`CRC`, Amaranth's catalog entry: software computes with ``CRC.compute`` and the bridge's
hardware is ``CRC.create()``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from amaranth.lib.crc import catalog

from .errors import LinkError

__all__ = [
    "SOF", "DEFAULT_BAUD", "CRC", "MAX_PAYLOAD", "MAX_WORDS", "ADDR_INCREMENT", "Command",
    "Code", "Frame", "Reply", "crc16", "encode_request", "encode_reply",
    "RequestParser", "ReplyParser", "beat_bytes", "max_beats", "encode_beats",
    "encode_read", "encode_write", "check_request", "render",
]

#: Start of every frame.  It may also appear inside a frame: the parser hunts for it only
#: between frames, and a false start is caught by the CRC or the gap timeout.
SOF = 0x5A
#: The UART's baud rate of a board build and of the host driver unless told otherwise.
DEFAULT_BAUD = 115200
#: The frame CRC, bytewise: CRC-16/CCITT-FALSE, catalogued by reveng (and Amaranth) as
#: CRC-16/IBM-3740.  ``CRC.compute(data)`` in software, ``CRC.create()`` in the bridge.
_CRC_NAME = "CRC16_IBM_3740"
CRC = getattr(catalog, _CRC_NAME)(data_width=8)
#: What the CRC leaves over a frame's bytes after SOF with its CRC bytes included (0 here).
_RESIDUE = CRC.residue()
#: Largest payload in either direction: the bridge's frame buffer (one 2048 x 8 block RAM).
MAX_PAYLOAD = 2048
#: Most 32-bit words one READ or WRITE moves (its reply or request payload fits the buffer).
MAX_WORDS = 511
#: Bit of a READ/WRITE address field: step the register address by 4 after every word
#: (otherwise every word goes to the same register, as the MODEL_DATA port wants).
ADDR_INCREMENT = 0x8000
ADDR_MASK = 0x0FFF


class Command(enum.IntEnum):
    """Request commands (the CMD byte)."""

    READ = 0x01     # payload: ADDR u16, COUNT u16; reply payload: COUNT words u32
    WRITE = 0x02    # payload: ADDR u16, then 1..MAX_WORDS words u32; reply payload: empty
    STREAM = 0x03   # payload: N beats of W/8 data bytes then a flags byte (bit 0 = tlast)


class Code(enum.IntEnum):
    """Reply codes (the CODE byte).  Every error reply carries a 2-byte DETAIL payload."""

    OK = 0x00
    BAD_CRC = 0x01        # the CRC did not check; nothing was executed. DETAIL 0
    BAD_COMMAND = 0x02    # unknown CMD; nothing was executed. DETAIL: the command byte
    BAD_LENGTH = 0x03     # LEN does not fit the command or the buffer; nothing executed. DETAIL 0
    GAP_TIMEOUT = 0x04    # the frame stopped before its end (a byte lost); nothing executed.
    #                       DETAIL: the bytes of the frame received after SOF
    NOT_READY = 0x05      # STREAM: the engine did not take a beat in time; the rest of the
    #                       burst was dropped. DETAIL: beats accepted
    BUS_ERROR = 0x06      # READ/WRITE: the register file answered SLVERR; the accesses before
    #                       it were done. DETAIL: index of the refused word


#: Codes after which the bridge executed nothing, so resending the same frame is safe.
NOT_EXECUTED = frozenset({Code.BAD_CRC, Code.GAP_TIMEOUT})

CODE_TEXT = {
    Code.OK: "done",
    Code.BAD_CRC: "the frame's CRC did not check (corrupted on the wire); nothing was executed",
    Code.BAD_COMMAND: "unknown command; nothing was executed",
    Code.BAD_LENGTH: "the payload length does not fit the command or the buffer; nothing was "
                     "executed",
    Code.GAP_TIMEOUT: "the frame stopped before its end (a byte was lost); nothing was executed",
    Code.NOT_READY: "the engine did not accept a stream beat in time (is an epoch started?); "
                    "the rest of the burst was dropped",
    Code.BUS_ERROR: "the register file refused an access (SLVERR)",
}


def crc16(data: bytes) -> int:
    """The frame CRC (:data:`CRC`) of ``data``."""
    return CRC.compute(bytes(data))


def beat_bytes(bus_width: int) -> int:
    """Bytes per beat in a STREAM payload: the ``W/8`` data bytes and the flags byte."""
    return bus_width // 8 + 1


def max_beats(bus_width: int) -> int:
    """The most beats one STREAM frame carries."""
    return MAX_PAYLOAD // beat_bytes(bus_width)


@dataclass(frozen=True)
class Frame:
    """A request."""

    command: int
    seq: int
    payload: bytes = b""


@dataclass(frozen=True)
class Reply:
    """A reply: the request's command and sequence number, a :class:`Code`, the payload."""

    command: int
    seq: int
    code: int
    payload: bytes = b""

    @property
    def detail(self) -> int:
        """An error reply's DETAIL field."""
        return int.from_bytes(self.payload[:2], "little")


def _frame(header: bytes, payload: bytes) -> bytes:
    if len(payload) > MAX_PAYLOAD:
        raise LinkError(f"a frame payload must be at most {MAX_PAYLOAD} bytes, found "
                        f"{len(payload)}")
    body = header + len(payload).to_bytes(2, "little") + bytes(payload)
    return bytes([SOF]) + body + crc16(body).to_bytes(2, "big")


def encode_request(frame: Frame) -> bytes:
    """The bytes of a request (any command byte, so that bad ones can be sent on purpose)."""
    return _frame(bytes([frame.command & 0xFF, frame.seq & 0xFF]), frame.payload)


def encode_reply(reply: Reply) -> bytes:
    return _frame(bytes([reply.command & 0xFF, reply.seq & 0xFF, reply.code & 0xFF]),
                  reply.payload)


def _address(offset: int, increment: bool) -> bytes:
    if not 0 <= offset <= ADDR_MASK or offset % 4:
        raise LinkError(f"a register offset must be a multiple of 4 in 0..0x{ADDR_MASK:X}, "
                        f"found {offset!r}")
    return (offset | (ADDR_INCREMENT if increment else 0)).to_bytes(2, "little")


def encode_read(offset: int, count: int = 1, increment: bool = False) -> bytes:
    """A READ payload."""
    if not 1 <= count <= MAX_WORDS:
        raise LinkError(f"a READ moves 1..{MAX_WORDS} words, found {count!r}")
    return _address(offset, increment) + count.to_bytes(2, "little")


def encode_write(offset: int, words, increment: bool = False) -> bytes:
    """A WRITE payload."""
    words = [int(w) & 0xFFFF_FFFF for w in words]
    if not 1 <= len(words) <= MAX_WORDS:
        raise LinkError(f"a WRITE moves 1..{MAX_WORDS} words, found {len(words)}")
    return _address(offset, increment) + b"".join(w.to_bytes(4, "little") for w in words)


def encode_beats(beats, lasts, bus_width: int) -> bytes:
    """A STREAM payload: each beat's ``W/8`` bytes (little-endian) and its flags byte."""
    if len(beats) != len(lasts):
        raise LinkError(f"{len(beats)} beats but {len(lasts)} tlast flags")
    if not 1 <= len(beats) <= max_beats(bus_width):
        raise LinkError(f"a STREAM frame carries 1..{max_beats(bus_width)} beats at W = "
                        f"{bus_width}, found {len(beats)}")
    size = bus_width // 8
    return b"".join(int(b).to_bytes(size, "little") + bytes([1 if last else 0])
                    for b, last in zip(beats, lasts, strict=True))


def check_request(frame: Frame, bus_width: int) -> Code:
    """What the bridge answers to a request that arrived intact: :data:`Code.OK` if it will
    execute it, otherwise the error code (the same checks as the hardware)."""
    n = len(frame.payload)
    if frame.command == Command.READ:
        if n != 4:
            return Code.BAD_LENGTH
        count = int.from_bytes(frame.payload[2:4], "little")
        return Code.OK if 1 <= count <= MAX_WORDS else Code.BAD_LENGTH
    if frame.command == Command.WRITE:
        return Code.OK if n >= 6 and (n - 2) % 4 == 0 else Code.BAD_LENGTH
    if frame.command == Command.STREAM:
        return Code.OK if n >= 1 and n % beat_bytes(bus_width) == 0 else Code.BAD_LENGTH
    return Code.BAD_COMMAND


class _Parser:
    """Byte-at-a-time frame parser with SOF hunting (the host side's half of the state machine
    the bridge implements).  ``feed`` returns the frames completed by the bytes given; a frame
    whose CRC fails is returned as ``None`` in that list, and its bytes are not re-scanned (as
    in the bridge, which answers BAD_CRC and goes back to hunting)."""

    def __init__(self, header_bytes: int):
        self._header_bytes = header_bytes
        self._buffer = bytearray()
        self._need = None   # total length of the frame being collected, once known
        self.overlong = 0   # frames dropped because LEN was above MAX_PAYLOAD

    @property
    def in_frame(self) -> bool:
        """A frame has started and not ended (a gap now means a lost byte)."""
        return bool(self._buffer)

    def reset(self) -> None:
        """Forget a partial frame (what the bridge does on its gap timeout)."""
        self._buffer.clear()
        self._need = None

    def feed(self, data: bytes) -> list:
        out = []
        for byte in bytes(data):
            if not self._buffer:
                if byte == SOF:
                    self._buffer.append(byte)
                continue
            self._buffer.append(byte)
            head = 1 + self._header_bytes + 2
            if self._need is None and len(self._buffer) == head:
                length = int.from_bytes(self._buffer[head - 2:head], "little")
                if length > MAX_PAYLOAD:
                    self.overlong += 1
                    self.reset()
                    out.append(None)
                    continue
                self._need = head + length + 2
            if self._need is not None and len(self._buffer) == self._need:
                frame = bytes(self._buffer)
                self.reset()
                out.append(self._decode(frame) if crc16(frame[1:]) == _RESIDUE else None)
        return out

    def _decode(self, frame: bytes):
        raise NotImplementedError


class RequestParser(_Parser):
    """Parses requests (what the bridge receives); frames are :class:`Frame` or None."""

    def __init__(self):
        super().__init__(2)

    def _decode(self, frame: bytes) -> Frame:
        return Frame(frame[1], frame[2], frame[5:-2])


class ReplyParser(_Parser):
    """Parses replies (what the host receives); frames are :class:`Reply` or None."""

    def __init__(self):
        super().__init__(3)

    def _decode(self, frame: bytes) -> Reply:
        return Reply(frame[1], frame[2], frame[3], frame[6:-2])


# -- documentation ------------------------------------------------------------------------------

_DOC = """\
# The host link

Generated from `zipsgd/spec/link.py` by `python -m zipsgd.spec.link > docs/HOSTLINK.md`; a test
checks that this file equals the rendering. The bridge is `zipsgd/hw/hostlink.py` (UART:
`zipsgd/hw/uart.py`), the host driver `zipsgd/host/board.py`.

The board's UART (8 data bits, no parity, one stop bit, LSB first; the baud rate is fixed when
the bitstream is built, {default_baud} by default) carries frames between the host and a bridge that
is an AXI4-Lite master of the engine's registers (`docs/REGISTERS.md`) and an AXI4-Stream
master of its sample input. The host sends one request and waits for its reply (stop and
wait); the bridge executes a request only after its last byte has arrived with a correct CRC.

## Frames

| | bytes |
|---|---|
| request | `SOF` `CMD` `SEQ` `LEN` (u16) payload `CRC` (u16, big-endian) |
| reply | `SOF` `CMD` `SEQ` `CODE` `LEN` (u16) payload `CRC` (u16, big-endian) |

* `SOF` = 0x{sof:02X}. Numbers are little-endian except the CRC.
* `SEQ` is chosen by the host and echoed in the reply with `CMD`, so a late reply to an earlier
  request is recognised and dropped. A framing error reply (BAD_CRC, GAP_TIMEOUT, BAD_LENGTH)
  echoes whatever `CMD` and `SEQ` arrived, possibly damaged or none; the host takes it as the
  answer to its current request (it drains the line before every new request after an error).
* `LEN` is the payload length, at most {max_payload} bytes (the bridge's frame buffer, one
  block RAM); the frame is `LEN` + {req_over} bytes long (reply: `LEN` + {rep_over}).
* `CRC` is CRC-16/CCITT-FALSE (reveng's CRC-16/IBM-3740, Amaranth's
  `amaranth.lib.crc.catalog.{crc_name}`: width {crc_width}, polynomial 0x{poly:04X}, initial
  0x{init:04X}, {reflection}, final XOR 0x{xor_out:04X}) over every byte after `SOF` up to the
  end of the payload; sent high byte first, so the CRC over everything after `SOF` including
  the CRC is {residue} (its residue). A 16-bit CRC rather than
  CRC-8: frames are up to {max_bits} bits long, and this polynomial keeps Hamming distance 4
  (every 1-, 2- and 3-bit error and every burst up to 16 bits detected) up to 32751 bits,
  while a false start of frame that reaches its CRC passes with probability 2^-16 instead of
  2^-8. In the bridge it is Amaranth's CRC `Processor`: 16 flip-flops and an XOR network taking
  a byte per cycle.

## Commands

| CMD | name | request payload | reply payload (OK) |
|---|---|---|---|
| 0x{read:02X} | READ | `ADDR` (u16), `COUNT` (u16, 1..{max_words}) | `COUNT` words (u32) |
| 0x{write:02X} | WRITE | `ADDR` (u16), 1..{max_words} words (u32) | empty |
| 0x{stream:02X} | STREAM | N >= 1 beats: `W/8` data bytes, a flags byte (bit 0 `tlast`) | empty |

* `ADDR` bits [11:0] are the register's byte offset (a multiple of 4); bit 15
  (0x{incr:04X}) steps the address by 4 after every word, otherwise every word goes to the same
  register (the MODEL_DATA port advances MODEL_INDEX by itself, so one READ returns up to
  {max_words} model words).
* A READ or WRITE stops at the first access the register file answers SLVERR; the reply is
  then BUS_ERROR with the index of that word (the words before it were done).
* STREAM hands the beats to the engine's AXI4-Stream input in order (`tvalid` held with its
  data until `tready`); `W` is the engine's bus width (register BUS_WIDTH), so `LEN` must be a
  multiple of `W/8 + 1` (at W = 64: at most {beats64} beats per frame). If the engine does not
  take a beat within the bridge's ready timeout, the rest of the burst is dropped and the reply
  is NOT_READY with the number of beats taken.

## Replies

Every error reply has a 2-byte payload, `DETAIL` (u16).

| CODE | name | meaning | DETAIL |
|---|---|---|---|
{codes}

## Resynchronisation

The bridge hunts for `SOF`, then collects the header, `LEN` payload bytes and the CRC. If no
byte arrives for the *gap timeout* (a build parameter of the bridge; about 20 ms on a board)
while a frame is incomplete, it drops the frame, answers GAP_TIMEOUT and hunts again: a lost
byte costs one error reply. A corrupted byte gives BAD_CRC (or, in `LEN`, a frame that ends
early or late: GAP_TIMEOUT, or BAD_CRC with the next frame's bytes). Bytes arriving while the
bridge executes or answers are dropped (the host waits for the reply). After an error, the host
driver waits two gap timeouts and discards what it has received, so both ends start from an
idle line; it resends a request only after BAD_CRC or GAP_TIMEOUT (nothing was executed) and
reports everything else, and a missing reply, as `LinkError`.
"""

_DETAIL = {Code.OK: "-", Code.BAD_CRC: "0", Code.BAD_COMMAND: "the CMD byte",
           Code.BAD_LENGTH: "0", Code.GAP_TIMEOUT: "bytes of the frame received after SOF",
           Code.NOT_READY: "beats accepted", Code.BUS_ERROR: "index of the refused word"}


def render() -> str:
    """``docs/HOSTLINK.md``."""
    codes = "\n".join(f"| 0x{c:02X} | {c.name} | {CODE_TEXT[c]} | {_DETAIL[c]} |" for c in Code)
    algo = CRC.algorithm
    reflection = ("MSB first (not reflected)" if not (algo.reflect_input or algo.reflect_output)
                  else f"input reflected: {algo.reflect_input}, output reflected: "
                       f"{algo.reflect_output}")
    return _DOC.format(sof=SOF, default_baud=DEFAULT_BAUD, max_payload=MAX_PAYLOAD, req_over=7,
                       rep_over=8,
                       crc_name=_CRC_NAME, crc_width=algo.crc_width, poly=algo.polynomial,
                       init=algo.initial_crc, reflection=reflection, xor_out=algo.xor_output,
                       residue=CRC.residue(), max_bits=(MAX_PAYLOAD + 8) * 8, read=Command.READ,
                       write=Command.WRITE, stream=Command.STREAM, max_words=MAX_WORDS,
                       incr=ADDR_INCREMENT, beats64=max_beats(64), codes=codes)


if __name__ == "__main__":
    print(render(), end="")
