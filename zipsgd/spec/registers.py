"""The one definition of the engine's control/status register map.

The hardware (:mod:`zipsgd.hw.regfile`), the cocotb benches, the host driver and
``docs/REGISTERS.md`` all read this module; ``python -m zipsgd.spec.registers > docs/REGISTERS.md``
regenerates the document and a test checks that the committed copy equals :func:`render`.

The bus is AXI4-Lite with 32-bit data and a 12-bit byte address; every register is one 32-bit
word at a word-aligned byte offset.  Field names are the names the hardware uses: a field of a
``config`` register is the ``ctrl`` member (and the :class:`~zipsgd.spec.engine.RunConfig`
attribute) of the same name, a field of a ``status`` register the ``status`` member of the same
name.  A 64-bit quantity is a ``_LO``/``_HI`` register pair whose field has the same name in both
registers; :attr:`Register.word` says which 32-bit word of the quantity a register holds, and
field values in :func:`encode`/:func:`decode` are always the register's own 32-bit word.
"""

from __future__ import annotations

import enum
import io
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields

from .engine import DECAY_WIDTH, STEP_WIDTH, EngineParams, EpochStatus, RunConfig, UpdateMode
from .errors import ConfigError
from .fixed import RoundingMode
from .stream import MAX_FEATURES, Encoding

__all__ = [
    "ADDR_WIDTH",
    "DATA_WIDTH",
    "ENGINE_ID",
    "ENGINE_VERSION",
    "RESP_OKAY",
    "RESP_SLVERR",
    "ACCESSES",
    "GROUPS",
    "ErrorBit",
    "Field",
    "Register",
    "REGISTERS",
    "RegisterMap",
    "MAP",
    "register",
    "register_at",
    "encode",
    "decode",
    "DERIVED_STATUS",
    "STROBES",
    "config_members",
    "status_members",
    "identity_values",
    "run_config_writes",
    "read_run_config",
    "status_offsets",
    "decode_status_words",
    "read_status_words",
    "epoch_status",
    "render",
]

#: AXI4-Lite data width (bits) and byte-address width of the register interface.
DATA_WIDTH = 32
ADDR_WIDTH = 12
#: AXI response codes the interface uses.
RESP_OKAY = 0
RESP_SLVERR = 2
#: The ``ID`` register: ASCII "ZSGD".
ENGINE_ID = 0x5A534744
#: The ``VERSION`` register: bump when the register map or the engine's arithmetic changes.
ENGINE_VERSION = 2

#: Register access kinds: read-only, read-write, write-only, and read with write-1-to-clear.
ACCESSES = ("ro", "rw", "wo", "w1c")
#: Register groups (sections of the document; the hardware treats each group alike).
GROUPS = {
    "identity": "Identity: constants and build-time parameters",
    "control": "Control and status",
    "config": "Run configuration (writable only while idle)",
    "interrupt": "Interrupt (the `irq` output)",
    "counters": "Epoch counters (reset by START)",
    "model": "Model memory port",
    "levels": "Level tables port",
}


class ErrorBit(enum.IntEnum):
    """Bit positions of the sticky error flags (``ERROR_FLAGS`` and ``status.error_flags``)."""

    TLAST_EARLY = 0
    TLAST_MISSING = 1
    START_WHILE_BUSY = 2
    BAD_CONFIG = 3
    MODEL_PORT_BUSY = 4


