"""The engine's on-chip random generators (for stochastic rounding).

Each generator is Marsaglia's xorshift32 with shifts (13, 17, 5)::

    x ^= x << 13;  x ^= x >> 17;  x ^= x << 5      (all mod 2**32)

which visits every non-zero 32-bit state once per period of ``2**32 - 1``.  A generator *steps*
and then its new state is its *output*.

The engine holds ``lanes + 1`` generators: one per update lane (lane ``i`` rounds the model words
that lane updates) and one residual generator (index ``lanes``) that rounds the scaled residual
once per sample.  Writing the seed register ``S`` loads generator ``i`` with
``(S ^ (GOLDEN * (i + 1))) mod 2**32``, or :data:`ZERO_STATE_REPLACEMENT` if that is zero.

Which bits are used: the low :data:`~zipsgd.spec.fixed.RAND_BITS` bits of an output round the
gradient step (and the scaled residual), the high 16 bits round the L2 decay.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["GOLDEN", "ZERO_STATE_REPLACEMENT", "xorshift32_step", "seed_states", "generate",
           "XorshiftBank"]

GOLDEN = 0x9E3779B9
ZERO_STATE_REPLACEMENT = 0x6D2B79F5
_MASK = 0xFFFF_FFFF


def xorshift32_step(state):
    """One step of xorshift32 on an int or a uint32 array (returns the new state)."""
    if isinstance(state, np.ndarray):
        state = state ^ (state << np.uint32(13))
        state = state ^ (state >> np.uint32(17))
        return state ^ (state << np.uint32(5))
    state ^= (state << 13) & _MASK
    state ^= state >> 17
    state ^= (state << 5) & _MASK
    return state


def seed_states(seed: int, count: int) -> np.ndarray:
    """Initial states of generators ``0..count-1`` for seed register value ``seed``."""
    index = np.arange(1, count + 1, dtype=np.uint64)
    states = ((np.uint64(seed & _MASK) ^ ((np.uint64(GOLDEN) * index) & np.uint64(_MASK)))
              & np.uint64(_MASK)).astype(np.uint32)
    states[states == 0] = ZERO_STATE_REPLACEMENT
    return states


@functools.cache
def _jump_columns(steps: int) -> np.ndarray:
    """Images of the 32 basis states after ``steps`` steps: the columns of the GF(2) matrix
    of ``steps`` xorshift32 steps (the generator is linear over GF(2))."""
    basis = (np.uint32(1) << np.arange(32, dtype=np.uint32)).astype(np.uint32)
    for _ in range(steps):
        basis = xorshift32_step(basis)
    return basis


@functools.cache
def _jump_tables(steps: int) -> np.ndarray:
    """``tables[k, v]``: the image of byte ``v`` placed at byte ``k`` of the state."""
    columns = _jump_columns(steps)
    values = np.arange(256, dtype=np.uint32)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for bit in range(8):
            tables[k] ^= np.where((values >> np.uint32(bit)) & np.uint32(1), columns[8 * k + bit],
                                  np.uint32(0))
    return tables


def _apply_jump(steps: int, states: np.ndarray) -> np.ndarray:
    """Jump every state ``steps`` steps ahead (linear map, applied byte by byte)."""
    tables = _jump_tables(steps)
    result = tables[0][states & np.uint32(0xFF)]
    for k in range(1, 4):
        result ^= tables[k][(states >> np.uint32(8 * k)) & np.uint32(0xFF)]
    return result


def generate(states: np.ndarray, count: int, segment: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Step generators ``states`` (uint32, shape ``(g,)``) ``count`` times.

    Returns ``(outputs, new_states)`` with ``outputs`` of shape ``(count, g)``.  Long runs are
    cut into segments whose start states are found by jumping ahead (a GF(2) matrix power), so
    all segments step in parallel; the result equals stepping one at a time.
    """
    states = np.asarray(states, dtype=np.uint32)
    out = np.empty((count, states.size), dtype=np.uint32)
    if count == 0:
        return out, states.copy()
    segments = -(-count // segment)
    starts = np.empty((segments, states.size), dtype=np.uint32)
    starts[0] = states
    for k in range(1, segments):
        starts[k] = _apply_jump(segment, starts[k - 1])
    current = starts
    padded = np.empty((segments * segment, states.size), dtype=np.uint32)
    view = padded.reshape(segments, segment, states.size)
    for k in range(segment):
        current = xorshift32_step(current)
        view[:, k] = current
    out[:] = padded[:count]
    return out, out[-1].copy()


class XorshiftBank:
    """The engine's ``lanes + 1`` generators, read as two sequential streams.

    Outputs are generated ahead in blocks and handed out in order, so the sequence each
    generator produces is exactly that of stepping it once per request.
    """

    def __init__(self, lanes: int, seed: int, block: int = 4096):
        self.lanes = lanes
        self.block = block
        states = seed_states(seed, lanes + 1)
        self._lane_states = states[:lanes].copy()
        self._residual_state = states[lanes:].copy()
        self._lane_buffer = np.empty((0, lanes), dtype=np.uint32)
        self._residual_buffer = np.empty((0, 1), dtype=np.uint32)

    def step_lanes(self, count: int) -> np.ndarray:
        """Step the lane generators ``count`` times; return outputs, shape ``(count, lanes)``."""
        if count > self._lane_buffer.shape[0]:
            more, self._lane_states = generate(self._lane_states, max(count, self.block))
            self._lane_buffer = np.concatenate([self._lane_buffer, more])
        out, self._lane_buffer = self._lane_buffer[:count], self._lane_buffer[count:]
        return out

    def step_residual(self, count: int) -> np.ndarray:
        """Step the residual generator ``count`` times; return its outputs (uint32 array)."""
        if count > self._residual_buffer.shape[0]:
            more, self._residual_state = generate(self._residual_state,
                                                  max(count, self.block * 4))
            self._residual_buffer = np.concatenate([self._residual_buffer, more])
        out, self._residual_buffer = self._residual_buffer[:count], self._residual_buffer[count:]
        return out[:, 0]
