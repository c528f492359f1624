"""The host driver of the board link (``docs/HOSTLINK.md``): registers, model, stream, epochs.

:class:`BoardLink` speaks the protocol over any byte transport with ``write(bytes)``,
``read(size) -> bytes`` (waiting at most a short poll time) and ``close()``;
:func:`open_serial` makes one from a serial port with pyserial (a real board, or the
pseudo-terminal of the simulated board).  Every failure is a :class:`~zipsgd.spec.errors.LinkError`
with a one-line message.

Recovery: after any failed exchange the driver waits until the line has been quiet for
``quiet`` seconds (longer than the bridge's gap timeout, so the bridge is hunting again) and
drops what it received.  A request the bridge reports as not executed (BAD_CRC, GAP_TIMEOUT)
is resent up to ``retries`` times; anything else, and a missing or corrupted reply (the
request may have run: a MODEL_DATA access or a STREAM burst must not run twice), is raised.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import serial

from ..spec import link
from ..spec import registers as regs
from ..spec.engine import SIM_MAX_BATCH, SIM_MAX_FEATURES, EngineParams, RunConfig, sim_params
from ..spec.errors import LinkError
from ..spec.link import CODE_TEXT, DEFAULT_BAUD, NOT_EXECUTED, Code, Command, Frame

__all__ = ["BoardLink", "SerialTransport", "open_serial", "run_board_job",
           "board_sim_params", "contiguous_runs"]

FRAMING_ERRORS = frozenset({Code.BAD_CRC, Code.GAP_TIMEOUT, Code.BAD_LENGTH})


class SerialTransport:
    """A pyserial port as a transport (``read`` waits at most ``poll`` seconds)."""

    def __init__(self, port: str, baud: int, poll: float = 0.01):
        try:
            self.serial = serial.Serial(port, baud, timeout=poll)
        except (serial.SerialException, OSError, ValueError) as error:
            raise LinkError(f"cannot open serial port {port!r} at {baud} baud: {error}") from None

    def write(self, data: bytes) -> None:
        try:
            self.serial.write(data)
            self.serial.flush()
        except (serial.SerialException, OSError) as error:
            raise LinkError(f"writing to {self.serial.port!r} failed: {error}") from None

    def read(self, size: int) -> bytes:
        try:
            return self.serial.read(max(1, min(size, self.serial.in_waiting or 1)))
        except (serial.SerialException, OSError) as error:
            raise LinkError(f"reading from {self.serial.port!r} failed: {error}") from None

    def close(self) -> None:
        self.serial.close()


def open_serial(port: str, baud: int = DEFAULT_BAUD, **options) -> BoardLink:
    """A :class:`BoardLink` over a serial port (``options``: see :class:`BoardLink`)."""
    return BoardLink(SerialTransport(port, baud), **options)


def contiguous_runs(offsets) -> list[tuple[int, int]]:
    """``(first offset, count)`` of each run of consecutive register offsets, in order."""
    runs: list[list[int]] = []
    for offset in offsets:
        if runs and offset == runs[-1][0] + 4 * runs[-1][1] and runs[-1][1] < link.MAX_WORDS:
            runs[-1][1] += 1
        else:
            runs.append([offset, 1])
    return [tuple(r) for r in runs]


def _signed32(value: int) -> int:
    return value - (1 << 32) if value >> 31 else value


class BoardLink:
    """The engine on a board, through the host link.

    Parameters
    ----------
    transport
        ``write``, ``read``, ``close`` (see the module docstring).
    timeout : float
        Seconds to wait for a reply.
    retries : int
        Resends of a request the bridge reports as not executed.
    quiet : float
        Seconds of silence that end a resynchronisation (more than the bridge's gap timeout).
    """

    def __init__(self, transport, *, timeout: float = 2.0, retries: int = 2,
                 quiet: float = 0.1):
        self.transport = transport
        self.timeout, self.retries, self.quiet = timeout, retries, quiet
        self._seq = 0
        self._bus_width: int | None = None
        self.resyncs = 0

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> BoardLink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- frames -------------------------------------------------------------------------------

    def resync(self) -> None:
        """Wait for a quiet line and drop whatever arrived."""
        self.resyncs += 1
        last = time.monotonic()
        deadline = last + max(10 * self.quiet, self.timeout)
        while time.monotonic() - last < self.quiet:
            if self.transport.read(4096):
                last = time.monotonic()
            if time.monotonic() > deadline:
                raise LinkError("the board keeps sending: the line does not go quiet")

    def exchange(self, frame: bytes, command: int, seq: int, what: str) -> link.Reply:
        """Send raw request bytes and return the reply with ``command`` and ``seq`` or a
        framing error reply (other replies are dropped).  Raises LinkError if none arrives in
        time or it is corrupted; an error reply is returned, not raised."""
        self.transport.write(frame)
        parser = link.ReplyParser()
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            for reply in parser.feed(self.transport.read(4096)):
                if reply is None:
                    self.resync()
                    raise LinkError(f"{what}: the reply was corrupted (CRC); it may have been "
                                    f"executed")
                # A framing error reply may echo a damaged CMD/SEQ; resync() has drained
                # earlier replies, so it answers this request.
                if (reply.command == command & 0xFF and reply.seq == seq) \
                        or reply.code in FRAMING_ERRORS:
                    return reply
        self.resync()
        raise LinkError(f"{what}: no reply within {self.timeout:g} s (is the board "
                        f"programmed and the port and baud rate right?)")

    def request(self, command: int, payload: bytes, what: str) -> bytes:
        """One request with retries (see the module docstring); returns the OK reply's
        payload."""
        for attempt in range(self.retries + 1):
            self._seq = (self._seq + 1) & 0xFF
            frame = link.encode_request(Frame(command, self._seq, payload))
            reply = self.exchange(frame, command, self._seq, what)
            if reply.code == Code.OK:
                return reply.payload
            self.resync()
            if reply.code not in NOT_EXECUTED or attempt == self.retries:
                raise LinkError(self.describe(reply, what))
        raise AssertionError("unreachable")

    @staticmethod
    def describe(reply: link.Reply, what: str) -> str:
        try:
            code = Code(reply.code)
        except ValueError:
            return f"{what}: the board answered unknown code 0x{reply.code:02X}"
        return f"{what}: the board answered {code.name}: {CODE_TEXT[code]} (detail " \
               f"{reply.detail})"

    # -- registers ----------------------------------------------------------------------------

    def read(self, offset: int, count: int = 1, increment: bool = False) -> list[int]:
        """``count`` words read at ``offset`` (stepping by 4 if ``increment``)."""
        what = f"read of {count} word(s) at 0x{offset:03X}"
        data = self.request(Command.READ, link.encode_read(offset, count, increment), what)
        if len(data) != 4 * count:
            raise LinkError(f"{what}: the reply carries {len(data)} bytes, expected {4 * count}")
        return [int.from_bytes(data[4 * k:4 * k + 4], "little") for k in range(count)]

    def write(self, offset: int, words, increment: bool = False) -> None:
        words = list(words)
        self.request(Command.WRITE, link.encode_write(offset, words, increment),
                     f"write of {len(words)} word(s) at 0x{offset:03X}")

    def read_reg(self, name: str) -> dict:
        return regs.decode(name, self.read(regs.register(name).offset)[0])

    def write_reg(self, name: str, **fields) -> None:
        self.write(regs.register(name).offset, [regs.encode(name, **fields)])

    def read_offsets(self, offsets) -> dict[int, int]:
        """Words at ``offsets`` (read in that order), one READ per run of consecutive ones."""
        out = {}
        for first, count in contiguous_runs(offsets):
            for k, word in enumerate(self.read(first, count, increment=count > 1)):
                out[first + 4 * k] = word
        return out

    def write_pairs(self, pairs) -> None:
        """``(offset, value)`` writes in order, one WRITE per run of consecutive offsets."""
        pairs = list(pairs)
        values = dict(pairs)
        for first, count in contiguous_runs([o for o, _ in pairs]):
            self.write(first, [values[first + 4 * k] for k in range(count)],
                       increment=count > 1)

    # -- the engine ---------------------------------------------------------------------------

    def identify(self) -> EngineParams:
        """Check that an engine answers and return its build parameters."""
        words = self.read_offsets([regs.register(n).offset for n in
                                   ("ID", "VERSION", "BUS_WIDTH", "MAX_FEATURES", "MAX_BATCH",
                                    "LANES")])
        values = list(words.values())
        if values[0] != regs.ENGINE_ID:
            raise LinkError(f"the board's ID register reads 0x{values[0]:08X}, expected "
                            f"0x{regs.ENGINE_ID:08X} (not a zipsgd engine)")
        try:
            params = EngineParams(values[2], values[3], values[4], values[5])
        except Exception as error:  # an engine that reads nonsense is a link problem here
            raise LinkError(f"the board reports impossible parameters: {error}") from None
        self._bus_width = params.bus_width
        return params

    def configure(self, config: RunConfig, n_samples: int, seed: bool = False) -> None:
        self.write_pairs(regs.run_config_writes(config, n_samples, seed=seed))

    def command(self, **bits) -> None:
        self.write_reg("CTRL", **bits)

    def status(self) -> dict:
        return regs.decode_status_words(self.read_offsets(regs.status_offsets()))

    def write_model(self, words) -> None:
        self.write_reg("MODEL_INDEX", index=0)
        words = [int(w) for w in words]
        data = regs.register("MODEL_DATA").offset
        for k in range(0, len(words), link.MAX_WORDS):
            self.write(data, words[k:k + link.MAX_WORDS])

    def read_model(self, n: int) -> np.ndarray:
        self.write_reg("MODEL_INDEX", index=0)
        data = regs.register("MODEL_DATA").offset
        out = []
        for k in range(0, n, link.MAX_WORDS):
            out += self.read(data, min(link.MAX_WORDS, n - k))
        return np.array([_signed32(w) for w in out], dtype=np.int64)

    def stream(self, beats, lasts) -> None:
        """Send beats (integers of ``W`` bits) with their ``tlast`` flags in bursts."""
        if self._bus_width is None:
            self.identify()
        per = link.max_beats(self._bus_width)
        for k in range(0, len(beats), per):
            self.request(Command.STREAM,
                         link.encode_beats(beats[k:k + per], lasts[k:k + per], self._bus_width),
                         f"stream burst at beat {k}")

    def wait_done(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            status = self.read_reg("STATUS")
            if status["done"] or not status["busy"]:
                return status
            if time.monotonic() > deadline:
                raise LinkError(f"the engine did not finish the epoch within {timeout:g} s")


def _beats(payload, beat_bytes: int, per_sample: int) -> tuple[list[int], list[bool]]:
    rows = np.asarray(payload, dtype=np.uint8).reshape(-1, beat_bytes)
    return ([int.from_bytes(row.tobytes(), "little") for row in rows],
            [(k + 1) % per_sample == 0 for k in range(len(rows))])


def run_board_job(board: BoardLink, params: EngineParams, epochs, initial_model,
                  progress: Callable[[int], None] | None = None) -> list[dict]:
    """Run training epochs (``zipsgd.host.backend.EpochJob``) on a board; per epoch the
    decoded status and the model words read back (the format of ``run_training_job``).

    Raises
    ------
    LinkError
        The link failed, or the board's engine cannot run ``params``' configurations.
    """
    found = board.identify()
    if found.bus_width != params.bus_width:
        raise LinkError(f"the board's engine has a {found.bus_width}-bit bus, the stream "
                        f"needs {params.bus_width}")
    if found.lanes != params.lanes:  # the lanes decide which random bits an update uses
        raise LinkError(f"the board's engine has {found.lanes} lanes, the golden model "
                        f"{params.lanes}: pass --lanes {found.lanes}")
    if board.read_reg("STATUS")["busy"]:  # an earlier run left an epoch open
        board.command(abort=1)
    board.command(clear_errors=1)
    results = []
    for index, epoch in enumerate(epochs):
        epoch.config.check_against(found)
        board.configure(epoch.config, epoch.samples, seed=epoch.write_seed)
        if index == 0:
            board.write_model(initial_model)
        layout = epoch.config.layout(params.bus_width)
        beats, lasts = _beats(epoch.payload, layout.beat_bytes,
                              layout.beats_per_sample(epoch.config.n_features))
        started = time.perf_counter()
        board.command(start=1)
        board.stream(beats, lasts)
        board.wait_done()
        wall = time.perf_counter() - started
        status = board.status()
        words = board.read_model(epoch.config.n_features)
        results.append({"status": status, "model_words": words.tolist(), "wall_s": wall})
        if progress is not None:
            progress(index + 1)
    return results


def board_sim_params(params: EngineParams, epochs) -> EngineParams:
    """The simulated board is a fixed build like a real board: the small simulation build
    (``zipsgd.spec.engine.sim_params``) when the run's epochs fit it (faster to build than the
    run's ``params``, and the same numbers: only the limits differ), else ``params``."""
    fits = all(e.config.n_features <= SIM_MAX_FEATURES and e.config.batch_size <= SIM_MAX_BATCH
               for e in epochs)
    return sim_params(params.bus_width, params.lanes) if fits else params
