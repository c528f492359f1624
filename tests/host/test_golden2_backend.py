"""The ``golden2`` backend: engine v2's bit-exact model (numerics v2) behind the training
driver, with no table, the uniform table or optimal levels, in memory and from ``.zsgd``
files; its results equal :class:`~zipsgd.golden.engine2.GoldenEngine2` driven directly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from zipsgd.golden.engine2 import GoldenEngine2
from zipsgd.golden.float_sgd import objective
from zipsgd.host.backend import Golden2Backend, get_backend
from zipsgd.host.datasets import SyntheticSource
from zipsgd.host.levels import LevelStats, solve_table
from zipsgd.host.pack import pack_source
from zipsgd.host.quantize import (
    dequantize_fields,
    epoch_rng,
    quantize_fields,
    quantize_fields_levels,
)
from zipsgd.host.scaling import Scaler
from zipsgd.host.train import (
    TrainSettings,
    load_scaled,
    scale_arrays,
    train_in_memory,
    train_stream_file,
)
from zipsgd.host.zsgd_file import StreamFile
from zipsgd.spec.engine2 import EngineParams2, RunConfig2, UpdateMode, step_register
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.stream import LEVEL_ONE, Encoding, StreamLayout, uniform_levels

SPEC = "synthetic:6:200:3"


def _direct(fields_for, table, settings: TrainSettings, n_features: int):
    """GoldenEngine2 driven by hand: the registers written out from the settings."""
    params = EngineParams2(settings.bus_width, settings.max_features, 512)
    engine, statuses = None, []
    for epoch in range(1, settings.epochs + 1):
        alpha = settings.step_size / epoch / settings.batch_size
        # e's format: the most fraction bits for |alpha r| <= 4 alpha in 18 bits.
        grad_frac = min(40, max(16, 17 - 2 - math.ceil(math.log2(alpha))))
        config = RunConfig2(encoding=Encoding.parse(settings.encoding), bits=settings.bits,
                            n_features=n_features, batch_size=settings.batch_size,
                            model_width=32, model_frac=24, forward_frac=14,
                            grad_frac=grad_frac, rounding=RoundingMode.STOCHASTIC,
                            update_mode=UpdateMode.EXACT, seed=settings.seed)
        step, shift = step_register(alpha, config)
        config = config.with_(step=step, residual_shift=shift)
        if engine is None:
            engine = GoldenEngine2(params, config, levels=table)
        else:
            engine.configure(config, table)
        statuses.append(engine.run_epoch_fields(fields_for(epoch)))
    return engine, statuses


def _check(report, engine, statuses):
    assert report["model_words"] == engine.model.tolist()
    for record, status in zip(report["epochs"], statuses, strict=True):
        assert record["loss_acc"] == status.loss_acc
        assert record["updates"] == status.updates and record["beats"] == status.beats
        assert record["engine_loss"] == status.loss_acc / 2.0 ** 26 / (2 * status.samples)


def test_registered_as_a_golden_backend_with_numerics_2():
    backend = get_backend("golden2")
    assert isinstance(backend, Golden2Backend)
    assert (backend.kind, backend.numerics, backend.levels) == ("golden", 2, True)
    assert (get_backend("golden").numerics, get_backend("golden").levels) == (1, False)


@pytest.mark.parametrize("levels", [None, "uniform", "optimal"])
@pytest.mark.parametrize("encoding, bits", [("double", 2), ("single", 3)])
def test_in_memory_equals_the_model_driven_directly(levels, encoding, bits):
    data = load_scaled(SPEC, scaling="minmax")
    settings = TrainSettings(backend="golden2", encoding=encoding, bits=bits, epochs=3,
                             batch_size=8, step_size=0.5, seed=5, levels=levels,
                             levels_method="exact", levels_points=512)
    report = train_in_memory(data, settings)
    layout = settings.layout()
    n = data.features.shape[1]
    table = None
    if levels == "uniform":
        table = uniform_levels(bits, n)
    elif levels == "optimal":
        stats = LevelStats(n, points=512)
        stats.update(data.labels, data.features)
        table = solve_table(stats, bits, "exact")
        assert report["level_table"] == table.tolist()

    def fields_for(epoch):
        rng = epoch_rng(5, epoch - 1)
        if table is None:
            return quantize_fields(data.labels, data.features, layout, rng)
        return quantize_fields_levels(data.labels, data.features, layout, rng,
                                      table / LEVEL_ONE)

    engine, statuses = _direct(fields_for, table, settings, n)
    _check(report, engine, statuses)
    assert report["epochs"][-1]["loss"] < report["epochs"][0]["loss"] * 1.5


def test_stream_file_with_a_table_equals_the_model_driven_directly(tmp_path):
    layout = StreamLayout.make("double", 2, 64)
    header = pack_source(SyntheticSource(6, 200, seed=3), tmp_path / "o.zsgd", layout, seed=7,
                         epochs=2, scaling="minmax", levels="optimal")
    stream = StreamFile(tmp_path / "o.zsgd")
    settings = TrainSettings(backend="golden2", bits=2, epochs=3, batch_size=8, step_size=0.5,
                             seed=7)
    report = train_stream_file(stream, settings)

    def fields_for(epoch):
        return np.concatenate(list(stream.iter_fields((epoch - 1) % 2)))

    engine, statuses = _direct(fields_for, header.levels, settings, 6)
    _check(report, engine, statuses)


def test_tables_need_golden2(tmp_path):
    layout = StreamLayout.make("double", 2, 64)
    pack_source(SyntheticSource(4, 50), tmp_path / "o.zsgd", layout, levels="uniform")
    with pytest.raises(ConfigError, match=r"level table: expected a backend .* "
                                          r"\(golden2, verilator2\), found 'golden'"):
        train_stream_file(StreamFile(tmp_path / "o.zsgd"), TrainSettings(backend="golden"))
    with pytest.raises(ConfigError, match="needs a backend that decodes level tables"):
        TrainSettings(backend="golden", levels="optimal")
    with pytest.raises(ConfigError, match="at most B_max=512"):
        TrainSettings(backend="golden2", batch_size=1024)
    with pytest.raises(ConfigError, match="brings its own levels"):
        train_stream_file(StreamFile(tmp_path / "o.zsgd"),
                          TrainSettings(backend="golden2", levels="uniform"))


def test_stream_file_reports_the_readable_losses_and_the_automatic_step(tmp_path):
    """A file with a level table trains on golden2 with the losses of every other backend: the
    loss on the data as decoded through the table, the loss on the original data (eval), the
    on-chip loss, their labels, and the step chosen from the data."""
    layout = StreamLayout.make("double", 3, 64)
    source = SyntheticSource(6, 200, seed=3)
    pack_source(source, tmp_path / "o.zsgd", layout, seed=7, epochs=2, scaling="minmax",
                levels="optimal")
    stream = StreamFile(tmp_path / "o.zsgd")
    h = stream.header
    labels, features = source.arrays()
    eval_data = scale_arrays(labels, features, "eval",
                             scaler=Scaler.from_table(h.offsets, h.scales))
    report = train_stream_file(stream, TrainSettings(backend="golden2", epochs=3, batch_size=8),
                               eval_data=eval_data)
    assert report["step_size"]["chosen"] == "auto"
    assert report["settings"]["step_size"] == report["step_size"]["alpha"] > 0
    assert report["loss_labels"] == {"loss_eval": "loss on the evaluation data",
                                     "loss_dequantized": "loss on the dequantized data",
                                     "engine_loss": "on-chip loss"}
    dequantized_labels, dequantized_features = dequantize_fields(
        np.concatenate(list(stream.iter_fields(0))), layout, h.levels)
    model = np.asarray(report["model"]["scaled"])
    last = report["epochs"][-1]
    assert last["loss_dequantized"] == pytest.approx(
        objective(dequantized_features, dequantized_labels, model), rel=1e-12)
    assert last["loss_eval"] == pytest.approx(
        objective(eval_data.features, eval_data.labels, model), rel=1e-12)
    assert last["loss_eval"] < report["epochs"][0]["loss_eval"] * 1.5
    golden = train_stream_file(StreamFile(_uniform_file(tmp_path)),
                               TrainSettings(epochs=3, batch_size=8), eval_data=eval_data)
    assert golden["loss_labels"] == report["loss_labels"]
    assert {k for k in golden["epochs"][0] if "loss" in k} <= set(last)


def _uniform_file(tmp_path):
    pack_source(SyntheticSource(6, 200, seed=3), tmp_path / "u.zsgd",
                StreamLayout.make("double", 3, 64), seed=7, scaling="minmax")
    return tmp_path / "u.zsgd"