@dataclass(frozen=True)
class Field:
    """A bit field of a register.

    Parameters
    ----------
    name : str
        Lower-case identifier: the keyword of :func:`encode` and the hardware member name.
    lsb, width : int
        Bits ``[lsb + width - 1 : lsb]`` of the 32-bit register.
    reset : int
        Value after reset.
    description : str
    codes : enum class or None
        The field's documented codes (an ``IntEnum``); other values fit the field but are a
        bad configuration.

    Raises
    ------
    ValueError
        If the field does not fit a 32-bit register or the reset value does not fit the field.
    """

    name: str
    lsb: int
    width: int
    reset: int = 0
    description: str = ""
    codes: type[enum.IntEnum] | None = None

    def __post_init__(self):
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"field name must be a lower-case identifier, found {self.name!r}")
        if not (isinstance(self.lsb, int) and isinstance(self.width, int)
                and self.lsb >= 0 and self.width >= 1 and self.lsb + self.width <= DATA_WIDTH):
            raise ValueError(f"field {self.name} must fit bits 0..{DATA_WIDTH - 1}, found "
                             f"lsb={self.lsb!r} width={self.width!r}")
        if not 0 <= self.reset < 1 << self.width:
            raise ValueError(f"field {self.name} reset must fit {self.width} bits, "
                             f"found {self.reset!r}")

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        """The field's bits within the register."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self) -> str:
        """``"[13:8]"`` or ``"[0]"``."""
        return f"[{self.msb}:{self.lsb}]" if self.width > 1 else f"[{self.lsb}]"


@dataclass(frozen=True)
class Register:
    """One 32-bit register.

    Parameters
    ----------
    name : str
        Upper-case identifier.
    offset : int
        Byte offset, a multiple of 4 below ``2**ADDR_WIDTH``.
    access : str
        ``"ro"``, ``"rw"``, ``"wo"`` or ``"w1c"`` (reads; writing 1 to a bit clears it).
    fields : tuple of Field
        Non-overlapping; bits outside every field read as 0 and ignore writes.
    description : str
    group : str
        One of :data:`GROUPS`.
    word : int
        For a ``_LO``/``_HI`` pair, which 32-bit word of the quantity the register holds
        (0 for ``_LO``, 1 for ``_HI``); 0 otherwise.
    param : str or None
        For an identity register, the :class:`~zipsgd.spec.engine.EngineParams` attribute it
        reads (its value is fixed when the hardware is built); ``None`` otherwise.

    Raises
    ------
    ValueError
        If the definition is inconsistent.
    """

    name: str
    offset: int
    access: str
    fields: tuple[Field, ...]
    description: str
    group: str
    word: int = 0
    param: str | None = None

    def __post_init__(self):
        if not self.name.isidentifier() or self.name != self.name.upper():
            raise ValueError(f"register name must be an upper-case identifier, "
                             f"found {self.name!r}")
        if not (isinstance(self.offset, int) and self.offset % 4 == 0
                and 0 <= self.offset < 1 << ADDR_WIDTH):
            raise ValueError(f"register {self.name} offset must be a multiple of 4 below "
                             f"{1 << ADDR_WIDTH:#x}, found {self.offset!r}")
        if self.access not in ACCESSES:
            raise ValueError(f"register {self.name} access must be one of {ACCESSES}, "
                             f"found {self.access!r}")
        if self.group not in GROUPS:
            raise ValueError(f"register {self.name} group must be one of {tuple(GROUPS)}, "
                             f"found {self.group!r}")
        if not self.fields:
            raise ValueError(f"register {self.name} has no fields")
        used = 0
        names = set()
        for f in self.fields:
            if f.mask & used:
                raise ValueError(f"register {self.name}: field {f.name} overlaps another field")
            if f.name in names:
                raise ValueError(f"register {self.name}: field {f.name} defined twice")
            used |= f.mask
            names.add(f.name)
        if self.word != (1 if self.name.endswith("_HI") else 0):
            raise ValueError(f"register {self.name} word must be 1 for a _HI register and 0 "
                             f"otherwise, found {self.word!r}")
        if self.wide and (len(self.fields) != 1 or self.fields[0].mask != (1 << DATA_WIDTH) - 1):
            raise ValueError(f"register {self.name} of a 64-bit pair must have one 32-bit field")

    @property
    def wide(self) -> bool:
        """The register is one half (``_LO`` or ``_HI``) of a 64-bit quantity."""
        return self.name.endswith(("_LO", "_HI"))

    @property
    def readable(self) -> bool:
        return self.access in ("ro", "rw", "w1c")

    @property
    def writable(self) -> bool:
        return self.access in ("rw", "wo", "w1c")

    @property
    def mask(self) -> int:
        """Bits that belong to some field."""
        mask = 0
        for f in self.fields:
            mask |= f.mask
        return mask

    @property
    def reset(self) -> int:
        """The register's value after reset (0 for an identity register with ``param``)."""
        value = 0
        for f in self.fields:
            value |= f.reset << f.lsb
        return value

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}; it has "
                       f"{', '.join(f.name for f in self.fields)}")


