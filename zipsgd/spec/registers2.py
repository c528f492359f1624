"""The one definition of engine v2's control/status register map.

The bus rules and the register classes are engine v1's (:mod:`zipsgd.spec.registers`); the
register file (:class:`zipsgd.hw.regfile.RegisterFile` with ``regmap=MAP``), the top level
(``zipsgd/hw/v2/top.py``), the host driver and ``docs/REGISTERS2.md`` all read this module;
``python -m zipsgd.spec.registers2 > docs/REGISTERS2.md`` regenerates the document and a test
checks that the committed copy equals :func:`render`.

The configuration fields are named after the core's setting ports
(:func:`zipsgd.spec.engine2.core_settings`, from a :class:`~zipsgd.spec.engine2.RunConfig2`
and the epoch's :class:`~zipsgd.spec.engine2.LanePlan`): the host computes the lane plan, the
engine only holds it.
"""

from __future__ import annotations

import enum
import io
import sys
from collections.abc import Callable, Mapping

from .engine import DECAY_WIDTH
from .engine2 import (
    MAX_LANE_CAPACITY,
    STEP_WIDTH,
    EngineParams2,
    LanePlan,
    RunConfig2,
    core_settings,
    lane_plan,
)
from .errors import ConfigError
from .fixed import RoundingMode
from .registers import (
    ADDR_WIDTH,
    DATA_WIDTH,
    GROUPS,
    RESP_OKAY,
    RESP_SLVERR,
    Field,
    Register,
    RegisterMap,
)
from .registers import MAP as _V1

__all__ = ["ENGINE_VERSION2", "ErrorBit2", "REGISTERS2", "MAP", "LEVEL_WIDTH",
           "RUN_REGISTERS", "config_writes", "run_writes", "level_writes", "status_offsets",
           "decode_status", "render"]

#: The ``VERSION`` register of engine v2 (v1's map is version 2).
ENGINE_VERSION2 = 4
#: Bits of a level word (``LEVEL_DATA``): two's complement, 8 fraction bits, -256..+256.
LEVEL_WIDTH = 9
#: Bits of WRAP and STEP_ADDR: a lane address and one more (a build's lane capacity is at
#: most ``MAX_LANE_CAPACITY``; START refuses a WRAP above the build's own).
_ADDR_BITS = (MAX_LANE_CAPACITY - 1).bit_length() + 1


class ErrorBit2(enum.IntEnum):
    """Bit positions of engine v2's sticky error flags (``ERROR_FLAGS``)."""

    FRAMING = 0
    START_WHILE_BUSY = 1
    BAD_CONFIG = 2
    MODEL_PORT_BUSY = 3
    READ_ERROR = 4


#: The memory run's configuration registers (not the core's settings: :func:`run_writes`).
RUN_REGISTERS = ("RUN_BASE", "RUN_BYTES", "RUN_EPOCHS")


def _one(name, width=DATA_WIDTH, reset=0, description="", codes=None):
    return (Field(name, 0, width, reset, description, codes),)


def _pair(name, offset, quantity, description):
    return (Register(f"{name}_LO", offset, "ro", _one(quantity, description="bits [31:0]"),
                     f"{description} Bits [31:0].", "counters", word=0),
            Register(f"{name}_HI", offset + 4, "ro", _one(quantity, description="bits [63:32]"),
                     f"{description} Bits [63:32].", "counters", word=1))


def _flag(bit: ErrorBit2, description: str) -> Field:
    return Field(bit.name.lower(), int(bit), 1, 0, description)


class UpdateMode2(enum.IntEnum):
    """MODE.EXACT's codes."""

    DELAYED = 0
    EXACT = 1


def _setting(reg: str, offset: int, name: str, width: int, text: str, description: str):
    """A configuration register of one setting (reset: the default run's)."""
    return Register(reg, offset, "rw", _one(name, width, _D[name], text), description, "config")


