"""The streaming SGD engine core: ``docs/ENGINE.md`` in hardware, organized as ``docs/HARDWARE.md``.

The core is platform-free.  Its stream input is a plain valid/ready/last interface (the top
level names it ``s_axis_*``); its settings come from the register file as signals; it exposes
status, counters and a model port.  Every stage below says which step of ``docs/ENGINE.md`` it
performs; widths come from :class:`~zipsgd.spec.engine.EngineParams`.

Timing conventions: a beat accepted in cycle ``t`` is in stage A in cycle ``t+1`` (decode, memory
reads issued), stage B in ``t+2`` (memory data), and so on, one stage per cycle.  Internal
pipelines never stall; all hazards are met by holding ``ready`` low at the input
(``docs/HARDWARE.md``, "Hazards").
"""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import (
    Array,
    Cat,
    Const,
    Module,
    Mux,
    ResetInserter,
    Signal,
    Value,
    signed,
)
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ..spec.engine import (
    DECAY_FRAC,
    DECAY_WIDTH,
    LOSS_ACC_WIDTH,
    LOSS_RESIDUAL_FRAC,
    LOSS_RESIDUAL_WIDTH,
    LOSS_SQUARE_SHIFT,
    MODEL_STORAGE_WIDTH,
    RAW_PRODUCT_SHIFT,
    STEP_FRAC,
    STEP_WIDTH,
    UPDATE_WINDOW,
    EngineParams,
)
from ..spec.fixed import RAND_BITS
from ..spec.registers import ErrorBit
from ..spec.stream import (
    QUANT_FEATURE_FRAC,
    QUANT_LABEL_FRAC,
    RAW_LABEL_FRAC,
    Encoding,
    StreamLayout,
)
from .arith import (
    REPLICA_ATTRIBUTE,
    Product,
    Rounder,
    any_of,
    format_limits,
    less_than,
    popcount,
    replicas,
    rotate,
)
from .decoder import FieldDecoder
from .fifo import BufferedFifo, FabricOutputFifo
from .regfile import ctrl_signature, status_signature
from .rng import XorshiftBank

__all__ = ["SgdCore", "UPDATE_WINDOW", "UNUSED_COLLISION_ATTRIBUTE"]

_QUANT_WIDTH = 10  # a decoded quantized feature: [-256, 256]
RESIDUAL_FIFO_SLACK = 64
#: Groups of the gradient path's head beat with their own load/shift control.
HEAD_GROUPS = 4


def _fields_per_beat_table(bus_width: int):
    """``fields_per_beat`` for every (encoding, bits) code: index ``encoding * 16 + bits``."""
    table = []
    for encoding in range(4):
        for bits in range(16):
            try:
                layout = StreamLayout.make(Encoding(encoding), bits, bus_width)
                table.append(layout.fields_per_beat)
            except Exception:
                table.append(1)
    return table


class _SliceLimits:
    """Per-epoch bounds that a :class:`_Slicer` compares its registers with, registered from
    the latched settings (valid from the cycle after START, when the first slice can move).

    With them every condition of the next position is one comparison of a register with a
    constant: ``beat_f0 + per_beat`` (the next beat) is past ``n - per_beat`` when
    ``beat_f0 > n - 2 per_beat``, and so on.
    """

    def __init__(self, m, cfg: _Config, lanes: int, field_bits: int, prefix: str):
        bound = signed(field_bits + 2)

        def derived(name, shape, value):
            # (Marked as replicas: the synthesis keeps each slicer's copy, which Yosys would
            # otherwise merge, having the same input.)
            sig = Signal(shape, name=f"{prefix}_{name}", attrs={REPLICA_ATTRIBUTE: 1})
            m.d.sync += sig.eq(value)
            return sig

        n, per_beat = cfg.n, cfg.per_beat
        self.next_beat_is_last = derived("next_beat_is_last", bound, n - 2 * per_beat)
        self.next_beat_one_slice = derived("next_beat_one_slice", bound, n - cfg.per_beat_lanes)
        self.next_slice_ends = derived("next_slice_ends", bound, n - 2 * lanes)
        self.slices_per_beat = derived("slices_per_beat", cfg.slices_per_beat.shape(),
                                       cfg.slices_per_beat)
        # (The slice after next is past the beat, for a slice at index i + 1: i + 3 >= per
        # beat, compared with the register i itself, not with an addition of it.)
        self.slices_less_three = derived("slices_less_three", bound,
                                         cfg.slices_per_beat - 3)
        self.one_slice_beats = derived("one_slice_beats", 1, cfg.one_slice_beats)


class _UpdateWindow:
    """The stream's fused slices issued in the last ``UPDATE_WINDOW`` cycles (their updates are
    not yet in the model memory): a shift register of valid bits and slice numbers, entry
    ``k`` issued ``k + 1`` cycles ago, and the issue point's signals that feed it.

    An entry holds the slice's number within its sample (:attr:`_Slicer.seq`), not its field
    offset: every sample of an epoch is walked through the same slices in the same order, so
    two slices are at the same offset exactly when they have the same number.  A slice can
    meet an earlier issue of its own offset in the window only if every other slice of the
    sample was issued in between, one per cycle: the sample then has at most
    ``UPDATE_WINDOW`` slices, so numbers from ``UPDATE_WINDOW`` on (``_Slicer.FAR``) never
    match and do not enter.  Four-bit comparisons instead of offset-wide ones, and the next
    slice and the next beat's first slice have the same number: one comparison each.
    """

    def __init__(self, m, reset: Value):
        self.valid = Signal(UPDATE_WINDOW, name="window_valid")
        self.seq = [Signal(range(_Slicer.FAR + 1), name=f"window_seq_{k}")
                    for k in range(UPDATE_WINDOW)]
        # Set (comb) in a cycle in which a fused stream slice numbered ``enter_seq`` issues.
        self.enter = Signal(name="window_enter")
        self.enter_seq = Signal(range(_Slicer.FAR + 1), name="window_enter_seq")
        self.reset = reset
        m.d.sync += [self.valid.eq(Cat(self.enter, self.valid[:-1])),
                     self.seq[0].eq(self.enter_seq)]
        m.d.sync += [self.seq[k].eq(self.seq[k - 1]) for k in range(1, UPDATE_WINDOW)]
        with m.If(reset):
            m.d.sync += self.valid.eq(0)

    def compare(self, seq) -> list:
        """Entry ``k`` is a fused slice numbered ``seq``, for every ``k``."""
        return [self.valid[k] & (self.seq[k] == seq) for k in range(UPDATE_WINDOW)]


class _Slicer:
    """Walks the fields of a sample slice by slice (``docs/HARDWARE.md``, "Slices").

    A beat of ``per_beat`` fields is issued as ``ceil(per_beat / lanes)`` slices of at most
    ``lanes`` fields, one per cycle; a slice that would start past the last feature is skipped.
    With ``lanes >= W/2`` every beat is one slice.  Members are signals: ``f0`` (first field of
    the slice), ``beat_f0`` (first field of its beat), ``index`` (slice within the beat), and
    the conditions ``slice_last`` (last slice of the beat), ``beat_last`` (last beat of the
    sample) and ``sample_last`` (both).

    Everything about the next position is ready before the move: its offset
    (``next_beat = beat_f0 + per_beat`` and ``next_slice = f0 + lanes`` are registers too) and
    its conditions (registers too, each move setting them for the position it moves to from
    comparisons of offset registers with :class:`_SliceLimits`), so that the move, under the
    caller's late condition, only chooses among registers.  :meth:`track` adds the same for the
    update window, by ``seq``, the slice's number within the sample (saturating at
    :attr:`FAR`), and ``next_seq``, that of the slice after it.  A :meth:`restart` must come
    after the settings are latched.
    """

    #: A slice number from which on slices never meet the update window (:class:`_UpdateWindow`).
    FAR = UPDATE_WINDOW

    def __init__(self, m, cfg: _Config, lanes: int, max_slices: int, field_bits: int,
                 name: str):
        # Each slicer has limits of its own: they feed its compares only, placed beside them.
        limits = _SliceLimits(m, cfg, lanes, field_bits, f"{name}_limit")
        self._cfg, self._limits, self._name = cfg, limits, name
        self._slice_last_copies, self._first_slice_copies = [], []
        self._lanes, self._sliced = lanes, max_slices > 1
        self.f0 = Signal(field_bits, name=f"{name}_f0")
        self.beat_f0 = Signal(field_bits, name=f"{name}_beat_f0")
        self.next_beat = Signal(field_bits, name=f"{name}_next_beat")
        self.next_slice = Signal(field_bits, name=f"{name}_next_slice")
        self.seq = Signal(range(self.FAR + 1), name=f"{name}_seq")
        self.next_seq = Signal(range(self.FAR + 1), init=1, name=f"{name}_next_seq")
        # seq < FAR: the slice enters the update window when it is fused.
        self.near = Signal(init=1, name=f"{name}_near")
        # At least one bit even when every beat is one slice (no empty Verilog range).
        self.index = Signal(range(max(2, max_slices)), name=f"{name}_index")
        self.slice_last = Signal(name=f"{name}_slice_last")
        self.beat_last = Signal(name=f"{name}_beat_last")
        # f0 == 0 as a register (the first slice of a sample: every later one is past 0), and
        # index == 0 (the first slice of a beat).
        self.at_start = Signal(init=1, name=f"{name}_at_start")
        self.first_slice = Signal(init=1, name=f"{name}_first_slice")
        self.sample_last = Signal(name=f"{name}_sample_last")
        m.d.comb += self.sample_last.eq(self.slice_last & self.beat_last)
        # The update window's view of f0 (made by track()).
        self.matches = Signal(UPDATE_WINDOW, name=f"{name}_window_matches")
        self.hit = Signal(name=f"{name}_window_hit")
        # Set (comb) in a cycle whose sync statements advance or restart (from outside
        # advance) the slicer: for track().
        self._advancing = Signal(name=f"{name}_advancing")
        self._restarting = Signal(name=f"{name}_restarting")
        # Next-position conditions as registers, set by each move for the position it moves to,
        # so that a move only chooses among registers (HARDWARE.md, "The issue decision").
        self._next_beat_slice_last = Signal(name=f"{name}_next_beat_slice_last")
        self._next_beat_last = Signal(name=f"{name}_next_beat_last")
        self._next_slice_last = Signal(name=f"{name}_next_slice_last")

    def slice_last_copy(self, name: str) -> Signal:
        """A register that always equals ``slice_last`` (loaded by the same moves), for logic
        placed away from the slicer's own; made before the first :meth:`advance` or
        :meth:`restart`."""
        copy = Signal(name=f"{self._name}_{name}", attrs={REPLICA_ATTRIBUTE: 1})
        self._slice_last_copies.append(copy)
        return copy

    def first_slice_copy(self, name: str) -> Signal:
        """A register that always equals ``first_slice`` (loaded by the same moves), like
        :meth:`slice_last_copy`."""
        copy = Signal(init=1, name=f"{self._name}_{name}", attrs={REPLICA_ATTRIBUTE: 1})
        self._first_slice_copies.append(copy)
        return copy

    @property
    def register_copies(self) -> list:
        """``(copy, register)`` of every copy made, for the formal harnesses."""
        return ([(copy, self.slice_last) for copy in self._slice_last_copies]
                + [(copy, self.first_slice) for copy in self._first_slice_copies])

    def _conditions(self, beat_f0, f0, next_index_last):
        """The next-position conditions of the position (``beat_f0``, ``f0``, and an index
        whose next slice is the beat's last by count when ``next_index_last``: index + 2 >=
        slices per beat), all registers compared with the limits: (next beat's first slice
        is its last, next beat is the sample's last, next slice is its beat's last)."""
        limits = self._limits
        return (limits.one_slice_beats | less_than(limits.next_beat_one_slice, beat_f0),
                less_than(limits.next_beat_is_last, beat_f0),
                # per_beat - (index + 1) lanes <= lanes, or the slice after starts past n.
                next_index_last | less_than(limits.next_slice_ends, f0))

    def _go(self, m, f0, beat_f0, index, slice_last, beat_last, next_beat, next_slice,
            conditions):
        m.d.sync += [copy.eq(slice_last if self._sliced else 1)
                     for copy in (self.slice_last, *self._slice_last_copies)]
        m.d.sync += [reg.eq(value) for reg, value in zip(
            (self._next_beat_slice_last, self._next_beat_last, self._next_slice_last),
            conditions, strict=True)]
        m.d.sync += [copy.eq(isinstance(index, int) and index == 0)
                     for copy in (self.first_slice, *self._first_slice_copies)]
        m.d.sync += [self.f0.eq(f0), self.beat_f0.eq(beat_f0), self.index.eq(index),
                     self.at_start.eq(isinstance(f0, int) and f0 == 0),
                     self.beat_last.eq(beat_last), self.next_beat.eq(next_beat),
                     self.next_slice.eq(next_slice)]
        if isinstance(f0, int):    # the restart: the sample's first slice
            m.d.sync += [self.seq.eq(0), self.next_seq.eq(1), self.near.eq(1)]
        else:
            far = self.next_seq == self.FAR
            m.d.sync += [self.seq.eq(self.next_seq), self.near.eq(~far),
                         self.next_seq.eq(Mux(far, self.FAR, self.next_seq + 1))]

    def advance(self, m):
        """The next slice (sync statements; the caller puts them under its condition)."""
        m.d.comb += self._advancing.eq(1)
        lanes, per_beat = self._lanes, self._cfg.per_beat
        with m.If(self.slice_last):
            with m.If(self.beat_last):
                self._go_restart(m)
            with m.Else():
                # (The next beat starts at or before n: its offset does not wrap.)
                self._go(m, self.next_beat, self.next_beat, 0, self._next_beat_slice_last,
                         self._next_beat_last, self.next_beat + per_beat,
                         self.next_beat + lanes,
                         self._conditions(self.next_beat, self.next_beat,
                                          self._limits.slices_per_beat <= 2))
        with m.Else():
            # (The beat's conditions stay; the next slice starts at or before n.)
            *_, next_slice_last = self._conditions(
                self.beat_f0, self.next_slice,
                ~less_than(self.index, self._limits.slices_less_three))
            self._go(m, self.next_slice, self.beat_f0, self.index + 1, self._next_slice_last,
                     self.beat_last, self.next_beat, self.next_slice + lanes,
                     (self._next_beat_slice_last, self._next_beat_last, next_slice_last))

    def restart(self, m):
        """Back to the first slice (sync statements, under the caller's condition, which must
        not be late: it chooses the window matches last but one)."""
        m.d.comb += self._restarting.eq(1)
        self._go_restart(m)

    def _go_restart(self, m):
        # The first slice's conditions come latched with the settings (``_Config.restart``): a
        # restart may come in the cycle after the latch, before the limits follow.
        cfg = self._cfg
        slice_last, beat_last, *conditions = cfg.restart
        self._go(m, 0, 0, 0, slice_last, beat_last, cfg.per_beat, self._lanes, conditions)

    def track(self, m, window: _UpdateWindow, fused: Value):
        """Registers ``matches`` (bit ``k``: entry ``k`` of the update window is a fused slice
        numbered ``seq``) and ``hit`` (any), always those of the current slice and window.

        They are made a cycle ahead: for each number the slicer can move to (``next_seq``, or
        0 at the restart) against the window as it is now, whose entries move up by one, plus
        the entry issued now when the slicer issues the slice it moves from (``fused`` says
        whether it enters the window; it matches only a restart to itself, a sample of one
        slice).  Another slicer's issues are not seen here: the caller guarantees that they
        are more than ``UPDATE_WINDOW`` cycles apart from this slicer's next issue (they are
        out of the window by then).
        """
        to_restart = self.slice_last & self.beat_last
        # Entries 0 .. UPDATE_WINDOW - 2 move up by one; each candidate's hit is its own OR,
        # so that the late choice (whether this slicer moves) comes last.
        at_zero, at_next = (window.compare(seq)[:-1] for seq in (0, self.next_seq))
        move_front = fused & to_restart & self.at_start
        move = (Cat(move_front, *(Mux(to_restart, z, n)
                                  for z, n in zip(at_zero, at_next, strict=True))),
                move_front | Mux(to_restart, any_of(at_zero), any_of(at_next)))
        stay = (Cat(Const(0, 1), self.matches[:-1]), self.matches[:-1].any())
        restart = (Cat(Const(0, 1), *at_zero), any_of(at_zero))
        next_matches, next_hit = (Mux(self._restarting, r, Mux(self._advancing, mv, st))
                                  for r, mv, st in zip(restart, move, stay, strict=True))
        m.d.sync += [self.matches.eq(next_matches), self.hit.eq(next_hit)]
        # The next hit if the slicer advances and if it stays (neither restarting): for a
        # caller's register that holds a function of it.
        self.hit_if_advance, self.hit_if_stay = (hit & ~window.reset
                                                 for hit in (move[1], stay[1]))
        with m.If(window.reset):
            m.d.sync += [self.matches.eq(0), self.hit.eq(0)]


