"""Memory-bandwidth performance model: how long one epoch takes on a given platform.

Memory moves the epoch in stream format v2 (samples back to back, ``StreamLayout.stream_bytes``)
to engine v2, which takes at most one ``W``-bit beat per clock at every encoding.  The epoch's
cycles are :meth:`EngineModel2.cycles` with the input fed at the platform's memory rate::

    bytes          = ceil(n_samples * sample_fields(n) * field_width / W) * W / 8
    rate           = min(1, bandwidth / (f_clk * W / 8))        beats per cycle from memory
    time           = EngineModel2.cycles(..., rate, MEMORY_LEAD_BEATS) / f_clk
    memory time    = bytes / bandwidth
    engine time    = EngineModel2.cycles(..., rate = 1) / f_clk
    bound          = memory if memory time > engine time, else engine

The cycle model is fitted to, and tested against, the simulated core (input never idle,
``tests/host/test_perf.py``, ``python benchmarks/bench_throughput2.py``) and, with the input
fed at a DRAM's rate, against the simulated SoCs of the boards (``python -m benchmarks dram``).
The memory side is a sustained bandwidth per platform (:data:`PLATFORMS`, sources in
``docs/PLATFORMS.md``).  :class:`EngineModel` is engine v1's cycle model, fitted to and
tested against engine v1's simulations.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..spec.engine import SIM_MAX_BATCH, SIM_MAX_FEATURES, UPDATE_WINDOW, EngineParams
from ..spec.engine2 import (
    BOARD_PARAMS2,
    READER_BURST,
    READER_OUTSTANDING,
    EngineParams2,
    RunConfig2,
    lane_plan,
    sub_words,
)
from ..spec.errors import ConfigError
from ..spec.soc import SYSTEM_CLOCK_HZ
from ..spec.stream import BUS_WIDTHS, Encoding, StreamLayout
from .train import UPDATE_MODES, ScaledData, TrainSettings, train_in_memory

__all__ = ["Platform", "PLATFORMS", "EngineModel", "EngineModel2", "epoch_cost",
           "predicted_cycles", "encodings_for", "perf_table", "measure_cycles_busy",
           "TARGET_GAP", "ENGINE_PROVENANCE", "DRAM_BEATS_PER_CYCLE", "MEMORY_LEAD_BEATS"]

@dataclass(frozen=True)
class Platform:
    """A board or system engine v2 could run on (``W / 2`` lanes, at most one beat a clock).

    Members
    -------
    name : str
        Preset name (``--platform``).
    bandwidth : float
        Sustained read bandwidth from the memory that holds the samples to the engine, bytes/s.
    clock_hz : float
        Engine clock.
    bus_width : int
        Bus width ``W`` of the engine built for this platform (64, 128, 256 or 512).
    source : str
        Where the figures come from (details in ``docs/PLATFORMS.md``).
    engine : str
        Where the engine's clock comes from: ``"measured: ..."`` (a zipsgd build of this FPGA
        that reached it, with its commit) or ``"estimate: ..."`` (how it was chosen); every
        preset says one (``docs/PLATFORMS.md``).

    Raises
    ------
    ConfigError
        If a figure is out of range.
    """

    name: str
    bandwidth: float
    clock_hz: float
    bus_width: int
    source: str = ""
    engine: str = ""

    def __post_init__(self):
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ConfigError(f"bandwidth must be > 0 bytes/s, found {self.bandwidth!r}")
        if not (math.isfinite(self.clock_hz) and self.clock_hz > 0):
            raise ConfigError(f"engine clock must be > 0 Hz, found {self.clock_hz!r}")
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        if self.engine and not self.engine.startswith(ENGINE_PROVENANCE):
            raise ConfigError("engine must start with "
                              f"{' or '.join(map(repr, ENGINE_PROVENANCE))}, "
                              f"found {self.engine!r}")

    @property
    def engine_bandwidth(self) -> float:
        """Bytes/s the engine takes at one beat per clock."""
        return self.clock_hz * self.bus_width / 8

    @property
    def memory_rate(self) -> float:
        """Beats per engine clock the memory delivers, at most 1."""
        return min(1.0, self.bandwidth / self.engine_bandwidth)


#: The boards' DRAM as LiteDRAM reads it for the engine: 64-bit beats per system clock on long
#: raw32 epochs (where the engine is not the bound), refresh included, measured in each board's
#: simulated SoC (``python -m benchmarks dram``; ``docs/results/benchmarks.md``).
DRAM_BEATS_PER_CYCLE = {"ulx3s-85f": 0.198, "orangecrab-85f": 0.786, "ecpix5-85": 0.693}
#: How far the memory may run ahead of the engine: the memory reader's FIFO
#: (``zipsgd/hw/v2/reader.py``).
MEMORY_LEAD_BEATS = READER_BURST * READER_OUTSTANDING

#: How a platform's ``engine`` begins.
ENGINE_PROVENANCE = ("measured: ", "estimate: ")
_U280_ENGINE = ("estimate: W/2 = 256 lanes at 300 MHz, the usual Vitis kernel clock on this "
                "card; no zipsgd build of an UltraScale+ (its tools are not on PyPI)")
#: The ULX3S's SoC routed (``zipsgd synth``; docs/results/synthesis.md).
_SOC_ROUTED = "routed at 62.5 MHz (zipsgd synth --engine 2, commit 9367d91)"
_SOC_ENGINE = {
    "ulx3s-85f": "measured: engine v2's W = 64 board SoC (32 lanes) at the board's 50 MHz "
                 f"system clock, {_SOC_ROUTED}",
    "orangecrab-85f": "measured: engine v2's W = 64 board SoC (32 lanes) at the board's 48 MHz "
                      "system clock, routed at 86.0 MHz (zipsgd synth --engine 2 --board "
                      "orangecrab-85f, commit fa1b2c0)",
    "ecpix5-85": "estimate: engine v2's W = 64 board SoC (32 lanes) at the board's 50 MHz "
                 f"system clock, as the ULX3S's SoC, {_SOC_ROUTED}; this board's SoC not "
                 "built",
}


def _board(name: str, dram: str) -> Platform:
    """The preset of a board SoC (``zipsgd/hw/board_soc.py``): its DRAM as measured, its
    system clock, the board build's bus width."""
    clock = SYSTEM_CLOCK_HZ[name]
    width = BOARD_PARAMS2.bus_width
    beats = DRAM_BEATS_PER_CYCLE[name]
    return Platform(
        name, beats * width / 8 * clock, clock, width,
        f"{dram} under LiteDRAM at the {clock / 1e6:g} MHz system clock: {beats} "
        f"{width}-bit beats a cycle sustained on long epochs, refresh included, measured in "
        f"the simulated SoC (python -m benchmarks dram); engine clock: the system clock",
        engine=_SOC_ENGINE[name])