def _single(name, width=DATA_WIDTH, reset=0, description="", codes=None):
    return (Field(name, 0, width, reset, description, codes),)


def _pair(name, offset, access, group, quantity, description):
    """The ``_LO``/``_HI`` registers of a 64-bit quantity whose field is ``quantity``."""
    return (
        Register(f"{name}_LO", offset, access, _single(quantity, description="bits [31:0]"),
                 f"{description} Bits [31:0].", group, word=0),
        Register(f"{name}_HI", offset + 4, access, _single(quantity, description="bits [63:32]"),
                 f"{description} Bits [63:32].", group, word=1),
    )


def _flag(bit: ErrorBit, description: str) -> Field:
    return Field(bit.name.lower(), int(bit), 1, 0, description)


_D = RunConfig()  # the reset values of the run configuration are RunConfig's defaults
_FORMAT_RESET = {"model_width": _D.model_width, "model_frac": _D.model_frac,
                 "grad_width": _D.grad_width, "grad_frac": _D.grad_frac}


def _format_fields(prefix: str) -> tuple[Field, ...]:
    return (
        Field(f"{prefix}_width", 0, 6, _FORMAT_RESET[f"{prefix}_width"],
              "word length WL (2..32)"),
        Field(f"{prefix}_frac", 8, 6, _FORMAT_RESET[f"{prefix}_frac"], "fraction bits FL"),
    )