class _SliceShift:
    """``shift(beat)``: the beat moved on by one slice, ``beat >> (lanes * field_width)``
    (zeros in from the top), so that the next slice's fields are fields ``0 .. lanes - 1``.

    The field width is one of the ten the stream has (2 .. 10, 32), each with a one-hot
    select registered from the latched settings (they are latched a cycle before any beat,
    in START): each bit is an AND-OR of at most ten fixed beat bits, with no barrel shifter.
    The selects are registered once per group of ``bus_width / groups`` output bits, so that
    each register's fan-out stays beside the bits it chooses.
    """

    WIDTHS = tuple(range(2, 11)) + (32,)

    def __init__(self, m, cfg: _Config, bus_width: int, lanes: int, name: str,
                 groups: int = 1):
        self._bus_width, self._lanes = bus_width, lanes
        self._group_bits = -(-bus_width // groups)
        double = cfg.encoding == Encoding.DOUBLE
        self._selects = [{} for _ in range(groups)]
        for w in self.WIDTHS:
            if lanes * w < bus_width:      # a wider slice leaves nothing for a next one
                # The field width is 32 (raw) or bits + 2 (double) or bits + 1: each select
                # compares ``bits`` with constants, without the adder.
                value = Mux(cfg.raw, w == 32,
                            Mux(double, cfg.bits == w - 2, cfg.bits == w - 1))
                for g, selects in enumerate(self._selects):
                    suffix = f"_{g}" if groups > 1 else ""
                    select = Signal(name=f"{name}_width{w}{suffix}", reset_less=True,
                                    attrs={REPLICA_ATTRIBUTE: 1})   # (one group's own)
                    m.d.sync += select.eq(value)
                    selects[w] = select

    def __call__(self, beat: Value) -> Value:
        shifted = [any_of(select & beat[j + self._lanes * w]
                          for w, select in self._selects[j // self._group_bits].items()
                          if j + self._lanes * w < self._bus_width)
                   for j in range(self._bus_width)]
        return Cat(*shifted)


#: Attribute of a memory whose reads in the cycle of a write to the same row are never used
#: (``docs/HARDWARE.md``, "Memories' collisions"): the synthesis flow makes those reads
#: undefined (``zipsgd/hw/synth.py``), which spares the logic that would keep the old word.
UNUSED_COLLISION_ATTRIBUTE = "zipsgd_unused_collision"


def _collision_checked(m, rd, wr, name: str, poison: bool) -> Value:
    """The read data of port ``rd``; with ``poison``, inverted when the read met a write of
    ``wr`` to its row in the same cycle (a word the engine must not use)."""
    if not poison:
        return rd.data
    collided = Signal(name=f"{name}_collided")
    m.d.sync += collided.eq(wr.en & (wr.addr == rd.addr))
    return rd.data ^ collided.replicate(len(rd.data))


def _operand(word, raw, raw_lane: bool):
    """A lane's multiplier operand: its decoded word, which in a quantized encoding is a level
    of ``_QUANT_WIDTH`` bits (a raw lane has one multiplier for both: a quantized word is a
    sign-extended one)."""
    quant = word[:_QUANT_WIDTH].as_signed()
    return Mux(raw, word, quant) if raw_lane else quant


def _align_raw(product, raw, raw_lane: bool):
    """A product with ``QUANT_FEATURE_FRAC + FL`` fraction bits: raw32 words have 30."""
    return Mux(raw, product >> RAW_PRODUCT_SHIFT, product) if raw_lane else product


def _row(base, shift, bank: int, lanes: int):
    """Row of ``bank`` for a beat whose first field is ``base * lanes + shift``: banks below
    ``shift`` hold fields of the next row (docs/HARDWARE.md, "Model memory")."""
    return base + (shift > bank) if bank < lanes - 1 else base


class _Config:
    """The settings latched at start (shadow registers) and the shifts derived from them."""

    def __init__(self, params: EngineParams):
        self.encoding = Signal(2)
        self.bits = Signal(6)
        self.n = Signal(range(params.max_features + 1))
        self.batch = Signal(range(params.max_batch + 1))
        self.samples = Signal(64)
        self.wl_m = Signal(6)
        self.fl_m = Signal(6)
        self.wl_g = Signal(6)
        self.fl_g = Signal(7)
        self.step = Signal(STEP_WIDTH)
        self.decay = Signal(DECAY_WIDTH)
        self.threshold = Signal(31)
        self.rounding = Signal(2)
        self.delayed = Signal()
        self.per_beat = Signal(range(params.bus_width // 2 + 1))
        # Table look-ups like per_beat (no arithmetic after the latch), for _SliceLimits: a
        # beat's fields plus one slice's, the slices of a full beat, whether a beat is one slice.
        self.per_beat_lanes = Signal(range(params.bus_width // 2 + params.lanes + 1))
        self.slices_per_beat = Signal(range(params.bus_width // 2 + 1))
        self.one_slice_beats = Signal()
        self.raw = Signal()
        # The slicers' first-slice conditions, latched with their settings (initial values: of
        # all-0 settings): a restart chooses among registers, not after compares with a far ``n``.
        self.restart = [Signal(init=init, name=f"restart_{name}") for name, init in (
            ("slice_last", 1), ("beat_last", 0), ("next_beat_slice_last", 0),
            ("next_beat_last", 0), ("next_slice_last", 1))]

    @staticmethod
    def restart_conditions(lanes, n, per_beat, per_beat_lanes, slices_per_beat,
                           one_slice_beats) -> list:
        """The first slice's conditions for these settings: (its slice_last, its beat_last,
        the next beat's first slice is its last, the next beat is the sample's last, the next
        slice is its beat's last), as :class:`_Slicer` keeps them."""
        return [one_slice_beats | (lanes > n), per_beat > n,
                one_slice_beats | (per_beat_lanes > n), 2 * per_beat > n,
                (slices_per_beat <= 2) | (2 * lanes > n)]

    def restart_conditions_now(self, lanes) -> list:
        """``restart_conditions`` of the latched settings (what ``restart`` stands for)."""
        return self.restart_conditions(lanes, self.n, self.per_beat, self.per_beat_lanes,
                                       self.slices_per_beat, self.one_slice_beats)


class SgdCore(wiring.Component):
    """The engine core.

    Parameters
    ----------
    params : EngineParams

    Members
    -------
    s_data, s_valid, s_last : In
        The packed sample stream (one beat of ``bus_width`` bits per handshake).
    s_ready : Out
    ctrl : In(ctrl_signature())
        The register settings (``RunConfig`` fields, ``n_samples`` = samples per epoch) and
        the one-cycle strobes ``start``, ``abort``, ``clear_errors``, ``seed_write``; widths
        from the register map.  The settings must not change in the cycle before a ``start``
        pulse (their range checks are registered), and they are latched when ``start`` is
        accepted.
    status : Out(status_signature())
        Status and counters (counters restart at every start).
    model_index, model_wdata, model_write, model_read : In
        (``model_index`` must not change in the cycle before a read or write pulse: the
        memory row it gives is a register.)
    model_rdata, model_rvalid : Out
        The model port (usable while idle; a use while busy sets ``model_port_busy`` and
        answers 0 at once).
    """

    def __init__(self, params: EngineParams):
        if not isinstance(params, EngineParams):
            raise TypeError(f"params must be EngineParams, found {params!r}")
        self._params = params
        w = params.bus_width
        super().__init__({
            "s_data": In(w), "s_valid": In(1), "s_last": In(1), "s_ready": Out(1),
            "ctrl": In(ctrl_signature()), "status": Out(status_signature()),
            "model_index": In(32), "model_wdata": In(32), "model_write": In(1),
            "model_read": In(1), "model_rdata": Out(32), "model_rvalid": Out(1),
        })

    @property
    def params(self) -> EngineParams:
        return self._params

    # ------------------------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        ctrl, status = self.ctrl, self.status
        p = self._params
        lanes = p.lanes
        log_lanes = lanes.bit_length() - 1
        raw_lanes = p.bus_width // 32
        max_slices = p.bus_width // 2 // lanes   # slices of the densest beat
        rows = p.max_features // lanes + 2
        gacc_width = p.grad_acc_width
        dot_width = p.dot_width
        # Field offsets reach N_max + W/2 (the beat after the last) plus a slice; one bit more.
        field_bits = (p.max_features + p.bus_width // 2 + 2 * lanes).bit_length() + 1

        cfg = _Config(p)
        pipe_reset = Signal()  # clears every pipeline and FIFO (start, abort)
        # The same reset in copies, each from its own copy of the start's acceptance, so that
        # no one net spans the die (HARDWARE.md, "The issue decision").
        fifo_reset, forward_reset, gradient_reset = (Signal(name=f"{path}_reset")
                                                     for path in ("fifo", "forward", "gradient"))

        # -- memories: model and the two gradient sets, one bank per lane ------------------
        # A read meeting a write to its row is never used (HARDWARE.md, "Memories' collisions").
        marked = {UNUSED_COLLISION_ATTRIBUTE: 1}
        model_banks = [memory.Memory(shape=signed(MODEL_STORAGE_WIDTH), depth=rows, init=[],
                                     attrs=marked)
                       for _ in range(lanes)]
        grad_banks = [[memory.Memory(shape=signed(gacc_width), depth=rows, init=[],
                                     attrs=marked)
                       for _ in range(lanes)] for _ in range(2)]
        for b, mem in enumerate(model_banks):
            m.submodules[f"model_bank{b}"] = mem
        for z in range(2):
            for b, mem in enumerate(grad_banks[z]):
                m.submodules[f"grad{z}_bank{b}"] = mem
        model_rd = [mem.read_port() for mem in model_banks]
        model_wr = [mem.write_port() for mem in model_banks]
        grad_rd = [[mem.read_port() for mem in bank] for bank in grad_banks]
        grad_wr = [[mem.write_port() for mem in bank] for bank in grad_banks]
        # What the engine reads of them: in simulation (no platform) a read that met a write
        # to its row is the old word inverted, so that a test fails if the engine uses it.
        poison = platform is None
        model_data = [_collision_checked(m, rd, wr, f"model_bank{b}", poison)
                      for b, (rd, wr) in enumerate(zip(model_rd, model_wr, strict=True))]
        grad_data = [[_collision_checked(m, rd, wr, f"grad{z}_bank{b}", poison)
                      for b, (rd, wr) in enumerate(zip(grad_rd[z], grad_wr[z], strict=True))]
                     for z in range(2)]

        # -- random generators: lanes for the update, one for the residual -----------------
        m.submodules.rng = rng = XorshiftBank(count=lanes + 1)
        # Seed and load registered beside the generators: the register file is far away, and a
        # seed is written while idle, three or more cycles before a start's first step.
        seed_here, load_here = Signal(32, reset_less=True), Signal()
        m.d.sync += [seed_here.eq(ctrl.seed), load_here.eq(ctrl.seed_write)]
        m.d.comb += [rng.seed.eq(seed_here), rng.load.eq(load_here)]

        # -- FIFOs between the forward and the gradient path --------------------------------
        max_beats = -(-(p.max_features + 1) // raw_lanes)
        sample_depth = 1 << (max_beats + 64).bit_length()
        # payload: beat, last beat of sample, first/last sample of batch, batch parity; output in
        # fabric flip-flops (HARDWARE.md, "The FIFOs between the paths").
        sfifo = FabricOutputFifo(width=p.bus_width + 4, depth=sample_depth)
        # Room for every sample the forward path can hold (it is shorter than RESIDUAL_FIFO_SLACK
        # cycles); in LUT RAM, beside its reader (HARDWARE.md, "The FIFOs between the paths").
        efifo = BufferedFifo(width=32, depth=2 * RESIDUAL_FIFO_SLACK, distributed=True)
        m.submodules.sample_fifo = ResetInserter(fifo_reset)(sfifo)
        m.submodules.scaled_residual_fifo = ResetInserter(fifo_reset)(efifo)

        # -- state ---------------------------------------------------------------------------
        state = Signal(range(7))
        IDLE, RUN, DRAIN, FLUSH, SETTLE, DISCARD, START = range(7)
        # state == RUN as a register of its own, loaded with the state (``enter``): the issue
        # decision reads one flip-flop instead of a decode of three.
        in_run = Signal()
        # (Copies of in_run, blocked and fifo_room for each 16 bits of the held beat: its
        # load enable is made from copies beside it, see below.)
        held_groups = p.bus_width // 16
        in_run_held = [Signal(name=f"in_run_held{g}", attrs={REPLICA_ATTRIBUTE: 1})
                       for g in range(held_groups)]

        def enter(next_state):
            return [state.eq(next_state),
                    *(copy.eq(next_state == RUN) for copy in (in_run, *in_run_held))]

        errors = Signal(len(ErrorBit))
        error_events = Signal(len(ErrorBit))
        running = Signal()     # an epoch is in progress (cycles_busy counts these cycles)
        start_request = Signal()   # a start pulse of the cycle before, while idle
        m.d.comb += [status.error_flags.eq(errors),
                     running.eq(state.matches(RUN, DRAIN, FLUSH, SETTLE, START)),
                     status.busy.eq(running | start_request),
                     # (Discarding stops with the start's pulse: no beat of the new epoch
                     # may be discarded while the start waits a cycle.)
                     status.draining.eq((state == DISCARD) & ~start_request)]
        # Events are registered before they reach the flags and the counter (one cycle later):
        # the framing checks sit at the end of the input's handshake logic.
        events = Signal(len(ErrorBit))
        m.d.sync += events.eq(error_events)
        with m.If(ctrl.clear_errors):
            m.d.sync += errors.eq(events)
        with m.Else():
            m.d.sync += errors.eq(errors | events)
        with m.If(events.any()):
            m.d.sync += status.error_count.eq(status.error_count + popcount(events))

        # -- start: check and latch the configuration ---------------------------------------
        per_beat_table = _fields_per_beat_table(p.bus_width)
        table_index = Cat(ctrl.bits[:4], ctrl.encoding)

        def look_up(values, shape):
            return Array(Const(v, shape) for v in values)[table_index]
        enc_ok = ctrl.encoding <= Encoding.RAW32
        bits_ok = (ctrl.encoding == Encoding.RAW32) | (
            (ctrl.bits >= 1) & (ctrl.bits <= 8))
        fl_m, fl_g = ctrl.model_frac, ctrl.grad_frac
        config_checks = Cat(
            enc_ok, bits_ok,
            (ctrl.n_features >= 1), (ctrl.n_features <= p.max_features),
            (ctrl.batch_size >= 1), (ctrl.batch_size <= p.max_batch),
            (ctrl.n_samples >= 1),
            (ctrl.model_width >= 2), (ctrl.model_width <= 32),
            (fl_m >= 1), (fl_m <= 31),
            (ctrl.grad_width >= 2), (ctrl.grad_width <= 32),
            (fl_g + 8 >= fl_m), (fl_g <= fl_m + 32))
        # A start is decided a cycle after its pulse, from registered range checks, so that its
        # fan-out starts at a flip-flop (HARDWARE.md, "The issue decision"; REGISTERS.md, CTRL).
        start_pulse = ctrl.start & ~status.busy & ~ctrl.abort
        start_ok = Signal()
        config_ok = Signal()
        m.d.sync += config_ok.eq(config_checks.all())
        start_accepted = start_pulse & config_ok    # (start_ok's next value)
        m.d.sync += [start_request.eq(start_pulse), start_ok.eq(start_accepted)]
        m.d.comb += error_events[ErrorBit.START_WHILE_BUSY].eq(ctrl.start & status.busy)
        m.d.comb += error_events[ErrorBit.BAD_CONFIG].eq(start_request & ~start_ok)
        m.d.comb += pipe_reset.eq(start_ok | ctrl.abort)
        start_ok_copies = replicas(m, "start_ok", start_accepted, 3,
                                   reset_less=False)
        m.d.comb += [reset.eq(copy | ctrl.abort) for reset, copy
                     in zip((fifo_reset, forward_reset, gradient_reset), start_ok_copies,
                            strict=True)]
        # The looked-up settings as signals, so that the restart conditions compare the tables'
        # outputs (an ``Array`` of constants under an operator becomes another ROM).
        looked_up = {name: Signal.like(getattr(cfg, name), name=f"{name}_looked_up")
                     for name in ("per_beat", "per_beat_lanes", "slices_per_beat",
                                  "one_slice_beats")}
        m.d.comb += [
            looked_up["per_beat"].eq(look_up(per_beat_table, cfg.per_beat.shape())),
            looked_up["per_beat_lanes"].eq(look_up([v + lanes for v in per_beat_table],
                                                   cfg.per_beat_lanes.shape())),
            looked_up["slices_per_beat"].eq(look_up([-(-v // lanes) for v in per_beat_table],
                                                    cfg.slices_per_beat.shape())),
            looked_up["one_slice_beats"].eq(
                look_up([int(v <= lanes) for v in per_beat_table], 1)),
        ]
        # The restart conditions, a register loaded every cycle like the range checks, so that
        # the latch takes them from flip-flops (HARDWARE.md, "The issue decision").
        restart_candidates = [Signal.like(latched, name=f"{latched.name}_candidate")
                              for latched in cfg.restart]
        m.d.sync += [candidate.eq(value) for candidate, value in zip(
            restart_candidates,
            cfg.restart_conditions(lanes, ctrl.n_features, **looked_up), strict=True)]
        with m.If(start_ok):
            m.d.sync += [getattr(cfg, name).eq(value) for name, value in looked_up.items()]
            m.d.sync += [latched.eq(candidate) for latched, candidate
                         in zip(cfg.restart, restart_candidates, strict=True)]
            m.d.sync += [
                cfg.encoding.eq(ctrl.encoding), cfg.bits.eq(ctrl.bits),
                cfg.n.eq(ctrl.n_features), cfg.batch.eq(ctrl.batch_size),
                cfg.samples.eq(ctrl.n_samples), cfg.wl_m.eq(ctrl.model_width),
                cfg.fl_m.eq(fl_m), cfg.wl_g.eq(ctrl.grad_width), cfg.fl_g.eq(fl_g),
                cfg.step.eq(ctrl.step), cfg.decay.eq(ctrl.decay),
                cfg.threshold.eq(ctrl.threshold), cfg.rounding.eq(ctrl.rounding),
                cfg.delayed.eq(ctrl.update_mode),
                cfg.raw.eq(ctrl.encoding == Encoding.RAW32),
            ]
        # Registered twice unless ``early`` (stage A, two cycles after the latch): beside the
        # settings, then beside the users (HARDWARE.md, "Pipeline", stage A).
        def derived(name, shape, value, early=False):
            sig = Signal(shape, name=name)
            if early:
                m.d.sync += sig.eq(value)
            else:
                near = Signal(shape, name=f"{name}_near")
                m.d.sync += [near.eq(value), sig.eq(near)]
            return sig

        update_shift = derived("update_shift", range(41),
                               cfg.fl_g + QUANT_FEATURE_FRAC - cfg.fl_m)
        residual_shift = derived("residual_shift", range(65),
                                 STEP_FRAC + QUANT_FEATURE_FRAC + cfg.fl_m - cfg.fl_g)
        update_rounder = Rounder(m, update_shift, cfg.rounding, 40, "update")
        decay_rounder = Rounder(m, DECAY_FRAC, cfg.rounding, DECAY_FRAC, "decay")
        residual_rounder = Rounder(m, residual_shift, cfg.rounding, 64, "residual")
        model_limits = [derived(f"model_{end}_r", signed(33), value) for end, value in
                        zip(("hi", "lo"), format_limits(m, cfg.wl_m, 32, "model"), strict=True)]
        grad_hi, grad_lo = (derived(f"grad_{end}_r", signed(33), value) for end, value in
                            zip(("hi", "lo"), format_limits(m, cfg.wl_g, 32, "grad"),
                                strict=True))
        grad_lo_minus_one = derived("grad_lo_minus_one_r", signed(34), grad_lo - 1)
        # Per-lane bounds n - i and per_beat - i, so that no addition stands in front of the
        # lanes' range tests (HARDWARE.md, "Pipeline", stage A).
        bound = signed(max(len(cfg.n), len(cfg.per_beat), lanes.bit_length()) + 1)
        n_less = [derived(f"n_less{i}", bound, cfg.n - i, early=True) for i in range(lanes)]
        per_beat_less = [derived(f"per_beat_less{i}", bound, cfg.per_beat - i, early=True)
                         for i in range(lanes)]

        def lanes_in_range(f0, index):
            """Bit ``i``: lane ``i`` of the slice at field ``f0``, number ``index`` in its
            beat, holds a feature of the beat."""
            first = index << log_lanes
            return Cat(*(((f0 != 0) if i == 0 else Const(1, 1)) & ~less_than(n_less[i], f0)
                         & less_than(first, per_beat_less[i]) for i in range(lanes)))
        # Label alignment (stage 3) and loss narrowing: left or right, by how much.
        raw_gain = cfg.fl_m + QUANT_FEATURE_FRAC - RAW_LABEL_FRAC
        label_left = derived("label_left", 1, ~cfg.raw | (cfg.fl_m + QUANT_FEATURE_FRAC
                                                           >= RAW_LABEL_FRAC))
        label_amount = derived("label_amount", range(32), Mux(
            ~cfg.raw, cfg.fl_m + QUANT_FEATURE_FRAC - QUANT_LABEL_FRAC,
            Mux(cfg.fl_m + QUANT_FEATURE_FRAC >= RAW_LABEL_FRAC, raw_gain,
                RAW_LABEL_FRAC - QUANT_FEATURE_FRAC - cfg.fl_m)))
        loss_gain_left = derived("loss_gain_left", 1,
                                 cfg.fl_m + QUANT_FEATURE_FRAC < LOSS_RESIDUAL_FRAC)
        loss_amount = derived("loss_amount", 5, Mux(
            cfg.fl_m + QUANT_FEATURE_FRAC < LOSS_RESIDUAL_FRAC,
            LOSS_RESIDUAL_FRAC - QUANT_FEATURE_FRAC - cfg.fl_m,
            cfg.fl_m + QUANT_FEATURE_FRAC - LOSS_RESIDUAL_FRAC)[:5])

        # -- counters restart at start -------------------------------------------------------
        counters = [status.loss, status.beats, status.samples, status.cycles_busy,
                    status.cycles_starved, status.cycles_update_stall, status.updates,
                    status.model_saturations, status.residual_saturations,
                    status.discarded_beats]
        # (They are cleared at start at the end of elaborate: the last assignment wins over an
        # increment in the same cycle.)
        with m.If(running):
            m.d.sync += status.cycles_busy.eq(status.cycles_busy + 1)

        # ======================================================================================
        # Input side: framing, batches, hazards
        # ======================================================================================
        feed = _Slicer(m, cfg, lanes, max_slices, field_bits, "in")
        in_f0 = feed.f0                    # first field of the next slice of the sample
        in_sample_in_batch = Signal(range(p.max_batch + 1))
        # The 64-bit counters move a cycle after the issue that ends a sample, so that the late
        # issue decision enables two flip-flops, not 192 (HARDWARE.md, "The issue decision").
        in_batch = Signal(64)              # batch index of the current sample (a cycle late)
        batch_parity = Signal()            # in_batch[0], up to date
        sample_ended, batch_ended = Signal(), Signal()
        # samples_to_begin == 1 and == 2 as registers that change with it.
        begin_one, begin_two = Signal(), Signal()
        in_samples = Signal(64)            # samples fully accepted (a cycle late)
        samples_to_begin = Signal(64)      # samples after the current one (counts down, a
                                           # cycle late)
        grad_batches_done = Signal(64)     # batches whose every gradient is written
        keep = cfg.delayed
        # Small registers for comparisons of the 64-bit counters, off the path to tready:
        # min(in_batch, 2), in_batch - grad_batches_done (0 .. 2), in_samples + 1 == samples.
        batches_begun = Signal(range(3))
        batches_pending = Signal(4)
        last_sample = Signal()
        # in_sample_in_batch == 0, and whether the sample is the first of a batch that takes a
        # fused update (EXACT: batches 1 on; DELAYED: batches 2 on), as registers.
        first_of_batch = Signal(init=1)
        fused_sample = Signal()
        # (in_sample_in_batch + 1 == batch) | last_sample, as a register loaded with the two
        # (the batch's end is on the enables of the batch registers, after the late issue).
        last_of_batch = Signal()
        # EXACT: batch u needs batches 0..u-1 written; DELAYED: batches 0..u-2.
        gradients_ready = Signal()         # of batches_pending, registered with it (below)
        pending_parity = Mux(keep, batch_parity, ~batch_parity)   # (u-2) or (u-1) mod 2
        last_beat_expected = feed.beat_last
        # The beat on the bus is taken with its first slice; later slices come from a copy.
        mid_beat = ~feed.first_slice if max_slices > 1 else Const(0)
        # Copies of first_slice, one per 16 bits, choose between the bus and the held copy, so
        # that no one register's fan-out spans the decoder's gathering (HARDWARE.md, "Pipeline").
        if max_slices > 1:
            mid_beat_data = [~feed.first_slice_copy(f"first_slice_data{g}")
                             for g in range(held_groups)]
        else:
            mid_beat_data = [Const(0)] * held_groups
        held_data = Signal(p.bus_width, reset_less=True)
        next_slice = _SliceShift(m, cfg, p.bus_width, lanes, "held_shift", groups=held_groups)

        # The window is cleared a cycle after a pipeline reset, from a register, not from the
        # reset's wide net (HARDWARE.md, "Hazards").
        window_reset = Signal()
        m.d.sync += window_reset.eq(pipe_reset)
        window = _UpdateWindow(m, window_reset)
        issue_valid, issue_fused = Signal(), Signal()
        issue_f0 = Signal(field_bits)

        # Registered: one cycle late, which the FIFOs' margins cover.
        fifo_room = Signal()
        fifo_room_next = (sfifo.level < sample_depth - 8) & (efifo.level < RESIDUAL_FIFO_SLACK)
        m.d.sync += fifo_room.eq(fifo_room_next)
        fifo_room_held = replicas(m, "fifo_room_held", fifo_room_next, held_groups,
                                  reset_less=False)
        # Both holds (HARDWARE.md, "Hazards") are one register, ``blocked``, loaded with
        # blocked_of of their next values (HARDWARE.md, "The issue decision").
        def blocked_of(fused, hit, at_start, ready):
            return fused & (hit | (at_start & ~ready))

        blocked = Signal()
        blocked_held = [Signal(name=f"blocked_held{g}", attrs={REPLICA_ATTRIBUTE: 1})
                        for g in range(held_groups)]
        hazard_free = ~blocked & fifo_room
        accepting = Signal()
        held_issue = Signal()
        m.d.comb += [accepting.eq(in_run & hazard_free & ~mid_beat),
                     held_issue.eq(in_run & hazard_free & mid_beat)]
        m.d.comb += self.s_ready.eq(accepting | status.draining)
        handshake = self.s_valid & self.s_ready
        # Counted a cycle after their events (the issue decision enables three flip-flops, not
        # 192); events come only in RUN, two cycles or more before a start can clear them.
        starved, stalled, beat_taken = Signal(), Signal(), Signal()
        m.d.sync += [starved.eq(accepting & ~self.s_valid),
                     stalled.eq(in_run & ~hazard_free & (self.s_valid | mid_beat))]
        with m.If(starved):
            m.d.sync += status.cycles_starved.eq(status.cycles_starved + 1)
        with m.If(stalled):
            m.d.sync += status.cycles_update_stall.eq(status.cycles_update_stall + 1)
        with m.If(status.draining & handshake):
            m.d.sync += status.discarded_beats.eq(status.discarded_beats + 1)

        framing_ok = self.s_last == last_beat_expected
        take = Signal()
        m.d.comb += take.eq(in_run & handshake & framing_ok)
        m.d.comb += [
            error_events[ErrorBit.TLAST_EARLY].eq(
                in_run & handshake & self.s_last & ~last_beat_expected),
            error_events[ErrorBit.TLAST_MISSING].eq(
                in_run & handshake & ~self.s_last & last_beat_expected),
        ]

        # Flush beats (end of epoch) share the issue point with stream beats.
        sweep = _Slicer(m, cfg, lanes, max_slices, field_bits, "flush")
        flush_f0 = sweep.f0
        flush_pass = Signal(2)     # passes still to do
        flush_parity = Signal()
        flush_issue = Signal()
        # The flush's only hazard is its own first pass: a counter from each pass's first issue
        # says when the next pass may start (HARDWARE.md, "The issue decision").
        flush_wait = Signal(range(UPDATE_WINDOW + 1))
        flush_waiting = Signal()           # flush_wait != 0, as a register
        with m.If(flush_issue & sweep.at_start):
            m.d.sync += [flush_wait.eq(UPDATE_WINDOW), flush_waiting.eq(1)]
        with m.Elif(flush_waiting):
            m.d.sync += [flush_wait.eq(flush_wait - 1), flush_waiting.eq(flush_wait != 1)]
        with m.If(pipe_reset):
            m.d.sync += [flush_wait.eq(0), flush_waiting.eq(0)]
        flush_gate = ~(sweep.at_start & flush_waiting)
        # (state == FLUSH) & (flush_pass != 0) as a register: only the flush issues while it is
        # set, so it chooses the issue's data; ``flush_issue`` only makes the valid bit.
        flushing = Signal()
        # Copies of ``flushing`` (loaded with it) for the decoder's beat choice and the issued
        # slice's rows: each drives dozens of multiplexers beside the decoder and the banks.
        flushing_data, flushing_rows = (
            Signal(name=f"flushing_{use}", attrs={REPLICA_ATTRIBUTE: 1})
            for use in ("data", "rows"))

        def set_flushing(value):
            return [copy.eq(value) for copy in (flushing, flushing_data, flushing_rows)]

        # The flush's issue is a register (made in the control section from the next values of
        # the three above), so that the flush slicer's enables start at a flip-flop.
        flush_go = Signal()
        m.d.comb += flush_issue.eq(flush_go)

        slice_issue = take | held_issue
        # The slicer and batch registers move with every slice offered and ready, framed right or
        # not (a framing error ends the stream), which keeps TLAST off their enables.
        slice_moves = (self.s_valid & accepting) | held_issue
        # The stream's slicer does not see the flush's issues: the two never issue within
        # UPDATE_WINDOW cycles of each other (HARDWARE.md, "The issue decision").
        feed.track(m, window, fused_sample)
        m.d.comb += [
            issue_valid.eq(slice_issue | flush_issue),
            issue_fused.eq(Mux(flushing, 1, fused_sample)),
            issue_f0.eq(Mux(flushing, flush_f0, in_f0)),
            window.enter.eq(slice_moves & fused_sample & feed.near),
            window.enter_seq.eq(feed.seq),
        ]

        # Registered, so that the FIFO counts from a flip-flop, not from the late handshake (the
        # beat is needed long after); a beat taken in a pipeline reset's cycle is dropped.
        sfifo_w_en = Signal()
        sfifo_w_data = Signal(len(sfifo.w_data), reset_less=True)
        m.d.sync += [
            sfifo_w_en.eq(take & ~fifo_reset),
            sfifo_w_data.eq(Cat(self.s_data, last_beat_expected, first_of_batch, last_of_batch,
                                batch_parity)),
        ]
        m.d.comb += [sfifo.w_en.eq(sfifo_w_en), sfifo.w_data.eq(sfifo_w_data)]

        m.d.sync += beat_taken.eq(take)
        with m.If(beat_taken):
            m.d.sync += status.beats.eq(status.beats + 1)
        # The held beat loads the bus until its later slices issue (a register condition, not the
        # handshake); each 16 bits under copies of its own (HARDWARE.md, "The issue decision").
        bus_moved_on, held_moved_on = next_slice(self.s_data), next_slice(held_data)
        for g, mid in enumerate(mid_beat_data):
            bits = slice(16 * g, 16 * g + 16)
            with m.If(~mid):
                m.d.sync += held_data[bits].eq(bus_moved_on[bits])
            with m.Elif(in_run_held[g] & ~blocked_held[g] & fifo_room_held[g]):
                m.d.sync += held_data[bits].eq(held_moved_on[bits])
        m.d.sync += [sample_ended.eq(slice_issue & feed.sample_last),
                     batch_ended.eq(slice_issue & feed.sample_last & last_of_batch)]
        with m.If(sample_ended):
            m.d.sync += [in_samples.eq(in_samples + 1),
                         samples_to_begin.eq(samples_to_begin - 1),
                         begin_one.eq(samples_to_begin == 2), begin_two.eq(samples_to_begin == 3)]
        with m.If(batch_ended):
            m.d.sync += in_batch.eq(in_batch + 1)
        with m.If(slice_moves):
            feed.advance(m)
            with m.If(feed.sample_last):
                # samples_to_begin is a sample behind when the sample before ended a cycle ago.
                next_last_sample = Mux(sample_ended, begin_two, begin_one)
                m.d.sync += last_sample.eq(next_last_sample)
                with m.If(last_of_batch):
                    m.d.sync += [in_sample_in_batch.eq(0), batch_parity.eq(~batch_parity),
                                 last_of_batch.eq((cfg.batch == 1) | next_last_sample),
                                 first_of_batch.eq(1),
                                 fused_sample.eq(Mux(keep, batches_begun != 0, 1))]
                    with m.If(batches_begun != 2):
                        m.d.sync += batches_begun.eq(batches_begun + 1)
                with m.Else():
                    m.d.sync += [in_sample_in_batch.eq(in_sample_in_batch + 1),
                                 last_of_batch.eq((in_sample_in_batch + 2 == cfg.batch)
                                                  | next_last_sample),
                                 first_of_batch.eq(0), fused_sample.eq(0)]

        # ======================================================================================
        # Forward path
        # ======================================================================================
        # Stage A registers (the issued beat).
        a_valid, a_fused, a_flush = Signal(), Signal(), Signal()
        a_f0 = Signal(field_bits)
        a_first, a_last = Signal(), Signal()
        a_parity = Signal()
        a_pass_end = Signal()
        a_index = Signal(range(max(2, max_slices)))
        m.d.sync += [
            a_valid.eq(issue_valid & ~forward_reset), a_fused.eq(issue_fused),
            a_flush.eq(flushing), a_f0.eq(issue_f0),
            a_first.eq(Mux(flushing, sweep.at_start, feed.at_start)),
            a_last.eq(Mux(flushing, 0, feed.sample_last)),
            a_parity.eq(Mux(flushing, flush_parity, pending_parity)),
            a_pass_end.eq(Mux(flushing, sweep.sample_last, feed.sample_last)),
            a_index.eq(Mux(flushing, sweep.index, feed.index)),
        ]
        # Forwarding (stage U12) for a plain beat: the most recent fused beat with its offset
        # among those issued 1 .. UPDATE_WINDOW - 1 cycles before, found now, one-hot.
        a_forward = Signal(UPDATE_WINDOW - 1)
        matches = [feed.matches[k] for k in range(UPDATE_WINDOW - 1)]
        m.d.sync += a_forward.eq(Mux(flushing | fused_sample, 0, Cat(*(
            matches[k] & ~Cat(*matches[:k]).any() if k else matches[0]
            for k in range(UPDATE_WINDOW - 1)))))

        # Gathering at issue, arithmetic in stage A: the words are in stage B, beside the memory
        # data; a flush's beat is all zeros (HARDWARE.md, "Decoder").
        m.submodules.decoder = dec = FieldDecoder(bus_width=p.bus_width, lanes=lanes,
                                                  latency=2, settings_latency=1)
        m.d.comb += [dec.data.eq(Cat(*(Mux(mid, held_data[16 * g:16 * g + 16],
                                            self.s_data[16 * g:16 * g + 16])
                                        for g, mid in enumerate(mid_beat_data)))),
                     dec.zero.eq(flushing_data),
                     dec.encoding.eq(cfg.encoding), dec.bits.eq(cfg.bits)]
        # The memory rows of the issued slice, registered with it (each slicer's from its own
        # offset register; the issue only chooses).
        def rows_of(f0):
            return [_row(f0[log_lanes:], f0[:log_lanes], b, lanes) for b in range(lanes)]

        a_rows = [Signal(field_bits - log_lanes, name=f"a_row{b}") for b in range(lanes)]
        m.d.sync += [row.eq(Mux(flushing_rows, flush_row, in_row)) for row, flush_row, in_row
                     in zip(a_rows, rows_of(flush_f0), rows_of(in_f0), strict=True)]
        # The port's bank and row, a register loaded every cycle, so that the address choice
        # does not wait for the addition (HARDWARE.md, "Model port").
        port_field = Signal(len(self.model_index) + 1, reset_less=True)
        m.d.sync += port_field.eq(self.model_index + 1)
        port_bank = port_field[:log_lanes]
        port_row = port_field[log_lanes:]
        # Whether the port is open or closed: registers, off the state decode behind BUSY, a
        # copy per bank and one for the answer (HARDWARE.md, "Model port").
        closed = replicas(m, "port_closed", status.busy | start_pulse, lanes + 1,
                          reset_less=False)
        port_closed = closed[lanes]
        # The memories' address and data choices: a copy of ``port_open`` per bank.
        idle_port = replicas(m, "port_open", ~status.busy, lanes, init=1, reset_less=False)
        for b in range(lanes):
            m.d.comb += model_rd[b].addr.eq(Mux(idle_port[b], port_row, a_rows[b]))
        # Lane generators step once per fused beat (stage A); outputs are read in stage B.
        m.d.comb += rng.step[:lanes].eq((a_valid & a_fused).replicate(lanes))
        # Whether stage A reads gradient set z: a register per set and bank, made at issue (not
        # reset: a reset also empties G2, whose reads it would take), one per address choice.
        issue_parity = Mux(flushing, flush_parity, pending_parity)
        fused_reads = [replicas(m, f"grad_read{z}", issue_valid & issue_fused
                                & (issue_parity == z), lanes, reset_less=False)
                       for z in range(2)]

        # Stage B: memory data; lane -> bank rotations of mask and random bits.
        b_valid, b_fused, b_flush, b_first, b_last, b_pass_end = (Signal() for _ in range(6))
        b_f0 = Signal(field_bits)
        b_parity = Signal()
        b_forward = Signal(UPDATE_WINDOW - 1)
        b_range_mask = Signal(lanes)
        m.d.sync += [b_valid.eq(a_valid & ~forward_reset), b_fused.eq(a_fused),
                     b_flush.eq(a_flush), b_first.eq(a_first), b_last.eq(a_last),
                     b_pass_end.eq(a_pass_end), b_f0.eq(a_f0), b_parity.eq(a_parity),
                     b_forward.eq(a_forward),
                     b_range_mask.eq(lanes_in_range(a_f0, a_index))]
        b_first_lanes = [dec.first[i] for i in range(lanes)]
        b_mask = Signal(lanes)
        m.d.comb += b_mask.eq(b_range_mask & dec.valid)
        # The lane -> bank rotation's amount, -b_f0 mod L, registered from stage A's offset,
        # one copy for each rotation below (each drives a few dozen multiplexers).
        rot_rand_step, rot_rand_decay, rot_mask = replicas(
            m, "b_rotation", (-a_f0[:log_lanes])[:log_lanes], 3)
        b_x = [model_data[b] for b in range(lanes)]
        # Each set's words go into registers of their own (U1), fed by the block RAM alone;
        # U1 chooses the set (HARDWARE.md, "Gradient memories").
        b_g_sets = [[grad_data[z][b] for b in range(lanes)] for z in range(2)]
        rand_lanes = [Signal(32, name=f"rand_lane{i}") for i in range(lanes)]
        m.d.comb += [rand_lanes[i].eq(rng.value[i]) for i in range(lanes)]
        rand_step_banks = rotate(m, [r[:RAND_BITS] for r in rand_lanes], rot_rand_step,
                                 "rand_step_rot")
        rand_decay_banks = rotate(m, [r[16:32] for r in rand_lanes], rot_rand_decay,
                                  "rand_decay_rot")
        mask_banks = rotate(m, [b_mask[i] for i in range(lanes)], rot_mask, "mask_rot")

        # ======================================================================================
        # Update pipeline U1..U13 (HARDWARE.md, "Pipeline"; docs/ENGINE.md stage 6)
        # ======================================================================================
        # The drain waits until these stages are empty (forward_tail, below).
        in_flight = []

        def stage(name, shape, value, reset_less=False):
            sig = Signal(shape, name=name, reset_less=reset_less)
            m.d.sync += sig.eq(value)
            return sig

        def raw_copy(site, lane):
            """A copy of the latched raw32 flag for one lane's choice at one stage, a cycle
            behind it (these stages see a beat at least two cycles after the start latches
            it): one flip-flop beside each multiplexer, not one for the whole die."""
            if lane >= raw_lanes:
                return cfg.raw           # (unused: a quantized lane has no choice)
            return replicas(m, f"raw_{site}{lane}", cfg.raw, 1)[0]

        def carry(prefix, src, drop=(), replicate=()):
            """The next stage's registers of every member of ``src`` but ``drop`` (a member is
            a value or a list of per-lane values; the valid bit is cleared by a reset).  Each
            member in ``replicate`` becomes a list: one register per bank (:func:`replicas`)."""
            out = {"valid": stage(f"{prefix}_valid", 1, src["valid"] & ~forward_reset)}
            in_flight.append((out["valid"], src["valid"] & ~forward_reset))
            # The members are data (the valid bit qualifies them): no reset, which keeps the
            # reset's fan-out small.
            for key, sig in src.items():
                if key == "valid" or key in drop:
                    continue
                if key in replicate:
                    out[key] = replicas(m, f"{prefix}_{key}", sig, lanes)
                elif isinstance(sig, list):
                    out[key] = [stage(f"{prefix}_{key}{i}", v.shape(), v, reset_less=True)
                                for i, v in enumerate(sig)]
                else:
                    out[key] = stage(f"{prefix}_{key}", sig.shape(), sig, reset_less=True)
            return out

        def delay_all(src, cycles, prefix, drop=(), replicate=()):
            """``carry`` ``cycles`` times (the tags of a value in a multi-cycle step); the
            members in ``replicate`` become one register per bank in the last."""
            for k in range(cycles):
                src = carry(f"{prefix}{k}", src, drop if k == 0 else (),
                            replicate if k == cycles - 1 else ())
            return src

        # U1: the memory words in bank order, with the random words and the lane mask rotated
        # to banks; the feature words stay in lane order (as multiplier operands).
        u1 = carry("u1", {
            "valid": b_valid, "fused": b_fused, "flush": b_flush, "first": b_first,
            "last": b_last, "pass_end": b_pass_end, "f0": b_f0, "label": dec.label,
            "forward": b_forward, "mask": Cat(*mask_banks),
            # (A raw lane's word goes on whole: its operand is chosen in D, off the decoder's
            # output path.)
            "ops": [b_first_lanes[i] if i < raw_lanes else _operand(b_first_lanes[i], cfg.raw,
                                                                    False)
                    for i in range(lanes)],
            "x": b_x, "g_set0": b_g_sets[0], "g_set1": b_g_sets[1],
            "rand_step": rand_step_banks,
            "rand_decay": rand_decay_banks,
        })
        # U1: the label (lane 0 of the sample's first beat, as decoded) aligned to the dot
        # product's format (a shift by a setting), so that the residual stage is one subtraction.
        label = u1["label"]
        u1["label"] = Mux(label_left, label.as_signed() << label_amount,
                          label.as_signed() >> label_amount)[:64].as_signed()
        # U1: the gradient set's choice (a_parity two stages on, a register per bank).
        u1_parity_banks = replicas(m, "u1_parity", b_parity, lanes)
        u1["g"] = [Mux(u1_parity_banks[b], u1["g_set1"][b], u1["g_set0"][b])
                   for b in range(lanes)]
        # U1..U3: step = round(G >> update_shift) (step 1), in three copies, one per carry
        # chain, the tests' cut to their width (HARDWARE.md, "Pipeline": Rounder.pipelined).
        model_hi, model_lo = model_limits
        test_width = max(len(u1["x"][0] - limit) for limit in model_limits)
        steps = [update_rounder.pipelined_copies(m, u1["g"][b], u1["rand_step"][b],
                                                 f"u_step{b}", 3, compare_width=test_width)
                 for b in range(lanes)]
        step_latency = steps[0][1]
        u3 = delay_all(u1, step_latency - 1, "u_s", drop=("g", "g_set0", "g_set1", "rand_step"))
        # U4, U5: x1 = sat_WLm(x - step) (step 1), tested as x - hi > step and x - lo < step
        # from U3's x - hi and x - lo: U4 is three carry chains side by side, U5 only chooses.
        u4 = carry(f"u_s{step_latency - 1}", u3 | {
            "above_hi": [u3["x"][b] - model_hi for b in range(lanes)],
            "above_lo": [u3["x"][b] - model_lo for b in range(lanes)]}, replicate=("fused",))
        u5 = carry("u5", u4 | {
            "diff": [(u4["x"][b] - steps[b][0][0])[:32] for b in range(lanes)],
            "over": [less_than(steps[b][0][1], u4["above_hi"][b]) for b in range(lanes)],
            "under": [less_than(u4["above_lo"][b], steps[b][0][2]) for b in range(lanes)]},
            drop=("above_hi", "above_lo"))
        # From U6 on a beat carries one model word (a plain beat's own x, its decay taken as 0
        # in U10), so that the pipeline does not carry x beside it.
        u6 = carry("u6", u5 | {
            "x1": [Mux(u5["fused"][b], Mux(u5["over"][b], model_hi,
                                        Mux(u5["under"][b], model_lo, u5["diff"][b]))
                       [:32].as_signed(), u5["x"][b]) for b in range(lanes)],
            "clip": [u5["over"][b] | u5["under"][b] for b in range(lanes)]},
            drop=("diff", "over", "under", "x"))
        # Model saturations: counted for fused, valid banks.
        sat_bits = Signal(lanes)
        m.d.comb += sat_bits.eq(Cat(*(u6["clip"][b] & u6["mask"][b] for b in range(lanes))))
        with m.If(u6["valid"] & u6["fused"][0]):
            m.d.sync += status.model_saturations.eq(status.model_saturations + popcount(sat_bits))
        # U6, U7: x1 * eta; U8, U9: its rounding; U10: x2 = x1 - decay (step 2). The product's
        # last sum is split at the rounder's span (HARDWARE.md, "Pipeline": Product).
        decay_products = [Product(m, u6["x1"][b], cfg.decay.as_unsigned(), f"u_decay{b}",
                                  platform, split=decay_rounder.span)
                          for b in range(lanes)]
        u8 = delay_all(u6, decay_products[0].latency, "u_p", drop=("clip",))
        decays = [decay_rounder.pipelined(m, decay_products[b].value, u8["rand_decay"][b],
                                          f"u_dround{b}") for b in range(lanes)]
        # (From U10 on, ``forward`` is one register per bank: it chooses each bank's words.)
        u10 = delay_all(u8, decays[0][1], "u_r", drop=("rand_decay",), replicate=("forward",))
        x2 = [u10["x1"][b] - Mux(u10["fused"][b], decays[b][0], 0) for b in range(lanes)]
        # U11 makes both sums of the L1 threshold (step 3), so that U12 chooses by signs only;
        # the forwarding sources are U13 and its history (HARDWARE.md, "Update forwarding").
        u13_x = [Signal(signed(32), name=f"u13_x{b}") for b in range(lanes)]
        history = [[Signal(signed(32), name=f"fwd{j}_x{b}") for b in range(lanes)]
                   for j in range(2, UPDATE_WINDOW - 2)]
        for j, words in enumerate(history):
            previous = u13_x if j == 0 else history[j - 1]
            m.d.sync += [words[b].eq(previous[b]) for b in range(lanes)]
        far_groups = ((2, 8), (8, UPDATE_WINDOW - 1))      # forward bits j of each group

        def pick(b, bits):
            sources = [u13_x[b]] + [words[b] for words in history]   # j - 2 two cycles ahead
            return functools.reduce(operator.or_, (
                Mux(u10["forward"][b][j], sources[j - 2], 0) for j in range(*bits)))
        far = {f"forward_far{g}": [pick(b, bits) for b in range(lanes)]
               for g, bits in enumerate(far_groups)}
        u11 = carry("u11", u10 | {"x2": x2} | far, drop=("x1",))
        early = [Mux(u11["forward"][b][1], u13_x[b], 0)
                 | functools.reduce(operator.or_, (u11[key][b] for key in far))
                 for b in range(lanes)]
        older = [u11["forward"][b][1:] for b in range(lanes)]
        u12 = carry("u12", u11 | {
            "above": [v - cfg.threshold for v in u11["x2"]],
            "below": [v + cfg.threshold for v in u11["x2"]],
            "negative": [v < 0 for v in u11["x2"]],
            "forward_newest": [u11["forward"][b][0] for b in range(lanes)],
            "forward_older": [older[b].any() for b in range(lanes)],
            "forwarded": early,
            # The rows U13 writes, made a cycle ahead (off the block RAMs' address paths).
            "write_rows": [_row(u11["f0"][log_lanes:], u11["f0"][:log_lanes], b, lanes)
                           for b in range(lanes)]}, drop=("forward", *far))
        # Cycles from issue to the write (U13): A, B, U1, the step's rounding, U4, U5, the
        # decay's product and rounding, U10 .. U12, U13.
        write_cycle = 3 + steps[0][1] + 2 + decay_products[0].latency + decays[0][1] + 3
        assert write_cycle == UPDATE_WINDOW, (
            f"UPDATE_WINDOW is {UPDATE_WINDOW}, the update pipeline writes {write_cycle} cycles "
            f"after issue")

        # U12 -> U13: x3, or a plain beat's own word, or the newer word a fused beat at its offset
        # wrote after it read the memory (HARDWARE.md, "Update forwarding").
        u13 = carry("u13", u12, drop=("above", "below", "negative", "x2", "forward_newest",
                                      "forward_older", "forwarded"))
        for b in range(lanes):
            above, below = u12["above"][b], u12["below"][b]
            x3 = Mux(u12["negative"][b], Mux(below < 0, below, 0), Mux(above < 0, 0, above))
            own = Mux(u12["fused"][b], x3, u12["x2"][b])
            m.d.sync += u13_x[b].eq(Mux(u12["forward_newest"][b], u13_x[b],
                                        Mux(u12["forward_older"][b], u12["forwarded"][b], own)))
        u13["x"] = u13_x
        with m.If(u13["valid"] & u13["fused"][0] & u13["pass_end"]):
            m.d.sync += status.updates.eq(status.updates + 1)
        # Write back the fused update (bank space; rows from f0).
        u13_shift = Signal(log_lanes)
        m.d.comb += u13_shift.eq(u13["f0"][:log_lanes])
        for b in range(lanes):
            with m.If(idle_port[b]):
                m.d.comb += [model_wr[b].addr.eq(port_row), model_wr[b].data.eq(self.model_wdata),
                             model_wr[b].en.eq(self.model_write & ~closed[b]
                                               & (port_bank == b))]
            with m.Else():
                m.d.comb += [model_wr[b].addr.eq(u13["write_rows"][b]),
                             model_wr[b].data.eq(u13_x[b]),
                             model_wr[b].en.eq(u13["valid"] & u13["fused"][b] & u13["mask"][b])]

        # Stage D: bank -> lane rotation of the (updated) model words; an unused lane's word is
        # 0 (so is its product), and the multiplier operand is chosen by the encoding.
        d = carry("d", u13, drop=("ops", "x", "mask", "fused"))
        x_lanes = rotate(m, u13_x, u13_shift, "x_rot")
        lane_mask = rotate(m, [u13["mask"][b] for b in range(lanes)], u13_shift, "lane_mask_rot")
        d_x = [stage(f"d_x{i}", signed(32), Mux(lane_mask[i], x_lanes[i], 0))
               for i in range(lanes)]
        d_op = [stage(f"d_op{i}", u13["ops"][i].shape(),
                      _operand(u13["ops"][i], raw_copy("d_op", i), True) if i < raw_lanes
                      else u13["ops"][i])
                for i in range(lanes)]

        # Stage E: products F1 * x (docs/ENGINE.md stage 2), then the raw32 alignment; the limbs
        # land in fabric registers first (HARDWARE.md, "Pipeline": Product).
        e_mul = [Product(m, d_op[i], d_x[i], f"e_mul{i}", platform, landing=True)
                 for i in range(lanes)]
        e = delay_all(carry("e_m", d), e_mul[0].latency - 1, "e_m")
        e = carry("e", e)
        products = [stage(f"e_p{i}", signed(42), _align_raw(e_mul[i].value, raw_copy("e_p", i),
                                                            i < raw_lanes))
                    for i in range(lanes)]

        # Adder tree, registered every two levels and after the last, so that the
        # accumulator's addition has a cycle of its own.
        level = products
        tree = e
        depth = 0
        while len(level) > 1:
            pairs = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                pairs.append(level[-1])
            level = pairs
            depth += 1
            if depth % 2 == 0 or len(level) == 1:
                before = tree
                tree = carry(f"t{depth}", tree)
                level = [stage(f"t{depth}_s{k}", v.shape(), v) for k, v in enumerate(level)]
        tree_out = level[0]
        # The tree's last stage holding a stream slice (its first, its last) as registers made
        # with its valid bit: each enables dozens of the accumulator's and sample's flip-flops.
        dot_take = before["valid"] & ~forward_reset & ~before["flush"]
        acc_take, first_take, last_take = (
            replicas(m, name, value, 1, reset_less=False)[0] for name, value in (
                ("acc_take", dot_take), ("acc_first_take", dot_take & before["first"]),
                ("acc_last_take", dot_take & before["last"])))

        # Per-sample accumulation.
        acc = Signal(signed(dot_width))
        held_label = Signal(signed(64))
        s_valid = Signal()
        s_dot = Signal(signed(dot_width))
        s_label = Signal(signed(64))      # aligned (stage B)
        m.d.sync += s_valid.eq(0)
        total = Mux(tree["first"], tree_out, acc + tree_out)
        with m.If(acc_take):
            m.d.sync += acc.eq(total)
        with m.If(first_take):
            m.d.sync += held_label.eq(tree["label"])
        with m.If(last_take):
            m.d.sync += [s_valid.eq(~forward_reset), s_dot.eq(total),
                         s_label.eq(Mux(tree["first"], tree["label"], held_label))]

        # Stage R: residual (stage 3); the residual generator steps once per sample.
        r_valid = stage("r_valid", 1, s_valid & ~forward_reset)
        r_res = stage("r_res", signed(dot_width + 1), s_dot - s_label)
        m.d.comb += rng.step[lanes].eq(s_valid)

        def delay(name, value, cycles, valid=False):
            """``value`` ``cycles`` clock cycles later (a valid bit is cleared by a reset)."""
            for k in range(cycles):
                before = value
                value = stage(f"{name}_d{k}", value.shape(), value & ~forward_reset if valid
                              else value, reset_less=not valid)
                if valid:
                    in_flight.append((value, before & ~forward_reset))
            return value

        # Residual: step * r, rounded and saturated to the gradient format (docs/ENGINE.md
        # stage 4), into the scaled-residual FIFO; the random word is this sample's (R + 1).
        e1_rand = stage("e1_rand", RAND_BITS, rng.value[lanes][:RAND_BITS])
        residual_mul = Product(m, r_res, cfg.step.as_unsigned(), "residual_mul", platform)
        scaled, scaled_clip, round_latency = residual_rounder.pipelined_saturating(
            m, residual_mul.value, delay("residual_rand", e1_rand, residual_mul.latency - 1),
            grad_hi, grad_lo, grad_lo_minus_one, 32, "residual_round")
        scaled_valid = delay("scaled_valid", r_valid, residual_mul.latency + round_latency,
                             valid=True)
        m.d.comb += [efifo.w_en.eq(scaled_valid), efifo.w_data.eq(scaled)]
        with m.If(scaled_valid):
            m.d.sync += status.samples.eq(status.samples + 1)
            with m.If(scaled_clip):
                m.d.sync += status.residual_saturations.eq(status.residual_saturations + 1)

        # Loss: r narrowed to LOSS_RESIDUAL_WIDTH, squared, accumulated with saturation; the shift
        # in two stages (multiple of 8, then the rest), each a barrel shifter of 2 or 3 levels.
        coarse_amount, fine_amount = Cat(Const(0, 3), loss_amount[3:]), loss_amount[:3]
        narrowed_coarse = stage("loss_narrowed_coarse", signed(dot_width + 1 + 31),
                                Mux(loss_gain_left, r_res << coarse_amount,
                                    r_res >> coarse_amount), reset_less=True)
        narrowed = stage("loss_narrowed", signed(dot_width + 1 + 31),
                         Mux(loss_gain_left, narrowed_coarse << fine_amount,
                             narrowed_coarse >> fine_amount), reset_less=True)
        loss_limit = 1 << (LOSS_RESIDUAL_WIDTH - 1)
        # (Tests of the top bits: narrowed >= 2**31 when it is not negative and they are not
        # all 0, narrowed < -2**31 when it is negative and they are not all 1.)
        loss_top = narrowed[LOSS_RESIDUAL_WIDTH - 1:]
        loss_over = stage("loss_over", 1, ~loss_top[-1] & loss_top.any())
        loss_under = stage("loss_under", 1, loss_top[-1] & ~loss_top.all())
        loss_low = stage("loss_low", signed(LOSS_RESIDUAL_WIDTH), narrowed[:LOSS_RESIDUAL_WIDTH])
        loss_word = stage("loss_word", signed(LOSS_RESIDUAL_WIDTH),
                          Mux(loss_over, loss_limit - 1, Mux(loss_under, -loss_limit, loss_low)))
        square = Product(m, loss_word, loss_word, "loss_square", platform)
        loss_clip = delay("loss_clip", stage("loss_clip", 1, loss_over | loss_under),
                          square.latency)
        loss_valid = delay("loss_valid", r_valid, 4 + square.latency, valid=True)
        with m.If(loss_valid):
            new_loss = Signal(LOSS_ACC_WIDTH + 1, name="new_loss")
            m.d.comb += new_loss.eq(status.loss + (square.value.as_unsigned() >> LOSS_SQUARE_SHIFT))
            with m.If(new_loss[LOSS_ACC_WIDTH]):       # past the accumulator: saturate
                m.d.sync += [status.loss.eq((1 << LOSS_ACC_WIDTH) - 1), status.loss_saturated.eq(1)]
            with m.Else():
                m.d.sync += status.loss.eq(new_loss[:LOSS_ACC_WIDTH])
            with m.If(loss_clip):
                m.d.sync += status.loss_saturated.eq(1)

        # ======================================================================================
        # Gradient path
        # ======================================================================================
        walk = _Slicer(m, cfg, lanes, max_slices, field_bits, "grad")
        g_f0 = walk.f0
        # The head beat in a register: the FIFO's output is beside its block RAMs and the
        # decoder gathers from the head; loaded long before its residual, it costs no time.
        head_valid = Signal()
        head = Signal(p.bus_width + 4)
        pop = Signal()     # a slice of the head beat goes to G1
        head_done = Signal()
        # The FIFO's read enable and the head's valid bit see the slicer's slice_last in a
        # copy of their own, placed beside the FIFO rather than beside the slicer.
        fifo_slice_last = walk.slice_last_copy("slice_last_fifo")
        m.d.comb += [pop.eq(head_valid & efifo.r_rdy), head_done.eq(pop & fifo_slice_last),
                     sfifo.r_en.eq(~head_valid | head_done)]
        # Like the stream's copy, the head moves on by a slice with every slice popped.
        head_valid_next = Signal()
        m.d.comb += head_valid_next.eq(Mux(sfifo.r_rdy & sfifo.r_en, 1,
                                           Mux(head_done, 0, head_valid)) & ~gradient_reset)
        m.d.sync += head_valid.eq(head_valid_next)
        with m.If(sfifo.r_rdy & sfifo.r_en):
            m.d.sync += head[p.bus_width:].eq(sfifo.r_data[p.bus_width:])
        # Each group loads or moves on under its own copy of head_valid (HARDWARE.md, "Pipeline");
        # after the last slice it may load an empty FIFO's output: the head is then empty.
        shifted = _SliceShift(m, cfg, p.bus_width, lanes, "head_shift",
                              groups=HEAD_GROUPS)(head[:p.bus_width])
        group_bits = -(-p.bus_width // HEAD_GROUPS)
        valid_copies = replicas(m, "head_valid", head_valid_next, HEAD_GROUPS, reset_less=False)
        for g, valid_copy in enumerate(valid_copies):
            bits = slice(g * group_bits, min((g + 1) * group_bits, p.bus_width))
            last_copy = walk.slice_last_copy(f"slice_last_head{g}")
            with m.If(Mux(valid_copy, efifo.r_rdy, sfifo.r_rdy)):
                m.d.sync += head[bits].eq(Mux(valid_copy & ~last_copy, shifted[bits],
                                              sfifo.r_data[bits]))
        pop_data = head[:p.bus_width]
        pop_last = head[p.bus_width]
        pop_first_of_batch = head[p.bus_width + 1]
        pop_last_of_batch = head[p.bus_width + 2]
        pop_parity = head[p.bus_width + 3]
        m.d.comb += efifo.r_en.eq(pop & pop_last & walk.slice_last_copy("slice_last_efifo"))
        with m.If(pop):
            walk.advance(m)
        # Slicers restart at a pipeline reset and in START, once the settings are latched;
        # ``starting`` is START as a register (HARDWARE.md, "The issue decision").
        starting = Signal()
        m.d.sync += starting.eq(start_ok & ~ctrl.abort)
        # (Each slicer's restart from copies of its own: the gradient path's reset, and a
        # copy of ``starting`` per slicer.)
        walk_starting, sweep_starting = replicas(m, "starting", start_ok & ~ctrl.abort,
                                                 2, reset_less=False)
        with m.If(gradient_reset | walk_starting):
            walk.restart(m)
        # The flush's slicer moves only in FLUSH and each pass ends at the start, so that the
        # drain's late end is not among its enables (HARDWARE.md, "The issue decision").
        with m.If(pipe_reset | sweep_starting):
            sweep.restart(m)

        # G1: decode F2, c = e * F2 (stage 5).
        g1_valid = stage("g1_valid", 1, pop & ~gradient_reset)
        g1_f0 = stage("g1_f0", field_bits, g_f0)
        g1_e = stage("g1_e", signed(32), efifo.r_data.as_signed())
        g1_overwrite = stage("g1_overwrite", 1, pop_first_of_batch)
        g1_batch_end = stage("g1_batch_end", 1, pop_last_of_batch & pop_last & walk.slice_last)
        g1_index = stage("g1_index", range(max(2, max_slices)), walk.index)
        g1_parity = stage("g1_parity", 1, pop_parity)
        # The decoder gathers from the head in the pop cycle and decodes in G1: the words are
        # in G1B, the operands in GO, the products in G2.
        m.submodules.grad_decoder = gdec = FieldDecoder(bus_width=p.bus_width, lanes=lanes,
                                                        latency=2, settings_latency=1)
        m.d.comb += [gdec.data.eq(pop_data), gdec.encoding.eq(cfg.encoding),
                     gdec.bits.eq(cfg.bits)]
        g1b = {"valid": g1_valid, "f0": g1_f0, "e": g1_e, "overwrite": g1_overwrite,
               "batch_end": g1_batch_end, "parity": g1_parity,
               "range": lanes_in_range(g1_f0, g1_index)}
        g1b = {key: stage(f"g1b_{key}", sig.shape(), sig & ~gradient_reset if key == "valid"
                          else sig) for key, sig in g1b.items()}
        in_flight.append((g1b["valid"], g1_valid & ~gradient_reset))
        g1b_second = [gdec.second[i] for i in range(lanes)]
        go = {key: stage(f"go_{key}", sig.shape(), sig & ~gradient_reset if key == "valid"
                         else sig) for key, sig in g1b.items() if key != "range"}
        in_flight.append((go["valid"], g1b["valid"] & ~gradient_reset))
        go_mask = stage("go_mask", lanes, g1b["range"] & gdec.valid)
        go_op = [stage(f"go_op{i}", signed(32 if i < raw_lanes else _QUANT_WIDTH),
                       _operand(g1b_second[i], raw_copy("go_op", i), i < raw_lanes))
                 for i in range(lanes)]
        g_mul = [Product(m, go["e"], go_op[i], f"g_mul{i}", platform, landing=True)
                 for i in range(lanes)]
        g_lat = g_mul[0].latency
        g2_valid = delay("g2_valid", go["valid"], g_lat, valid=True)
        g2_f0 = delay("g2_f0", go["f0"], g_lat)
        g2_overwrite = delay("g2_overwrite", go["overwrite"], g_lat)
        g2_batch_end = delay("g2_batch_end", go["batch_end"], g_lat)
        g2_parity = delay("g2_parity", go["parity"], g_lat)
        g2_mask = delay("g2_mask", go_mask, g_lat)
        # The rows the reads of G2 address, made from GO's offset and carried along: the
        # block RAMs' address is then a choice between two registers.
        g2_rows = [delay(f"g2_row{b}", _row(go["f0"][log_lanes:], go["f0"][:log_lanes], b, lanes),
                         g_lat) for b in range(lanes)]
        g2_c_wide = [_align_raw(g_mul[i].value, raw_copy("g2_c", i), i < raw_lanes)
                     for i in range(lanes)]

        # G2 (combinational part): rotate to banks, issue the reads.
        g2_neg = Signal(log_lanes)
        m.d.comb += g2_neg.eq(-g2_f0[:log_lanes])
        g2_c = [Signal(signed(42), name=f"g2_c{i}") for i in range(lanes)]
        m.d.comb += [g2_c[i].eq(g2_c_wide[i]) for i in range(lanes)]
        c_banks = rotate(m, g2_c, g2_neg, "c_rot")
        en_banks = rotate(m, [g2_mask[i] for i in range(lanes)], g2_neg, "en_rot")

        # G3: the memory's data; H: that data registered (so that the block RAM's read is a
        # cycle of its own), old value (memory or forwarded) + c; G4: write.
        g3_valid = stage("g3_valid", 1, g2_valid & ~gradient_reset)
        g3_overwrite = stage("g3_overwrite", 1, g2_overwrite)
        g3_batch_end = stage("g3_batch_end", 1, g2_batch_end)
        g3_parity = stage("g3_parity", 1, g2_parity)
        h_parity_banks = replicas(m, "h_parity_bank", g3_parity, lanes)   # (as u1_parity)
        g3_rows = [stage(f"g3_row{b}", range(rows), g2_rows[b]) for b in range(lanes)]
        g3_en = stage("g3_en", lanes, Cat(*en_banks))
        g3_c = [stage(f"g3_c{b}", signed(42), c_banks[b]) for b in range(lanes)]
        h_valid = stage("h_valid", 1, g3_valid & ~gradient_reset)
        h_overwrite = stage("h_overwrite", 1, g3_overwrite)
        h_batch_end = stage("h_batch_end", 1, g3_batch_end)
        h_parity = stage("h_parity", 1, g3_parity)
        h_rows = [stage(f"h_row{b}", range(rows), g3_rows[b]) for b in range(lanes)]
        h_en = stage("h_en", lanes, g3_en)
        h_c = [stage(f"h_c{b}", signed(42), g3_c[b], reset_less=True) for b in range(lanes)]
        g4_valid = stage("g4_valid", 1, h_valid & ~gradient_reset)
        g4_batch_end = stage("g4_batch_end", 1, h_batch_end)
        g4_parity = stage("g4_parity", 1, h_parity)
        g4_rows = [stage(f"g4_row{b}", range(rows), h_rows[b]) for b in range(lanes)]
        g4_en = stage("g4_en", lanes, h_en)
        # The stage after the write, for the forwarding below.
        g5_valid = stage("g5_valid", 1, g4_valid & ~gradient_reset)
        g5_parity = stage("g5_parity", 1, g4_parity)
        g5_rows = [stage(f"g5_row{b}", range(rows), g4_rows[b]) for b in range(lanes)]
        g5_en = stage("g5_en", lanes, g4_en)
        g4_sum = []
        g5_sum = [Signal(signed(gacc_width), name=f"g5_sum{b}", reset_less=True)
                  for b in range(lanes)]
        def same_word(b, valid, en, parity, row_of, parity_now, rows_now):
            """A write ahead of a beat (``valid``, ``en``, ``parity``, ``row_of``) is to bank
            ``b``'s word that the beat (``parity_now``, ``rows_now``) reads."""
            return valid & en[b] & (parity == parity_now) & (row_of[b] == rows_now[b])

        # Copies of G4's rows for the comparisons below: G4's own are the write address,
        # beside the block RAMs.
        g4_rows_cmp = [replicas(m, f"g4_row_cmp{b}", h_rows[b], 1, reset_less=False)[0]
                       for b in range(lanes)]
        forwarding_facts = []
        # (G2's rows as G3 will hold them: cut to the row's width.)
        g2_rows_cut = [g2_rows[b][:len(g3_rows[b])] for b in range(lanes)]
        for b in range(lanes):
            # (Each set's word in a register of its own, beside its block RAM, as in U1; H
            # chooses.)
            h_memory = Mux(h_parity_banks[b], *(
                stage(f"h_memory{b}_set{z}", signed(gacc_width), grad_data[z][b],
                      reset_less=True) for z in (1, 0)))
            # Forwarding from the three writes the G2 read cannot see: compared in G2, chosen in
            # G3, so that H chooses among registers (HARDWARE.md, "Gradient forwarding").
            g4_value = Signal(signed(gacc_width), name=f"g4_sum{b}", reset_less=True)
            from_g5 = stage(f"g3_from_g5_{b}", 1,
                            same_word(b, h_valid, h_en, h_parity, h_rows, g2_parity, g2_rows_cut))
            from_g6 = stage(f"g3_from_g6_{b}", 1, same_word(b, g4_valid, g4_en, g4_parity,
                                                            g4_rows_cmp, g2_parity, g2_rows_cut))
            from_g4_ahead = stage(f"g3_from_g4_{b}", 1, same_word(
                b, g3_valid, g3_en, g3_parity, g3_rows, g2_parity, g2_rows_cut) & ~g2_overwrite)
            from_g4 = stage(f"h_from_g4_{b}", 1, from_g4_ahead)
            # (What each stands for, in every state with a beat in G3: the formal harnesses
            # assert it.)
            forwarding_facts += [
                ~g3_valid | (from_g5 == same_word(b, g4_valid, g4_en, g4_parity, g4_rows,
                                                  g3_parity, g3_rows)),
                ~g3_valid | (from_g6 == same_word(b, g5_valid, g5_en, g5_parity, g5_rows,
                                                  g3_parity, g3_rows)),
                ~g3_valid | (from_g4_ahead == (same_word(b, h_valid, h_en, h_parity, h_rows,
                                                         g3_parity, g3_rows)
                                               & ~g3_overwrite))]
            use_older = stage(f"h_use_older{b}", 1, g3_overwrite | from_g5 | from_g6)
            older = stage(f"h_older{b}", signed(gacc_width),
                          Mux(g3_overwrite, 0, Mux(from_g5, g4_value, g5_sum[b])),
                          reset_less=True)
            old = Mux(from_g4, g4_value, Mux(use_older, older, h_memory))
            # |old + c| stays below 2**(GACC_W-2): the width analysis of docs/ENGINE.md.
            m.d.sync += g4_value.eq((old + h_c[b])[:gacc_width].as_signed())
            g4_sum.append(g4_value)
        m.d.sync += [g5_sum[b].eq(g4_sum[b]) for b in range(lanes)]
        for z in range(2):
            for b in range(lanes):
                m.d.comb += [grad_wr[z][b].addr.eq(g4_rows[b]), grad_wr[z][b].data.eq(g4_sum[b]),
                             grad_wr[z][b].en.eq(g4_valid & g4_en[b] & (g4_parity == z))]
        with m.If(g4_valid & g4_batch_end):
            m.d.sync += grad_batches_done.eq(grad_batches_done + 1)
        batch_begins = slice_issue & feed.sample_last & last_of_batch
        batch_written = g4_valid & g4_batch_end
        # Both outcomes of the (late) batch begin are made from registers first; it only
        # chooses between them.
        pending_if = [Signal.like(batches_pending, name=f"pending_if_begin{k}") for k in (0, 1)]
        m.d.comb += [pending_if[k].eq(batches_pending + k - batch_written) for k in (0, 1)]
        ready_if = [Mux(keep, pending <= 1, pending == 0) for pending in pending_if]
        m.d.sync += [batches_pending.eq(Mux(batch_begins, pending_if[1], pending_if[0])),
                     gradients_ready.eq(Mux(batch_begins, ready_if[1], ready_if[0]))]
        # The next cycle's hold for both outcomes of the late slice move: a batch begins only with
        # an issuing move (framed right, or a held slice); the fused flag, only at a sample's end.
        ends_sample = feed.sample_last
        ready_if_move = Mux((mid_beat | framing_ok) & ends_sample & last_of_batch,
                            ready_if[1], ready_if[0])
        fused_if_move = Mux(ends_sample, last_of_batch & Mux(keep, batches_begun != 0, 1),
                            fused_sample)
        blocked_next = Mux(
            slice_moves,
            blocked_of(fused_if_move, feed.hit_if_advance, ends_sample, ready_if_move),
            blocked_of(fused_sample, feed.hit_if_stay, feed.at_start, ready_if[0]))
        m.d.sync += [copy.eq(blocked_next) for copy in (blocked, *blocked_held)]

        # Gradient-memory read addresses: the fused update (stage A) or the gradient path (G2).
        for z in range(2):
            for b in range(lanes):
                m.d.comb += grad_rd[z][b].addr.eq(Mux(fused_reads[z][b], a_rows[b], g2_rows[b]))

        # ======================================================================================
        # Control
        # ======================================================================================
        # "A stage after A holds a beat" as a register, so that the drain's end and SETTLE's
        # test read flip-flops, not a wide OR (HARDWARE.md, "The issue decision").
        after_a = [(b_valid, a_valid & ~forward_reset), (s_valid, last_take & ~forward_reset),
                   (r_valid, s_valid & ~forward_reset), *in_flight]
        forward_tail = Signal()
        forward_tail_means = any_of(valid for valid, _ in after_a)
        m.d.sync += forward_tail.eq(any_of(next_value for _, next_value in after_a))
        forward_busy = a_valid | forward_tail
        gradient_busy = (sfifo_w_en | sfifo.r_rdy | head_valid | efifo.r_rdy | g1_valid | g3_valid
                         | h_valid | g4_valid)

        drain_done = Signal()
        m.d.comb += drain_done.eq(~forward_busy & ~gradient_busy & (batches_pending == 0))
        # flush_go is flushing & flush_gate of the next cycle: those change only at the end of
        # DRAIN, with the flush's own issues, and at an abort or pipeline reset (no flush).
        flush_begins = (state == DRAIN) & drain_done
        flushing_next = Mux(ctrl.abort, 0,
                            Mux(flush_issue & sweep.sample_last, flush_pass != 1,
                                Mux(flush_begins, 1, flushing)))
        at_start_next = Mux(flush_begins, 1, Mux(flush_issue, sweep.sample_last,
                                                 sweep.at_start))
        waiting_next = Mux(pipe_reset, 0, Mux(flush_issue & sweep.at_start, 1,
                                              Mux(flush_waiting, flush_wait != 1, 0)))
        m.d.sync += flush_go.eq(flushing_next & ~(at_start_next & waiting_next))

        # The wide registers START restarts, each from a copy of ``starting`` of its own.
        wide_restarts = ((in_batch, 0), (in_samples, 0), (grad_batches_done, 0), (acc, 0),
                         (samples_to_begin, cfg.samples - 1))
        wide_starting = replicas(m, "starting_wide", start_ok & ~ctrl.abort,
                                 len(wide_restarts), reset_less=False)
        for (register, value), copy in zip(wide_restarts, wide_starting, strict=True):
            with m.If(copy):
                m.d.sync += register.eq(value)
        with m.If(starting):   # the state is START (a register of its own, above)
            # The settings are latched now: the walkers' conditions follow them.
            feed.restart(m)
            m.d.sync += [in_sample_in_batch.eq(0), batch_parity.eq(0), *enter(RUN),
                         batches_begun.eq(0), batches_pending.eq(0),
                         first_of_batch.eq(1), fused_sample.eq(0), gradients_ready.eq(1),
                         *(copy.eq(0) for copy in (blocked, *blocked_held)),
                         begin_one.eq(cfg.samples == 2), begin_two.eq(cfg.samples == 3),
                         last_sample.eq(cfg.samples == 1),
                         last_of_batch.eq((cfg.batch == 1) | (cfg.samples == 1))]
        with m.Switch(state):
            with m.Case(IDLE, DISCARD):
                with m.If(start_ok):
                    m.d.sync += enter(START)
            with m.Case(RUN):
                with m.If(handshake & ~framing_ok):
                    m.d.sync += enter(DISCARD)
                with m.Elif(slice_issue & feed.sample_last & last_sample):
                    m.d.sync += enter(DRAIN)
            with m.Case(DRAIN):
                # Every begun batch's gradient is written: batches_pending == 0 stands for
                # grad_batches_done == in_batch, as in_batch has caught up (forward_busy).
                with m.If(drain_done):
                    last = in_batch - 1
                    m.d.sync += [*enter(FLUSH), *set_flushing(1)]
                    with m.If(keep & (in_batch >= 2)):
                        m.d.sync += [flush_pass.eq(2), flush_parity.eq(~last[0])]
                    with m.Else():
                        m.d.sync += [flush_pass.eq(1), flush_parity.eq(last[0])]
            with m.Case(FLUSH):
                with m.If(flush_pass == 0):
                    m.d.sync += enter(SETTLE)
            with m.Case(SETTLE):
                with m.If(~forward_busy):
                    m.d.sync += [*enter(IDLE), status.done.eq(1)]
        # (flush_issue implies FLUSH with passes to do: ``flushing`` is that, as a register.)
        with m.If(flush_issue):
            sweep.advance(m)
            with m.If(sweep.sample_last):
                m.d.sync += [flush_pass.eq(flush_pass - 1), flush_parity.eq(~flush_parity),
                             *set_flushing(flush_pass != 1)]
        with m.If(ctrl.abort):
            m.d.sync += [*enter(IDLE), *set_flushing(0)]

        # Model port: reads answer two cycles later (the banks' words are registered before the
        # bank's choice); a use while busy is an error, answered 0 at once.
        port_pending, port_answer = Signal(), Signal()
        port_pending_bank, port_answer_bank = Signal(log_lanes), Signal(log_lanes)
        port_words = [Signal(32, name=f"port_word{b}", reset_less=True) for b in range(lanes)]
        port_use = self.model_read | self.model_write
        m.d.comb += error_events[ErrorBit.MODEL_PORT_BUSY].eq(port_use & port_closed)
        m.d.sync += [port_pending.eq(self.model_read & ~port_closed),
                     port_pending_bank.eq(port_bank),
                     port_answer.eq(port_pending), port_answer_bank.eq(port_pending_bank)]
        m.d.sync += [word.eq(model_data[b]) for b, word in enumerate(port_words)]
        m.d.comb += [
            self.model_rvalid.eq(port_answer | (self.model_read & port_closed)),
            self.model_rdata.eq(Mux(port_answer, Array(port_words)[port_answer_bank], 0)),
        ]
        # Counters clear last in the module, so that a clear wins over an increment in the start
        # cycle (formal ``counter_restart``); one copy each (HARDWARE.md, "The issue decision").
        counter_clears = replicas(m, "counter_clear", start_accepted, len(counters),
                                  reset_less=False)
        for counter, clear in zip(counters, counter_clears, strict=True):
            with m.If(clear):
                m.d.sync += counter.eq(0)
        with m.If(start_ok):
            m.d.sync += [status.done.eq(0), status.loss_saturated.eq(0)]

        # Internal signals the formal harness (``zipsgd.hw.formal``) states properties about;
        # set at elaboration, so a harness elaborates the core itself and then reads them.
        self.formal_taps = {
            "state": state, "running": state == RUN, "dot_acc": acc, "tree_out": tree_out,
            "dot_clear": state == START,      # the cycle that clears the accumulator
            "dot_valid": tree["valid"] & ~tree["flush"], "dot_first": tree["first"],
            "dot_last": tree["last"], "grad_sums": g4_sum, "grad_addends": h_c,
            "grad_valid": h_valid, "grad_overwrite": h_overwrite, "in_f0": in_f0,
            "in_samples": in_samples, "start_accepted": start_ok,
            "error_events": events,     # registered: they reach error_count a cycle later
            # Registers loaded with others, as (copy, what it stands for): every harness
            # asserts each pair equal (induction needs them, as it may start anywhere).
            "register_copies": [(flushing_data, flushing), (flushing_rows, flushing),
                                (starting, state == START), (walk_starting, starting),
                                (sweep_starting, starting),
                                *((copy, starting) for copy in wide_starting),
                                *((copy, start_ok) for copy in start_ok_copies),
                                *((copy, start_ok) for copy in counter_clears),
                                (forward_tail, forward_tail_means),
                                (in_run, state == RUN), (flush_go, flushing & flush_gate),
                                # (the flush's issue register is its definition: the
                                # stream and the flush never issue together because of it)
                                (flushing, (state == FLUSH) & (flush_pass != 0)),
                                (blocked, blocked_of(fused_sample, feed.hit, feed.at_start,
                                                     gradients_ready)),
                                *zip(g4_rows_cmp, g4_rows, strict=True),
                                *feed.register_copies, *walk.register_copies,
                                *sweep.register_copies,
                                *((copy, in_run) for copy in in_run_held),
                                *((copy, blocked) for copy in blocked_held),
                                *((copy, fifo_room) for copy in fifo_room_held),
                                *sfifo.register_copies, *efifo.register_copies,
                                *zip(cfg.restart, cfg.restart_conditions_now(lanes),
                                     strict=True)],
            # Facts of every reachable state that the logic relies on (asserted likewise).
            "invariants": [~feed.at_start | feed.first_slice,
                           # (An accepted start comes while idle or discarding: the pulse
                           # needs ~busy, and a start waits a cycle, busy, for its checks.)
                           state <= START, ~start_ok | state.matches(IDLE, DISCARD),
                           ~start_ok | start_request,
                           # (START restarts the flush's slicer, which then moves only in
                           # FLUSH: it waits at the start through RUN and DRAIN.)
                           ((state != RUN) & (state != DRAIN))
                           | (sweep.at_start & sweep.first_slice),
                           *sfifo.invariants, *efifo.invariants,
                           # (Outside IDLE and START: the settings can be latched there
                           # before START restarts the batch registers.)
                           state.matches(IDLE, START) | (last_of_batch == (
                               (in_sample_in_batch + 1 == cfg.batch) | last_sample)),
                           state.matches(IDLE, START) | (in_sample_in_batch < cfg.batch),
                           *forwarding_facts],
            "beat_pending": beat_taken,  # a beat taken a cycle ago, not yet in ``beats``
        }
        return m
