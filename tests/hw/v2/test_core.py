"""``hw.v2.core.Core2`` against the golden model of engine v2: epochs bit-exact (status and
model) over encodings, feature counts (every lane plan: narrow, wide, bypass), batch sizes,
update modes and stalls in the stream."""

from __future__ import annotations

import numpy as np
import pytest
from sim_support import simulate

from zipsgd.golden.engine2 import GoldenEngine2
from zipsgd.hw.v2.core import MODEL_READ_LATENCY, Core2
from zipsgd.sim.core2_sim import random_fields, random_levels, run_config
from zipsgd.spec.engine2 import EngineParams2, core_settings, lane_plan
from zipsgd.spec.stream import Encoding, pack_stream, uniform_levels

PARAMS = EngineParams2(64, 1024, 512)


def _config(encoding, bits, n, batch, mode, alpha=0.02):
    return run_config({"encoding": encoding, "bits": bits, "n": n, "batch": batch,
                       "mode": mode, "alpha": alpha})


async def write_levels(ctx, dut, table, per_feature):
    """The level tables through the host port: every feature's row, or row 0 shared."""
    ctx.set(dut.level_we, 1)
    for j, row in enumerate(table if per_feature else table[:1]):
        for q, word in enumerate(row[:-1].tolist()):
            ctx.set(dut.level_feature, j)
            ctx.set(dut.level_index, q)
            ctx.set(dut.level_data, word)
            await ctx.tick()
    ctx.set(dut.level_we, 0)


def run_epochs(cfg, epochs, samples, seed=3, gaps=0.2, model=None, per_feature=False,
               early=False):
    """Runs ``epochs`` epochs on the core and on the golden model; returns both results.
    ``early``: once an epoch's last beat is taken, the next beat is offered at once (as a
    source streaming epoch after epoch would), and must wait for the next start."""
    rng = np.random.default_rng([seed, cfg.n_features, cfg.batch_size])
    plan = lane_plan(cfg, PARAMS, samples, per_feature)
    raw = cfg.encoding is Encoding.RAW32
    table = None if raw else (random_levels(rng, cfg.bits, cfg.n_features) if per_feature
                              else uniform_levels(cfg.bits, cfg.n_features).astype(np.int64))
    streams = []
    for _ in range(epochs):
        fields, layout = random_fields(rng, cfg, samples, PARAMS.bus_width)
        streams.append((fields, pack_stream(fields, layout).view(np.uint64)))
    if model is None:
        model = rng.integers(-(1 << 22), 1 << 22, cfg.n_features)
    golden = GoldenEngine2(PARAMS, cfg, table if per_feature else None)
    golden.write_model(model)
    want = []
    for fields, _ in streams:
        status = golden.run_epoch_fields(fields)
        want.append((status.samples, status.updates, status.loss_acc, status.loss_saturated,
                     status.residual_saturations, status.model_saturations,
                     status.forward_saturations, golden.model.tolist()))
    dut = Core2(PARAMS)
    got = []
    stall = np.random.default_rng(seed)

    async def bench(ctx):
        for name, value in core_settings(cfg, plan, per_feature).items():
            ctx.set(getattr(dut, name), value)
        if table is not None:
            await write_levels(ctx, dut, table, per_feature)
        ctx.set(dut.seed, cfg.seed)
        ctx.set(dut.seed_load, 1)
        await ctx.tick()
        ctx.set(dut.seed_load, 0)
        for m, word in enumerate(model.tolist()):
            ctx.set(dut.model_we, 1)
            ctx.set(dut.model_addr, m)
            ctx.set(dut.model_wdata, word)
            await ctx.tick()
        ctx.set(dut.model_we, 0)
        await ctx.tick()
        for _, beats in streams:
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            i, cycles = 0, 0
            while not ctx.get(dut.done):
                assert not ctx.get(dut.framing_error)
                if i < beats.size and stall.random() >= gaps:
                    ctx.set(dut.beats.valid, 1)
                    ctx.set(dut.beats.payload.data, int(beats[i]))
                    ctx.set(dut.beats.payload.last, int(i == beats.size - 1))
                elif i >= beats.size and early:
                    ctx.set(dut.beats.valid, 1)
                    ctx.set(dut.beats.payload.data, 0x5A5A5A5A5A5A5A5A)
                    ctx.set(dut.beats.payload.last, 0)
                else:
                    ctx.set(dut.beats.valid, 0)
                took = ctx.get(dut.beats.valid) and ctx.get(dut.beats.ready)
                assert not (took and i >= beats.size), "a beat after the stream's last taken"
                await ctx.tick()
                i += int(bool(took))
                cycles += 1
                assert cycles < 20 * beats.size + 4000, "the epoch did not end"
            ctx.set(dut.beats.valid, 0)
            words = []
            for m in range(cfg.n_features):
                ctx.set(dut.model_addr, m)
                await ctx.tick().repeat(MODEL_READ_LATENCY)
                words.append(ctx.get(dut.model_rdata))
            got.append((ctx.get(dut.samples), ctx.get(dut.updates), ctx.get(dut.loss_acc),
                        ctx.get(dut.loss_saturated), ctx.get(dut.residual_saturations),
                        ctx.get(dut.model_saturations), ctx.get(dut.forward_saturations),
                        words))

    simulate(dut, bench)
    return got, want


CASES = [
    # (encoding, bits, n, batch, mode): n + 1 odd (one feature per update cycle), even (two),
    # dividing the lanes (bypass), small batches (windows of several batches), raw words.
    ("double", 4, 10, 4, "delayed"),
    ("double", 2, 15, 16, "delayed"),
    ("single", 3, 13, 3, "exact"),
    ("double", 1, 40, 1, "delayed"),
    ("double", 6, 7, 2, "exact"),
    ("single", 8, 70, 5, "delayed"),
    ("raw32", 32, 5, 4, "delayed"),
    ("raw32", 32, 7, 2, "exact"),
    # Samples shorter than a group: passes of one sample end each.
    ("double", 3, 1, 4, "delayed"),
    ("single", 2, 3, 5, "exact"),
    ("double", 5, 6, 3, "delayed"),
]


@pytest.mark.parametrize("encoding, bits, n, batch, mode", CASES,
                         ids=[f"{e}{b}-n{n}-B{bb}-{mo}" for e, b, n, bb, mo in CASES])
def test_core_matches_golden(encoding, bits, n, batch, mode):
    cfg = _config(encoding, bits, n, batch, mode)
    got, want = run_epochs(cfg, epochs=2, samples=23)
    assert got == want


@pytest.mark.parametrize("encoding, bits, n", [("double", 2, 15), ("raw32", 32, 7)])
def test_the_next_stream_waits_for_its_start(encoding, bits, n):
    # A source that streams epoch after epoch offers the next beat while this epoch drains.
    cfg = _config(encoding, bits, n, 4, "delayed")
    got, want = run_epochs(cfg, epochs=2, samples=19, early=True)
    assert got == want


@pytest.mark.parametrize("bits, n", [(1, 9), (4, 30), (3, 64)])
def test_core_per_feature_levels(bits, n):
    cfg = _config("double", bits, n, 4, "delayed")
    got, want = run_epochs(cfg, epochs=1, samples=17, per_feature=True)
    assert got == want