#: Reset values: the settings of the default run (one sample of one feature).
_D = core_settings(RunConfig2(), lane_plan(RunConfig2(), EngineParams2(), 1))

REGISTERS2: tuple[Register, ...] = (
    # -- identity ---------------------------------------------------------------------------
    _V1.register("ID"),
    Register("VERSION", 0x004, "ro", _one("version", reset=ENGINE_VERSION2),
             "Version of the engine and of this register map (3: engine v2).", "identity"),
    Register("BUS_WIDTH", 0x008, "ro", _one("bus_width"),
             "AXI4-Stream data width W in bits (`EngineParams2.bus_width`).", "identity",
             param="bus_width"),
    Register("MAX_FEATURES", 0x00C, "ro", _one("max_features"),
             "N_max, the largest feature count (`EngineParams2.max_features`).", "identity",
             param="max_features"),
    Register("MAX_BATCH", 0x010, "ro", _one("max_batch"),
             "B_max, the largest mini-batch (`EngineParams2.max_batch`).", "identity",
             param="max_batch"),
    Register("LANES", 0x014, "ro", _one("lanes"),
             "Lanes L = W/2 (`EngineParams2.lanes`).", "identity", param="lanes"),
    Register("UPDATE_UNITS", 0x018, "ro", _one("update_units"),
             "Update units U = W/32 (`EngineParams2.update_units`).", "identity",
             param="update_units"),
    # -- control ----------------------------------------------------------------------------
    Register("CTRL", 0x020, "wo", (
        Field("start", 0, 1, 0, "start an epoch (resets the epoch counters and STATUS.DONE); "
              "refused with START_WHILE_BUSY while busy, BAD_CONFIG if the configuration is "
              "out of range"),
        Field("clear_errors", 2, 1, 0, "clear ERROR_FLAGS"),
        Field("run", 3, 1, 0, "start a memory run: RUN_EPOCHS epochs, each started as START "
              "starts one, its beats read by the engine's AXI4 master (`m_axi_*`) from "
              "RUN_BYTES bytes at RUN_BASE; refused as START is, and (BAD_CONFIG) with "
              "RUN_BASE or RUN_BYTES not a multiple of W/8, RUN_BYTES 0 or RUN_EPOCHS 0"),
    ), "Self-clearing strobes: writing 1 to a bit pulses the `ctrl` strobe of that name for one "
       "cycle; 0 bits do nothing. Reads answer SLVERR.", "control"),
    Register("STATUS", 0x024, "ro", (
        Field("busy", 0, 1, 0, "an epoch or a memory run is running"),
        Field("done", 1, 1, 0, "an epoch finished; cleared by START"),
        Field("error", 2, 1, 0, "some ERROR_FLAGS bit is set"),
        Field("loss_saturated", 4, 1, 0, "the loss accumulator saturated this epoch"),
        Field("running", 5, 1, 0, "a memory run is active (its epochs follow each other; "
              "it ends after RUN_EPOCHS epochs, or early after an error)"),
    ), "Engine state.", "control"),
    Register("ERROR_FLAGS", 0x028, "ro", (
        _flag(ErrorBit2.FRAMING, "the stream's `tlast` was not on the epoch's last beat (the "
              "epoch stops; STATUS.DONE stays 0)"),
        _flag(ErrorBit2.START_WHILE_BUSY, "START written while busy (ignored)"),
        _flag(ErrorBit2.BAD_CONFIG, "START with a configuration out of range (refused): "
              "N_FEATURES 0 or above N_max, BATCHES 0, WRAP 0, LAST_VALID 0, FIELD_WIDTH 0"),
        _flag(ErrorBit2.MODEL_PORT_BUSY, "MODEL_DATA accessed while busy (ignored)"),
        _flag(ErrorBit2.READ_ERROR, "a memory read was answered SLVERR or DECERR: the run "
              "reads nothing more and starts no further epoch; an epoch whose beats had "
              "begun ends with a zero beat with `tlast` (so FRAMING too, unless that was its "
              "last beat)"),
    ), "Sticky error flags, cleared by CTRL.CLEAR_ERRORS.", "control"),
    # (As engine v1's.)
    _V1.register("ERROR_COUNT"), _V1.register("IRQ_ENABLE"),
    Register("IRQ_STATUS", 0x034, "w1c", (
        Field("done", 0, 1, 0, "an epoch finished: STATUS.DONE rose, or EPOCHS_DONE stepped "
              "(a memory run's every epoch)"),
        Field("error", 1, 1, 0, "an error event (every event ERROR_COUNT counts)"),
    ), "Pending interrupt events, set whether or not enabled; writing 1 to a bit clears it "
       "(an event in the same cycle wins). `irq` is high while a pending bit is enabled.",
       "interrupt"),
    Register("EPOCHS_DONE", 0x038, "ro", _one("epochs_done"),
             "Epochs of the memory run finished (reset by CTRL.RUN).", "control"),
    # -- run configuration: the core's settings (core_settings) -----------------------------
    Register("FORMAT", 0x040, "rw", (
        Field("field_width", 0, 4, _D["field_width"],
              "field width in bits (`LanePlan.field_width`; raw32: 8, a word is four fields)"),
        Field("double_sampled", 8, 1, _D["double_sampled"], "1: encoding `double`"),
        Field("raw", 9, 1, _D["raw"], "1: encoding `raw32`"),
        Field("per_feature", 10, 1, _D["per_feature"],
              "1: a level table per feature; 0: one shared table"),
        Field("short_samples", 11, 1, _D["short_samples"],
              "1: samples of fewer than 8 fields (`LanePlan.short`)"),
        Field("index_mask", 16, 8, _D["index_mask"], "2**b - 1 (0 for raw32)"),
        Field("bit_select", 24, 8, _D["bit_select"], "2**(b-1) (0 for raw32)"),
    ), "Stream encoding and level tables.", "config"),
    Register("PLAN", 0x044, "rw", (
        Field("g_log2", 0, 3, _D["g_log2"], "log2 of the lane classes' period g "
              "(`LanePlan.g_log2`)"),
        Field("last_valid", 4, 9, _D["last_valid"], "positions of the last window "
              "(`LanePlan.last_valid`, 1..L)"),
        Field("wrap", 16, _ADDR_BITS, _D["wrap"], "addresses a lane's features take "
              "(`LanePlan.wrap`, 1..the build's lane capacity: 512, more for a large N_max, "
              "`EngineParams2.lane_capacity`)"),
    ), "The epoch's lane plan (`zipsgd.spec.engine2.lane_plan`).", "config"),
    _setting("STEP_ADDR", 0x048, "step_addr", _ADDR_BITS,
             "address step per window (`LanePlan.step`)", "The lanes' address step per window."),
    _setting("LAST_WINDOW", 0x04C, "last_window", DATA_WIDTH,
             "`LanePlan.last_window`", "Index of the epoch's last window."),
    _setting("N_FEATURES", 0x050, "n_features", 21,
             "n, 1..N_max", "Features per sample n."),
    _setting("BATCH_POSITIONS", 0x054, "batch_positions", DATA_WIDTH,
             "B (n + 1) (`LanePlan.batch_positions`)", "Fields per mini-batch."),
    _setting("BATCHES", 0x058, "batches", DATA_WIDTH,
             "`LanePlan.batches`, >= 1", "Mini-batches per epoch."),
    Register("MODE", 0x05C, "rw", (
        Field("exact", 0, 1, _D["exact"], "update mode", UpdateMode2),
        Field("rounding", 8, 2, _D["rounding"], "rounding mode", RoundingMode),
    ), "Update and rounding modes.", "config"),
    Register("FORMATS", 0x060, "rw", (
        Field("model_width", 0, 6, _D["model_width"], "model word length WL_m (2..32)"),
        Field("forward_frac", 8, 5, _D["forward_frac"], "forward operand's FL_f"),
        Field("update_shift", 16, 6, _D["update_shift"], "FL_e + 8 - FL_m"),
        Field("forward_shift", 24, 5, _D["forward_shift"], "FL_m - FL_f"),
    ), "Fixed-point formats (`docs/ENGINE.md`, engine v2).", "config"),
    _setting("STEP", 0x064, "step", STEP_WIDTH,
             "step mantissa a (`step_register`)", "Step size mantissa."),
    _setting("RESIDUAL_SHIFT", 0x068, "residual_shift", 6,
             "s of e = round(a r 2**-s)", "Scaled residual's shift."),
    _setting("DECAY", 0x06C, "decay", DECAY_WIDTH,
             "L2 decay eta (`DECAY_FRAC` fraction bits)", "L2 decay."),
    _setting("THRESHOLD", 0x070, "threshold", 31,
             "L1 threshold tau in model words", "L1 threshold."),
    Register("SEED", 0x074, "rw", _one("seed", reset=RunConfig2().seed),
             "Seed of the random generators. A write (any byte enabled) also pulses "
             "`ctrl.seed_write`, which reloads the generators from the new value.", "config"),
    # -- epoch counters ---------------------------------------------------------------------
    *_pair("LOSS", 0x080, "loss", "Loss accumulator <64, 32>, saturating."),
    Register("BEATS", 0x088, "ro", _one("beats"), "Stream beats consumed.", "counters"),
    Register("SAMPLES", 0x08C, "ro", _one("samples"), "Samples closed.", "counters"),
    Register("UPDATES", 0x090, "ro", _one("updates"), "Model updates applied.", "counters"),
    Register("MODEL_SATURATIONS", 0x094, "ro", _one("model_saturations"),
             "Model words clamped to the model format by an update.", "counters"),
    Register("RESIDUAL_SATURATIONS", 0x098, "ro", _one("residual_saturations"),
             "Scaled residuals clamped to <18, FL_e>.", "counters"),
    Register("FORWARD_SATURATIONS", 0x09C, "ro", _one("forward_saturations"),
             "Forward operands clamped to <18, FL_f>.", "counters"),
    *_pair("CYCLES_BUSY", 0x0A0, "cycles_busy", "Cycles with STATUS.BUSY."),
    # -- model port -------------------------------------------------------------------------
    Register("MODEL_INDEX", 0x0C0, "rw", _one("index", 24),
             "Model word m (feature m + 1) of the model port; incremented after every "
             "MODEL_DATA access that is answered OKAY.", "model"),
    Register("MODEL_DATA", 0x0C4, "rw", _one("data"),
             "Read: model word m sign-extended to 32 bits. Write: store model word m (all four "
             "byte enables required). Only while idle: while busy the access is ignored and "
             "sets MODEL_PORT_BUSY. An index at or above N_max is answered SLVERR.", "model"),
    # -- level tables -----------------------------------------------------------------------
    Register("LEVEL_INDEX", 0x0D0, "rw", (
        Field("level", 0, 8, 0, "level q of the row (0..2**b - 1)"),
        Field("feature", 8, 24, 0, "feature j of the row (0 the label; any row with a shared "
              "table)"),
    ), "Where the next LEVEL_DATA write goes; after it, LEVEL goes to the row's next level, "
       "and from the last (FORMAT.INDEX_MASK) to level 0 of the next feature, so every "
       "table is written in one run of writes from feature 0, level 0.", "levels"),
    Register("LEVEL_DATA", 0x0D4, "wo", _one("data", LEVEL_WIDTH, 0,
                                              "level l_q, two's complement, 8 fraction bits"),
             "Write level l_q of feature j's table (all four byte enables required; l_(2**b) "
             "= +256 is fixed). Like a configuration register, refused (SLVERR) while busy; "
             "a feature above N_max is answered SLVERR.", "levels"),
    # -- the memory run ---------------------------------------------------------------------
    Register("RUN_BASE", 0x0E0, "rw", _one("run_base", description="byte address"),
             "Byte address of the packed stream in memory (a multiple of W/8).", "config"),
    Register("RUN_BYTES", 0x0E4, "rw", _one("run_bytes", description="bytes"),
             "Bytes of one epoch's stream (a multiple of W/8).", "config"),
    Register("RUN_EPOCHS", 0x0E8, "rw", _one("run_epochs", reset=1, description="epochs"),
             "Epochs of a memory run (the same stream each epoch).", "config"),
)

