"""Time to accuracy (:mod:`zipsgd.host.time_to_accuracy`) and the CPU baseline
(:mod:`zipsgd.host.cpu_baseline`): the epochs-to-target rule, the table's arithmetic against the
performance model, the baseline's SGD against the float reference, the files written and the
errors at the boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from zipsgd.cli import main
from zipsgd.golden.float_sgd import SgdSettings, objective, sgd_epoch
from zipsgd.host import time_to_accuracy as module
from zipsgd.host.cpu_baseline import measure_cpu_baseline, numpy_sgd
from zipsgd.host.perf import PLATFORMS, TARGET_GAP, epoch_cost
from zipsgd.host.time_to_accuracy import (
    FieldLayout,
    Schedule,
    first_epoch_reaching,
    format_table,
    run_performance_study,
    schedule_for,
    time_to_accuracy,
)
from zipsgd.host.train import load_scaled
from zipsgd.spec.errors import ConfigError, DatasetError, OutputExistsError
from zipsgd.spec.stream import Encoding, StreamLayout

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SOURCE = "synthetic:12:400"
SCHEDULE = Schedule(epochs=4, batch_size=8)


@pytest.fixture(scope="module")
def result():
    return time_to_accuracy(SOURCE, "pynq-z1", bits=(2, 8), schedule=SCHEDULE, cpu_repeats=1)


# --- epochs to target ---------------------------------------------------------------------------

def test_first_epoch_reaching_a_constructed_curve():
    curve = [5.0, 3.0, 2.0, 2.5, 1.0]
    assert first_epoch_reaching(curve, 2.0) == 3          # equal counts as reached
    assert first_epoch_reaching(curve, 1.9999) == 5       # a later rise does not matter
    assert first_epoch_reaching(curve, 5.0) == 1
    assert first_epoch_reaching(curve, 0.5) is None
    assert first_epoch_reaching([], 1.0) is None
    assert first_epoch_reaching([None, 0.1], 1.0) == 2    # an epoch without a loss is skipped


def test_schedule_follows_the_study():
    assert schedule_for("sklearn:diabetes") == Schedule(epochs=60, batch_size=16,
                                                        intercept=True)
    assert schedule_for("synthetic:10", 7, update_mode="exact") == Schedule(
        epochs=7, update_mode="exact")
    with pytest.raises(ConfigError, match="epochs"):
        Schedule(epochs=0)
    with pytest.raises(ConfigError, match="update mode"):
        Schedule(update_mode="fast")
    with pytest.raises(ConfigError, match="step size"):
        Schedule(step_size=-1.0)


# --- the table ----------------------------------------------------------------------------------

def test_table_structure(result):
    assert (result["dataset"], result["n_samples"], result["n_features"]) == (SOURCE, 400, 12)
    engine_rows = [r for r in result["rows"] if r["kind"] == "engine"]
    assert [(r["encoding"], r["bits"]) for r in engine_rows] == [
        ("raw32", 32), ("single", 2), ("single", 8), ("double", 2), ("double", 8)]
    assert result["target_loss"] == result["float_final_loss"] * (1 + TARGET_GAP)
    assert len(result["float_losses"]) == SCHEDULE.epochs
    for row in result["rows"]:
        assert len(row["losses"]) == SCHEDULE.epochs
        assert row["epochs_to_target"] == first_epoch_reaching(row["losses"],
                                                               result["target_loss"])
    text = format_table(result)
    assert len(text.splitlines()) == 1 + len(result["rows"]) + 1      # header, rows, CPU row
    assert "epochs to target" in text and "CPU NumPy float64" in text
    markdown = format_table(result, markdown=True).splitlines()
    assert markdown[0].startswith("| dataset |") and markdown[1].startswith("|---|")
    json.dumps(result)                                                # JSON-ready


def test_times_are_epochs_times_the_modeled_epoch(result):
    platform = PLATFORMS["pynq-z1"]
    raw = result["rows"][0]
    assert raw["epochs_to_target"] is not None and raw["speedup_vs_raw32"] == 1.0
    for row in result["rows"]:
        if row["kind"] == "engine":
            layout = StreamLayout.make(row["encoding"], row["bits"], platform.bus_width)
            cost = epoch_cost(platform, None, 400, 12, layout, SCHEDULE.batch_size,
                              SCHEDULE.update_mode)
            assert row["epoch_s"] == cost["time_s"] and row["bytes_per_epoch"] == cost["bytes"]
            assert row["bits_per_value"] == layout.bits_per_value(12, 400)
        if row["epochs_to_target"] is None:
            assert row["time_to_target_s"] is None and row["speedup_vs_raw32"] is None
        else:
            assert row["time_to_target_s"] == row["epochs_to_target"] * row["epoch_s"]
            assert row["speedup_vs_raw32"] == raw["time_to_target_s"] / row["time_to_target_s"]
    reached = [r for r in result["rows"][1:] if r["kind"] == "engine"
               and r["speedup_vs_raw32"] is not None]
    fastest = max(r["speedup_vs_raw32"] for r in reached)
    assert result["best"]["speedup_vs_raw32"] == fastest
    if any(r["encoding"] == "double" and r["speedup_vs_raw32"] == fastest for r in reached):
        assert result["best"]["encoding"] == "double"        # ties go to double sampling
    assert result["goal_met"] == (fastest >= 8.0)


def test_two_sample_context_row(result):
    best = result["best"]
    context = [r for r in result["rows"] if r["kind"] == "context"]
    if best["encoding"] != "double":
        assert context == []
        return
    (row,) = context
    double = next(r for r in result["rows"] if (r["encoding"], r["bits"]) == ("double",
                                                                              best["bits"]))
    assert row["losses"] == double["losses"]        # the same estimator, so the same epochs
    assert row["bits_per_value"] >= double["bits_per_value"]


def test_field_layout_arithmetic():
    # 2b bits per field at b = 4, W = 64: 8 fields per beat; label + 100 features = 13 beats.
    layout = FieldLayout(Encoding.DOUBLE, 4, 64, 8)
    assert (layout.field_width, layout.fields_per_beat) == (8, 8)
    assert layout.beats_per_sample(100) == 13 and layout.sample_bytes_v1(100) == 104
    assert layout.stream_bytes(100, 10) == 127 * 8  # v2: 8080 bits back to back, 127 beats
    # At b = 2 the two layouts coincide (2b = b + 2).
    assert FieldLayout(Encoding.DOUBLE, 2, 64, 4).beats_per_sample(100) == \
        StreamLayout(Encoding.DOUBLE, 2, 64).beats_per_sample(100)
    with pytest.raises(ConfigError, match="field bits"):
        FieldLayout(Encoding.DOUBLE, 4, 64, 0)


# --- CPU baseline -------------------------------------------------------------------------------

def test_cpu_sgd_is_the_float_reference():
    data = load_scaled(SOURCE)
    run = numpy_sgd(data.features, data.labels, epochs=5, batch_size=8, step_size=0.25)
    model = np.zeros(12)
    for epoch in range(1, 6):
        model = sgd_epoch(model, data.features, data.labels, epoch, SgdSettings(8, 0.25))
        assert run["losses"][epoch - 1] == pytest.approx(
            objective(data.features, data.labels, model), rel=1e-9)
    assert run["epochs_to_target"] is None and len(run["epoch_end_s"]) == 5
    assert all(a < b for a, b in zip(run["epoch_end_s"], run["epoch_end_s"][1:], strict=False))


def test_cpu_baseline_stops_at_the_target():
    data = load_scaled(SOURCE)
    losses = numpy_sgd(data.features, data.labels, 6, 8, 0.25)["losses"]
    target = losses[2]                                 # reached exactly at epoch 3
    assert first_epoch_reaching(losses, target) == 3
    cpu = measure_cpu_baseline(data.features, data.labels, target, 6, 8, 0.25, repeats=3)
    assert cpu["epochs_to_target"] == 3 and cpu["losses"] == losses[:3]
    assert len(cpu["wall_s_runs"]) == 3 and cpu["wall_s"] == sorted(cpu["wall_s_runs"])[1]
    missed = measure_cpu_baseline(data.features, data.labels, 0.0, 2, 8, 0.25, repeats=1)
    assert missed["epochs_to_target"] is None and len(missed["losses"]) == 2
    with pytest.raises(ConfigError, match="repeats"):
        measure_cpu_baseline(data.features, data.labels, 1.0, 2, 8, 0.25, repeats=0)


def test_cpu_baseline_reaches_the_float_target(result):
    cpu = result["cpu"]
    assert cpu["epochs_to_target"] is not None
    assert cpu["losses"][cpu["epochs_to_target"] - 1] <= result["target_loss"]
    assert cpu["wall_s"] > 0 and cpu["speedup_vs_raw32"] == (
        result["rows"][0]["time_to_target_s"] / cpu["wall_s"])


# --- command line and files ---------------------------------------------------------------------

PERF = ["perf", SOURCE, "--target", "--epochs", "3", "--bits", "4", "--cpu-repeats", "1"]


def test_cli_json_and_plot_atomic_and_force(tmp_path, capsys):
    out, plot = tmp_path / "tta.json", tmp_path / "tta.png"
    assert main(PERF + ["--json", str(out), "--plot", str(plot)]) == 0
    text = capsys.readouterr().out
    assert "epochs to target" in text and "target: loss <=" in text
    # Results only: not the project's goals, nor paragraphs of context.
    assert "context:" not in text and "goal" not in text
    data = json.loads(out.read_text())
    assert [r["encoding"] for r in data["rows"] if r["kind"] == "engine"] == [
        "raw32", "single", "double"]
    assert plot.read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tta.json", "tta.png"]  # no temp files
    before = out.read_bytes()
    assert main(PERF + ["--json", str(out)]) == 2                     # exists, no --force
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
    assert main(PERF + ["--plot", str(plot)]) == 2
    assert main(PERF + ["--json", str(out), "--force"]) == 0


@pytest.mark.parametrize("argv, expected", [
    (["perf", "nosuch:thing", "--target"], "nosuch"),
    (["perf", "synthetic:abc", "--target"], "synthetic"),
    (["perf", SOURCE, "--target", "--platform", "nope"], "platform must be one of"),
    (["perf", SOURCE, "--plot", "x.png"], "expected --target"),
    (["perf", SOURCE, "--target", "--bits", "9"], "bits"),
    (["perf", SOURCE, "--target", "--epochs", "0"], "epochs"),
    (["perf", SOURCE, "--target", "--cpu-repeats", "0"], "repeats"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, expected, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zipsgd: error:") and expected in err


def test_library_errors():
    with pytest.raises(ConfigError, match="platform"):
        time_to_accuracy(SOURCE, "nope", schedule=SCHEDULE)
    with pytest.raises(DatasetError):
        time_to_accuracy("synthetic:abc", "pynq-z1", schedule=SCHEDULE)


def test_performance_study_files(tmp_path, capsys):
    results = run_performance_study([SOURCE], ["harp-v1"], bits=(4,), epochs=2, out=tmp_path,
                                    cpu_repeats=1)
    assert len(results) == 1 and results[0]["platform"]["name"] == "harp-v1"
    page = (tmp_path / "performance.md").read_text()
    assert "zipsgd study performance --epochs 2 --bits 4" in page
    assert results[0]["machine"] in page and "| CPU NumPy float64 |" in page
    assert (tmp_path / "performance_synthetic_12_400_harp_v1.png").read_bytes().startswith(
        PNG_MAGIC)
    assert json.loads((tmp_path / "performance.json").read_text())[0]["dataset"] == SOURCE
    with pytest.raises(OutputExistsError):
        run_performance_study([SOURCE], ["harp-v1"], bits=(4,), epochs=2, out=tmp_path)
    with pytest.raises(ConfigError, match="platform"):
        run_performance_study([SOURCE], ["nope"], out=tmp_path / "new")


def test_cli_libsvm_file(tmp_path, capsys):
    rng = np.random.default_rng(3)
    features = rng.uniform(-2, 2, (120, 5))
    labels = features @ np.array([1.0, -0.5, 0.25, 0.0, 2.0]) + rng.normal(0, 0.1, 120)
    path = tmp_path / "small.libsvm"
    path.write_text("".join(f"{y:.6f} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(x))
                            + "\n" for y, x in zip(labels, features, strict=True)))
    assert main(["perf", str(path), "--target", "--epochs", "3", "--bits", "6",
                 "--cpu-repeats", "1", "--platform", "harp-v1"]) == 0
    text = capsys.readouterr().out
    assert "120 samples x 5 features on harp-v1" in text and "CPU NumPy float64" in text


def test_a_run_that_diverges_is_reported_not_raised(monkeypatch):
    """An encoding whose loss rises at float SGD's step is a 'diverged' row (not reached, no
    curve); the other rows and the study go on."""
    real = module.train_in_memory

    def train(data, settings):
        if settings.backend == "golden2" and (settings.encoding, settings.bits) == ("single", 2):
            raise ConfigError("the training loss rose from 0.1 to 0.3 in epoch 1: too large")
        return real(data, settings)

    monkeypatch.setattr(module, "train_in_memory", train)
    out = time_to_accuracy(SOURCE, "pynq-z1", bits=(2, 8), schedule=SCHEDULE, cpu_repeats=1)
    rows = {(r["encoding"], r["bits"]): r for r in out["rows"] if r["kind"] == "engine"}
    bad = rows[("single", 2)]
    assert bad["diverged"].startswith("the training loss rose") and bad["losses"] == []
    assert bad["epochs_to_target"] is None and bad["final_loss"] is None
    assert all(r["diverged"] is None for key, r in rows.items() if key != ("single", 2))
    assert "diverged" in format_table(out, markdown=True)
