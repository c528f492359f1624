"""The golden model of engine v2 (numerics v2): its steps, its bounds, and its convergence
against v1 (issue goal: final losses within 0.1 % of v1's)."""

from __future__ import annotations

import numpy as np
import pytest

from zipsgd.golden.engine import GoldenEngine
from zipsgd.golden.engine2 import GoldenEngine2, decode2, forward_operand
from zipsgd.host.quantize import epoch_rng, quantize_fields
from zipsgd.spec.engine import STEP_FRAC, EngineParams, RunConfig, UpdateMode
from zipsgd.spec.engine2 import (
    PRODUCT_LOG2,
    RESIDUAL_MAX,
    STEP_WIDTH,
    TABLE_BITS,
    EngineParams2,
    RunConfig2,
    lane_plan,
    step_register,
)
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.stream import Encoding, StreamLayout, pack_beats_v1, uniform_levels

PARAMS = EngineParams2(64, 1024, 512)


def _data(n=100, rows=4000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (rows, n))
    w = rng.normal(size=n) * 0.05
    return x, np.clip(x @ w, -1, 1)


def _config2(encoding, bits, n, batch, alpha, **kw):
    cfg = RunConfig2(encoding=encoding, bits=bits, n_features=n, batch_size=batch, **kw)
    step, shift = step_register(alpha, cfg)
    return cfg.with_(step=step, residual_shift=shift)


@pytest.mark.parametrize("encoding,bits", [("double", 1), ("double", 2), ("double", 4),
                                           ("double", 6), ("single", 4), ("raw32", 32)])
def test_final_loss_matches_v1(encoding, bits):
    """Same data, seeds, step and batches: v2's final loss (float, on the original data) is
    within 0.1 % of v1's."""
    x, y = _data()
    n, batch, alpha = x.shape[1], 16, 0.05 / 16
    layout = StreamLayout.make(encoding, bits, 64)
    v2 = GoldenEngine2(PARAMS, _config2(encoding, bits, n, batch, alpha))
    v1 = GoldenEngine(EngineParams(64, 1024, 512, 32), RunConfig(
        encoding=encoding, bits=bits, n_features=n, batch_size=batch,
        step=int(round(alpha * 2**STEP_FRAC)), update_mode=UpdateMode.DELAYED))
    for epoch in range(8):
        fields = quantize_fields(y, x, layout, epoch_rng(1, epoch))
        v2.run_epoch_fields(fields)
        v1.run_epoch(pack_beats_v1(fields, layout))

    def loss(model):
        return 0.5 * np.mean((x @ (model / 2.0**24) - y) ** 2)

    l1, l2 = loss(v1.model.astype(float)), loss(v2.model.astype(float))
    assert abs(l2 / l1 - 1) < 1e-3, (l1, l2)


def test_step_register_keeps_17_bits():
    cfg = RunConfig2(n_features=4)
    for alpha in (1e-6, 3.3e-4, 0.01, 0.5, 3.0):
        step, shift = step_register(alpha, cfg)
        assert 1 << (STEP_WIDTH - 1) <= step < 1 << STEP_WIDTH
        value = step * 2.0 ** -(shift - cfg.dot_frac + cfg.grad_frac)
        assert abs(value / alpha - 1) < 2.0 ** -(STEP_WIDTH - 1)
    with pytest.raises(ConfigError):
        step_register(float("nan"), cfg)


def test_forward_operand_rounds_half_even_and_saturates():
    words = np.array([0, 1, 2, 3, 6, -2, (1 << 30) - 1, -(1 << 30)], dtype=np.int64)
    out, clipped = forward_operand(words, 2)
    assert out.tolist() == [0, 0, 0, 1, 2, 0, (1 << 17) - 1, -(1 << 17)]
    assert clipped.tolist() == [False] * 6 + [True, True]