#: Engine v2's map.
MAP = RegisterMap(REGISTERS2, ErrorBit2, EngineParams2)


def config_writes(config: RunConfig2, plan: LanePlan, *, per_feature: bool = False,
                  seed: bool = False) -> list[tuple[int, int]]:
    """The register writes ``(offset, value)`` that load a run's settings (SEED too, which
    reloads the generators, with ``seed``)."""
    values = core_settings(config, plan, per_feature)
    values["seed"] = config.seed
    writes = []
    for reg in MAP.registers:
        if reg.group != "config" or reg.name in RUN_REGISTERS or (reg.name == "SEED"
                                                                   and not seed):
            continue
        word = 0
        for f in reg.fields:
            value = int(values[f.name])
            if not 0 <= value < 1 << f.width:
                raise ConfigError(f"{reg.name}.{f.name} must fit {f.width} bits, found {value}")
            word |= value << f.lsb
        writes.append((reg.offset, word))
    return writes


def run_writes(base: int, nbytes: int, epochs: int, bus_width: int) -> list[tuple[int, int]]:
    """The register writes ``(offset, value)`` that set up a memory run of ``epochs`` epochs
    over ``nbytes`` bytes at ``base`` (then CTRL.RUN starts it)."""
    beat = bus_width // 8
    for name, value in (("base", base), ("bytes", nbytes), ("epochs", epochs)):
        if not isinstance(value, int) or not 0 <= value < 1 << DATA_WIDTH:
            raise ConfigError(f"the run's {name} must be an integer in 0..2**32 - 1, "
                              f"found {value!r}")
    if base % beat or nbytes % beat or nbytes == 0 or epochs == 0:
        raise ConfigError(f"a memory run needs a base and a byte count that are multiples of "
                          f"{beat} (W/8), at least one beat and one epoch; found base "
                          f"{base:#x}, {nbytes} bytes, {epochs} epochs")
    return [(MAP.register(n).offset, v)
            for n, v in zip(RUN_REGISTERS, (base, nbytes, epochs), strict=True)]


