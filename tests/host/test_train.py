"""Training runs (:mod:`zipsgd.host.train`): backends against each other and the optimum, the
register words the host writes, ``.zsgd`` replay, reports and mapping models back.

Data: ``synthetic:8:300`` (300 samples x 8 features, fixed seed) unless said otherwise, so every
golden run takes a fraction of a second.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from zipsgd.golden.engine import GoldenEngine
from zipsgd.host.datasets import open_source
from zipsgd.host.pack import pack_source
from zipsgd.host.train import (
    TrainSettings,
    engine_run_config,
    load_scaled,
    lssvm_labels,
    train_in_memory,
    train_stream_file,
)
from zipsgd.host.zsgd_file import StreamFile, StreamHeader, write_stream
from zipsgd.spec.engine import DECAY_FRAC, STEP_FRAC, UpdateMode
from zipsgd.spec.errors import ConfigError, DatasetError
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.stream import Encoding, restream_v1, uniform_levels

SPEC = "synthetic:8:300"
#: alpha and batch of the backend comparisons (float SGD gets within 2x of the optimum in 6
#: epochs with them, so the loss still moves and a backend that misbehaves shows).
BASE = TrainSettings(epochs=6, batch_size=16, step_size=0.5, seed=0)


@pytest.fixture(scope="module")
def data():
    return load_scaled(SPEC)


@pytest.fixture(scope="module")
def float_report(data):
    return train_in_memory(data, replace(BASE, backend="float"))


def losses(report) -> np.ndarray:
    return np.array([record["loss"] for record in report["epochs"]])


# ---------------------------------------------------------------------------------------------
# Backends


def test_float_backend_converges_to_the_optimum(data):
    report = train_in_memory(data, TrainSettings(backend="float", epochs=30, batch_size=1,
                                                 step_size=0.05))
    optimum = report["optimum"]["loss"]
    assert report["optimum"]["method"] == "closed form"
    curve = losses(report)
    # Monotone up to SGD noise: no epoch ends more than 0.1% above the one before.
    assert np.all(curve[1:] <= curve[:-1] * 1.001)
    assert curve[0] > 1.5 * optimum  # it did have something to learn ...
    assert optimum <= curve[-1] <= 1.02 * optimum  # ... and ends within 2% of the optimum


def test_golden_raw32_tracks_float(data, float_report):
    """Same alpha, batch, order: raw32 engine vs float64 SGD.

    Tolerance: raw32 features carry 30 fraction bits (error <= 2**-31, negligible), so the gap
    comes from the model's 24 fraction bits: each of the U = 6 * ceil(300/16) = 114 updates
    rounds every weight (and the scaled residual) at 2**-24 = 6e-8 without bias (stochastic
    rounding), and the step word ``alpha_k/B`` at 2**-25 relative to >= 0.005.  Unbiased
    errors add like a random walk: |dx_j| ~ sqrt(U) 2**-24 ~ 6e-7.  The loss moves by
    |dF|/F <= 2 rho + rho**2 with rho = RMS(A dx) / RMS(r) <= ||dx||_1 / sqrt(2 F)
    = 8 * 6e-7 / 0.03 = 1.6e-4 (F >= optimum 4.4e-4 here), so |dF|/F <~ 3e-4: the bound
    1e-3 leaves a factor 3 (the measured gap is ~4e-6 because SGD contracts the errors).
    """
    golden = train_in_memory(data, replace(BASE, backend="golden", encoding="raw32"))
    gap = np.abs(losses(golden) / losses(float_report) - 1.0)
    assert np.all(gap < 1e-3), gap
    assert_allclose(golden["model"]["scaled"], float_report["model"]["scaled"], atol=1e-5)


def test_golden_double_8_bits_near_float(data, float_report):
    golden = train_in_memory(data, replace(BASE, backend="golden", encoding="double", bits=8))
    gap = np.abs(losses(golden) / losses(float_report) - 1.0)
    assert np.all(gap < 0.01), gap  # the paper's claim: double sampling within 1% of float


def test_single_sampling_is_biased_at_2_bits(data, float_report):
    """The paper's bias claim: one quantized sample in both the dot product and the gradient
    biases the gradient (E[Q(a) Q(a)^T] != a a^T); two independent samples do not."""
    single = losses(train_in_memory(data, replace(BASE, encoding="single", bits=2)))
    double = losses(train_in_memory(data, replace(BASE, encoding="double", bits=2)))
    assert single[-1] > 2.0 * double[-1]
    assert single[-3:].mean() > 2.0 * double[-3:].mean()
    assert single[-1] > 2.0 * float_report["epochs"][-1]["loss"]


def test_delayed_update_ends_close_to_exact(data):
    base = replace(BASE, batch_size=4)
    exact = train_in_memory(data, base)
    delayed = train_in_memory(data, replace(base, update_mode="delayed"))
    assert exact["model_words"] != delayed["model_words"]  # it is a different schedule ...
    assert losses(delayed)[-1] == pytest.approx(losses(exact)[-1], rel=0.01)  # ... as good
    assert losses(delayed)[-1] < 1.05 * exact["optimum"]["loss"]


def test_float_delayed_update_ends_close_to_exact(data):
    exact = train_in_memory(data, replace(BASE, backend="float", batch_size=4))
    delayed = train_in_memory(data, replace(BASE, backend="float", batch_size=4,
                                            update_mode="delayed"))
    assert exact["model"]["scaled"] != delayed["model"]["scaled"]
    assert losses(delayed)[-1] == pytest.approx(losses(exact)[-1], rel=0.01)


def test_precision_change_by_training_twice(data, float_report):
    """The engine's precision is per run: retrain with other settings (no state is shared)."""
    low = train_in_memory(data, replace(BASE, bits=2))
    high = train_in_memory(data, replace(BASE, bits=8))
    again = train_in_memory(data, replace(BASE, bits=2))
    assert (low["layout"], high["layout"]) == ("double2/W64", "double8/W64")
    assert again["model_words"] == low["model_words"]  # the second run did not change the first
    # 9 fields of 4 bits fit one 64-bit beat, 9 fields of 10 bits need two.
    assert [e["beats"] for e in low["epochs"]] == [300] * 6
    assert [e["beats"] for e in high["epochs"]] == [600] * 6
    float_loss = float_report["epochs"][-1]["loss"]
    assert abs(high["epochs"][-1]["loss"] - float_loss) < abs(low["epochs"][-1]["loss"]
                                                              - float_loss)


