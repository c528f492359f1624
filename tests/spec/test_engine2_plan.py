"""``zipsgd.spec.engine2``: a lane's partial sub-words (``sub_words``)."""

from __future__ import annotations

import math

import pytest

from zipsgd.spec.engine2 import PARTIAL_REUSE, EngineParams2, RunConfig2, lane_plan, sub_words


@pytest.mark.parametrize("wrap", range(1, 40))
def test_a_word_comes_back_no_sooner_than_the_lane_allows(wrap):
    p = sub_words(wrap)
    assert math.gcd(p, wrap) == 1 and wrap * p >= PARTIAL_REUSE
    assert p == 1 or wrap < PARTIAL_REUSE
    # Window t's term of a lane whose address steps by a step coprime to wrap goes to
    # a + 4 (t mod p): the same word again only wrap * p windows later, and addresses fit
    # below 4 p when p > 1.
    for step in (s for s in range(1, wrap + 1) if math.gcd(s, wrap) == 1):
        words = [(t * step) % wrap + 4 * (t % p) for t in range(4 * wrap * p)]
        for t, word in enumerate(words):
            assert word not in words[t + 1:t + PARTIAL_REUSE]
        assert p == 1 or max(words) < 4 * p


def test_the_plans_with_sub_words():
    # W = 64 (32 lanes): wrap <= 3 exactly when n + 1 divides 64 or 96.
    params = EngineParams2(64, 4096, 512)
    spread = [n for n in range(1, 400)
              if sub_words(lane_plan(RunConfig2(n_features=n), params, 1).wrap) > 1]
    assert spread == [1, 2, 3, 5, 7, 11, 15, 23, 31, 47, 63, 95]
