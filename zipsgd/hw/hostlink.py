"""The host-link bridge: UART frames (``docs/HOSTLINK.md``) to the engine's AXI4-Lite registers
and AXI4-Stream input, and the engine with its bridge as one platform-free block.

:class:`HostLinkBridge` receives a whole request into its frame buffer (one 2048 x 8 memory),
checking the CRC as the bytes arrive, and executes it only when it is complete and intact, so
a damaged frame has no effect.  READ and WRITE run AXI4-Lite transactions one word at a time
(READ data go back into the buffer, which the reply then sends); STREAM assembles each beat
from the buffer into a register and holds it on ``m_axis_*`` until ``tready``.  Then the reply
is sent with its own CRC and the bridge hunts for the next SOF.

:class:`LinkedEngine` is the bridge wired to :class:`~zipsgd.hw.top.ZipsgdEngine`, with
``uart_rx``/``uart_tx`` and status outputs for LEDs: what a board top puts behind its PLL and
pins, and what the board-sim backend simulates.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..spec import link
from ..spec.engine import EngineParams
from ..spec.errors import ConfigError
from ..spec.registers import ADDR_WIDTH
from .arith import REPLICA_ATTRIBUTE
from .regfile import axil_signature
from .top import ZipsgdEngine
from .uart import UartRx, UartTx, check_divisor

__all__ = ["LinkParams", "HostLinkBridge", "ObservedEngine", "LinkedEngine", "SIM_LINK"]


@dataclass(frozen=True)
class LinkParams:
    """Build-time settings of the bridge, in clock cycles.

    divisor
        Clocks per UART bit (``f_clk / baud``), at least 4.
    gap_timeout
        Idle cycles after which an incomplete frame is dropped (GAP_TIMEOUT reply).
    ready_timeout
        Cycles a STREAM beat may wait for ``tready`` before NOT_READY.
    """

    divisor: int
    gap_timeout: int
    ready_timeout: int

    def __post_init__(self):
        check_divisor(self.divisor)
        # At least a few byte times, so that a frame sent without pauses is never cut.
        if not 30 * self.divisor <= self.gap_timeout < 1 << 32:
            raise ConfigError(f"gap_timeout must be at least 3 byte times ({30 * self.divisor} "
                              f"cycles), found {self.gap_timeout!r}")
        if not 16 <= self.ready_timeout < 1 << 32:
            raise ConfigError(f"ready_timeout must be in 16..2**32-1, found "
                              f"{self.ready_timeout!r}")

    @classmethod
    def for_board(cls, freq_mhz: float, baud: int) -> LinkParams:
        """A board's settings: gap timeout 20 ms, ready timeout 10 ms."""
        if not isinstance(baud, int) or baud <= 0:
            raise ConfigError(f"baud must be a positive integer, found {baud!r}")
        divisor = round(freq_mhz * 1e6 / baud)
        if divisor < 4 or abs(freq_mhz * 1e6 / divisor - baud) > 0.02 * baud:
            raise ConfigError(f"{baud} baud cannot be made from {freq_mhz} MHz within 2%")
        return cls(divisor, round(freq_mhz * 20e3), round(freq_mhz * 10e3))

    def seconds(self, cycles: int, freq_mhz: float) -> float:
        return cycles / (freq_mhz * 1e6)


#: The simulated board (``--backend board-sim``): 8 clocks per bit, short timeouts.
SIM_LINK = LinkParams(divisor=8, gap_timeout=4096, ready_timeout=1 << 14)