#: The register map, in offset order.
REGISTERS: tuple[Register, ...] = (
    # -- identity ---------------------------------------------------------------------------
    Register("ID", 0x000, "ro", _single("id", reset=ENGINE_ID),
             'Identifies the engine: 0x5A534744, ASCII "ZSGD".', "identity"),
    Register("VERSION", 0x004, "ro", _single("version", reset=ENGINE_VERSION),
             "Version of the engine and of this register map.", "identity"),
    Register("BUS_WIDTH", 0x008, "ro", _single("bus_width"),
             "AXI4-Stream data width W in bits (`EngineParams.bus_width`).", "identity",
             param="bus_width"),
    Register("MAX_FEATURES", 0x00C, "ro", _single("max_features"),
             "N_max, the largest feature count (`EngineParams.max_features`).", "identity",
             param="max_features"),
    Register("MAX_BATCH", 0x010, "ro", _single("max_batch"),
             "B_max, the largest mini-batch (`EngineParams.max_batch`).", "identity",
             param="max_batch"),
    Register("LANES", 0x014, "ro", _single("lanes"),
             "Lanes L: fields processed per clock, a power of two from 2 to W/2 "
             "(`EngineParams.lanes`).", "identity", param="lanes"),
    # -- control and status -----------------------------------------------------------------
    Register("CTRL", 0x020, "wo", (
        Field("start", 0, 1, 0, "start an epoch (resets the epoch counters and STATUS.DONE); "
              "refused with START_WHILE_BUSY while busy, BAD_CONFIG if the configuration is "
              "out of range"),
        Field("abort", 1, 1, 0, "return to idle and discard the epoch in progress"),
        Field("clear_errors", 2, 1, 0, "clear ERROR_FLAGS"),
    ), "Self-clearing strobes: writing 1 to a bit pulses the `ctrl` strobe of that name for one "
       "cycle; 0 bits do nothing. Bits written together pulse in the same cycle (ABORT wins "
       "over START: write START on its own). Reads answer SLVERR.", "control"),
    Register("STATUS", 0x024, "ro", (
        Field("busy", 0, 1, 0, "an epoch is running"),
        Field("done", 1, 1, 0, "an epoch finished; cleared by START"),
        Field("error", 2, 1, 0, "some ERROR_FLAGS bit is set"),
        Field("draining", 3, 1, 0, "discarding beats after a framing error"),
        Field("loss_saturated", 4, 1, 0, "the loss accumulator or a narrowed residual "
              "saturated this epoch"),
    ), "Engine state.", "control"),
    Register("ERROR_FLAGS", 0x028, "ro", (
        _flag(ErrorBit.TLAST_EARLY, "`tlast` before the last beat of a sample"),
        _flag(ErrorBit.TLAST_MISSING, "no `tlast` on the last beat of a sample"),
        _flag(ErrorBit.START_WHILE_BUSY, "START written while busy (ignored)"),
        _flag(ErrorBit.BAD_CONFIG, "START with a configuration out of range (refused)"),
        _flag(ErrorBit.MODEL_PORT_BUSY, "MODEL_DATA accessed while busy (ignored)"),
    ), "Sticky error flags, cleared by CTRL.CLEAR_ERRORS.", "control"),
    Register("ERROR_COUNT", 0x02C, "ro", _single("error_count"),
             "Error events counted since reset (every event that sets a flag, also when the "
             "flag is already set); neither START nor CLEAR_ERRORS clears it.", "control"),
    Register("IRQ_ENABLE", 0x030, "rw", (
        Field("done", 0, 1, 0, "raise `irq` when an epoch finishes"),
        Field("error", 1, 1, 0, "raise `irq` on an error event"),
    ), "Which pending events drive the `irq` output (active high, level).", "interrupt"),
    Register("IRQ_STATUS", 0x034, "w1c", (
        Field("done", 0, 1, 0, "an epoch finished (STATUS.DONE rose)"),
        Field("error", 1, 1, 0, "an error event (every event ERROR_COUNT counts)"),
    ), "Pending interrupt events, set whether or not enabled; writing 1 to a bit clears it "
       "(an event in the same cycle wins). `irq` is high while a pending bit is enabled.",
       "interrupt"),
    # -- run configuration ------------------------------------------------------------------
    Register("FORMAT", 0x040, "rw", (
        Field("encoding", 0, 2, int(_D.encoding), "stream encoding", Encoding),
        Field("bits", 8, 6, _D.bits, "interval-index bits b (1..8; 32 for raw32)"),
    ), "Stream format of the samples.", "config"),
    Register("N_FEATURES", 0x044, "rw", _single("n_features", reset=_D.n_features),
             "Features per sample n, 1..N_max (all 32 bits are kept so that the core can refuse "
             "a value out of range).", "config"),
    Register("BATCH_SIZE", 0x048, "rw", _single("batch_size", reset=_D.batch_size),
             "Samples per mini-batch B, 1..B_max.", "config"),
    *_pair("N_SAMPLES", 0x04C, "rw", "config", "n_samples",
           "Samples per epoch K, at least 1."),
    Register("MODEL_FORMAT", 0x054, "rw", _format_fields("model"),
             "Model fixed-point format <WL_m, FL_m> (FL_m 1..31).", "config"),
    Register("GRAD_FORMAT", 0x058, "rw", _format_fields("grad"),
             "Scaled-residual format <WL_g, FL_g> (max(0, FL_m-8) <= FL_g <= FL_m+32).",
             "config"),
    Register("STEP", 0x05C, "rw", _single("step", STEP_WIDTH, _D.step),
             "Step size alpha/B, unsigned, 24 fraction bits.", "config"),
    Register("DECAY", 0x060, "rw", _single("decay", DECAY_WIDTH, _D.decay),
             "L2 decay eta = gamma*lambda/(1+gamma*lambda), unsigned, 24 fraction bits.",
             "config"),
    Register("THRESHOLD", 0x064, "rw", _single("threshold", 31, _D.threshold),
             "L1 threshold tau in model words (FL_m fraction bits).", "config"),
    Register("MODE", 0x068, "rw", (
        Field("rounding", 0, 2, int(_D.rounding), "rounding mode", RoundingMode),
        Field("update_mode", 8, 1, int(_D.update_mode), "update mode", UpdateMode),
    ), "Rounding and update modes.", "config"),
    Register("SEED", 0x06C, "rw", _single("seed", reset=_D.seed),
             "Seed of the random generators. A write (any byte enabled) also pulses "
             "`ctrl.seed_write`, which reloads the generators from the new value.", "config"),
    # -- epoch counters ---------------------------------------------------------------------
    *_pair("LOSS", 0x080, "ro", "counters", "loss",
           "Loss accumulator <64, 32>: the sum of squared narrowed residuals, saturating."),
    *_pair("BEATS", 0x088, "ro", "counters", "beats", "Stream beats consumed."),
    *_pair("SAMPLES", 0x090, "ro", "counters", "samples", "Samples consumed."),
    *_pair("CYCLES_BUSY", 0x098, "ro", "counters", "cycles_busy", "Cycles with STATUS.BUSY."),
    *_pair("CYCLES_STARVED", 0x0A0, "ro", "counters", "cycles_starved",
           "Cycles busy and able to accept a beat with `tvalid` low."),
    *_pair("CYCLES_UPDATE_STALL", 0x0A8, "ro", "counters", "cycles_update_stall",
           "Cycles the input stalled for a model update."),
    Register("UPDATES", 0x0B0, "ro", _single("updates"),
             "Model updates applied (one per mini-batch).", "counters"),
    Register("MODEL_SATURATIONS", 0x0B4, "ro", _single("model_saturations"),
             "Model words clamped to the model format by an update.", "counters"),
    Register("RESIDUAL_SATURATIONS", 0x0B8, "ro", _single("residual_saturations"),
             "Scaled residuals clamped to the gradient format.", "counters"),
    Register("DISCARDED_BEATS", 0x0BC, "ro", _single("discarded_beats"),
             "Beats discarded after a framing error.", "counters"),
    # -- model port -------------------------------------------------------------------------
    Register("MODEL_INDEX", 0x0C0, "rw", _single("index", 24),
             "Feature index j of the model port; incremented after every MODEL_DATA access "
             "that is answered OKAY.", "model"),
    Register("MODEL_DATA", 0x0C4, "rw", _single("data"),
             "Read: model word j sign-extended to 32 bits. Write: store model word j (all four "
             "byte enables required). Only while idle: while busy (and in the clock cycle in "
             "which BUSY falls) the access is ignored and sets MODEL_PORT_BUSY. An index at or "
             "above N_max is answered SLVERR.", "model"),
)

