"""The host's driver of engine v2 in a LiteX SoC (``zipsgd/hw/soc.py``): DRAM init, the upload
of a packed stream into DRAM, a memory run and the read-back, as bus operations.

The driver is written without I/O: each step is a generator that yields operations, ``("write",
address, value)``, ``("write_block", address, words)`` (consecutive words), ``("read", address)``
(sent back the word read) and ``("wait", cycles)``, so the
same code runs on a board (LiteX's ``RemoteClient`` through ``litex_server``) and against the
simulated SoC (a cocotb Wishbone master): :func:`execute` runs a step on any object with
``read``/``write``/``wait``.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterable

from litex.tools.litex_client import RemoteClient

from ..spec import registers2 as regs
from ..spec.errors import ConfigError, LinkError
from ..spec.registers import ENGINE_ID
from ..spec.registers2 import ENGINE_VERSION2, MAP
from ..spec.soc import DFII_SEL
from .leveling import needs_read_leveling, read_leveling

__all__ = ["BLOCK_WORDS", "dram_init", "upload", "engine_writes", "memory_run", "read_status",
           "read_model", "execute", "RUNNING", "Ops", "RemoteBus", "litex_server", "parse_link",
           "BOARD_TIMEOUT_S", "check_engine", "check_dram", "check_upload", "run_soc_jobs",
           "DRAM_CHECK_WORDS", "link_max_words"]

Ops = Generator[tuple, int | None, None]
#: Words of one upload block: LiteX's UART bridge carries at most 255 words a record (an
#: Etherbone bridge fewer: its ``max_words``, :func:`link_max_words`; ``RemoteBus`` splits).
BLOCK_WORDS = 255
#: STATUS.RUNNING.
RUNNING = 1 << 5
_CTRL_RUN = 1 << 3


def dram_init(csrs: dict, init: Iterable[tuple], hardware_control: int,
              phy: dict | None = None) -> Ops:
    """Replay the DRAM's init sequence through the DFII CSRs, level the reads of a PHY that
    needs it (``phy``, the SoC's ``soc.json`` ``phy``: :mod:`zipsgd.host.leveling`), then hand
    the DRAM to the controller.  Returns the leveling's choice per byte lane (``[]``: none)."""
    for address, bank, control, command, delay in init:
        yield ("write", csrs["sdram_dfii_pi0_address"], address)
        yield ("write", csrs["sdram_dfii_pi0_baddress"], bank)
        if control is not None:
            yield ("write", csrs["sdram_dfii_control"], control)
        else:
            yield ("write", csrs["sdram_dfii_pi0_command"], command)
            yield ("write", csrs["sdram_dfii_pi0_command_issue"], 1)
        if delay:
            yield ("wait", delay)
    leveled = []
    if phy is not None and needs_read_leveling(phy):
        leveled = yield from read_leveling(csrs, phy)
    yield ("write", csrs["sdram_dfii_control"], hardware_control)
    return leveled


def upload(address: int, data: bytes) -> Ops:
    """Write ``data`` at ``address`` as little-endian 32-bit words (padded with zeros), in
    blocks of :data:`BLOCK_WORDS` consecutive words (``("write_block", address, words)``: one
    bridge transaction each on a board)."""
    if address % 4:
        raise ConfigError(f"an upload address must be a multiple of 4, found {address:#x}")
    data = bytes(data) + bytes(-len(data) % 4)
    words = [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
    for k in range(0, len(words), BLOCK_WORDS):
        yield ("write_block", address + 4 * k, words[k:k + BLOCK_WORDS])


def engine_writes(base: int, pairs: Iterable[tuple[int, int]]) -> Ops:
    """Register writes ``(offset, value)`` to the engine at ``base``."""
    for offset, value in pairs:
        yield ("write", base + offset, value & 0xFFFF_FFFF)


def memory_run(base: int, stream_address: int, nbytes: int, epochs: int, bus_width: int,
               poll: int = 64) -> Ops:
    """Start a memory run of ``epochs`` epochs over ``nbytes`` at ``stream_address`` (the
    engine's view of the bus address) and wait for its end; returns nothing (read the status
    with :func:`read_status`)."""
    yield from engine_writes(base, regs.run_writes(stream_address, nbytes, epochs, bus_width))
    yield ("write", base + MAP.register("CTRL").offset, _CTRL_RUN)
    status = MAP.register("STATUS").offset
    while True:
        word = yield ("read", base + status)
        if not word & RUNNING:
            return
        yield ("wait", poll)


def read_status(base: int) -> Generator[tuple, int, dict]:
    """The status registers, decoded (``registers2.decode_status``)."""
    words = {}
    for offset in regs.status_offsets():
        words[offset] = yield ("read", base + offset)
    return regs.decode_status(words)


def read_model(base: int, n: int) -> Generator[tuple, int, list[int]]:
    """Model words ``0..n-1``, signed."""
    yield ("write", base + MAP.register("MODEL_INDEX").offset, 0)
    data = MAP.register("MODEL_DATA").offset
    out = []
    for _ in range(n):
        word = yield ("read", base + data)
        out.append(word - (1 << 32) if word >> 31 else word)
    return out


def execute(ops: Generator, bus):
    """Run ``ops`` on ``bus`` (``read(address)``, ``write(address, value)``, ``wait(cycles)``);
    returns the generator's result."""
    reply = None
    try:
        while True:
            op = ops.send(reply)
            reply = None
            if op[0] == "write":
                bus.write(op[1], op[2])
            elif op[0] == "write_block":
                if hasattr(bus, "write_block"):
                    bus.write_block(op[1], op[2])
                else:
                    for k, word in enumerate(op[2]):
                        bus.write(op[1] + 4 * k, word)
            elif op[0] == "read":
                reply = bus.read(op[1])
            else:
                bus.wait(op[1])
    except StopIteration as stop:
        return stop.value


# --------------------------------------------------------------------------------------------
# The bus of a board (or of the simulated SoC behind its UART bridge): litex_server and
# LiteX's RemoteClient.
# --------------------------------------------------------------------------------------------

#: How long a read waits for its answer on a board (an upload block ahead of it at 1 Mbaud
#: takes about 10 ms).
BOARD_TIMEOUT_S = 5.0


class _Client(RemoteClient):
    """LiteX's client, but a read that gets no answer is an error, not a word of zeros."""

    def receive_packet(self, sock, addr_size):
        packet = super().receive_packet(sock, addr_size)
        if packet == 0:
            raise LinkError(f"the board did not answer within {sock.gettimeout():g} s "
                            f"(is it programmed with the SoC's bitstream, and is the link, "
                            f"its serial port or IP address, the right one?)")
        return packet


class RemoteBus:
    """The SoC's bus through ``litex_server`` at ``host:port`` (LiteX's ``RemoteClient``):
    ``read``, ``write``, ``write_block`` (records of at most ``max_words`` words: the link's,
    :func:`link_max_words`) and ``wait`` (the SoC's clock cycles at ``clock_hz``, slept).

    Raises
    ------
    LinkError
        The server cannot be reached, or a read gets no answer within ``timeout_s``.
    """

    def __init__(self, host: str = "localhost", port: int = 1234, *, clock_hz: float = 50e6,
                 timeout_s: float = BOARD_TIMEOUT_S, max_words: int = BLOCK_WORDS):
        self.clock_hz = clock_hz
        self.max_words = max_words
        self.client = _Client(host=host, port=port, csr_csv=None)
        try:
            self.client.open()
        except OSError as error:
            raise LinkError(f"litex_server at {host}:{port} cannot be reached ({error})") \
                from None
        self.client.socket.settimeout(timeout_s)

    def read(self, address: int) -> int:
        try:
            return self.client.read(address)
        except OSError as error:
            raise LinkError(f"the link to litex_server broke ({error})") from None

    def write(self, address: int, value: int) -> None:
        self.write_block(address, [value])

    def write_block(self, address: int, words: list[int]) -> None:
        words = list(words)
        try:
            for k in range(0, len(words), self.max_words):
                self.client.write(address + 4 * k, words[k:k + self.max_words])
        except OSError as error:
            raise LinkError(f"the link to litex_server broke ({error})") from None

    def wait(self, cycles: int) -> None:
        time.sleep(cycles / self.clock_hz)

    def close(self) -> None:
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def parse_link(link: str, etherbone: dict | None = None) -> tuple[str, list[str]]:
    """``(what, litex_server's options)`` for a link to a board: a serial device (LiteX's UART
    bridge, at the rate given to :func:`litex_server`), or ``udp``/``udp:IP``/``udp:IP:PORT``
    for Etherbone, whose address and port default to the SoC's (``etherbone``, ``soc.json``'s:
    ``{"ip": ..., "port": ...}``).

    Raises
    ------
    ConfigError
        ``udp`` for a SoC with no Etherbone bridge, or a malformed address or port.
    """
    if link != "udp" and not link.startswith("udp:"):
        return link, ["--uart", "--uart-port", link]
    if etherbone is None:
        raise ConfigError(f"expected a serial port: this SoC has no Etherbone bridge (its "
                          f"soc.json has no etherbone entry), found --port {link}")
    parts = link.split(":")[1:]
    ip = parts[0] if parts and parts[0] else etherbone["ip"]
    port = parts[1] if len(parts) > 1 else str(etherbone["port"])
    try:
        socket.inet_aton(ip)
        valid = len(parts) <= 2 and ip.count(".") == 3 and port.isdigit() \
            and 0 < int(port) < 65536
    except OSError:
        valid = False
    if not valid:
        raise ConfigError(f"expected udp, udp:IP or udp:IP:PORT (an IPv4 address, a port "
                          f"1..65535), found --port {link}")
    return f"Etherbone {ip}:{port}", ["--udp", "--udp-ip", ip, "--udp-port", port]


def link_max_words(link: str, etherbone: dict | None = None) -> int:
    """The most words one write record may carry on ``link`` (:func:`parse_link`): 255 on the
    UART bridge, the Etherbone bridge's ``max_words`` (``soc.json``'s ``etherbone``).

    Raises
    ------
    ConfigError
        As :func:`parse_link`; or an ``etherbone`` entry without ``max_words`` (a ``soc.json``
        written before it was recorded: build the SoC again).
    """
    what, options = parse_link(link, etherbone)
    if options[0] == "--uart":
        return BLOCK_WORDS
    words = etherbone.get("max_words")
    if not (isinstance(words, int) and 1 <= words <= BLOCK_WORDS):
        raise ConfigError(f"expected soc.json's etherbone entry with max_words (1..{BLOCK_WORDS}"
                          f", the words a write record carries), found {etherbone!r}: build "
                          f"the SoC again")
    return words


@contextlib.contextmanager
def litex_server(link: str, baud: int, *, etherbone: dict | None = None,
                 start_timeout_s: float = 20.0):
    """Run ``litex_server`` on ``link`` (:func:`parse_link`: a serial device at ``baud``, LiteX's
    UART bridge, or ``udp[:IP[:PORT]]``, Etherbone) on a free local TCP port, which it yields;
    stopped when the block ends.

    Raises
    ------
    ConfigError
        As :func:`parse_link`.
    LinkError
        The server ends or does not listen within ``start_timeout_s`` (its last words are in
        the message: a serial port that cannot be opened, a board that does not answer
        Etherbone's probe).
    """
    what, options = parse_link(link, etherbone)
    if options[0] == "--uart":
        options += ["--uart-baudrate", str(baud)]
    port = _free_port()
    # (Its words go to a file, which a pipe nobody reads while it serves could not be.)
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "litex.tools.litex_server", *options,
             "--bind-port", str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + start_timeout_s
            while True:
                if server.poll() is not None:
                    log.seek(0)
                    words = log.read().strip().splitlines()
                    raise LinkError(f"litex_server on {what} ended at once: "
                                    f"{words[-1] if words else 'no message'}")
                # (It listens before it opens the link, and greets a client once the link is
                # open: Etherbone's probe of the board takes up to ten seconds.)
                try:
                    with socket.create_connection(("localhost", port), timeout=0.5) as probe:
                        probe.settimeout(max(0.1, deadline - time.monotonic()))
                        if probe.recv(256):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise LinkError(f"litex_server on {what} did not open the link within "
                                    f"{start_timeout_s:g} s")
                time.sleep(0.1)
            # (The probe connection above ends the server's first session; it serves the next.)
            yield port
        finally:
            server.terminate()
            try:
                server.wait(timeout=5)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# --------------------------------------------------------------------------------------------
# A training run on the SoC: identity, DRAM init and check, uploads, epochs from DRAM.
# --------------------------------------------------------------------------------------------

#: Words written and read back at the bottom of DRAM after its init: a DRAM whose init or
#: calibration failed does not return them.
DRAM_CHECK_WORDS = 64


def check_engine(base: int, params) -> Generator[tuple, int, None]:
    """Check that the engine at ``base`` is engine v2 built with ``params``.

    Raises
    ------
    LinkError
        No engine answers there, or it was built for other parameters or another register map
        (the message names both).
    """
    ident = yield ("read", base + MAP.register("ID").offset)
    if ident != ENGINE_ID:
        raise LinkError(f"expected the zipsgd engine (ID {ENGINE_ID:#010x}) at {base:#x}, "
                        f"found ID {ident:#010x}: is the board programmed with the SoC's "
                        f"bitstream?")
    found = {}
    for name in ("VERSION", "BUS_WIDTH", "MAX_FEATURES", "MAX_BATCH"):
        found[name] = yield ("read", base + MAP.register(name).offset)
    want = {"VERSION": ENGINE_VERSION2, "BUS_WIDTH": params.bus_width,
            "MAX_FEATURES": params.max_features, "MAX_BATCH": params.max_batch}
    if found != want:
        def show(values):
            return ", ".join(f"{k.lower()} {v}" for k, v in values.items())
        raise LinkError(f"the driver needs an engine with {show(want)}; the bitstream's has "
                        f"{show(found)}: build the SoC with these parameters, or run with the "
                        f"bitstream's")


def check_dram(address: int, words: int = DRAM_CHECK_WORDS) -> Generator[tuple, int, None]:
    """Write a pattern of ``words`` words at ``address`` and read it back.

    Raises
    ------
    LinkError
        A word reads back wrong: the DRAM's init or calibration failed.
    """
    pattern = [(0x9E37_79B9 * (k + 1)) & 0xFFFF_FFFF for k in range(words)]
    yield ("write_block", address, pattern)
    for k, want in enumerate(pattern):
        got = yield ("read", address + 4 * k)
        if got != want:
            raise LinkError(f"the DRAM failed its check after init: {address + 4 * k:#x} reads "
                            f"{got:#010x}, {want:#010x} was written (its init or calibration "
                            f"failed; power-cycle the board and retry)")


def check_upload(address: int, data: bytes) -> Generator[tuple, int, None]:
    """Read back the last word of an upload of ``data`` at ``address``.

    Raises
    ------
    LinkError
        It differs from what was written.
    """
    padded = bytes(data) + bytes(-len(data) % 4)
    last = len(padded) - 4
    want = int.from_bytes(padded[last:], "little")
    got = yield ("read", address + last)
    if got != want:
        raise LinkError(f"the upload did not land: {address + last:#x} reads {got:#010x}, "
                        f"{want:#010x} was written")


def run_soc_jobs(bus, facts: dict, params, jobs, initial_model,
                 progress=None) -> list[dict]:
    """Train ``jobs`` (``EpochJob2``) on the SoC behind ``bus`` (:func:`execute`'s bus) from
    ``initial_model``: check the engine, init the DRAM (and level its reads), check it, then
    per epoch upload its stream (only when it differs from the one in DRAM), write its
    settings and run it from DRAM.  ``facts`` is the SoC's ``soc.json`` (``csrs``, ``init``,
    ``main_ram_base``, ``main_ram_size``, ``engine_base``, ``phy``).  One dict per epoch:
    ``status``, ``model_words``, ``wall_s`` (the epoch's run) and ``upload_s`` (its upload, 0
    when none).

    Raises
    ------
    ConfigError
        A packed stream larger than the board's DRAM.
    LinkError
        As :func:`check_engine`, :func:`check_dram` and
        :func:`~zipsgd.host.leveling.read_leveling`, or the bus fails.
    """
    base, ram = facts["engine_base"], facts["main_ram_base"]
    for job in jobs:
        if job.payload.size > facts["main_ram_size"]:
            raise ConfigError(f"the packed stream is {job.payload.size} bytes; the board's DRAM "
                              f"holds {facts['main_ram_size']} (pack fewer samples or features)")
    execute(check_engine(base, params), bus)
    execute(dram_init(facts["csrs"], facts["init"], DFII_SEL, facts.get("phy")), bus)
    execute(check_dram(ram), bus)
    model = MAP.register("MODEL_INDEX").offset, MAP.register("MODEL_DATA").offset
    execute(engine_writes(base, [(model[0], 0)] + [(model[1], int(w)) for w in initial_model]),
            bus)
    loaded, results = None, []
    for index, job in enumerate(jobs):
        data = job.payload.tobytes()
        started = uploaded = time.perf_counter()
        if data != loaded:
            execute(upload(ram, data), bus)
            # (A bridge does not answer writes: reading the last word waits for them all, so
            # the upload's time is its own, and shows that it landed.)
            execute(check_upload(ram, data), bus)
            loaded, uploaded = data, time.perf_counter()
        writes = regs.config_writes(job.config, job.plan, per_feature=job.per_feature,
                                    seed=job.write_seed)
        if job.levels is not None:
            writes += regs.level_writes(job.levels if job.per_feature else job.levels[:1])
        execute(engine_writes(base, writes), bus)
        execute(memory_run(base, ram, len(data), 1, params.bus_width), bus)
        wall = time.perf_counter() - uploaded
        status = execute(read_status(base), bus)
        words = execute(read_model(base, job.config.n_features), bus)
        results.append({"status": status, "model_words": words, "wall_s": wall,
                        "upload_s": uploaded - started})
        if progress is not None:
            progress(index + 1)
    return results
