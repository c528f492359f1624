"""The control/status register file: an AXI4-Lite slave in front of the engine core.

The register map, field positions, reset values and access rules are
:mod:`zipsgd.spec.registers`
(``docs/REGISTERS.md``); this module only implements them.  Ownership is split so that every
piece of state has one owner:

* the register file owns the run configuration (the ``config`` registers, driven on ``ctrl``),
  MODEL_INDEX, the one-cycle strobes and the high-word latches of the 64-bit pairs;
* the core owns every status bit, the sticky error flags, the error counter and the epoch
  counters (``status``): the register file only maps them onto registers;
* the core owns the model memory; the register file reaches it through the ``model`` port.

Top-level ports
---------------
Inside the component the bus is the ``axil`` interface (Verilog ports ``axil__awaddr`` ...).
A top level exposes the usual ``s_axil_*`` names with :func:`axil_ports` and
:func:`connect_axil_ports`::

    class Top(wiring.Component):
        def __init__(self, params):
            self._params = params
            super().__init__({**axil_ports("s_axil_"), ...})

        def elaborate(self, platform):
            m = Module()
            m.submodules.regfile = regfile = RegisterFile(params=self._params)
            connect_axil_ports(m, self, regfile.axil, prefix="s_axil_")
            ...

cocotbext-axi then finds the bus with ``AxiLiteBus.from_prefix(dut, "s_axil")``.
"""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..spec.registers import (
    ADDR_WIDTH,
    DATA_WIDTH,
    MAP,
    RESP_OKAY,
    RESP_SLVERR,
    Register,
    RegisterMap,
)
from .arith import any_of

__all__ = [
    "RegisterFile",
    "axil_signature",
    "register_layout",
    "ctrl_signature",
    "status_signature",
    "model_port_signature",
    "model_index_width",
    "level_port_signature",
    "axil_ports",
    "connect_axil_ports",
]