@dataclass(frozen=True)
class RegisterMap:
    """A register map and what the register file derives from it (``zipsgd/hw/regfile.py``
    implements any map).

    Parameters
    ----------
    registers : tuple of Register
        In offset order; names and offsets unique.
    error_bits : IntEnum class
        The sticky error flags (ERROR_FLAGS' fields, bit ``ErrorBit.X`` is flag X).
    params_type : type
        The build-time parameters the identity registers read.

    The map's conventions, which the register file relies on: the ``control`` group's ``wo``
    register (CTRL) holds the one-cycle strobes; SEED's write also pulses ``seed_write``;
    ``X_DATA`` in group ``model`` or ``levels`` is a window onto a memory of the core at
    ``X_INDEX``.
    """

    registers: tuple[Register, ...]
    error_bits: type[enum.IntEnum]
    params_type: type

    def __post_init__(self):
        names = {r.name for r in self.registers}
        offsets = {r.offset for r in self.registers}
        if len(names) != len(self.registers) or len(offsets) != len(self.registers):
            raise ValueError("register names and offsets must be unique")

    def register(self, name: str) -> Register:
        """The register called ``name`` (:class:`KeyError` if none)."""
        for reg in self.registers:
            if reg.name == name:
                return reg
        raise KeyError(f"no register called {name!r}")

    def register_at(self, offset: int) -> Register | None:
        """The register at byte ``offset`` (a multiple of 4), or ``None`` if unmapped."""
        return next((r for r in self.registers if r.offset == offset), None)

    @property
    def strobes(self) -> tuple[str, ...]:
        """The CTRL strobes (one-cycle pulses to the core)."""
        return tuple(f.name for r in self.registers
                     if r.group == "control" and r.access == "wo" for f in r.fields)

    @property
    def ports(self) -> tuple[str, ...]:
        """The memory windows' names (``MODEL`` for MODEL_INDEX/MODEL_DATA, ...)."""
        return tuple(r.name[:-len("_DATA")] for r in self.registers
                     if r.group in ("model", "levels") and r.name.endswith("_DATA"))

    def config_members(self) -> dict[str, int]:
        """``{name: width}`` of the configuration the register file drives to the core: one
        entry per ``config`` field, 64-bit pairs joined (``_LO`` before ``_HI``)."""
        widths: dict[str, int] = {}
        for reg in self.registers:
            if reg.group == "config":
                for f in reg.fields:
                    widths[f.name] = widths.get(f.name, 0) + f.width
        return widths

    def status_members(self) -> dict[str, int]:
        """``{name: width}`` of the status the core drives to the register file: every
        readable ``control`` and ``counters`` field but the derived ones, 64-bit pairs joined,
        and the sticky flags (``error_flags``, one bit per error bit)."""
        widths: dict[str, int] = {}
        for reg in self.registers:
            if reg.group not in ("control", "counters") or not reg.readable:
                continue
            if reg.name == "ERROR_FLAGS":
                widths["error_flags"] = len(self.error_bits)
                continue
            for f in reg.fields:
                if f.name not in DERIVED_STATUS:
                    widths[f.name] = widths.get(f.name, 0) + f.width
        return widths

    def identity_values(self, params) -> dict[str, int]:
        """What the identity registers read for an engine built with ``params``."""
        if not isinstance(params, self.params_type):
            raise TypeError(f"params must be an {self.params_type.__name__}, "
                            f"found {params!r}")
        return {r.name: (getattr(params, r.param) if r.param else r.reset)
                for r in self.registers if r.group == "identity"}