def test_largest_values_stay_in_bounds():
    """Every field at a level of +-1 and every forward operand at its extreme: the products
    and gradient terms reach 2**25 and the model still checks its bounds."""
    n = 64
    cfg = _config2("double", 1, n, 512, 200.0, forward_frac=14, rounding=RoundingMode.TRUNCATE)
    engine = GoldenEngine2(PARAMS, cfg)
    engine.write_model(np.full(n, -(1 << 31), dtype=np.int64))
    assert engine.forward.min() == -(1 << 17)
    fields = np.full((512, n + 1), 0b11, dtype=np.uint64)     # i = 1, s1 = 1: level +1
    fields[:, 0] = 0                                          # label -1
    status = engine.run_epoch_fields(fields)
    assert status.residual_saturations == 512                 # e clamped to -RESIDUAL_MAX
    assert int(engine.model.min()) >= -(1 << 31) and int(engine.model.max()) < 1 << 31
    assert PRODUCT_LOG2 == 25 and RESIDUAL_MAX == (1 << 17) - 1


def test_explicit_uniform_levels_decode_like_none():
    rng = np.random.default_rng(3)
    for bits in range(1, 9):
        layout = StreamLayout(Encoding.DOUBLE, bits, 64)
        fields = rng.integers(0, 1 << (bits + 2), (20, 6), dtype=np.uint64)
        plain = decode2(fields, layout)
        table = decode2(fields, layout, uniform_levels(bits, 5))
        for a, b in zip(plain, table, strict=True):
            assert np.array_equal(a, b)


def test_per_feature_tables_only_up_to_table_bits():
    """A lane's per-feature table holds 16 levels a feature, so the engine (its lane plan) and
    its model refuse a table that differs by feature above b = 4; one shared table runs at
    any b."""
    assert TABLE_BITS == 4
    n = 6
    for bits in (4, 5, 8):
        cfg = RunConfig2(encoding=Encoding.DOUBLE, bits=bits, n_features=n, batch_size=4)
        shared = uniform_levels(bits, n)
        per_feature = shared.copy()
        per_feature[2, 1] += 1                      # one feature's second level differs
        GoldenEngine2(PARAMS, cfg, shared)
        lane_plan(cfg, PARAMS, 40, False)
        if bits <= TABLE_BITS:
            GoldenEngine2(PARAMS, cfg, per_feature)
            lane_plan(cfg, PARAMS, 40, True)
            continue
        message = rf"hold 2\*\*4 levels \(b <= 4\), found b = {bits}"
        with pytest.raises(ConfigError, match=message):
            GoldenEngine2(PARAMS, cfg, per_feature)
        with pytest.raises(ConfigError, match=message):
            lane_plan(cfg, PARAMS, 40, True)


def test_exact_and_delayed_differ_only_in_staleness():
    x, y = _data(n=8, rows=64)
    layout = StreamLayout(Encoding.DOUBLE, 4, 64)
    fields = quantize_fields(y, x, layout, epoch_rng(2, 0))
    out = {}
    for mode in UpdateMode:
        engine = GoldenEngine2(PARAMS, _config2("double", 4, 8, 1 if mode else 64, 0.01,
                                               update_mode=mode))
        engine.run_epoch_fields(fields)
        out[mode] = engine.model.copy()
    # One batch of all samples in EXACT mode and batches of one in DELAYED mode are different
    # algorithms; each is deterministic.
    assert not np.array_equal(out[UpdateMode.EXACT], out[UpdateMode.DELAYED])


def test_residual_draws_step_generator_s_mod_r_in_sample_order():
    from zipsgd.spec.rng import seed_states, xorshift32_step

    engine = GoldenEngine2(PARAMS, RunConfig2(n_features=3, seed=99))
    draws = np.concatenate([engine._residual_draws(c) for c in (1, 5, 16, 3, 4100, 7)])
    units, count = PARAMS.update_units, PARAMS.residual_generators
    states = [int(x) for x in seed_states(99, units + count)[units:]]
    expected = []
    for s in range(draws.size):
        states[s % count] = xorshift32_step(states[s % count])
        expected.append(states[s % count] & 0xFFFF)
    assert draws.tolist() == expected
