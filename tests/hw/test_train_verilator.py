"""``zipsgd train --backend verilator``: the training driver on the simulated engine."""

from __future__ import annotations

from dataclasses import replace

from zipsgd.host.datasets import open_source
from zipsgd.host.estimators import ZipSGDRegressor
from zipsgd.host.pack import pack_source
from zipsgd.host.train import TrainSettings, load_scaled, train_in_memory, train_stream_file
from zipsgd.host.zsgd_file import StreamFile
from zipsgd.spec.engine import SIM_MAX_BATCH, SIM_MAX_FEATURES

# The build of the engine simulation tests (W = 64, N_max = 1024, B_max = 64): cached once.
SETTINGS = TrainSettings(backend="verilator", bits=3, epochs=2, batch_size=16, step_size=0.25,
                         max_features=SIM_MAX_FEATURES, max_batch=SIM_MAX_BATCH, seed=4)


def test_in_memory_training_is_bit_exact_with_the_golden_model():
    data = load_scaled("synthetic:8:300:2")
    report = train_in_memory(data, SETTINGS)
    golden = train_in_memory(data, replace(SETTINGS, backend="golden"))
    assert report["bit_exact"] is True
    assert report["model_words"] == golden["model_words"]
    for simulated, reference in zip(report["epochs"], golden["epochs"], strict=True):
        assert simulated["loss"] == reference["loss"]
        assert simulated["engine_loss"] == reference["engine_loss"]
        assert simulated["beats"] == reference["beats"]
        assert 0 < simulated["bus_efficiency"] <= 1
        assert simulated["cycles"] >= simulated["beats"]


def test_stream_file_training_on_the_simulated_engine(tmp_path):
    path = tmp_path / "s.zsgd"
    pack_source(open_source("synthetic:5:120:3"), path, SETTINGS.layout(), epochs=2, seed=8,
                progress=False)
    report = train_stream_file(StreamFile(path), replace(SETTINGS, epochs=3))
    assert report["bit_exact"] is True
    assert [e["bit_exact"] for e in report["epochs"]] == [True] * 3


def test_estimator_on_the_simulated_engine():
    """ZipSGDRegressor with backend="verilator": the same engine build, checked against the
    golden model after every epoch; the cycles and bus efficiency come back."""
    labels, features = open_source("synthetic:8:300:2").arrays()
    params = {"bits": 3, "epochs": 2, "batch_size": 16, "seed": 4,
              "max_features": SIM_MAX_FEATURES, "max_batch": SIM_MAX_BATCH}
    model = ZipSGDRegressor(backend="verilator", **params).fit(features, labels)
    golden = ZipSGDRegressor(backend="golden", **params).fit(features, labels)
    report = model.engine_report_
    assert report["bit_exact"] is True
    assert report["cycles"] > 0 and 0 < report["bus_efficiency"] <= 1
    assert list(model.coef_) == list(golden.coef_)
    assert model.loss_curve_ == golden.loss_curve_
