"""``zipsgd train --backend verilator2``: the training driver on engine v2 simulated by
Verilator, through its registers and stream, checked against the golden model of engine v2
after every epoch."""

from __future__ import annotations

from dataclasses import replace

from zipsgd.cli import main
from zipsgd.host.datasets import open_source
from zipsgd.host.pack import pack_source
from zipsgd.host.study import run_demo
from zipsgd.host.train import TrainSettings, load_scaled, train_in_memory, train_stream_file
from zipsgd.host.zsgd_file import StreamFile
from zipsgd.spec.engine2 import (
    BOARD_PARAMS2,
    LANE_CAPACITY,
    EngineParams2,
    RunConfig2,
    lane_plan,
)

# The build of the engine v2 tests (W = 64, N_max = 4096, B_max = 512): cached once.
SETTINGS = TrainSettings(backend="verilator2", bits=3, epochs=2, batch_size=16, step_size=0.25,
                         max_features=4096, max_batch=512, seed=4)


def test_in_memory_training_is_bit_exact_with_the_golden_model():
    data = load_scaled("synthetic:8:300:2")
    report = train_in_memory(data, SETTINGS)
    golden = train_in_memory(data, replace(SETTINGS, backend="golden2"))
    assert report["bit_exact"] is True and report["model_words"] == golden["model_words"]
    keys = ("loss", "engine_loss", "beats", "updates", "forward_saturations")
    assert [[e[k] for k in keys] for e in report["epochs"]] == \
        [[e[k] for k in keys] for e in golden["epochs"]]
    assert all(e["cycles"] >= e["beats"] for e in report["epochs"])


def test_samples_of_n_max_features():
    """Samples of exactly N_max = 32768 features on the command line's build: 32,896 slots
    (padded to a multiple of 128, ``sample_fields``) over 32 lanes put 1,028 features in each
    lane, beyond the 512 of a smaller build (``EngineParams2.lane_capacity``: 2,048 here)."""
    settings = replace(SETTINGS, max_features=32768, bits=1, batch_size=2, epochs=1,
                       step_size="auto")
    params = EngineParams2(64, 32768, 512)
    plan = lane_plan(RunConfig2(n_features=32768, bits=1, batch_size=2), params, 6)
    assert plan.wrap == 1028 > LANE_CAPACITY and params.lane_capacity == 2048
    data = load_scaled("synthetic:32768:6:1")
    report = train_in_memory(data, settings)
    assert report["bit_exact"] is True and report["epochs"][0]["updates"] == 3


def test_optimal_levels_are_loaded_through_the_registers():
    """Per-feature variance-optimal tables, solved on the data, written through LEVEL_DATA."""
    data = load_scaled("sklearn:diabetes")
    settings = replace(SETTINGS, bits=2, levels="optimal", batch_size=8)
    report = train_in_memory(data, settings)
    golden = train_in_memory(data, replace(settings, backend="golden2"))
    assert report["bit_exact"] is True
    assert report["model_words"] == golden["model_words"]
    assert report["level_table"] == golden["level_table"]


def test_stream_file_training_and_the_command_line(tmp_path, capsys):
    """A packed file through the driver, and ``zipsgd train --backend verilator2``."""
    path = tmp_path / "s.zsgd"
    pack_source(open_source("synthetic:5:120:3"), path, SETTINGS.layout(), epochs=2, seed=8,
                progress=False)
    report = train_stream_file(StreamFile(path), replace(SETTINGS, epochs=3))
    assert [e["bit_exact"] for e in report["epochs"]] == [True] * 3
    # (The command line's build: N_max = 32768, B_max = 512.)
    assert main(["train", str(path), "--backend", "verilator2", "--epochs", "2",
                 "--batch-size", "16", "--step-size", "0.25"]) == 0


def test_the_demo_trains_the_board_build_bit_exact_at_full_rate(tmp_path, capsys):
    """``make demo``'s run (``zipsgd demo``) on a shorter epoch: engine v2 as the boards build
    it, every epoch bit-exact, and the bus taken at >= 0.98 beats a cycle."""
    reports = run_demo(tmp_path, epochs=1, spec="synthetic:100:4000")
    (engine,) = [r for name, r in reports.items() if name.startswith("engine v2")]
    assert engine["bit_exact"] is True
    assert engine["settings"]["max_features"] == BOARD_PARAMS2.max_features
    (epoch,) = engine["epochs"]
    assert epoch["bus_efficiency"] >= 0.98, epoch
    assert "goal >= 0.98" in capsys.readouterr().out
    assert (tmp_path / "demo_loss.png").is_file() and (tmp_path / "demo_report.json").is_file()
