"""The ``Updater`` (``zipsgd/hw/v2/updater.py``) alone in Amaranth's simulator, against the golden
model's update (``GoldenEngine2._update``): its lanes are a Python model that answers each
partial read ``PARTIAL_LATENCY`` cycles after its address, each feature's gradient split over
the lanes that hold it; the model words are read back through its host port, and the forward
operands it writes into every lane (the label's and the padding features' as 0) are compared
with the golden model's.  Wide (``g >= U``: ``U`` features a cycle) and narrow (one) passes,
every rounding, decay and threshold, and a refresh (forward operands of the model as it is, no
update, no draws)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.sim import Simulator

from zipsgd.golden.engine2 import GoldenEngine2, forward_operand
from zipsgd.hw.rng import XorshiftBank
from zipsgd.hw.v2.lane import PARTIAL_LATENCY
from zipsgd.hw.v2.updater import MODEL_READ_LATENCY, Updater
from zipsgd.spec.engine import EpochStatus
from zipsgd.spec.engine2 import PARTIAL_WIDTH, EngineParams2, RunConfig2, core_settings, lane_plan
from zipsgd.spec.fixed import RoundingMode

PARAMS = EngineParams2(64, 300, 64)
SEED = 0x5EED
_SETTINGS = ("n_features", "g_log2", "wrap", "update_shift", "forward_shift", "model_width",
             "rounding", "decay", "threshold", "raw")


class _Bench(wiring.Component):
    """The updater with its generators as the core seeds and primes them."""

    def __init__(self, params):
        self.params = params
        super().__init__({"seed_load": In(1), "prime": In(1)})
        self.upd = Updater(params)
        self.gens = XorshiftBank(count=params.update_units)

    def elaborate(self, platform):
        m = Module()
        m.submodules.upd, m.submodules.gens = self.upd, self.gens
        units = self.params.update_units
        m.d.comb += [self.gens.seed.eq(SEED), self.gens.load.eq(self.seed_load),
                     self.gens.step.eq(self.upd.gen_step | self.prime.replicate(units))]
        m.d.comb += [self.upd.gen_value[u].eq(self.gens.value[u]) for u in range(units)]
        return m


def _run(config: RunConfig2, model, gradient, *, refresh=False, seed=1):
    """Train the pass on the bench; returns (model words read back, forward operand of each
    (lane, address) written, cycles busy)."""
    params, lanes, units = PARAMS, PARAMS.lanes, PARAMS.update_units
    plan = lane_plan(config, params, 4)
    settings = core_settings(config, plan)
    g, fields = 1 << plan.g_log2, plan.fields
    rng = np.random.default_rng(seed)
    # Each feature's gradient split over the L/g lanes of its class, at address j >> g_log2.
    partials = np.zeros((lanes, plan.wrap), dtype=np.int64)
    for j in range(fields):
        holders = [k for k in range(lanes) if k % g == j % g]
        total = int(gradient[j]) if j < len(gradient) else 0
        parts = rng.integers(-(1 << 20), 1 << 20, len(holders) - 1)
        for k, part in zip(holders, [*parts, total - int(parts.sum())], strict=True):
            partials[k, j >> plan.g_log2] = part
    assert np.abs(partials).max() < 1 << (PARTIAL_WIDTH - 1)
    bench = _Bench(params)
    upd = bench.upd
    written: dict[tuple[int, int], int] = {}
    out: dict = {}

    async def tb(ctx):
        for name in _SETTINGS:
            ctx.set(getattr(upd, name), settings[name])
        ctx.set(bench.seed_load, 1)
        await ctx.tick()
        ctx.set(bench.seed_load, 0)
        ctx.set(bench.prime, 1)
        await ctx.tick()
        ctx.set(bench.prime, 0)
        for m, word in enumerate(model):
            ctx.set(upd.host_we, 1)
            ctx.set(upd.host_addr, m)
            ctx.set(upd.host_wdata, int(word))
            await ctx.tick()
        ctx.set(upd.host_we, 0)
        await ctx.tick().repeat(4)
        ctx.set(upd.refresh, refresh)
        ctx.set(upd.bank, 1)
        ctx.set(upd.buffer, 1)
        ctx.set(upd.start, 1)
        await ctx.tick()
        ctx.set(upd.start, 0)
        reads = [(0, 0)] * PARTIAL_LATENCY
        cycles = 0
        while True:
            # The lanes: the word read PARTIAL_LATENCY cycles after its address.
            addr, enable = reads[-PARTIAL_LATENCY]
            for k in range(lanes):
                ctx.set(upd.partials[k],
                        int(partials[k, addr]) if enable >> k & 1 and addr < plan.wrap else 0)
            reads.append((ctx.get(upd.upd_addr), ctx.get(upd.upd_enable)))
            assert ctx.get(upd.upd_bank) == 1
            we, xf_addr = ctx.get(upd.xf_we), ctx.get(upd.xf_addr)
            for k in range(lanes):
                if we >> k & 1:
                    written[k, xf_addr] = ctx.get(upd.xf_data[k % units])
            await ctx.tick()
            cycles += 1
            if not ctx.get(upd.busy) and cycles > 2:
                break
            assert cycles < 5000
        words = []
        for m in range(config.n_features):
            ctx.set(upd.host_addr, m)
            await ctx.tick().repeat(MODEL_READ_LATENCY)
            words.append(ctx.get(upd.host_rdata))
        out.update(words=words, cycles=cycles, plan=plan)

    sim = Simulator(bench)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return out["words"], written, out["plan"]


def _config(n, rounding, decay=0, threshold=0):
    return RunConfig2(n_features=n, bits=4, batch_size=4, rounding=rounding, decay=decay,
                      threshold=threshold, seed=SEED)


@pytest.mark.parametrize("n, rounding, decay, threshold", [
    (127, RoundingMode.STOCHASTIC, 0, 0),            # F = 128: g = 32, wide, 4 addresses
    (33, RoundingMode.HALF_EVEN, 1 << 12, 0),        # F = 34: g = 2 = U, wide
    (100, RoundingMode.STOCHASTIC, 1 << 10, 1 << 6), # F = 101: g = 1, narrow
    (44, RoundingMode.TRUNCATE, 0, 1 << 8),          # F = 45: narrow
])
def test_an_update_matches_the_golden_model(n, rounding, decay, threshold):
    config = _config(n, rounding, decay, threshold)
    rng = np.random.default_rng(n)
    model = rng.integers(-(1 << 26), 1 << 26, n)
    gradient = rng.integers(-(1 << 30), 1 << 30, n + 1)
    golden = GoldenEngine2(PARAMS, config)
    golden.write_model(model)
    golden.load_seed(SEED)
    golden._update(gradient[1:].astype(np.int64), EpochStatus())
    words, written, plan = _run(config, model, gradient)
    assert words == golden.model.tolist()
    _check_forward(written, plan, golden.forward)


def test_a_refresh_writes_the_models_forward_operands_and_changes_nothing():
    config = _config(100, RoundingMode.STOCHASTIC, 1 << 10, 1 << 6)
    model = np.random.default_rng(5).integers(-(1 << 26), 1 << 26, 100)
    words, written, plan = _run(config, model, np.full(101, 1 << 20), refresh=True)
    assert words == model.tolist()
    _check_forward(written, plan, forward_operand(model, config.forward_shift)[0])


def _check_forward(written, plan, forward):
    """Every lane's forward operand of every feature it holds, in buffer 1: feature ``j``'s
    (model word ``j - 1``), the label's and the padding features' 0."""
    g, aw = 1 << plan.g_log2, (PARAMS.lane_capacity - 1).bit_length()
    for k in range(PARAMS.lanes):
        for j in range(k % g, plan.fields, g):
            want = int(forward[j - 1]) if 1 <= j <= len(forward) else 0
            assert written.get((k, (1 << aw) | (j >> plan.g_log2))) == want, (k, j)