#: Engine v1's map.
MAP = RegisterMap(REGISTERS, ErrorBit, EngineParams)
_BY_NAME = {r.name: r for r in REGISTERS}
_BY_OFFSET = {r.offset: r for r in REGISTERS}
if len(_BY_NAME) != len(REGISTERS) or len(_BY_OFFSET) != len(REGISTERS):
    raise ValueError("register names and offsets must be unique")  # pragma: no cover
if _BY_NAME["MODEL_INDEX"].field("index").width < MAX_FEATURES.bit_length():
    raise ValueError("MODEL_INDEX must hold every feature index")  # pragma: no cover


def register(name: str) -> Register:
    """The register called ``name``.

    Raises
    ------
    KeyError
    """
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no register called {name!r}") from None


def register_at(offset: int) -> Register | None:
    """The register at byte ``offset`` (a multiple of 4), or ``None`` if unmapped."""
    return _BY_OFFSET.get(offset)


def _check_value(name: str, f: Field, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}.{f.name} must be an integer, found {value!r}")
    if not 0 <= value < 1 << f.width:
        raise ConfigError(f"{name}.{f.name} must be in 0..{(1 << f.width) - 1} "
                          f"({f.width} bits), found {value}")
    return int(value)


def encode(register_name: str, **field_values) -> int:
    """The 32-bit word with the given field values (fields not named are 0).

    Raises
    ------
    KeyError
        If the register does not exist.
    ConfigError
        If a field does not exist or a value is not an integer that fits its field.
    """
    reg = register(register_name)
    word = 0
    for name, value in field_values.items():
        try:
            f = reg.field(name)
        except KeyError as e:
            raise ConfigError(e.args[0]) from None
        word |= _check_value(reg.name, f, value) << f.lsb
    return word


def decode(register_name: str, value: int) -> dict[str, int]:
    """The field values of a 32-bit register word (bits outside every field are ignored).

    Raises
    ------
    KeyError
        If the register does not exist.
    ConfigError
        If ``value`` is not a 32-bit unsigned integer.
    """
    reg = register(register_name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << DATA_WIDTH:
        raise ConfigError(f"{reg.name} value must be a 32-bit unsigned integer, found {value!r}")
    return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in reg.fields}


#: STATUS fields the register file computes itself rather than reading from the core.
DERIVED_STATUS = ("error",)
#: The one-cycle strobes of CTRL, and the SEED write pulse, driven to the core with the
#: configuration.
STROBES = ("start", "abort", "clear_errors")


def config_members() -> dict[str, int]:
    """:meth:`RegisterMap.config_members` of engine v1's map."""
    return MAP.config_members()


def status_members() -> dict[str, int]:
    """:meth:`RegisterMap.status_members` of engine v1's map."""
    return MAP.status_members()


def identity_values(params: EngineParams) -> dict[str, int]:
    """What the identity registers read for an engine built with ``params``."""
    return MAP.identity_values(params)


def _config_registers(seed: bool) -> list[Register]:
    return [r for r in REGISTERS if r.group == "config" and (seed or r.name != "SEED")]