def level_writes(table) -> list[tuple[int, int]]:
    """The writes that load level ``table`` (rows ``l_0 .. l_(2**b)``; the last, fixed at
    +256, is not written): LEVEL_INDEX to row 0, then every level in order."""
    writes = [(MAP.register("LEVEL_INDEX").offset, 0)]
    data = MAP.register("LEVEL_DATA").offset
    for row in table:
        for word in list(row)[:-1]:
            word = int(word)
            if not -(1 << (LEVEL_WIDTH - 1)) <= word < 1 << (LEVEL_WIDTH - 1):
                raise ConfigError(f"a level word must be in -256..255, found {word}")
            writes.append((data, word & ((1 << LEVEL_WIDTH) - 1)))
    return writes


def status_offsets() -> list[int]:
    """Offsets of the status and counter registers in reading order (``_LO`` before ``_HI``)."""
    return [r.offset for r in MAP.registers
            if r.group in ("control", "counters") and r.readable]


def decode_status(read: Callable[[int], int] | Mapping[int, int]) -> dict:
    """The status fields by name (64-bit pairs joined) from ``read(offset)`` of every status
    offset, read in order (or a ``{offset: word}`` mapping)."""
    get = read.__getitem__ if isinstance(read, Mapping) else read
    out: dict[str, int] = {}
    for offset in status_offsets():
        reg, word = MAP.register_at(offset), get(offset)
        for f in reg.fields:
            value = (word >> f.lsb) & ((1 << f.width) - 1)
            out[f.name] = out.get(f.name, 0) | (value << (DATA_WIDTH * reg.word))
    out["error_flags"] = get(MAP.register("ERROR_FLAGS").offset)
    return out