class HostLinkBridge(wiring.Component):
    """The frame parser, executor and reply generator (see the module docstring).

    Members
    -------
    rx : In(1), tx : Out(1)
        The UART lines.
    axil : Out(axil_signature())
        AXI4-Lite master to the register file.
    m_axis_tdata : Out(W), m_axis_tvalid, m_axis_tlast : Out(1), m_axis_tready : In(1)
        AXI4-Stream master to the engine's sample input.
    busy : Out(1)
        Inside a frame, executing or answering (not hunting for SOF): for an activity LED.
    """

    def __init__(self, bus_width: int, link_params: LinkParams):
        self._width = bus_width
        self._link = link_params
        super().__init__({
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "axil": Out(axil_signature()),
            "m_axis_tdata": Out(bus_width), "m_axis_tvalid": Out(1), "m_axis_tlast": Out(1),
            "m_axis_tready": In(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lp, w = self._link, self._width
        beat_bytes = link.beat_bytes(w)
        m.submodules.uart_rx = urx = UartRx(lp.divisor)
        m.submodules.uart_tx = utx = UartTx(lp.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx)]
        m.submodules.buffer = buffer = Memory(shape=8, depth=link.MAX_PAYLOAD, init=[])
        rd, wr = buffer.read_port(), buffer.write_port()

        cmd, seq, code = Signal(8), Signal(8), Signal(8)
        length = Signal(16)
        head = Signal(32)           # the first four payload bytes (address, count)
        hdr_idx = Signal(3)
        # The frame CRC, one register for both directions: a frame is received and then its
        # reply sent, never both at once.
        m.submodules.crc = crc = link.CRC.create()
        crc_ok = Signal()
        received = Signal(16)       # bytes after SOF, for GAP_TIMEOUT's detail
        gap = Signal(range(lp.gap_timeout + 1))
        ptr = Signal(range(link.MAX_PAYLOAD + 1))
        beat_pos = Signal(range(beat_bytes))
        n_beats = Signal(16)
        index = Signal(16)          # the word or beat being executed
        total = Signal(16)          # words or beats to execute
        # The last index, payload byte and reply byte, registered with the counts they end, so
        # that the end-of-loop tests are equalities of registers (HARDWARE.md, "Loop ends").
        last_index = Signal(16)
        last_byte = Signal(16)
        reply_last = Signal(16)
        # Those equalities, registered: each is read a cycle or more after both its sides last
        # changed, so it is never stale (HARDWARE.md, "Loop ends").
        at_last_index, at_last_byte, at_reply_last = Signal(), Signal(), Signal()
        detail = Signal(16)
        reply_len = Signal(16)
        address = Signal(ADDR_WIDTH)
        increment = Signal()
        fetched = Signal(range(beat_bytes + 1))
        took = Signal()             # a buffer read was issued last cycle: shift its byte in
        gather = Signal(w + 8)
        tx_byte = Signal(8)         # the reply's payload byte being sent
        word = Signal(32)
        aw_done, w_done = Signal(), Signal()
        waited = Signal(range(lp.ready_timeout + 1))
        # The engine's handshakes are registered before the state machine acts on them: a cycle
        # more per word, and the engine's late logic ends at a flip-flop here.
        b_seen, b_error = Signal(), Signal()
        r_seen, r_error = Signal(), Signal()
        offering, beat_taken = Signal(), Signal()
        # TVALID, a copy of ``offering`` kept apart in synthesis, so that the bridge and the
        # engine each read a flip-flop beside them (HARDWARE.md, "STREAM").
        tvalid = Signal(attrs={REPLICA_ATTRIBUTE: 1})

        m.d.sync += [at_last_index.eq(index == last_index), at_last_byte.eq(ptr == last_byte),
                     at_reply_last.eq(index == reply_last)]
        m.d.comb += [rd.addr.eq(ptr), wr.addr.eq(ptr), wr.data.eq(urx.data)]
        m.d.sync += took.eq(0)
        with m.If(took):
            m.d.sync += gather.eq(Cat(gather[8:], rd.data))
        axil = self.axil
        m.d.comb += [axil.awaddr.eq(address), axil.araddr.eq(address), axil.wdata.eq(gather[-32:]),
                     axil.wstrb.eq(0xF), self.m_axis_tvalid.eq(tvalid),
                     self.m_axis_tdata.eq(gather[:w]),
                     self.m_axis_tlast.eq(gather[w])]
        byte_in = urx.valid
        data = urx.data

        # The reply's length is loaded in TX_SOF from the code, command and count (registers),
        # so that the many sites that end a command set the code only.
        def error(value, detail_value=0):
            m.d.sync += [code.eq(value), detail.eq(detail_value)]
            m.next = "TX_SOF"

        def ok():
            m.d.sync += [code.eq(link.Code.OK), ptr.eq(0)]
            m.next = "TX_SOF"

        payload_len = Mux(code == link.Code.OK, Mux(cmd == link.Command.READ, total << 2, 0), 2)

        def receiving():
            """A frame is being received: CRC, counters, gap timer."""
            m.d.comb += [crc.data.eq(data), crc.valid.eq(byte_in)]
            with m.If(byte_in):
                m.d.sync += [gap.eq(0), received.eq(received + 1)]
            with m.Elif(gap == lp.gap_timeout - 1):
                error(link.Code.GAP_TIMEOUT, received)
            with m.Else():
                m.d.sync += gap.eq(gap + 1)

        def fetch(count, after):
            """Read ``count`` buffer bytes from ``ptr`` into ``gather``, then go to ``after``
            (the last byte lands in ``gather`` at the end of that state's first cycle)."""
            m.d.sync += [ptr.eq(ptr + 1), fetched.eq(fetched + 1), took.eq(1)]
            with m.If(fetched == count - 1):
                m.d.sync += fetched.eq(0)
                m.next = after

        with m.FSM() as fsm:
            with m.State("HUNT"):
                with m.If(byte_in & (data == link.SOF)):
                    m.d.comb += crc.start.eq(1)
                    m.d.sync += [hdr_idx.eq(0), received.eq(0),
                                 gap.eq(0), ptr.eq(0), beat_pos.eq(0), n_beats.eq(0)]
                    m.next = "HEADER"

            with m.State("HEADER"):
                receiving()
                with m.If(byte_in):
                    m.d.sync += hdr_idx.eq(hdr_idx + 1)
                    with m.Switch(hdr_idx):
                        with m.Case(0):
                            m.d.sync += cmd.eq(data)
                        with m.Case(1):
                            m.d.sync += seq.eq(data)
                        with m.Case(2):
                            m.d.sync += length[:8].eq(data)
                        with m.Case(3):
                            m.d.sync += [length[8:].eq(data), hdr_idx.eq(0),
                                         last_byte.eq(Cat(length[:8], data) - 1)]
                            m.next = "LENGTH"

            # The length's tests, on its register: a cycle after its last byte, and a byte
            # time before the next can come (the received byte stays off the next state).
            with m.State("LENGTH"):
                with m.If(length > link.MAX_PAYLOAD):
                    m.next = "DISCARD"
                with m.Elif(length == 0):
                    m.next = "CRC"
                with m.Else():
                    m.next = "PAYLOAD"

            with m.State("PAYLOAD"):
                receiving()
                with m.If(byte_in):
                    m.d.comb += wr.en.eq(1)
                    m.d.sync += ptr.eq(ptr + 1)
                    with m.Switch(ptr):
                        for k in range(4):
                            with m.Case(k):
                                m.d.sync += head[8 * k:8 * k + 8].eq(data)
                    with m.If(beat_pos == beat_bytes - 1):
                        m.d.sync += [beat_pos.eq(0), n_beats.eq(n_beats + 1)]
                    with m.Else():
                        m.d.sync += beat_pos.eq(beat_pos + 1)
                    with m.If(at_last_byte):
                        m.next = "CRC"

            with m.State("CRC"):
                receiving()
                with m.If(byte_in):
                    m.d.sync += hdr_idx.eq(hdr_idx + 1)
                    with m.If(hdr_idx == 1):
                        m.next = "CRC_TEST"

            with m.State("CRC_TEST"):  # the residue, on its register (receiving() loaded it)
                m.d.sync += crc_ok.eq(crc.match_detected)
                m.next = "CHECK"

            with m.State("DISCARD"):  # LEN beyond the buffer: drop bytes until the line idles
                with m.If(byte_in):
                    m.d.sync += gap.eq(0)
                with m.Elif(gap == lp.gap_timeout - 1):
                    error(link.Code.BAD_LENGTH)
                with m.Else():
                    m.d.sync += gap.eq(gap + 1)

            with m.State("CHECK"):
                m.d.sync += [index.eq(0), ptr.eq(0), address.eq(head[:ADDR_WIDTH]),
                             increment.eq(head[15]), aw_done.eq(0), w_done.eq(0), waited.eq(0)]
                count = head[16:32]
                with m.If(~crc_ok):
                    error(link.Code.BAD_CRC)
                with m.Elif(cmd == link.Command.READ):
                    with m.If((length == 4) & (count >= 1) & (count <= link.MAX_WORDS)):
                        m.d.sync += [total.eq(count), last_index.eq(count - 1)]
                        m.next = "READ_AR"
                    with m.Else():
                        error(link.Code.BAD_LENGTH)
                with m.Elif(cmd == link.Command.WRITE):
                    with m.If((length >= 6) & (length[:2] == 2)):
                        m.d.sync += [total.eq(length[2:]), last_index.eq(length[2:] - 1),
                                     ptr.eq(2)]
                        m.next = "WRITE_FETCH"
                    with m.Else():
                        error(link.Code.BAD_LENGTH)
                with m.Elif(cmd == link.Command.STREAM):
                    with m.If((beat_pos == 0) & (n_beats != 0)):
                        m.d.sync += [total.eq(n_beats), last_index.eq(n_beats - 1)]
                        m.next = "BEAT_FETCH"
                    with m.Else():
                        error(link.Code.BAD_LENGTH)
                with m.Else():
                    error(link.Code.BAD_COMMAND, cmd)

            def next_word(then):
                m.d.sync += [index.eq(index + 1),
                             address.eq(Mux(increment, address + 4, address))]
                with m.If(at_last_index):
                    ok()
                with m.Else():
                    m.next = then

            with m.State("READ_AR"):
                m.d.comb += axil.arvalid.eq(1)
                with m.If(axil.arready):
                    m.next = "READ_R"
            with m.State("READ_R"):
                m.d.comb += axil.rready.eq(~r_seen)
                m.d.sync += r_seen.eq(r_seen | axil.rvalid)
                with m.If(~r_seen):
                    m.d.sync += [word.eq(axil.rdata), r_error.eq(axil.rresp != 0)]
                with m.Else():
                    m.d.sync += r_seen.eq(0)
                    with m.If(r_error):
                        error(link.Code.BUS_ERROR, index)
                    with m.Else():
                        m.next = "READ_STORE"
            with m.State("READ_STORE"):  # four bytes into the buffer, little-endian
                m.d.comb += [wr.en.eq(1), wr.data.eq(word[:8])]
                m.d.sync += [ptr.eq(ptr + 1), word.eq(word >> 8), fetched.eq(fetched + 1)]
                with m.If(fetched == 3):
                    m.d.sync += fetched.eq(0)
                    next_word("READ_AR")

            with m.State("WRITE_FETCH"):
                fetch(4, "WRITE_LAND")
            with m.State("WRITE_LAND"):
                m.next = "WRITE_AW"
            with m.State("WRITE_AW"):
                m.d.comb += [axil.awvalid.eq(~aw_done), axil.wvalid.eq(~w_done)]
                aw_now, w_now = aw_done | axil.awready, w_done | axil.wready
                m.d.sync += [aw_done.eq(aw_now), w_done.eq(w_now)]
                with m.If(aw_now & w_now):
                    m.next = "WRITE_B"
            with m.State("WRITE_B"):
                m.d.comb += axil.bready.eq(~b_seen)
                m.d.sync += [b_seen.eq(b_seen | axil.bvalid), b_error.eq(axil.bresp != 0)]
                with m.If(b_seen):
                    m.d.sync += [aw_done.eq(0), w_done.eq(0), b_seen.eq(0)]
                    with m.If(b_error):
                        error(link.Code.BUS_ERROR, index)
                    with m.Else():
                        next_word("WRITE_FETCH")

            with m.State("BEAT_FETCH"):
                fetch(beat_bytes, "BEAT_LAND")
            with m.State("BEAT_LAND"):
                m.d.sync += [offering.eq(1), tvalid.eq(1)]
                m.next = "BEAT_OFFER"
            with m.State("BEAT_OFFER"):  # the beat is held in ``gather`` until taken
                # Offered (TVALID, a register) for ready_timeout cycles; the cycle after the
                # last, taken or given up.
                handshake = offering & self.m_axis_tready
                m.d.sync += [waited.eq(waited + 1), beat_taken.eq(handshake)]
                with m.If(handshake | (waited == lp.ready_timeout - 1)):
                    m.d.sync += [offering.eq(0), tvalid.eq(0)]
                with m.If(beat_taken):
                    m.d.sync += waited.eq(0)
                    next_word("BEAT_FETCH")
                with m.Elif(waited == lp.ready_timeout):
                    error(link.Code.NOT_READY, index)

            # -- the reply --------------------------------------------------------------------
            def send(value, then, *, checked=True):
                m.d.comb += [utx.valid.eq(1), utx.data.eq(value)]
                if checked:
                    m.d.comb += [crc.data.eq(value), crc.valid.eq(utx.ready)]
                with m.If(utx.ready):
                    m.next = then

            with m.State("TX_SOF"):
                m.d.comb += crc.start.eq(1)
                m.d.sync += [hdr_idx.eq(0), reply_len.eq(payload_len),
                             reply_last.eq(payload_len - 1)]
                send(link.SOF, "TX_HEADER", checked=False)
            with m.State("TX_HEADER"):
                header = Cat(cmd, seq, code, reply_len).word_select(hdr_idx, 8)
                send(header, "TX_HEADER")
                with m.If(utx.ready):
                    m.d.sync += hdr_idx.eq(hdr_idx + 1)
                    with m.If(hdr_idx == 4):
                        m.d.sync += [hdr_idx.eq(0), index.eq(0)]
                        m.next = "TX_PAYLOAD_WAIT"
                        with m.If(reply_len == 0):
                            m.next = "TX_CRC"
            with m.State("TX_PAYLOAD_WAIT"):  # the buffer read of ``ptr`` lands
                m.next = "TX_PAYLOAD_LATCH"
            with m.State("TX_PAYLOAD_LATCH"):
                # The byte is registered before it is sent: the block RAM's output then
                # reaches only this register, not the CRC and the transmitter.
                m.d.sync += tx_byte.eq(Mux(code == link.Code.OK, rd.data,
                                           detail.word_select(index[0], 8)))
                m.next = "TX_PAYLOAD"
            with m.State("TX_PAYLOAD"):
                send(tx_byte, "TX_PAYLOAD_WAIT")
                with m.If(utx.ready):
                    m.d.sync += [ptr.eq(ptr + 1), index.eq(index + 1)]
                    with m.If(at_reply_last):
                        m.next = "TX_CRC"
            with m.State("TX_CRC"):
                send(crc.crc.word_select(~hdr_idx[0], 8), "TX_CRC", checked=False)
                with m.If(utx.ready):
                    m.d.sync += hdr_idx.eq(hdr_idx + 1)
                    with m.If(hdr_idx == 1):
                        m.next = "HUNT"
        m.d.comb += self.busy.eq(~fsm.ongoing("HUNT"))
        return m


class ObservedEngine(ZipsgdEngine):
    """:class:`ZipsgdEngine` plus the core's busy/done/any-error as plain signals for LEDs
    (the engine's bus ports do not carry them); the engine itself is unchanged."""

    def __init__(self, params: EngineParams):
        super().__init__(params)
        self.busy, self.done, self.error = Signal(), Signal(), Signal()

    def elaborate(self, platform):
        m = super().elaborate(platform)
        core = m.submodules.core
        m.d.comb += [self.busy.eq(core.status.busy), self.done.eq(core.status.done),
                     self.error.eq(core.status.error_flags.any())]
        return m


class LinkedEngine(wiring.Component):
    """The engine driven by the host-link bridge.

    Members
    -------
    uart_rx : In(1), uart_tx : Out(1)
        The serial lines (idle high).
    busy, done, error, link_busy : Out(1)
        For LEDs: the engine's STATUS.BUSY, DONE, any error flag; the bridge inside a frame.
    """

    TOP_NAME = "zipsgd_board_sim"

    def __init__(self, params: EngineParams, link_params: LinkParams = SIM_LINK):
        if not isinstance(params, EngineParams):
            raise TypeError(f"params must be EngineParams, found {params!r}")
        self._params, self._link = params, link_params
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1),
                          "busy": Out(1), "done": Out(1), "error": Out(1),
                          "link_busy": Out(1)})

    @property
    def params(self) -> EngineParams:
        return self._params

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = HostLinkBridge(self._params.bus_width, self._link)
        m.submodules.engine = engine = ObservedEngine(self._params)
        m.d.comb += [bridge.rx.eq(self.uart_rx), self.uart_tx.eq(bridge.tx),
                     self.link_busy.eq(bridge.busy), self.busy.eq(engine.busy),
                     self.done.eq(engine.done), self.error.eq(engine.error),
                     engine.s_axis_tdata.eq(bridge.m_axis_tdata),
                     engine.s_axis_tvalid.eq(bridge.m_axis_tvalid),
                     engine.s_axis_tlast.eq(bridge.m_axis_tlast),
                     bridge.m_axis_tready.eq(engine.s_axis_tready)]
        for name, member in bridge.axil.signature.members.items():
            port, inner = getattr(engine, "s_axil_" + name), getattr(bridge.axil, name)
            if member.flow == Out:  # driven by the bridge (the manager)
                m.d.comb += port.eq(inner)
            else:
                m.d.comb += inner.eq(port)
        return m