def run_config_writes(config: RunConfig, n_samples: int, *, seed: bool = False,
                      params: EngineParams | None = None) -> list[tuple[int, int]]:
    """The register writes ``(offset, value)`` that load ``config`` for epochs of ``n_samples``.

    Parameters
    ----------
    config : RunConfig
    n_samples : int
        Samples per epoch, ``0..2**64-1``.
    seed : bool
        Also write SEED (which reloads the random generators).  The host writes it at the
        start of a run and whenever the seed changes, as ``GoldenEngine.configure`` assumes.
    params : EngineParams, optional
        If given, ``config`` is also checked against the built engine.

    Raises
    ------
    ConfigError
    """
    if not isinstance(config, RunConfig):
        raise TypeError(f"config must be a RunConfig, found {config!r}")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) \
            or not 0 <= n_samples < 1 << 64:
        raise ConfigError(f"n_samples must be an integer in 0..2**64-1, found {n_samples!r}")
    if params is not None:
        config.check_against(params)
    values = {f.name: int(getattr(config, f.name)) for f in fields(RunConfig)
              if f.name != "extra"}
    values["n_samples"] = n_samples
    writes = []
    for reg in _config_registers(seed):
        if reg.wide:  # this register's 32-bit word of a 64-bit value
            word = {f.name: (values[f.name] >> (DATA_WIDTH * reg.word)) & ((1 << DATA_WIDTH) - 1)
                    for f in reg.fields}
        else:
            word = {f.name: values[f.name] for f in reg.fields}
        writes.append((reg.offset, encode(reg.name, **word)))
    return writes


def _join(reads: Iterable[tuple[Register, int]]) -> dict[str, int]:
    """Field values of register words, ``_LO``/``_HI`` words joined into one value."""
    out: dict[str, int] = {}
    for reg, word in reads:
        for name, value in decode(reg.name, word).items():
            out[name] = out.get(name, 0) | (value << (DATA_WIDTH * reg.word))
    return out


def read_run_config(read: Callable[[int], int]) -> tuple[RunConfig, int]:
    """Read the configuration registers back: ``(RunConfig, n_samples)``.

    ``read(offset)`` returns the 32-bit word at a byte offset (a dict's ``__getitem__`` will
    do).  Raises :class:`ConfigError` if the registers hold a configuration ``RunConfig``
    refuses.
    """
    values = _join((reg, read(reg.offset)) for reg in _config_registers(seed=True))
    n_samples = values.pop("n_samples")
    return RunConfig(**values), n_samples


def status_offsets() -> list[int]:
    """Offsets of the status and counter registers, in the order to read them (every ``_LO``
    before its ``_HI``, which returns the high word latched by that ``_LO`` read)."""
    return [r.offset for r in REGISTERS
            if r.group in ("control", "counters") and r.readable]


def decode_status_words(words: Mapping[int, int]) -> dict:
    """Decode the words read at :func:`status_offsets`: ``{offset: word}`` -> one dict with
    every STATUS field (``busy``, ``done``, ``error``, ``draining``, ``loss_saturated``),
    ``error_flags`` (an :class:`ErrorBit` bit set as int), every error flag by name,
    ``error_count`` and every counter (64-bit pairs joined: ``loss``, ``beats``, ...)."""
    out = _join((register_at(o), words[o]) for o in status_offsets())
    out["error_flags"] = words[register("ERROR_FLAGS").offset]
    return out


def read_status_words(read: Callable[[int], int]) -> dict:
    """:func:`decode_status_words` of ``read(offset)`` for every status offset, read in order."""
    return decode_status_words({o: read(o) for o in status_offsets()})


def epoch_status(status: Mapping[str, int]) -> EpochStatus:
    """The golden model's :class:`~zipsgd.golden.engine.EpochStatus` of decoded status words,
    for an exact comparison with ``GoldenEngine``."""
    return EpochStatus(loss_acc=status["loss"], samples=status["samples"],
                       beats=status["beats"], updates=status["updates"],
                       model_saturations=status["model_saturations"],
                       residual_saturations=status["residual_saturations"],
                       loss_saturated=bool(status["loss_saturated"]))


# -- documentation ----------------------------------------------------------------------------

