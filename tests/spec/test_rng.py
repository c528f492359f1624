"""The engine's generators (:mod:`zipsgd.spec.rng`) against a step-at-a-time reference.

``generate`` jumps ahead (GF(2) matrix powers) and ``XorshiftBank`` hands out outputs from
blocks generated ahead; both must give exactly the sequence of stepping each generator once
per request, across segment and block boundaries and for any request sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

from zipsgd.spec.rng import (
    GOLDEN,
    ZERO_STATE_REPLACEMENT,
    XorshiftBank,
    generate,
    seed_states,
    xorshift32_step,
)

M32 = (1 << 32) - 1


def ref_step(x: int) -> int:
    x ^= (x << 13) & M32
    x ^= x >> 17
    return x ^ ((x << 5) & M32)


def ref_sequence(states: np.ndarray, count: int) -> np.ndarray:
    """Step every generator ``count`` times, one at a time (uint64 lanes, masked)."""
    x = np.array(states, dtype=np.uint64)  # a copy: the caller's states are not touched
    out = np.empty((count, x.size), dtype=np.uint64)
    for k in range(count):
        x ^= (x << np.uint64(13)) & np.uint64(M32)
        x ^= x >> np.uint64(17)
        x ^= (x << np.uint64(5)) & np.uint64(M32)
        out[k] = x
    return out


def test_scalar_step_known_values():
    assert ref_step(1) == 270369
    state = 1
    for _ in range(1000):
        state = ref_step(state)
    values = np.random.default_rng(0).integers(1, 1 << 32, 500, dtype=np.uint64)
    assert [xorshift32_step(int(v)) for v in values] == [ref_step(int(v)) for v in values]
    np.testing.assert_array_equal(xorshift32_step(values.astype(np.uint32)),
                                  [ref_step(int(v)) for v in values])
    assert xorshift32_step(state) == ref_step(state)


@pytest.mark.parametrize("count", [1, 255, 256, 257, 1000, 5000])
def test_generate_equals_stepping(count):
    states = np.random.default_rng(count).integers(1, 1 << 32, 7, dtype=np.uint64)
    out, final = generate(states.astype(np.uint32), count)
    want = ref_sequence(states, count)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(final, want[-1])
    out_small, _ = generate(states.astype(np.uint32), count, segment=3)
    np.testing.assert_array_equal(out_small, want)


def test_bank_across_block_boundaries():
    """Requests of odd sizes that cross the 4096-step lane block and the 16384-step residual
    block (the bank's defaults) several times."""
    lanes, seed = 32, 0xDEADBEEF
    bank = XorshiftBank(lanes, seed)
    start = seed_states(seed, lanes + 1).astype(np.uint64)
    lane_sizes = [1, 4095, 2, 4097, 300, 4096, 7]
    want_lanes = ref_sequence(start[:lanes], sum(lane_sizes))
    res_sizes = [5, 16379, 1, 16400]
    want_res, state = [], int(start[lanes])
    for _ in range(sum(res_sizes)):
        state = ref_step(state)
        want_res.append(state)
    got_lanes, got_res = [], []
    for k in range(max(len(lane_sizes), len(res_sizes))):  # interleave the two streams
        if k < len(lane_sizes):
            got_lanes.append(bank.step_lanes(lane_sizes[k]))
        if k < len(res_sizes):
            got_res.append(bank.step_residual(res_sizes[k]))
    np.testing.assert_array_equal(np.concatenate(got_lanes), want_lanes)
    np.testing.assert_array_equal(np.concatenate(got_res), want_res)


def test_seed_states():
    for seed in (0, 1, 0xFFFF_FFFF, GOLDEN, (GOLDEN * 5) & M32):
        want = [((seed ^ (GOLDEN * (i + 1))) & M32) or ZERO_STATE_REPLACEMENT for i in range(257)]
        assert seed_states(seed, 257).tolist() == want
    assert seed_states((GOLDEN * 5) & M32, 8)[4] == ZERO_STATE_REPLACEMENT
