"""``docs/ENGINE.md``, section "Engine v2", against :mod:`zipsgd.spec.engine2`: every number the
section states is parsed out of its text and compared with the code."""

from __future__ import annotations

import re
from pathlib import Path

from zipsgd.spec import engine2 as E2
from zipsgd.spec.engine2 import EngineParams2, RunConfig2

DOC = (Path(__file__).resolve().parents[2] / "docs" / "ENGINE.md").read_text(encoding="utf-8")
SECTION = " ".join(DOC.split("## Engine v2", 1)[1].split())


def find(pattern: str) -> tuple[str, ...]:
    found = {m.groups() for m in re.finditer(pattern, SECTION)}
    assert len(found) == 1, f"the Engine v2 section says {pattern!r} {len(found)} ways"
    return found.pop()


def test_widths_and_formats():
    assert int(find(r"B_max` \(at most (\d+)\)")[0]) == E2.MAX_BATCH2
    assert int(find(r"`U = W/(\d+)`")[0]) == 64 // E2.update_units(64)
    assert int(find(r"`R = W/(\d+)`")[0]) == 64 // EngineParams2(64).residual_generators
    assert int(find(r"v2 raw fraction bits (\d+)")[0]) == E2.RAW_FEATURE_FRAC2
    assert int(find(r"`F = \(w \+ 2\^(\d+)\) >> \d+`")[0]) == E2.RAW_ROUND_SHIFT - 1
    assert int(find(r"`F = \(w \+ 2\^\d+\) >> (\d+)`")[0]) == E2.RAW_ROUND_SHIFT
    assert int(find(r"`x_f = sat_(\d+)\(")[0]) == E2.FORWARD_WIDTH
    assert int(find(r"register `forward_frac`, default (\d+)")[0]) == RunConfig2().forward_frac
    assert int(find(r"`\|p_j\| <= 2\^(\d+)`")[0]) == E2.PRODUCT_LOG2
    width, extra, at_n, n_max = map(int, find(
        r"exact in `(\d+) \+ ceil\(log2\(N_max\)\) \+ (\d+)` bits \((\d+) at `N_max` = (\d+)\)"))
    assert width == E2.PRODUCT_LOG2 and EngineParams2(max_features=n_max).dot_width == at_n
    assert EngineParams2(max_features=n_max).dot_width == width + 15 + extra
    loss_w, loss_f = map(int, find(r"rounded \(half even\) to `<(\d+), (\d+)>`"))
    assert (loss_w, loss_f) == (E2.LOSS_WIDTH, E2.LOSS_FRAC)
    assert int(find(r"squared \((\d+) fraction bits\)")[0]) == 2 * E2.LOSS_FRAC
    assert int(find(r"`loss_acc / 2\^(\d+) / \(2K\)`")[0]) == 2 * E2.LOSS_FRAC
    assert int(find(r"step mantissa `a` \(unsigned, (\d+) bits\)")[0]) == E2.STEP_WIDTH
    lo, hi = find(r"clamped to `\[-\(2\^(\d+) - 1\), 2\^(\d+) - 1\]`")
    assert int(lo) == int(hi) and (1 << int(hi)) - 1 == E2.RESIDUAL_MAX
    (partial, b) = map(int, find(r"`25 \+ ceil\(log2\(B_max\)\) \+ 1` bits \((\d+) at "
                                 r"`B_max` = (\d+)\)"))
    assert b == E2.MAX_BATCH2 and partial == E2.PARTIAL_WIDTH
    assert EngineParams2(max_batch=b).gradient_width == partial
    fe_sub, fe_hi = map(int, find(r"`FL_m - (\d+) <= FL_e <= (\d+)`"))
    cfg = RunConfig2(model_frac=24)
    assert (fe_sub, fe_hi) == (8, 40) and cfg.grad_frac >= 24 - fe_sub