_PREAMBLE = f"""\
# Control and status registers

Generated from `zipsgd/spec/registers.py` by `python -m zipsgd.spec.registers > docs/REGISTERS.md`;
a test checks that this file equals the rendering. The hardware is `zipsgd/hw/regfile.py`; the
run-time settings are `RunConfig` and the build-time ones `EngineParams` (`zipsgd/spec/engine.py`).

## Bus

AXI4-Lite slave, {DATA_WIDTH}-bit data, {ADDR_WIDTH}-bit byte address; every register is one
32-bit word at a word-aligned byte offset (address bits [1:0] are ignored). One write and one
read can be outstanding; AW and W may arrive in any order or together; BVALID and RVALID are
held until accepted. Fields are unsigned; bits outside every field read 0 and ignore writes.

* **Responses.** OKAY ({RESP_OKAY}) for an access the register supports. SLVERR
  ({RESP_SLVERR}), with no effect at all and read data 0, for: an unmapped offset, a write to
  an `ro` register, a read of a `wo` register, a write to a configuration register while
  STATUS.BUSY or in the clock cycle after it falls (so the configuration is stable during an
  epoch), a partial write to MODEL_DATA,
  and a MODEL_DATA access with MODEL_INDEX >= N_max.
* **Byte enables.** A write changes only the bytes whose WSTRB bit is set (byte merge with the
  stored value); a write with WSTRB = 0 is answered OKAY and changes nothing (no strobe, no
  SEED reload). CTRL strobes fire for the 1 bits of enabled bytes, and a `w1c` register
  (IRQ_STATUS) clears the 1 bits of enabled bytes. MODEL_DATA needs all four
  byte enables (the regfile holds no copy of the model word to merge with).
* **64-bit pairs.** Read `_LO` first: the `_LO` read latches the high word, which the next read
  of the `_HI` register returns, so a pair read while the engine runs is consistent. (N_SAMPLES
  is written by the host; both of its halves read back directly.)
* **Model port.** MODEL_INDEX selects feature j; a MODEL_DATA read or write reaches model word
  j and then increments MODEL_INDEX, so N words stream through N accesses. A read's response
  waits for the core's answer.
* **Strobes.** CTRL bits and SEED writes reach the core as one-cycle pulses in the cycle after
  the write, when the written values are already visible on the `ctrl` outputs.

"""


#: Registers with no stored value of their own (strobes, the model memory window).
_NO_RESET = ("CTRL", "MODEL_DATA")


def _reset_text(reg: Register) -> str:
    if reg.param:
        return f"`EngineParams.{reg.param}`"
    if reg.name in _NO_RESET:
        return "-"
    return f"0x{reg.reset:08X}"


def _summary(text: str) -> str:
    """The first sentence."""
    head, sep, _ = text.partition(". ")
    return head + "." if sep else text


def _field_text(f: Field) -> str:
    text = f.description or "the value"
    if f.codes is not None:
        codes = ", ".join(f"{int(c)} `{c.name.lower()}`" for c in f.codes)
        text += f": {codes}; other codes are a bad configuration"
    return text


def render() -> str:
    """``docs/REGISTERS.md``: the bus rules, the register summary and every field."""
    out = io.StringIO()
    out.write(_PREAMBLE)
    out.write("## Map\n\n| offset | register | access | reset | description |\n"
              "|---|---|---|---|---|\n")
    for reg in REGISTERS:
        out.write(f"| 0x{reg.offset:03X} | [{reg.name}](#{reg.name.lower()}) | {reg.access} | "
                  f"{_reset_text(reg)} | {_summary(reg.description)} |\n")
    for group, title in GROUPS.items():
        regs = [r for r in REGISTERS if r.group == group]
        if not regs:
            continue
        out.write(f"\n## {title}\n")
        for reg in regs:
            reset = "" if reg.name in _NO_RESET else f", reset {_reset_text(reg)}"
            out.write(f"\n### {reg.name}\n\n0x{reg.offset:03X}, {reg.access}{reset}. "
                      f"{reg.description}\n\n")
            out.write("| bits | field | reset | description |\n|---|---|---|---|\n")
            for f in reg.fields:
                if reg.param or reg.name in _NO_RESET:
                    reset = "-"
                else:
                    reset = f"0x{f.reset:X}" if f.reset > 0xFFFF else f"{f.reset}"
                out.write(f"| {f.bits} | `{f.name}` | {reset} | {_field_text(f)} |\n")
    return out.getvalue()


if __name__ == "__main__":
    sys.stdout.write(render())