def test_lssvm_classifies_breast_cancer():
    data = load_scaled("sklearn:breast_cancer", loss="lssvm", intercept=True)
    assert set(np.unique(data.labels)) == {-1.0, 1.0} and data.label_scale == 1.0
    # 31 non-negative features: alpha = 0.5 diverges here; 0.05 is stable.
    settings = TrainSettings(backend="golden", loss="lssvm", epochs=5, batch_size=4,
                             step_size=0.05)
    golden = train_in_memory(data, settings)
    reference = train_in_memory(data, replace(settings, backend="float"))
    assert losses(golden)[-1] == pytest.approx(losses(reference)[-1], rel=0.01)
    accuracy = np.mean(np.sign(data.features @ np.array(golden["model"]["scaled"]))
                       == data.labels)
    assert accuracy > 0.85  # (the optimum classifies 96%; the majority class is 63%)


def test_lssvm_rejects_a_regression_label():
    with pytest.raises(DatasetError, match="exactly two label values, found 300"):
        load_scaled(SPEC, loss="lssvm")
    assert_array_equal(lssvm_labels(np.array([3.0, 7.0, 3.0])), [-1.0, 1.0, -1.0])


# ---------------------------------------------------------------------------------------------
# Settings and register words


@pytest.mark.parametrize("changes", [
    {"backend": "gpu"}, {"loss": "hinge"}, {"epochs": 0}, {"epochs": -1}, {"epochs": 2.0},
    {"step_size": 0.0}, {"step_size": -0.5}, {"step_size": math.nan}, {"l1": -1.0},
    {"l2": -1e-3}, {"update_mode": "late"}, {"rounding": "up"}, {"bits": 0}, {"bits": 9},
    {"bus_width": 100}, {"encoding": "triple"},
], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_settings_reject_bad_values(changes):
    with pytest.raises(ConfigError):
        replace(BASE, **changes)


@pytest.mark.parametrize("changes", [
    {"batch_size": 0}, {"step_size": math.inf}, {"l2": math.inf}, {"l1": math.nan},
], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_settings_reject_bad_batch_and_non_finite_values(changes):
    with pytest.raises(ConfigError):
        replace(BASE, **changes)


@pytest.mark.parametrize(("alpha", "batch", "epoch", "l2", "l1", "model_frac"), [
    (0.5, 16, 1, 0.0, 0.0, 24),
    (0.5, 16, 3, 0.0, 0.0, 24),
    (2.0, 1, 7, 0.1, 0.0, 24),
    (0.125, 5, 2, 1e-3, 1e-2, 24),
    (1.0, 32, 4, 0.5, 0.25, 16),
])
def test_engine_run_config_words(alpha, batch, epoch, l2, l1, model_frac):
    settings = replace(BASE, step_size=alpha, batch_size=batch, l2=l2, l1=l1,
                       model_frac=model_frac, grad_frac=model_frac, seed=(1 << 32) + 5,
                       rounding="half-even", update_mode="delayed", encoding="single", bits=3)
    config = engine_run_config(settings, 8, epoch)
    gamma = alpha / epoch
    assert config.step == round(gamma / batch * 2**STEP_FRAC)
    assert config.decay == round(gamma * l2 / (1 + gamma * l2) * 2**DECAY_FRAC)
    assert config.threshold == round(gamma * l1 / (1 + gamma * l2) * 2**model_frac)
    assert (config.encoding, config.bits, config.n_features, config.batch_size) == (
        Encoding.SINGLE, 3, 8, batch)
    assert (config.model_width, config.model_frac) == (32, model_frac)
    assert config.rounding is RoundingMode.HALF_EVEN
    assert config.update_mode is UpdateMode.DELAYED
    assert config.seed == 5  # the 32-bit seed register takes the low word


def test_engine_run_config_by_hand():
    config = engine_run_config(replace(BASE, step_size=0.5, batch_size=16, l2=1.0, l1=0.25),
                               8, 1)
    assert config.step == 1 << 19  # 0.5 / 16 = 2**-5
    assert config.decay == 5592405  # eta = 0.5 / 1.5 = 1/3; 2**24 / 3 = 5592405.33
    assert config.threshold == 1398101  # 0.5 * 0.25 / 1.5 = 1/12; 2**24 / 12 = 1398101.33
    config = engine_run_config(replace(BASE, step_size=0.5, batch_size=16), 8, 3)
    assert config.step == 174763  # 0.5 / 3 / 16 * 2**24 = 174762.67
    assert (config.decay, config.threshold) == (0, 0)


def test_step_word_rounds_to_nearest_and_zero_is_an_error():
    lsb = 2.0**-STEP_FRAC
    assert engine_run_config(replace(BASE, step_size=0.6 * lsb, batch_size=1), 8, 1).step == 1
    assert engine_run_config(replace(BASE, step_size=1.4 * lsb, batch_size=1), 8, 1).step == 1
    assert engine_run_config(replace(BASE, step_size=1.6 * lsb, batch_size=1), 8, 1).step == 2
    with pytest.raises(ConfigError, match="rounds to 0"):
        engine_run_config(replace(BASE, step_size=0.4 * lsb, batch_size=1), 8, 1)
    # alpha/k/B falls below half an LSB in a later epoch: that epoch's config is refused.
    settings = replace(BASE, step_size=16 * lsb, batch_size=16)
    assert engine_run_config(settings, 8, 1).step == 1
    with pytest.raises(ConfigError, match="rounds to 0"):
        engine_run_config(settings, 8, 3)


def test_tiny_step_is_refused_by_the_golden_backend_only(data):
    settings = replace(BASE, step_size=1e-9, epochs=1)
    with pytest.raises(ConfigError, match="step size / batch .* rounds to 0"):
        train_in_memory(data, settings)
    train_in_memory(data, replace(settings, backend="float"))  # float has no register


def test_step_word_too_large_is_an_error():
    with pytest.raises(ConfigError, match="to fit its register"):
        engine_run_config(replace(BASE, step_size=256.0, batch_size=1), 8, 1)


# ---------------------------------------------------------------------------------------------
# Reports


@pytest.mark.parametrize(("bus_width", "encoding", "bits"), [
    (64, "double", 4), (64, "raw32", 4), (128, "single", 2),
])
def test_bytes_streamed_is_beats_times_beat_bytes(data, bus_width, encoding, bits):
    report = train_in_memory(data, replace(BASE, epochs=2, bus_width=bus_width,
                                           encoding=encoding, bits=bits))
    for record in report["epochs"]:
        assert record["samples"] == 300
        assert record["bytes_streamed"] == record["beats"] * bus_width // 8
    assert report["bytes_streamed"] == sum(r["bytes_streamed"] for r in report["epochs"])
    # raw32 at W=64: 9 fields of 32 bits = 5 beats per sample
    if (bus_width, encoding) == (64, "raw32"):
        assert report["epochs"][0]["beats"] == 5 * 300


def test_float_report_counts_raw32_bytes(float_report):
    assert [r["bytes_streamed"] for r in float_report["epochs"]] == [300 * 9 * 4] * 6
    assert "model_words" not in float_report


def test_report_fields(data):
    report = train_in_memory(data, replace(BASE, epochs=2))
    assert report["settings"] == asdict(replace(BASE, epochs=2))
    assert (report["seed"], report["n_samples"], report["n_features"]) == (0, 300, 8)
    assert report["source"] == "synthetic:8:300:0"
    assert report["model_format"] == [32, 24]
    assert len(report["model_words"]) == 8
    assert_array_equal(np.array(report["model_words"]) / 2**24, report["model"]["scaled"])
    for k, record in enumerate(report["epochs"], 1):
        assert record["epoch"] == k and record["gamma"] == 0.5 / k
        assert record["loss"] > 0 and record["engine_loss"] > 0
        assert record["updates"] == math.ceil(300 / 16)
        assert record["model_saturations"] == record["residual_saturations"] == 0


def test_runs_are_deterministic(data):
    first = train_in_memory(data, replace(BASE, epochs=2))
    second = train_in_memory(data, replace(BASE, epochs=2))
    assert first["model_words"] == second["model_words"]
    other_seed = train_in_memory(data, replace(BASE, epochs=2, seed=1))
    assert other_seed["model_words"] != first["model_words"]


# ---------------------------------------------------------------------------------------------
# .zsgd files


@pytest.fixture(scope="module")
def two_epoch_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("zsgd") / "two.zsgd"
    pack_source(open_source(SPEC), path, BASE.layout(), seed=0, epochs=2)
    return StreamFile(path)


def test_stream_file_equals_in_memory_training(data, two_epoch_file):
    """A file packed with seed s stores epoch k quantized as in-memory training quantizes it
    (epoch_rng(s, k)), so the two runs are bit-identical."""
    from_file = train_stream_file(two_epoch_file, replace(BASE, epochs=2))
    in_memory = train_in_memory(data, replace(BASE, epochs=2))
    assert from_file["model_words"] == in_memory["model_words"]
    assert [r["engine_loss"] for r in from_file["epochs"]] == [
        r["engine_loss"] for r in in_memory["epochs"]]
    assert from_file["model"]["coef"] == in_memory["model"]["coef"]
    assert from_file["model"]["intercept"] == in_memory["model"]["intercept"]
    # A file has no float data: the loss on the data it decodes to, and on the original data
    # when they are given (then the in-memory run's training loss).
    assert "loss" not in from_file["epochs"][0]
    assert all(r["loss_dequantized"] > 0 for r in from_file["epochs"])
    with_eval = train_stream_file(two_epoch_file, replace(BASE, epochs=2), eval_data=data)
    assert [r["loss_eval"] for r in with_eval["epochs"]] == [
        r["loss"] for r in in_memory["epochs"]]
    assert with_eval["loss_labels"]["engine_loss"] == "on-chip loss"


def test_stream_file_cycles_through_stored_epochs(two_epoch_file):
    settings = replace(BASE, epochs=4)
    report = train_stream_file(two_epoch_file, settings)
    assert report["model_words"] == train_stream_file(two_epoch_file, settings)["model_words"]
    # The current engine is fed v1 beats (one a sample here); the file holds them back to back.
    assert [r["bytes_streamed"] for r in report["epochs"]] == [300 * 8] * 4
    assert report["bytes_streamed"] == 4 * 300 * 8
    assert two_epoch_file.header.epoch_bytes == 254 * 8

    def replay(order):
        engine = None
        for epoch, index in enumerate(order, 1):
            config = engine_run_config(settings, 8, epoch)
            if engine is None:
                engine = GoldenEngine(settings.engine_params(), config)
            else:
                engine.configure(config)
            engine.run_epoch(restream_v1([two_epoch_file.epoch_payload(index)],
                                         two_epoch_file.layout, 8, 300))
        return engine.model.tolist()

    assert report["model_words"] == replay([0, 1, 0, 1])  # epoch k reads (k - 1) mod 2
    assert report["model_words"] != replay([0, 1, 1, 0])  # (the order matters)


def test_stream_file_layout_overrides_settings(two_epoch_file):
    report = train_stream_file(two_epoch_file, replace(BASE, epochs=1, encoding="single",
                                                       bits=8, bus_width=256))
    assert report["layout"] == "double4/W64"
    assert (report["settings"]["encoding"], report["settings"]["bits"],
            report["settings"]["bus_width"]) == ("double", 4, 64)


def test_stream_file_needs_the_golden_backend(two_epoch_file):
    with pytest.raises(ConfigError, match="golden model or an engine backend .*found 'float'"):
        train_stream_file(two_epoch_file, replace(BASE, backend="float"))


# ---------------------------------------------------------------------------------------------
# Back to original units


@pytest.mark.parametrize(("spec", "scaling", "intercept"), [
    (SPEC, "maxabs", False), (SPEC, "minmax", False), ("sklearn:diabetes", "minmax", True),
    ("sklearn:diabetes", "maxabs", True),
])
def test_inverse_model_predicts_in_original_units(spec, scaling, intercept):
    labels, features = open_source(spec).arrays()
    data = load_scaled(spec, scaling=scaling, intercept=intercept)
    label_offset = 0.0 if scaling == "maxabs" else (labels.max() + labels.min()) / 2
    weights = np.random.default_rng(0).normal(size=data.features.shape[1])
    coef, intercept_value = data.inverse_model(weights)
    assert coef.shape == (features.shape[1],)
    original = features @ coef + intercept_value
    scaled = data.features @ weights * data.label_scale + label_offset
    assert_allclose(original, scaled, rtol=1e-10, atol=1e-9 * np.abs(labels).max())


def test_report_model_is_the_inverse_of_the_scaled_model():
    data = load_scaled("sklearn:diabetes", scaling="minmax", intercept=True)
    report = train_in_memory(data, TrainSettings(backend="float", epochs=5, step_size=1.0))
    coef, intercept = data.inverse_model(np.array(report["model"]["scaled"]))
    assert report["model"]["coef"] == coef.tolist()
    assert report["model"]["intercept"] == intercept
    labels, features = open_source("sklearn:diabetes").arrays()
    loss = np.mean((features @ coef + intercept - labels) ** 2) / 2
    assert loss == pytest.approx(report["epochs"][-1]["loss_original_units"], rel=1e-9)


def test_stream_file_with_intercept_maps_back_like_in_memory(tmp_path):
    """The intercept column's weight is folded into the intercept, whether the model was
    trained from memory or from a file packed with ``add_intercept``."""
    path = tmp_path / "diabetes.zsgd"
    settings = TrainSettings(epochs=2, step_size=1.0)
    pack_source(open_source("sklearn:diabetes"), path, settings.layout(), scaling="minmax",
                add_intercept=True, epochs=2)
    from_file = train_stream_file(StreamFile(path), settings)
    in_memory = train_in_memory(load_scaled("sklearn:diabetes", scaling="minmax",
                                            intercept=True), settings)
    assert from_file["model_words"] == in_memory["model_words"]
    assert len(from_file["model"]["coef"]) == 10  # the 10 data features, no intercept column
    assert_allclose(from_file["model"]["coef"], in_memory["model"]["coef"], rtol=1e-12)
    assert from_file["model"]["intercept"] == pytest.approx(in_memory["model"]["intercept"],
                                                            rel=1e-12)


def test_a_file_with_a_level_table_is_refused(two_epoch_file, tmp_path):
    """The v1 engine and its model decode uniform levels only (golden2 takes tables)."""
    header = two_epoch_file.header
    path = tmp_path / "levels.zsgd"
    with_table = StreamHeader(header.layout, header.n_features, header.n_samples, header.seed,
                              header.scaling, header.offsets, header.scales,
                              epoch_count=header.epoch_count,
                              levels=uniform_levels(header.layout.bits, header.n_features))
    write_stream(path, with_table, [two_epoch_file.epoch_payload(k) for k in range(2)])
    with pytest.raises(ConfigError, match=r"level table: expected a backend that decodes level "
                                          r"tables \(golden2, verilator2\)"):
        train_stream_file(StreamFile(path), replace(BASE, epochs=1))