#: Presets; every figure and its source (or "estimate") is in docs/PLATFORMS.md, whose table
#: repeats each preset's ``engine`` word for word.
PLATFORMS: dict[str, Platform] = {p.name: p for p in (
    _board("ulx3s-85f", "ULX3S (ECP5-85F): 16-bit SDR SDRAM (AS4C32M16)"),
    _board("orangecrab-85f", "OrangeCrab (ECP5-85F): 16-bit DDR3L (MT41K64M16), ECP5 DDR3 "
                             "PHY 1:2"),
    _board("ecpix5-85", "ECPIX-5 (ECP5-85F): 16-bit DDR3 (MT41K256M16), ECP5 DDR3 PHY 1:2"),
    Platform("pynq-z1", 0.8e9, 100e6, 64,
             "PYNQ-Z1 (Zynq-7020): one AXI HP port, 64 bits at 100 MHz = 0.8 GB/s",
             engine="estimate: W/2 = 32 lanes at 100 MHz, the PYNQ overlays' default PL "
                    "clock; no zipsgd build of a Zynq (its tools are not on PyPI)"),
    Platform("harp-v1", 6.5e9, 200e6, 512,
             "Intel Xeon+FPGA v1 (Stratix V, QPI): ~6.5 GB/s at 200 MHz, 512-bit lines "
             "(Kara et al., FCCM 2017; ZipML, ICML 2017)",
             engine="estimate: W/2 = 256 lanes at 200 MHz, the clock of the papers' engine "
                    "on this platform; no zipsgd build of a Stratix V (its tools are not on "
                    "PyPI), and no zipsgd build has 256 lanes"),
    Platform("u280-hbm-channel", 14.4e9, 300e6, 512,
             "Alveo U280: one HBM2 pseudo-channel, 256 bits at 450 MHz = 14.4 GB/s; engine "
             "at 300 MHz (estimate)",
             engine=_U280_ENGINE),
    Platform("u280-hbm", 460e9, 300e6, 512,
             "Alveo U280: all 32 HBM2 pseudo-channels, 460 GB/s aggregate (data sheet); one "
             "engine at 300 MHz (estimate) cannot use it: engine bound",
             engine=_U280_ENGINE),
)}