def axil_signature(*, addr_width: int = ADDR_WIDTH, data_width: int = DATA_WIDTH
                   ) -> wiring.Signature:
    """AXI4-Lite without AxPROT, seen from the manager: a slave takes ``In(axil_signature())``.

    Members
    -------
    awaddr, awvalid, awready, wdata, wstrb, wvalid, wready, bresp, bvalid, bready,
    araddr, arvalid, arready, rdata, rresp, rvalid, rready
        As in the AXI specification (``wstrb`` is ``data_width // 8`` bits, responses 2).

    Raises
    ------
    ValueError
        If a width is out of range.
    """
    if not isinstance(addr_width, int) or not 2 <= addr_width <= 64:
        raise ValueError(f"addr_width must be an integer in 2..64, found {addr_width!r}")
    if data_width not in (32, 64):
        raise ValueError(f"data_width must be 32 or 64, found {data_width!r}")
    return wiring.Signature({
        "awaddr": Out(addr_width), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_width), "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


def register_layout(reg: Register) -> data.FlexibleLayout:
    """The register word as an Amaranth layout: ``layout.const({...}).as_bits()`` and
    ``layout.from_bits(word)`` pack and unpack it (the register file stores it so)."""
    return data.FlexibleLayout(DATA_WIDTH, {
        f.name: data.Field(unsigned(f.width), f.lsb) for f in reg.fields})


def ctrl_signature(regmap: RegisterMap = MAP) -> wiring.Signature:
    """What the register file drives to the core (the core takes ``In(ctrl_signature())``).

    Members
    -------
    encoding : Out(2)
    bits : Out(6)
    n_features, batch_size : Out(32)
    n_samples : Out(64)
    model_width, model_frac, grad_width, grad_frac : Out(6)
    step : Out(32)
    decay : Out(24)
    threshold : Out(31)
    rounding : Out(2)
    update_mode : Out(1)
    seed : Out(32)
        The configuration registers, one member per field (the widths are the map's).  They
        hold the last value written; writes are refused while ``status.busy``, so they are
        stable during an epoch.  Writes execute two cycles apart at the least, so none of
        them changes in the cycle before a ``start`` pulse (the core registers its range
        checks, BAD_CONFIG at ``start``, a cycle ahead) or in the one after it (the core
        latches them then).
    start, abort, clear_errors : Out(1)
        One-cycle pulses, the cycle after CTRL is written with the bit set.
    seed_write : Out(1)
        One-cycle pulse, the cycle after SEED is written; ``seed`` already holds the new value.
    """
    members = {name: Out(width) for name, width in regmap.config_members().items()}
    members.update({name: Out(1) for name in regmap.strobes})
    members["seed_write"] = Out(1)
    return wiring.Signature(members)


def status_signature(regmap: RegisterMap = MAP) -> wiring.Signature:
    """What the core drives to the register file (the core takes ``Out(status_signature())``).

    The core owns every one of these: stickiness of the flags, clearing on ``clear_errors``,
    resetting the counters on ``start``.  ``busy`` must rise in the cycle after the ``start``
    pulse (at the latest) for the configuration lock to be seamless.

    Members
    -------
    busy, done, draining, loss_saturated : Out(1)
        STATUS bits (STATUS.ERROR is computed here as ``error_flags != 0``).
    error_flags : Out(5)
        Sticky flags, bit ``ErrorBit.X`` is flag X (ERROR_FLAGS).
    error_count : Out(32)
    loss, beats, samples, cycles_busy, cycles_starved, cycles_update_stall : Out(64)
    updates, model_saturations, residual_saturations, discarded_beats : Out(32)
    """
    return wiring.Signature({name: Out(width) for name, width in regmap.status_members().items()})


def model_index_width(params) -> int:
    """Bits of ``model.index``: enough for ``0..max_features-1`` (at least 1)."""
    return max(1, (params.max_features - 1).bit_length())


def model_port_signature(*, params) -> wiring.Signature:
    """The model memory port, seen from the register file (the core takes ``In(...)``).

    Members
    -------
    index : Out(model_index_width(params))
        Feature index, valid in the cycle of ``read`` or ``write`` (always ``< max_features``
        then: the register file answers an index out of range with SLVERR by itself), and
        unchanged since the cycle before (accesses execute two cycles apart at the least; the
        core registers the memory row made from it).
    wdata : Out(32)
        The word to store, valid with ``write``.
    write : Out(1)
        One-cycle pulse: store ``wdata`` at ``index`` (no back-pressure: the core takes it or,
        while busy, ignores it and raises MODEL_PORT_BUSY).
    read : Out(1)
        One-cycle pulse: read the word at ``index``.
    rdata : In(32)
        The model word sign-extended to 32 bits, valid with ``rvalid``.
    rvalid : In(1)
        The core's single answer to a ``read``, in the cycle of the pulse or any later cycle
        (while busy: at once, with any data, raising MODEL_PORT_BUSY).  The AXI read response
        waits for it; ``rvalid`` at any other time is ignored.
    """
    if not isinstance(getattr(params, "max_features", None), int):
        raise TypeError(f"params must be engine parameters, found {params!r}")
    return wiring.Signature({
        "index": Out(model_index_width(params)),
        "wdata": Out(DATA_WIDTH),
        "write": Out(1),
        "read": Out(1),
        "rdata": In(DATA_WIDTH),
        "rvalid": In(1),
    })


def level_port_signature(*, params, regmap: RegisterMap) -> wiring.Signature:
    """The level tables' write port, seen from the register file (maps with LEVEL_DATA).

    Members
    -------
    feature : Out(model_index_width(params) + 1)
        Feature ``j`` of the row (LEVEL_INDEX.FEATURE, always ``<= max_features`` then).
    level : Out(8)
        Level ``q`` of the row (LEVEL_INDEX.LEVEL).
    wdata : Out(LEVEL_DATA's width)
        The level word (two's complement).
    write : Out(1)
        One-cycle pulse: store ``wdata`` at ``(feature, level)``; only while idle (the
        register file refuses the write otherwise).
    """
    width = regmap.register("LEVEL_DATA").fields[0].width
    return wiring.Signature({
        "feature": Out(model_index_width(params) + 1), "level": Out(8),
        "wdata": Out(width), "write": Out(1),
    })


def axil_ports(prefix: str = "s_axil_", *, addr_width: int = ADDR_WIDTH,
               data_width: int = DATA_WIDTH) -> dict[str, wiring.Member]:
    """Flat slave-side members ``{prefix + name: member}`` for a top-level signature, so that
    the Verilog ports are ``s_axil_awaddr`` ... (see the module docstring)."""
    flipped = axil_signature(addr_width=addr_width, data_width=data_width).flip()
    return {prefix + name: member for name, member in flipped.members.items()}


def connect_axil_ports(m: Module, top, bus, *, prefix: str = "s_axil_") -> None:
    """Wire the flat ports ``top.<prefix><name>`` made by :func:`axil_ports` to the slave
    interface ``bus`` (e.g. ``RegisterFile.axil``) with combinational assignments."""
    for name, member in bus.signature.flip().members.items():
        port, inner = getattr(top, prefix + name), getattr(bus, name)
        if member.flow == Out:  # driven by the manager: top-level input into the slave
            m.d.comb += inner.eq(port)
        else:
            m.d.comb += port.eq(inner)


def _pack(reg: Register, values: dict) -> Value:
    """The register word with each field's value (exactly the field's width) at its place and
    zeros elsewhere."""
    parts, pos = [], 0
    for f in sorted(reg.fields, key=lambda f: f.lsb):
        value = Value.cast(values[f.name])
        assert len(value) == f.width, (reg.name, f.name)
        if f.lsb > pos:
            parts.append(Const(0, f.lsb - pos))
        parts.append(value)
        pos = f.lsb + f.width
    return Cat(*parts)


#: Readable words ORed into one register in a read's first stage (see ``elaborate``).
READ_GROUP = 8


class RegisterFile(wiring.Component):
    """AXI4-Lite register file of the engine (the map is :mod:`zipsgd.spec.registers`).

    One write and one read transaction are handled at a time; AW and W are buffered
    independently (any order, any delay), and an access executes once its response slot is
    empty (the previous response taken, a cycle before), so B and R back-pressure are
    honoured.  Accesses execute one at a time (a write and
    a read never execute in the same cycle), and none while a model-port access is in flight.
    A write's response comes two cycles after its last address/data handshake, a read's three
    cycles after AR (its word is gathered over two cycles; a MODEL_DATA read: one cycle after
    ``model.rvalid``).

    Parameters
    ----------
    params : EngineParams or EngineParams2
        The built engine: the identity registers and the model-index range come from it.
    regmap : RegisterMap
        The map (engine v1's by default; engine v2's is ``zipsgd.spec.registers2.MAP``).

    Members
    -------
    axil : In(axil_signature())
        The AXI4-Lite slave (12-bit byte address, 32-bit data).
    ctrl : Out(ctrl_signature())
    status : In(status_signature())
    model : Out(model_port_signature(params=params))
    levels : Out(level_port_signature(params=params, regmap=regmap))
        Only for a map with LEVEL_DATA.
    irq : Out(1)
        High while an IRQ_STATUS bit is set and enabled in IRQ_ENABLE (a level, registered).

    Raises
    ------
    TypeError
        If ``params`` is not the map's parameter type.
    """

    def __init__(self, *, params, regmap: RegisterMap = MAP):
        if not isinstance(params, regmap.params_type):
            raise TypeError(f"params must be an {regmap.params_type.__name__}, "
                            f"found {params!r}")
        self._params, self._map = params, regmap
        members = {
            "axil": In(axil_signature()),
            "ctrl": Out(ctrl_signature(regmap)),
            "status": In(status_signature(regmap)),
            "model": Out(model_port_signature(params=params)),
            "irq": Out(1),
        }
        if "LEVEL" in regmap.ports:
            members["levels"] = Out(level_port_signature(params=params, regmap=regmap))
        super().__init__(members)

    @property
    def params(self):
        return self._params

    @property
    def regmap(self) -> RegisterMap:
        return self._map

    def elaborate(self, platform):
        m = Module()
        bus, ctrl, status, port = self.axil, self.ctrl, self.status, self.model

        # -- channel buffers: each channel's ready is "buffer empty" (a register) ------------
        aw_full, w_full, ar_full = Signal(), Signal(), Signal()
        # An access's register is decoded when its address is taken (one-hot over the
        # registers it can reach), so that the cycle it executes in only chooses.
        registers, register = self._map.registers, self._map.register
        writable = [reg for reg in registers if reg.writable]
        readable = [reg for reg in registers if reg.readable]
        aw_sel, ar_sel = Signal(len(writable)), Signal(len(readable))
        w_data, w_strb = Signal(DATA_WIDTH), Signal(DATA_WIDTH // 8)
        m.d.comb += [bus.awready.eq(~aw_full), bus.wready.eq(~w_full),
                     bus.arready.eq(~ar_full)]
        with m.If(bus.awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_sel.eq(Cat(*(bus.awaddr[2:] == reg.offset >> 2
                                                        for reg in writable)))]
        with m.If(bus.wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(bus.arvalid & ~ar_full):
            m.d.sync += [ar_full.eq(1), ar_sel.eq(Cat(*(bus.araddr[2:] == reg.offset >> 2
                                                        for reg in readable)))]

        # -- arbitration ---------------------------------------------------------------------
        read_wait = Signal()  # a MODEL_DATA read waits for model.rvalid
        port_busy = Signal()
        write_go, read_go = Signal(), Signal()
        read_staged = Signal()  # the cycle after a read executed: RDATA is gathered
        m.d.comb += [
            port_busy.eq(port.write | read_wait),
            # A request executes once the previous response is taken, not in its handshake's
            # cycle, so that BREADY and RREADY stay off every register's decode and enables.
            write_go.eq(aw_full & w_full & ~bus.bvalid & ~port_busy),
            read_go.eq(ar_full & ~bus.rvalid & ~port_busy & ~write_go & ~read_staged),
        ]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)

        # Strobes are one cycle long: cleared every cycle unless set below.
        m.d.sync += [getattr(ctrl, name).eq(0) for name in (*self._map.strobes, "seed_write")]
        m.d.sync += [port.write.eq(0), port.read.eq(0)]
        if "LEVEL" in self._map.ports:
            m.d.sync += self.levels.write.eq(0)

        # -- storage: the config registers and MODEL_INDEX, each with its register layout ----
        store: dict[str, Signal] = {}
        for reg in registers:
            if reg.access == "rw" and reg.name != "MODEL_DATA":
                store[reg.name] = Signal(register_layout(reg), name=f"reg_{reg.name.lower()}",
                                         init={f.name: f.reset for f in reg.fields})
        for name, width in self._map.config_members().items():
            value = Cat(*(store[r.name][name] for r in registers if r.group == "config"
                          for f in r.fields if f.name == name))  # _LO before _HI
            assert len(value) == width, name
            m.d.comb += getattr(ctrl, name).eq(value)

        index = store["MODEL_INDEX"]["index"]
        index_ok = Signal()
        m.d.comb += [index_ok.eq(index < self._params.max_features),
                     port.index.eq(index[:len(port.index)])]
        with m.If(port.read | port.write):  # the pulse cycle: the access has happened
            # index < max_features <= 2**21 here, so the 24-bit register cannot wrap.
            m.d.sync += index.eq(index + 1)
        if "LEVEL" in self._map.ports:
            self._level_index(m, store)

        # -- interrupt: events set IRQ_STATUS bits (a write of 1 clears one, an event wins) ------
        pending = self._pending = Signal(register_layout(register("IRQ_STATUS")))
        was_done, last_count = Signal(), Signal.like(status.error_count)
        m.d.sync += [was_done.eq(status.done), last_count.eq(status.error_count)]
        events = {"done": status.done & ~was_done, "error": status.error_count != last_count}
        if "epochs_done" in self._map.status_members():
            # A memory run starts its next epoch in the cycle the last one ends, so DONE does
            # not rise between them: each epoch's end is EPOCHS_DONE's step.
            last_epochs = Signal.like(status.epochs_done)
            m.d.sync += last_epochs.eq(status.epochs_done)
            events["done"] = events["done"] | (status.epochs_done == last_epochs + 1)
        self._irq_events = events
        enable = store["IRQ_ENABLE"]
        m.d.sync += self.irq.eq((pending.as_value() & enable.as_value()) != 0)

        # -- writes ----------------------------------------------------------------------------
        byte_mask = Signal(DATA_WIDTH)
        m.d.comb += byte_mask.eq(Cat(*(w_strb[i].replicate(8) for i in range(len(w_strb)))))
        # The lock is a register (off the core's state decode), up from the cycle after the START
        # pulse, the first in which a later write can execute, until a cycle after BUSY falls.
        config_locked = Signal()
        m.d.sync += config_locked.eq(status.busy | ctrl.start)

        def merge(reg: Register, old):
            return ((old & ~byte_mask) | (w_data & byte_mask)) & reg.mask

        okay = []
        for reg, selected in zip(writable, aw_sel, strict=True):
            okay.append(selected & self._write(m, reg, write_go & selected, store, merge,
                                               w_data, w_strb, index_ok, config_locked))
        for name, event in self._irq_events.items():
            with m.If(event):
                m.d.sync += getattr(pending, name).eq(1)
        with m.If(write_go):
            # SLVERR for an address that is not writable or a write that is refused.
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1),
                         bus.bresp.eq(Mux(any_of(okay), RESP_OKAY, RESP_SLVERR))]

        # -- reads -----------------------------------------------------------------------------
        latches: dict[str, Signal] = {}  # high words latched by _LO reads, by quantity
        words, okay = [], []
        for reg, selected in zip(readable, ar_sel, strict=True):
            word = self._read(m, reg, selected & read_go, store, latches, index_ok, read_wait)
            if word is not None:
                words.append(Mux(selected, word, 0))
                okay.append(selected)
        # The selected word in two cycles: groups ORed into registers every cycle (AR holds the
        # selection), then into RDATA a cycle after the read executes, with that cycle's words.
        groups = [Signal(DATA_WIDTH, name=f"read_group{k}")
                  for k in range(0, len(words), READ_GROUP)]
        m.d.sync += [group.eq(functools.reduce(operator.or_, words[k * READ_GROUP:
                                                                    (k + 1) * READ_GROUP]))
                     for k, group in enumerate(groups)]
        m.d.sync += read_staged.eq(0)
        model_data_selected = ar_sel[readable.index(register("MODEL_DATA"))]
        with m.If(read_go):
            with m.If(model_data_selected):
                # The response comes with the word (_read_model), or SLVERR now.
                m.d.sync += [ar_full.eq(0), bus.rvalid.eq(1), bus.rresp.eq(RESP_SLVERR),
                             bus.rdata.eq(0)]
                self._read_model(m, model_data_selected, index_ok, read_wait)
            with m.Else():
                # SLVERR and 0 for an address that is not readable.
                m.d.sync += [read_staged.eq(1),
                             bus.rresp.eq(Mux(any_of(okay), RESP_OKAY, RESP_SLVERR))]
        with m.If(read_staged):
            m.d.sync += [ar_full.eq(0), bus.rvalid.eq(1),
                         bus.rdata.eq(functools.reduce(operator.or_, groups))]
        with m.If(read_wait & port.rvalid):
            m.d.sync += [read_wait.eq(0), bus.rvalid.eq(1), bus.rresp.eq(RESP_OKAY),
                         bus.rdata.eq(port.rdata)]
        # Facts of every reachable state, asserted by the formal harness so that an induction
        # does not start where they fail: a one-hot write decode, responses pending or awaited.
        self.formal_taps = {"invariants": [(aw_sel & (aw_sel - 1)) == 0,
                                           ~ctrl.start | bus.bvalid,
                                           ~port.write | bus.bvalid,
                                           ~port.read | read_wait]}
        return m

    def _write(self, m, reg, taken, store, merge, w_data, w_strb, index_ok, config_locked):
        """Executes a write of ``reg`` in the cycle ``taken`` is high; returns the condition
        under which it is OKAY (else SLVERR)."""
        ctrl, port = self.ctrl, self.model
        if reg.group == "control" and reg.access == "wo":    # CTRL: strobes
            with m.If(taken):
                for f in reg.fields:
                    m.d.sync += getattr(ctrl, f.name).eq(w_data[f.lsb] & w_strb[f.lsb // 8])
            return Const(1, 1)
        if reg.name == "IRQ_STATUS":
            self._clear_pending(m, taken, w_data, w_strb)
            return Const(1, 1)
        if reg.name == "LEVEL_DATA":
            # Like a configuration register: refused while busy (and with the row past N_max).
            writes = w_strb.all() & self._level_ok & ~config_locked
            with m.If(taken & writes):
                m.d.sync += [self.levels.write.eq(1),
                             self.levels.wdata.eq(w_data[:len(self.levels.wdata)])]
            return (w_strb == 0) | writes
        if reg.name == "MODEL_DATA":
            writes = w_strb.all() & index_ok
            with m.If(taken & writes):
                m.d.sync += [port.write.eq(1), port.wdata.eq(w_data)]
            return (w_strb == 0) | writes
        stored = store[reg.name].as_value()
        if reg.group == "config":
            with m.If(taken & ~config_locked):
                m.d.sync += stored.eq(merge(reg, stored))
                if reg.name == "SEED":
                    m.d.sync += ctrl.seed_write.eq(w_strb.any())
            return ~config_locked
        assert reg.name in ("MODEL_INDEX", "IRQ_ENABLE", "LEVEL_INDEX"), reg.name
        with m.If(taken):
            m.d.sync += stored.eq(merge(reg, stored))
        return Const(1, 1)

    def _level_index(self, m, store):
        """LEVEL_INDEX drives the level port; after each level written it steps to the next
        level of the row, and from the row's last (``ctrl.index_mask``) to the next row."""
        row = store["LEVEL_INDEX"]
        levels = self.levels
        self._level_ok = Signal()
        m.d.comb += [self._level_ok.eq(row["feature"] <= self._params.max_features),
                     levels.feature.eq(row["feature"][:len(levels.feature)]),
                     levels.level.eq(row["level"])]
        with m.If(levels.write):
            with m.If(row["level"] == self.ctrl.index_mask):
                # feature <= max_features <= 2**20 here: the 24-bit field cannot wrap.
                m.d.sync += [row["level"].eq(0), row["feature"].eq(row["feature"] + 1)]
            with m.Else():
                m.d.sync += row["level"].eq(row["level"] + 1)

    def _clear_pending(self, m, taken, w_data, w_strb):
        """IRQ_STATUS: a written 1 clears its bit (the events, applied after, win)."""
        bits = self._pending.as_value()
        ones = Cat(*(w_data[i] & w_strb[i // 8] for i in range(len(bits))))
        with m.If(taken):
            m.d.sync += bits.eq(bits & ~ones)

    def _read(self, m, reg, taken, store, latches, index_ok, read_wait):
        """The word a read of ``reg`` returns (``None``: MODEL_DATA, see :meth:`_read_model`);
        ``taken`` is high in the cycle the read executes (it latches a high word)."""
        status = self.status
        if reg.name == "MODEL_DATA":
            return None
        if reg.name in store:
            return store[reg.name].as_value()
        if reg.name == "IRQ_STATUS":
            return self._pending.as_value()
        if reg.group == "identity":
            return Const(self._map.identity_values(self._params)[reg.name], DATA_WIDTH)
        if reg.wide:
            (f,) = reg.fields
            value = getattr(status, f.name)
            if reg.word == 0:
                # The _LO read latches the high word for the _HI read that follows.
                high = Signal(DATA_WIDTH, name=f"{f.name}_hi_latch")
                latches[f.name] = high
                with m.If(taken):
                    m.d.sync += high.eq(value[DATA_WIDTH:])
                return value[:DATA_WIDTH]
            return latches[f.name]
        sources = {}
        for f in reg.fields:
            if reg.name == "ERROR_FLAGS":
                sources[f.name] = status.error_flags[f.lsb]
            elif f.name == "error":
                sources[f.name] = status.error_flags.any()
            else:
                sources[f.name] = getattr(status, f.name)
        return _pack(reg, sources)

    def _read_model(self, m, selected, index_ok, read_wait):
        """A MODEL_DATA read (in the read cycle): it asks the model port and answers when the
        word comes (``read_wait``); with the index out of range it is SLVERR now."""
        with m.If(selected & index_ok):
            m.d.sync += [self.model.read.eq(1), read_wait.eq(1), self.axil.rvalid.eq(0)]