_PREAMBLE = f"""\
# Engine v2: control and status registers

Generated by `python -m zipsgd.spec.registers2 > docs/REGISTERS2.md`; a test checks that
this file equals the rendering. The hardware is `zipsgd/hw/regfile.py` (the map is a
parameter) in `zipsgd/hw/v2/top.py`.

The bus is engine v1's (`docs/REGISTERS.md`, "Bus"): AXI4-Lite, {DATA_WIDTH}-bit data,
{ADDR_WIDTH}-bit byte address, OKAY ({RESP_OKAY}) or SLVERR ({RESP_SLVERR}) with no effect,
byte merges, `_LO` before `_HI`, configuration writes refused while busy.

* **Configuration.** The fields are the core's settings, named as its ports: the host
  computes them from the run (`RunConfig2`) and the epoch's lane plan (`lane_plan`) with
  `zipsgd.spec.engine2.core_settings`, and writes them with
  `zipsgd.spec.registers2.config_writes`. The engine checks only what would leave it unable to
  end an epoch (BAD_CONFIG).
* **Level tables** (`docs/FORMAT.md`, levels): write FORMAT (its INDEX_MASK and
  PER_FEATURE) first, then LEVEL_INDEX = 0 and every table's levels l_0 .. l_(2**b - 1)
  in order, feature 0 (the label) first: `level_writes`. With a shared table (PER_FEATURE 0)
  only row 0 is written.
* **Model port.** As engine v1's: MODEL_INDEX selects model word m, a MODEL_DATA access
  reaches it and increments MODEL_INDEX.

"""