def _tree_registers(lanes: int) -> int:
    """Pipeline registers in the adder tree over ``lanes`` products (one every two levels and
    one after the last level; ``zipsgd/hw/core.py``)."""
    levels = lanes.bit_length() - 1
    return -(-levels // 2)


@dataclass(frozen=True)
class EngineModel:
    """Cycle model of the engine (``docs/HARDWARE.md``), fitted to ``cycles_busy`` of the
    simulated engine at W = 64, checked at W = 128 and 512 (widths differ in the adder-tree
    depth).

    Members
    -------
    bus_width : int
        ``W``.
    lanes : int or None
        ``L`` (``EngineParams.lanes``; ``None``: ``W / 2``).  A sample takes
        ``StreamLayout.slices_per_sample`` issue cycles, which is its beat count when every
        beat fits in one slice.
    base_depth : int
        Cycles from a sample's last beat being accepted until its gradient is written, less the
        sample's own beats and the adder-tree registers (39 measured at W = 64: the update
        pipeline, the pipelined multipliers and rounders of ``docs/HARDWARE.md``).
    epoch_fixed : int
        Epoch start and end cycles that depend on nothing (26 measured: the flush beats' way
        through the forward path is part of it).
    update_window : int
        ``zipsgd.spec.engine.UPDATE_WINDOW``: a fused beat waits until no fused beat with its
        offset was issued in this many cycles.
    """

    bus_width: int = 64
    lanes: int | None = None
    base_depth: int = 39
    epoch_fixed: int = 26
    update_window: int = UPDATE_WINDOW

    def __post_init__(self):
        if self.bus_width not in BUS_WIDTHS:
            raise ConfigError(f"bus width must be one of {BUS_WIDTHS}, found {self.bus_width!r}")
        # EngineParams owns the rule for lanes (and its default).
        params = EngineParams(bus_width=self.bus_width, lanes=self.lanes)
        object.__setattr__(self, "lanes", params.lanes)

    @property
    def depth(self) -> int:
        """Pipeline depth: 42 cycles at W = 64 and 128, 43 at W = 256 and 512 (all but 256
        measured); 40 with 4 lanes."""
        return self.base_depth + _tree_registers(self.lanes)

    def cycles(self, n_samples: int, beats_per_sample: int, batch: int,
               update_mode: str, slices_per_sample: int | None = None) -> dict:
        """Engine cycles of one epoch, input never idle: ``beats``, ``issues`` (slices),
        ``update_stall``, ``epoch_overhead`` and ``cycles`` = issues + stall + overhead (the
        engine's ``cycles_busy``).

        The single place the formula lives.  Below, ``beats_per_sample`` stands for the
        sample's issue cycles, ``slices_per_sample`` (its beats when that is not given, i.e.
        when every beat is one slice):

        * ``EXACT``: every batch boundary stalls until the previous batch's last gradient is
          written, ``depth + beats_per_sample`` cycles after its last beat;
        * ``DELAYED``: the fused update of batch ``u`` needs batch ``u-2``'s gradient, so boundary
          ``u`` stalls for what batch ``u-1`` (``B * beats_per_sample`` beats plus its own stall)
          does not cover: ``s_u = max(depth + beats_per_sample - B * beats_per_sample - s_{u-1},
          w)``, ``s_1 = 0``; ``w = max(0, update_window + 1 - B * beats_per_sample)`` keeps
          fused beats with the same offset ``update_window`` cycles apart (batches of one or a
          few short samples);
        * end of epoch: ``epoch_fixed`` + drain (``depth + beats_per_sample``) + one flush pass
          (``EXACT``, or ``DELAYED`` with a single batch) or two (``DELAYED``, the second one at
          least ``update_window + 1`` cycles).
        """
        if update_mode not in UPDATE_MODES:
            raise ConfigError(f"update mode must be exact or delayed, found {update_mode!r}")
        if n_samples < 1 or batch < 1 or beats_per_sample < 1:
            raise ConfigError(f"samples, batch and beats per sample must be >= 1, found "
                              f"{n_samples}, {batch}, {beats_per_sample}")
        bps = beats_per_sample if slices_per_sample is None else slices_per_sample
        if bps < beats_per_sample:
            raise ConfigError(f"a sample has at least one slice per beat, found "
                              f"{bps} slices for {beats_per_sample} beats")
        beats = n_samples * beats_per_sample
        issues = n_samples * bps
        boundaries = -(-n_samples // batch) - 1
        drain = self.depth + bps
        if update_mode == "exact":
            stall = boundaries * drain
            overhead = self.epoch_fixed + drain + bps
        else:
            stall = _delayed_stalls(boundaries, drain - batch * bps,
                                    max(0, self.update_window + 1 - batch * bps))
            overhead = self.epoch_fixed + drain + bps
            if boundaries:                       # a second pending update: the second pass
                overhead += max(bps, self.update_window + 1)
        return {"beats": beats, "issues": issues, "update_stall": stall,
                "epoch_overhead": overhead, "cycles": issues + stall + overhead}


@dataclass(frozen=True)
class EngineModel2:
    """Cycle model of engine v2's core (``docs/HARDWARE.md``, "The update loop"), input never
    idle; the constants are fitted to the Verilator simulation
    (``python benchmarks/bench_throughput2.py``).

    The stream is a sequence of windows (``P`` fields, ``L * f / W`` beats each); the gearbox
    assembles one while the window stages hold ``buffered`` more (fitted; the flags' stage
    holds the gearbox at 5 windows, ``docs/HARDWARE.md``, "The window stages"), so window ``w``
    is there ``L f / W`` cycles after window ``w - 1``, and not before window ``w - buffered``
    was used.
    A window is used at once unless a batch starting in it needs a model version that is not
    ready (EXACT: the previous batch's; DELAYED: the one before); then the rest of it waits.
    Batch ``k``'s update begins at ``b_k = max(e_k + grad_latency, b_(k-1) + A + occupancy)``
    (``e_k``: its last pass; one update at a time; ``A``: the update's issue cycles) and its
    version is ready at ``b_k + A + update_latency``.  The epoch begins with the refresh
    pass (ready ``A + refresh`` cycles after the start) and ends ``epoch_end`` cycles after the
    last version."""

    bus_width: int = 64
    grad_latency: int = 32
    occupancy: int = 31
    update_latency: int = 36
    refresh: int = 33
    epoch_end: int = 1
    buffered: int = 4

    def plan(self, n_features: int, layout: StreamLayout) -> tuple[int, int, float]:
        """``(A, P, window beats, F)``: the update's issue cycles (``F / U``, ``U = W / 32``
        update units, when the lane classes allow it, else ``F``, with ``F =
        sample_fields(n)`` a sample's slots; times ``sub_words``:
        ``zipsgd/hw/v2/updater.py``), the fields of a window and its beats (``L`` positions
        of ``layout.field_width`` bits; raw32's 32-bit fields take four 8-bit positions)."""
        config = RunConfig2(encoding=layout.encoding, bits=layout.bits,
                            n_features=n_features)
        params = EngineParams2(self.bus_width, max(n_features, 1), 1)
        plan = lane_plan(config, params, 1)
        units = params.update_units
        raw = layout.encoding is Encoding.RAW32
        wide = (1 << plan.g_log2) >= units and not raw
        beats = params.lanes * (plan.field_width if raw else layout.field_width) \
            / self.bus_width
        issues = plan.fields // (units if wide else 1) * sub_words(plan.wrap)
        return issues, plan.positions, beats, plan.fields

    def cycles(self, n_samples: int, n_features: int, layout: StreamLayout, batch: int,
               update_mode: str, rate: float = 1.0, fifo_beats: int = 0) -> dict:
        """``beats``, ``cycles`` (start to done), the update's issue cycles ``A``, the loop
        ``grad_latency + A + update_latency`` and ``steady`` (beats per cycle of a long epoch
        of full batches).

        ``rate``: the beats per cycle the memory delivers (1: the input is never idle).  The
        memory may run ``fifo_beats`` ahead of the gearbox (the memory reader's FIFO), so
        window ``w``'s last beat arrives ``window beats / rate`` cycles after window
        ``w - 1``'s, and not before window ``w - fifo_beats / window beats`` was taken."""
        if update_mode not in UPDATE_MODES:
            raise ConfigError(f"update mode must be exact or delayed, found {update_mode!r}")
        if n_samples < 1 or batch < 1:
            raise ConfigError(f"samples and batch must be >= 1, found {n_samples}, {batch}")
        if not (math.isfinite(rate) and 0 < rate <= 1) or fifo_beats < 0:
            raise ConfigError(f"the memory's rate must be in (0, 1] beats per cycle and its "
                              f"lead >= 0 beats, found {rate!r} and {fifo_beats!r}")
        a, positions, window_beats, fields = self.plan(n_features, layout)
        per_batch = batch * fields
        total = n_samples * fields
        batches = -(-n_samples // batch)
        refreshed = a + self.refresh
        ready = []                             # ready[v]: version v ready
        state = {"begin": None}

        def update(end):                       # batch len(ready) - 1's update, last pass at end
            begin = end + self.grad_latency
            if state["begin"] is not None:
                begin = max(begin, state["begin"] + a + self.occupancy)
            state["begin"] = begin
            ready.append(begin + a + self.update_latency)

        def version_for(j):
            need = j if update_mode == "exact" else max(j - 1, 0)
            return refreshed if need == 0 else ready[need]

        ready.append(refreshed)
        used = 0.0
        uses: list[float] = []                 # when each window was used
        taken: list[float] = []                # when the gearbox had each window
        arrived = delivered = 0.0
        lead = int(fifo_beats // window_beats) if rate < 1 else 0
        next_batch = 1
        for w in range(-(-total // positions)):
            delivered += window_beats / rate
            if lead and w >= lead:
                delivered = max(delivered, taken[w - lead])
            arrived = max(arrived + window_beats, delivered)
            if w >= self.buffered:
                arrived = max(arrived, uses[w - self.buffered] + 1)
            taken.append(arrived)
            t = max(arrived, used + 1, refreshed) if w else max(arrived, refreshed)
            first, last = w * positions, min((w + 1) * positions, total)
            while next_batch < batches and next_batch * per_batch < last:
                if next_batch * per_batch > first or w == 0:
                    update(t)                  # batch next_batch - 1 ends in this window
                else:
                    update(used)               # it ended with the previous window
                t = max(t, version_for(next_batch))
                next_batch += 1
            used = t
            uses.append(t)
        update(used)
        window_cycles = max(1.0, window_beats)
        t_batch = per_batch / positions * window_cycles
        loop = self.grad_latency + a + self.update_latency
        period = t_batch + loop if update_mode == "exact" else max(t_batch, (t_batch + loop) / 2)
        period = max(period, a + self.occupancy)
        return {"beats": layout.stream_beats(n_features, n_samples),
                "cycles": ready[-1] + self.epoch_end, "update_cycles": a, "loop": loop,
                "steady": min(1.0, t_batch * window_beats / window_cycles / period)}


def _delayed_stalls(boundaries: int, slack: int, window: int) -> int:
    """Sum of ``s_u = max(slack - s_{u-1}, window)`` for ``u = 2..boundaries``, ``s_1 = 0``
    (the sequence has period at most 2 from ``u = 3`` on)."""
    if boundaries < 2:
        return 0
    terms = [0]                                  # terms[k] = s_{k+1}
    while len(terms) < min(boundaries, 4):
        terms.append(max(slack - terms[-1], window))
    if len(terms) == boundaries:
        return sum(terms)
    # From s_3 on the pair (s_3, s_4) repeats: s_{u+1} = max(min(s_{u-1}, slack - window), window).
    head = terms[0] + terms[1]
    rest = boundaries - 2
    pair = terms[2] + terms[3]
    return head + (rest // 2) * pair + (terms[2] if rest % 2 else 0)


def predicted_cycles(n_samples: int, n_features: int, layout: StreamLayout, batch: int,
                     update_mode: str, engine: EngineModel | None = None) -> int:
    """The model's ``cycles_busy`` for one epoch (input never idle)."""
    engine = engine or EngineModel(layout.bus_width)
    return engine.cycles(n_samples, layout.beats_per_sample(n_features), batch, update_mode,
                         layout.slices_per_sample(n_features, engine.lanes))["cycles"]


@functools.lru_cache(maxsize=512)
def _cost(platform: Platform, engine: EngineModel2, n_samples: int, n_features: int,
          layout: StreamLayout, batch: int, update_mode: str) -> dict:
    if layout.bus_width != engine.bus_width:
        raise ConfigError(f"the layout's bus width {layout.bus_width} differs from the "
                          f"engine's {engine.bus_width}")
    rate = platform.memory_rate
    alone = engine.cycles(n_samples, n_features, layout, batch, update_mode)
    fed = alone if rate == 1 else engine.cycles(n_samples, n_features, layout, batch,
                                                update_mode, rate, MEMORY_LEAD_BEATS)
    n_bytes = layout.stream_bytes(n_features, n_samples)
    memory_s = n_bytes / platform.bandwidth
    engine_s = alone["cycles"] / platform.clock_hz
    return {"layout": str(layout), "bits_per_value": layout.bits_per_value(n_features, n_samples),
            "bytes": n_bytes, "beats": fed["beats"], "memory_rate": rate,
            "engine_cycles": fed["cycles"], "engine_alone_cycles": alone["cycles"],
            "update_cycles": fed["update_cycles"], "memory_s": memory_s, "engine_s": engine_s,
            "time_s": fed["cycles"] / platform.clock_hz,
            "bound": "memory" if memory_s > engine_s else "engine"}


def epoch_cost(platform: Platform, engine: EngineModel2 | None, n_samples: int,
               n_features: int, layout: StreamLayout, batch: int,
               update_mode: str = "delayed") -> dict:
    """Model one epoch of ``n_samples`` x ``n_features`` in ``layout`` on ``platform``
    (engine v2; ``engine`` none given: ``EngineModel2(platform.bus_width)``).

    Returns a dict: ``bytes`` moved, ``beats``, ``memory_rate`` (beats per clock),
    ``engine_cycles`` (the epoch with the input at that rate), ``engine_alone_cycles`` (input
    never idle), ``memory_s`` (bytes over bandwidth), ``engine_s`` (the engine alone),
    ``time_s`` (``engine_cycles`` over the clock), ``bound`` (``memory`` or ``engine``: the
    larger of ``memory_s`` and ``engine_s``) and ``speedup_vs_raw32`` (raw32's ``time_s``
    over this one's, same platform, engine, batch and update mode).

    Raises
    ------
    ConfigError
        If the layout's bus width is not the engine's, or a count is out of range.
    """
    engine = engine or EngineModel2(platform.bus_width)
    cost = dict(_cost(platform, engine, n_samples, n_features, layout, batch, update_mode))
    raw = _cost(platform, engine, n_samples, n_features,
                StreamLayout.make(Encoding.RAW32, 32, layout.bus_width), batch, update_mode)
    cost["speedup_vs_raw32"] = raw["time_s"] / cost["time_s"]
    return cost


def encodings_for(bits: tuple[int, ...], bus_width: int) -> list[StreamLayout]:
    """raw32, then ``single`` and ``double`` at each of ``bits``."""
    layouts = [StreamLayout.make(Encoding.RAW32, 32, bus_width)]
    for encoding in (Encoding.SINGLE, Encoding.DOUBLE):
        layouts += [StreamLayout(encoding, b, bus_width) for b in bits]
    return layouts


def perf_table(platform: Platform, n_samples: int, n_features: int, bits=(1, 2, 4, 6, 8),
               batch: int = 16, update_mode: str = "delayed", epochs: int = 1) -> list[dict]:
    """One :func:`epoch_cost` row per encoding, with ``epochs`` x the epoch time as
    ``total_s``."""
    rows = []
    for layout in encodings_for(tuple(bits), platform.bus_width):
        row = epoch_cost(platform, None, n_samples, n_features, layout, batch, update_mode)
        row["encoding"] = layout.encoding.name.lower()
        row["bits"] = layout.bits
        row["total_s"] = row["time_s"] * epochs
        rows.append(row)
    return rows


#: "Reached the target": a loss within this fraction above float SGD's final loss.
TARGET_GAP = 0.01


def measure_cycles_busy(encoding: str, bits: int, n_features: int, n_samples: int, batch: int,
                        update_mode: str, bus_width: int = 64, seed: int = 1,
                        lanes: int | None = None) -> dict:
    """Run one epoch of synthetic data on the simulated engine (Verilator; ``bus_width``,
    the small simulation build, ``lanes``, input never idle) and return its counters:
    ``beats``, ``cycles_busy``, ``update_stall``, ``starved`` and ``bit_exact`` (against the
    golden model). Takes 10 to 60 s; this is how the fixture of ``tests/host/test_perf.py``
    is made."""
    rng = np.random.default_rng(seed)
    features = rng.uniform(-1, 1, (n_samples, n_features))
    labels = np.clip(features @ (rng.uniform(-1, 1, n_features) / n_features), -1, 1)
    data = ScaledData("synthetic", labels, features, lambda m: (m, 0.0))
    settings = TrainSettings(backend="verilator", encoding=encoding, bits=bits, epochs=1,
                             batch_size=batch, update_mode=update_mode, bus_width=bus_width,
                             max_features=SIM_MAX_FEATURES, max_batch=SIM_MAX_BATCH,
                             step_size=0.1, lanes=lanes)
    record = train_in_memory(data, settings)["epochs"][0]
    return {"beats": record["beats"], "cycles_busy": record["cycles"],
            "update_stall": record["cycles_update_stall"], "starved": record["cycles_starved"],
            "bit_exact": record["bit_exact"]}
