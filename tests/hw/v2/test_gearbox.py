"""``hw.v2.gearbox.FieldGearbox`` against the back-to-back stream, bit for bit.

Fields of every width are packed back to back into beats (the reference packer is plain integer
arithmetic), fed with random gaps while the window consumer applies random backpressure; window
``t`` must hold fields ``t*L .. t*L + L - 1``.
"""

from __future__ import annotations

import random

import pytest
from sim_support import simulate

from zipsgd.hw.v2.gearbox import FIELD_WIDTHS, FieldGearbox


def pack_back_to_back(fields: list[int], width: int, bus_width: int) -> list[int]:
    """Beats (ints) of fields packed LSB first, the last beat zero-padded."""
    stream = 0
    for i, f in enumerate(fields):
        stream |= f << (i * width)
    beats = -(-len(fields) * width // bus_width)
    mask = (1 << bus_width) - 1
    return [(stream >> (t * bus_width)) & mask for t in range(beats)]


def run(bus_width: int, streams: list[tuple[int, list[int]]], seed: int,
        hold: bool = False) -> list[list[list[int]]]:
    """Run each (width, fields) stream through one gearbox; return each stream's windows.
    ``hold``: the consumer always takes windows and throttles the gearbox with ``hold``."""
    dut = FieldGearbox(bus_width)
    rng = random.Random(seed)
    out: list[list[list[int]]] = []

    async def bench(ctx):
        for width, fields in streams:
            ctx.set(dut.width, width)
            ctx.set(dut.restart, 1)
            await ctx.tick()
            ctx.set(dut.restart, 0)
            await ctx.tick()                       # the registered width selects settle
            beats = pack_back_to_back(fields, width, bus_width)
            windows: list[list[int]] = []
            sent, done = 0, False
            while not done:
                valid = sent < len(beats) and rng.random() < 0.8
                if valid:
                    ctx.set(dut.beats.payload.data, beats[sent])
                    ctx.set(dut.beats.payload.last, int(sent == len(beats) - 1))
                ctx.set(dut.beats.valid, int(valid))
                ready = hold or rng.random() < 0.7
                ctx.set(dut.windows.ready, int(ready))
                held = hold and rng.random() < 0.3
                ctx.set(dut.hold, int(held))
                took = valid and ctx.get(dut.beats.ready)
                assert not (held and took), "a beat taken while held"
                if ready and ctx.get(dut.windows.valid):
                    payload = ctx.get(dut.windows.payload)
                    windows.append([int(s) for s in payload.slots])
                    done = bool(payload.last)
                await ctx.tick()
                sent += int(bool(took))
            ctx.set(dut.beats.valid, 0)
            out.append(windows)

    simulate(dut, bench)
    return out


@pytest.mark.parametrize("bus_width, hold", [(64, False), (128, False), (64, True)])
def test_windows_hold_consecutive_fields(bus_width, hold):
    lanes = bus_width // 2
    rng = random.Random(bus_width)
    streams = []
    for width in FIELD_WIDTHS:
        for count in (1, lanes - 1, lanes, 3 * lanes + 5, 7 * lanes + lanes // 2 + 1):
            streams.append((width, [rng.randrange(1 << width) for _ in range(count)]))
    results = run(bus_width, streams, seed=bus_width, hold=hold)
    for (width, fields), windows in zip(streams, results, strict=True):
        needed = -(-len(fields) // lanes)
        # A final partial window may be followed by one of padding only.
        assert needed <= len(windows) <= needed + 1, (width, len(fields), len(windows))
        for t in range(needed):
            expected = fields[t * lanes:(t + 1) * lanes]
            assert windows[t][:len(expected)] == expected, (width, len(fields), t)


def test_all_ones_and_alternating_fields():
    streams = [(w, [(1 << w) - 1] * 100) for w in FIELD_WIDTHS]
    streams += [(w, [0x155 & ((1 << w) - 1), 0x2AA & ((1 << w) - 1)] * 50) for w in FIELD_WIDTHS]
    for (width, fields), windows in zip(streams, run(64, streams, seed=1), strict=True):
        flat = [s for window in windows for s in window][:len(fields)]
        assert flat == fields, width


def test_raw_word_rounds_and_clamps():
    from amaranth.hdl import Module, Signal, signed

    from zipsgd.hw.v2.gearbox import raw_word

    m = Module()
    chunks = [Signal(10, name=f"c{i}") for i in range(4)]
    out = Signal(signed(18))
    m.d.comb += out.eq(raw_word(chunks))
    words = [0, 1, 0x1FFF, 0x2000, -0x2000 & 0xFFFFFFFF, -0x2001 & 0xFFFFFFFF, 1 << 30,
             (1 << 30) + 1, 0x7FFFFFFF, 0x80000000, (-(1 << 30)) & 0xFFFFFFFF,
             (-(1 << 30) - 1) & 0xFFFFFFFF, 0x3FFFE000, 0x3FFFDFFF]
    # Around both limits, where rounding meets the clamp.
    words += [(x + d) & 0xFFFFFFFF for x in (1 << 30, -(1 << 30), 1 << 29, -(1 << 29))
              for d in (-0x4001, -0x2001, -0x2000, -0x1FFF, -1, 1, 0x1FFF, 0x2000, 0x2001)]
    words += [random.Random(3).randrange(1 << 32) for _ in range(200)]

    async def bench(ctx):
        for w in words:
            for i, c in enumerate(chunks):
                ctx.set(c, (w >> (8 * i)) & 0xFF | (0x300 if i % 2 else 0))   # slot bits 8, 9
            signed_w = w - (1 << 32) if w >> 31 else w
            clamped = max(-(1 << 30), min(1 << 30, signed_w))
            assert ctx.get(out) == (clamped + (1 << 13)) >> 14, hex(w)
            await ctx.delay(1e-9)

    simulate(m, bench, clock=False)