def render() -> str:
    """``docs/REGISTERS2.md``."""
    out = io.StringIO()
    out.write(_PREAMBLE)
    out.write("## Map\n\n| offset | register | access | reset | description |\n"
              "|---|---|---|---|---|\n")
    no_reset = ("CTRL", "MODEL_DATA", "LEVEL_DATA")

    def reset_text(reg):
        if reg.param:
            return f"`EngineParams2.{reg.param}`"
        return "-" if reg.name in no_reset else f"0x{reg.reset:08X}"

    for reg in MAP.registers:
        head, sep, _ = reg.description.partition(". ")
        out.write(f"| 0x{reg.offset:03X} | [{reg.name}](#{reg.name.lower()}) | {reg.access} | "
                  f"{reset_text(reg)} | {head + '.' if sep else reg.description} |\n")
    for group, title in GROUPS.items():
        regs = [r for r in MAP.registers if r.group == group]
        if not regs:
            continue
        out.write(f"\n## {title}\n")
        for reg in regs:
            out.write(f"\n### {reg.name}\n\n0x{reg.offset:03X}, {reg.access}, reset "
                      f"{reset_text(reg)}. {reg.description}\n\n")
            out.write("| bits | field | reset | description |\n|---|---|---|---|\n")
            for f in reg.fields:
                reset = "-" if reg.param or reg.name in no_reset else f"{f.reset}"
                text = f.description or "the value"
                if f.codes is not None:
                    text += ": " + ", ".join(f"{int(c)} `{c.name.lower()}`" for c in f.codes)
                out.write(f"| {f.bits} | `{f.name}` | {reset} | {text} |\n")
    return out.getvalue()


if __name__ == "__main__":
    sys.stdout.write(render())
