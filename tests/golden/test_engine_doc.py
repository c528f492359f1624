"""``docs/ENGINE.md`` against the constants and formulas of :mod:`zipsgd.spec`.

Every number the page states is parsed out of the text (not copied into this file) and compared
with the code, so neither can change without the other.  If a sentence is reworded, the pattern
that reads it fails loudly: update the pattern, and check the number while you are there.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from zipsgd.spec import engine as E
from zipsgd.spec import fixed, rng, stream
from zipsgd.spec.engine import EngineParams, RunConfig, UpdateMode, clog2
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import RoundingMode

DOC = (Path(__file__).resolve().parents[2] / "docs" / "ENGINE.md").read_text(encoding="utf-8")
# The v1 engine's sections (the "Engine v2" section has its own test), on one line with single
# spaces: patterns survive re-wrapping.
TEXT = " ".join(DOC.split("## Engine v2", 1)[0].split())


def find(pattern: str) -> tuple[str, ...]:
    """The groups of the single place ``pattern`` matches the page (whitespace-normalised)."""
    matches = list(re.finditer(pattern, TEXT))
    assert matches, f"docs/ENGINE.md no longer says {pattern!r}"
    groups = {m.groups() for m in matches}
    assert len(groups) == 1, f"docs/ENGINE.md says {pattern!r} in different ways: {groups}"
    return matches[0].groups()


def num(text: str) -> int:
    return int(text, 0)


def test_bus_widths_and_build_defaults():
    (widths,) = find(r"bus width `W` in \{([\d, ]+)\}")
    assert tuple(int(w) for w in widths.split(",")) == stream.BUS_WIDTHS
    (n_max,) = find(r"`N_max` \(largest feature count, default (\d+)\)")
    (b_max,) = find(r"`B_max` \(largest mini-batch, default (\d+)\)")
    assert EngineParams().max_features == int(n_max)
    assert EngineParams().max_batch == int(b_max)
    (divisor,) = find(r"`lanes = W / (\d+)`")
    for width in stream.BUS_WIDTHS:
        assert EngineParams(bus_width=width).lanes == width // int(divisor)


def test_run_time_register_ranges():
    wl_lo, wl_hi, fl_lo, fl_hi = map(int, find(
        r"model format `<WL_m, FL_m>` \((\d+)\.\.(\d+), (\d+)\.\.(\d+)\)"))
    g_lo, g_hi, g_sub, g_add = map(int, find(
        r"gradient format `<WL_g, FL_g>` \((\d+)\.\.(\d+), `max\(0, FL_m-(\d+)\) <= FL_g "
        r"<= FL_m\+(\d+)`\)"))
    assert wl_hi == E.MODEL_STORAGE_WIDTH

    def ok(**kw):
        RunConfig(**kw)

    def bad(**kw):
        with pytest.raises(ConfigError):
            RunConfig(**kw)

    fmt = {"grad_frac": 8}
    ok(model_width=wl_lo, model_frac=8, **fmt)
    ok(model_width=wl_hi, model_frac=8, **fmt)
    bad(model_width=wl_lo - 1, model_frac=8, **fmt)
    bad(model_width=wl_hi + 1, model_frac=8, **fmt)
    ok(model_frac=fl_lo, grad_frac=fl_lo)
    ok(model_frac=fl_hi, grad_frac=fl_hi)
    bad(model_frac=fl_lo - 1, grad_frac=fl_lo)
    bad(model_frac=fl_hi + 1, grad_frac=fl_hi)
    ok(grad_width=g_lo)
    ok(grad_width=g_hi)
    bad(grad_width=g_lo - 1)
    bad(grad_width=g_hi + 1)
    for fl_m in (1, 5, 8, 9, 20, 31):
        lo, hi = max(0, fl_m - g_sub), fl_m + g_add
        ok(model_frac=fl_m, grad_frac=lo)
        ok(model_frac=fl_m, grad_frac=hi)
        bad(model_frac=fl_m, grad_frac=lo - 1)
        bad(model_frac=fl_m, grad_frac=hi + 1)

    step_bits, step_frac = map(int, find(
        r"step `alpha` \(unsigned (\d+) bits, `STEP_FRAC` = (\d+) fraction bits"))
    assert (step_bits, step_frac) == (E.STEP_WIDTH, E.STEP_FRAC)
    decay_bits, decay_frac = map(int, find(
        r"L2 decay `eta` \(unsigned (\d+) bits, `DECAY_FRAC` = (\d+)\)"))
    assert (decay_bits, decay_frac) == (E.DECAY_WIDTH, E.DECAY_FRAC)
    ok(step=(1 << step_bits) - 1, decay=(1 << decay_bits) - 1)
    bad(step=1 << step_bits)
    bad(decay=1 << decay_bits)


def test_rounding_modes_table():
    for name, member in (("truncate", RoundingMode.TRUNCATE),
                         ("round-half-even", RoundingMode.HALF_EVEN),
                         ("stochastic", RoundingMode.STOCHASTIC)):
        (code,) = find(rf"\| {name} \| (\d+) \|")
        assert int(code) == member
    r1, r2, r3, r4, r5 = map(int, find(
        r"`o = u >> \((\d+) - s\)` if `s <= (\d+)`, else `u << \(s - (\d+)\)`; `u` is (\d+) "
        r"random bits.*?for `s <= (\d+)`"))
    assert r1 == r2 == r3 == r4 == r5 == fixed.RAND_BITS
    (bias,) = find(r"the bias is at most `2\^-(\d+)` of an ulp")
    assert int(bias) == fixed.RAND_BITS


def test_decode_stage():
    (shift,) = find(r"\| double \| `i` \(b bits\), `s1`, `s2` \| `\(2\(i\+s1\) - 2\^b\) << "
                    r"\((\d+)-b\)`")
    wl, fl = map(int, find(r"`<(\d+), (\d+)>`, in \[-256, 256\]"))
    assert int(shift) == fl == stream.QUANT_FEATURE_FRAC
    assert wl == fl + 2  # sign bit and the value 256 (= 1.0)
    (lo, hi) = find(r"`clamp\(word, -2\^(\d+), 2\^(\d+)\)` \| `<32, (?:\d+)>`")
    (raw_frac,) = find(r"`clamp\(word, -2\^\d+, 2\^\d+\)` \| `<32, (\d+)>`")
    assert int(lo) == int(hi) == int(raw_frac) == stream.RAW_FEATURE_FRAC
    assert 1 << int(hi) == stream.RAW_ONE
    (label_wl, label_fl) = find(r"The label word is `Y = F1 \+ F2` \(`<(\d+), (\d+)>`\)")
    assert int(label_fl) == stream.QUANT_LABEL_FRAC and int(label_wl) == int(label_fl) + 2


def test_dot_product_and_widths():
    (raw_shift,) = find(r"`p_j = \(F1_j \* x_j\) >> (\d+)` \(floor\) for raw32")
    assert int(raw_shift) == E.RAW_PRODUCT_SHIFT == stream.RAW_FEATURE_FRAC - \
        stream.QUANT_FEATURE_FRAC
    (extra,) = find(r"`FL_d = FL_m \+ (\d+)` fraction bits")
    for fl_m in (1, 10, 24, 31):
        assert RunConfig(model_frac=fl_m, grad_frac=fl_m).dot_frac == fl_m + int(extra)
    (p_log2,) = find(r"`\|p_j\| <= 2\^(\d+)`")
    assert int(p_log2) == E.PRODUCT_MAGNITUDE_LOG2
    base, plus, dot_w, n_max = map(int, find(
        r"`DOT_W = (\d+) \+ ceil\(log2\(N_max\)\) \+ (\d+)` bits \((\d+) for `N_max` = (\d+)\)"))
    assert base == E.PRODUCT_MAGNITUDE_LOG2
    assert EngineParams(max_features=n_max).dot_width == dot_w
    for n in (1, 2, 3, 1000, 32768, 32769, 1 << 21):
        assert EngineParams(max_features=n).dot_width == base + clog2(n) + plus
        assert EngineParams(max_features=n).residual_width == base + clog2(n) + plus + 1
    find(r"exact in `DOT_W \+ 1` bits")
    base, plus, gacc_w, b_max = map(int, find(
        r"`GACC_W = (\d+) \+ ceil\(log2\(B_max\)\) \+ (\d+)` bits \((\d+) for `B_max` = (\d+)\)"))
    assert base == E.PRODUCT_MAGNITUDE_LOG2
    assert EngineParams(max_batch=b_max).grad_acc_width == gacc_w
    for b in (1, 2, 3, 1000, 1024, 1025, 65536):
        assert EngineParams(max_batch=b).grad_acc_width == base + clog2(b) + plus
    (raw_shift2, c_log2) = find(r"`\(e \* F2_j\) >> (\d+)` \(floor\) for raw32: `FL_g \+ 8` "
                                r"fraction bits, `\|c_j\| <= 2\^(\d+)`")
    assert int(raw_shift2) == E.RAW_PRODUCT_SHIFT
    assert int(c_log2) == E.PRODUCT_MAGNITUDE_LOG2


def test_loss_formats():
    wl, fl = map(int, find(r"`r` is narrowed to `<(\d+), (\d+)>`"))
    assert (wl, fl) == (E.LOSS_RESIDUAL_WIDTH, E.LOSS_RESIDUAL_FRAC)
    sq_fl, shift, acc_fl = map(int, find(
        r"squared \(`FL` (\d+)\), shifted right by (\d+) \(floor, `FL` (\d+)\)"))
    assert sq_fl == 2 * E.LOSS_RESIDUAL_FRAC
    assert shift == E.LOSS_SQUARE_SHIFT
    assert acc_fl == sq_fl - shift == E.LOSS_ACC_FRAC
    acc_wl, acc_fl2, sat = map(int, find(
        r"unsigned (\d+)-bit loss accumulator `<\d+, (\d+)>`, which saturates at `2\^(\d+) - 1`"))
    (acc_wl2,) = find(r"loss accumulator `<(\d+), \d+>`")
    assert acc_wl == int(acc_wl2) == sat == E.LOSS_ACC_WIDTH
    assert acc_fl2 == E.LOSS_ACC_FRAC
    (report_frac,) = find(r"The host reports `loss_acc / 2\^(\d+) / \(2 K\)`")
    assert int(report_frac) == E.LOSS_ACC_FRAC


def test_scaled_residual_and_update_shifts():
    (step_frac,) = find(r"`e = sat_WL_g\(round_m\(alpha \* r, (\d+) \+ FL_d - FL_g\)\)`")
    assert int(step_frac) == E.STEP_FRAC
    (product_bits,) = find(r"The product is at most (\d+) bits wide")
    # |r| <= N_max 2**39 + 2**39 (aligned label) for the default N_max; alpha < 2**STEP_WIDTH
    params = EngineParams()
    r_max = params.max_features * (1 << E.PRODUCT_MAGNITUDE_LOG2) + (1 << 39)
    assert (((1 << E.STEP_WIDTH) - 1) * r_max).bit_length() + 1 == int(product_bits)
    (add,) = find(r"`x1 = sat_WL_m\(x_j - round_m\(G_j, FL_g \+ (\d+) - FL_m\)\)`")
    (decay_shift,) = find(r"`x2 = x1 - round_m\(eta \* x1, (\d+)\)`")
    assert int(decay_shift) == E.DECAY_FRAC
    for fl_m, fl_g in ((24, 24), (4, 2), (20, 16), (31, 23), (1, 33)):
        cfg = RunConfig(model_frac=fl_m, grad_frac=fl_g)
        assert cfg.residual_shift == int(step_frac) + cfg.dot_frac - fl_g
        assert cfg.update_shift == fl_g + int(add) - fl_m
    find(r"\(low (\d+) random bits\)")
    find(r"\(high (\d+) random bits\)")
    assert int(find(r"\(low (\d+) random bits\)")[0]) == fixed.RAND_BITS
    assert int(find(r"\(high (\d+) random bits\)")[0]) == 32 - fixed.RAND_BITS


def test_update_modes():
    (exact,) = find(r"`EXACT` \(update mode (\d+)\)")
    (delayed,) = find(r"`DELAYED` \(update mode (\d+)\)")
    assert (int(exact), int(delayed)) == (UpdateMode.EXACT, UpdateMode.DELAYED)


def test_random_generators():
    a, b, c = map(int, find(r"xorshift32 generators \(shifts (\d+), (\d+), (\d+);"))
    golden, replacement = map(num, find(
        r"`S \^ \((0x[0-9A-Fa-f]+) \* \(i \+ 1\)\) mod 2\^32`, or `(0x[0-9A-Fa-f]+)` if that is "
        r"zero"))
    assert golden == rng.GOLDEN
    assert replacement == rng.ZERO_STATE_REPLACEMENT
    mask = (1 << 32) - 1

    def step(x):
        x ^= (x << a) & mask
        x ^= x >> b
        return x ^ ((x << c) & mask)

    gen = np.random.default_rng(13)
    states = gen.integers(1, 1 << 32, 200, dtype=np.uint64).astype(np.uint32)
    expected = [step(int(s)) for s in states]
    assert [rng.xorshift32_step(int(s)) for s in states] == expected
    assert rng.xorshift32_step(states).tolist() == expected
    for seed in (0, 1, 0xDEADBEEF, golden, (golden * 3) & mask):
        want = [((seed ^ (golden * (i + 1))) & mask) or replacement for i in range(65)]
        assert rng.seed_states(seed, 65).tolist() == want
    (lanes_plus,) = find(r"`lanes \+ (\d+)` xorshift32 generators")
    assert int(lanes_plus) == 1
    find(r"Generator `lanes` is the residual generator \(one step per sample\)")


def test_overflow_table():
    rows = {
        "feature word (quantized)": (r"`\|F\| <= 2\^(\d+)`", r"(\d+) \(signed\)"),
        "feature word (raw32, clamped)": (r"`\|F\| <= 2\^(\d+)`", r"(\d+)"),
        "model word": (r"`\|x\| <= 2\^(\d+)`", r"`WL_m <= (\d+)`"),
        "product": (r"`\|p\| <= 2\^(\d+)`", r"(\d+)"),
        "gradient term": (r"`\|c\| <= 2\^(\d+)`", r"(\d+)"),
        "decay product": (r"`2\^(\d+) 2\^(\d+)`", r"(\d+)"),
    }
    got = {name: find(rf"\| {re.escape(name)} \| {bound} \| {width} \|")
           for name, (bound, width) in rows.items()}
    assert got["feature word (quantized)"] == (str(stream.QUANT_FEATURE_FRAC),
                                               str(stream.QUANT_FEATURE_FRAC + 2))
    assert got["feature word (raw32, clamped)"] == (str(stream.RAW_FEATURE_FRAC), "32")
    assert got["model word"] == (str(E.MODEL_STORAGE_WIDTH - 1), str(E.MODEL_STORAGE_WIDTH))
    for name in ("product", "gradient term"):
        assert got[name] == (str(E.PRODUCT_MAGNITUDE_LOG2), str(E.PRODUCT_MAGNITUDE_LOG2 + 2))
    eta_log2, x_log2, width = map(int, got["decay product"])
    assert eta_log2 == E.DECAY_WIDTH and x_log2 == E.MODEL_STORAGE_WIDTH - 1
    assert width == eta_log2 + x_log2 + 1
    # the residual and accumulator rows name the widths by symbol
    find(r"\| dot product \| `N_max 2\^39` \| `DOT_W` \|")
    find(r"\| gradient accumulator \| `B_max 2\^39` \| `GACC_W` \|")
    (e_log2, e_width) = find(r"\| scaled residual \| `\|e\| <= 2\^(\d+)` \| `WL_g <= (\d+)` \|")
    assert int(e_width) == int(e_log2) + 1 == 32


def test_doc_names_its_modules_and_this_test():
    for path in ("zipsgd/spec/engine.py", "zipsgd/spec/fixed.py", "zipsgd/spec/stream.py",
                 "zipsgd/spec/rng.py", "zipsgd/golden/engine.py",
                 "tests/golden/test_engine_doc.py"):
        assert f"`{path}`" in DOC
        assert (Path(__file__).resolve().parents[2] / path).is_file(), path
    for name, module, attr in (("zipsgd.spec.fixed.shift_right", fixed, "shift_right"),
                               ("zipsgd.spec.stream.decode_fields", stream, "decode_fields"),
                               ("zipsgd.spec.rng", rng, None)):
        assert f"`{name}`" in DOC
        assert attr is None or callable(getattr(module, attr)), name
