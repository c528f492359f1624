"""The ``zipsgd`` command line, run in-process through :func:`zipsgd.cli.main` (one test runs
the installed console script).

The contract (``zipsgd/cli.py``): bad input gives exit status 2 and a one-line message on
standard error naming what was expected and what was found; outputs are never replaced
without ``--force``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from zipsgd import __version__
from zipsgd.cli import main

SPEC = "synthetic:8:300"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv) -> tuple[int, str, str]:
    """``zipsgd argv...`` in-process: (exit status, stdout, stderr)."""
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exit_:  # argparse: --version, --help, malformed options
        status = exit_.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_bad_input(capsys, *argv, expected: list[str]) -> str:
    """Exit status 2, nothing on stdout, one stderr line holding every ``expected`` piece."""
    status, out, err = run(capsys, *argv)
    assert status == 2, (status, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("zipsgd: error: ")
    for piece in expected:
        assert piece in lines[0], (piece, lines[0])
    return lines[0]


@pytest.fixture
def stream(tmp_path, capsys) -> Path:
    """A two-epoch double4/W64 .zsgd file of synthetic:8:300."""
    path = tmp_path / "s.zsgd"
    status, out, _ = run(capsys, "quantize", SPEC, "-o", path, "--bits", 4, "--epochs", 2)
    assert status == 0
    assert out.startswith(f"wrote {path}: 300 samples x 8 features, double4/W64, 2 epoch(s)")
    return path


# ---------------------------------------------------------------------------------------------
# Round trips


def test_quantize_inspect_train_round_trip(tmp_path, capsys, stream):
    status, out, err = run(capsys, "inspect", stream, "--json")
    assert (status, err) == (0, "")
    info = json.loads(out)
    assert (info["encoding"], info["bits"], info["bus_width"]) == ("double", 4, 64)
    assert (info["n_samples"], info["n_features"], info["epoch_count"]) == (300, 8, 2)
    # double at 4 bits: 300 samples of 9 six-bit fields back to back are 16200 bits, 254 beats.
    assert info["version"] == 3 and info["levels"] == "uniform"
    assert info["beats_per_epoch"] == 254 and info["payload_bytes"] == 2 * 254 * 8
    assert stream.stat().st_size == info["header_bytes"] + info["payload_bytes"]
    assert info["bits_per_value"] == pytest.approx(254 * 64 / (300 * 8))
    assert info["bits_per_value_limit"] == pytest.approx(6 * 9 / 8)
    assert info["compression_vs_raw32"] == pytest.approx(1350 / 254)  # raw32: 86400 bits

    status, out, _ = run(capsys, "inspect", stream)
    assert status == 0 and "n_samples" in out and "double" in out

    report_path = tmp_path / "r.json"
    status, out, err = run(capsys, "train", stream, "--epochs", 3, "--report", report_path)
    assert (status, err) == (0, "")
    assert "golden backend, double4/W64" in out
    report = json.loads(report_path.read_text())
    assert report["settings"]["epochs"] == 3 and report["settings"]["backend"] == "golden"
    assert report["seed"] == 0 and report["source"] == str(stream)
    assert [e["epoch"] for e in report["epochs"]] == [1, 2, 3]
    for record in report["epochs"]:
        assert record["engine_loss"] > 0
        # what the current engine consumed: its v1 beats, one a sample
        assert record["bytes_streamed"] == 300 * 8 == record["beats"] * 8
        assert "loss" not in record and record["loss_dequantized"] > 0  # no float data in a file
    assert report["bytes_streamed"] == 3 * 300 * 8
    assert len(report["model"]["coef"]) == 8 and isinstance(report["model"]["intercept"], float)
    assert len(report["model_words"]) == 8 and all(isinstance(w, int)
                                                   for w in report["model_words"])
    assert report["model_format"] == [32, 24]
    assert report["epochs"][-1]["engine_loss"] < report["epochs"][0]["engine_loss"]


def test_train_from_source_writes_report_and_plot(tmp_path, capsys):
    report_path, plot_path = tmp_path / "r.json", tmp_path / "p.png"
    status, out, err = run(capsys, "train", SPEC, "--epochs", 3, "--backend", "float",
                           "--report", report_path, "--plot", plot_path)
    assert (status, err) == (0, "")
    assert "optimum loss" in out
    report = json.loads(report_path.read_text())
    assert report["settings"]["backend"] == "float" and len(report["epochs"]) == 3
    assert report["optimum"]["loss"] <= report["epochs"][-1]["loss"]
    assert plot_path.read_bytes().startswith(PNG_MAGIC)
    assert not list(tmp_path.glob("*.tmp*"))  # atomic writes leave no temporary files


def test_train_options_reach_the_report(tmp_path, capsys):
    report_path = tmp_path / "r.json"
    status, _, _ = run(capsys, "train", SPEC, "--epochs", 1, "--encoding", "single",
                       "--bits", 3, "--bus-width", 128, "--batch-size", 8, "--step-size", 0.25,
                       "--l2", 0.01, "--l1", 0.001, "--seed", 3, "--update-mode", "delayed",
                       "--rounding", "half-even", "--model-format", "28,20",
                       "--grad-format", "30,22", "--report", report_path)
    assert status == 0
    report = json.loads(report_path.read_text())
    expected = {"encoding": "single", "bits": 3, "bus_width": 128, "batch_size": 8,
                "step_size": 0.25, "l2": 0.01, "l1": 0.001, "seed": 3,
                "update_mode": "delayed", "rounding": "half-even", "model_width": 28,
                "model_frac": 20, "grad_width": 30, "grad_frac": 22}
    assert {k: report["settings"][k] for k in expected} == expected
    assert report["model_format"] == [28, 20] and report["layout"] == "single3/W128"
    assert report["optimum"]["method"].startswith("proximal gradient")


def test_train_lssvm(capsys):
    status, out, _ = run(capsys, "train", "sklearn:breast_cancer", "--loss", "lssvm",
                         "--epochs", 1, "--step-size", 0.05, "--intercept")
    assert status == 0 and "569 samples x 31 features" in out


# ---------------------------------------------------------------------------------------------
# Outputs are not replaced without --force


def test_quantize_refuses_to_overwrite(tmp_path, capsys, stream):
    old = stream.read_bytes()
    assert_bad_input(capsys, "quantize", SPEC, "-o", stream, "--bits", 2,
                     expected=[f"{stream} exists", "--force"])
    assert stream.read_bytes() == old
    status, _, _ = run(capsys, "quantize", SPEC, "-o", stream, "--bits", 2, "--force")
    assert status == 0
    assert stream.read_bytes() != old
    status, out, _ = run(capsys, "inspect", stream, "--json")
    assert status == 0 and json.loads(out)["bits"] == 2


@pytest.mark.parametrize("existing", ["report", "plot"])
def test_train_refuses_to_overwrite(tmp_path, capsys, existing):
    paths = {"report": tmp_path / "r.json", "plot": tmp_path / "p.png"}
    paths[existing].write_text("keep me")
    argv = ["train", SPEC, "--epochs", 1, "--report", paths["report"], "--plot", paths["plot"]]
    assert_bad_input(capsys, *argv, expected=[f"{paths[existing]} exists", "--force"])
    assert paths[existing].read_text() == "keep me"
    other = paths["plot" if existing == "report" else "report"]
    assert not other.exists()  # refused before training, so nothing at all was written

    status, _, _ = run(capsys, *argv, "--force")
    assert status == 0
    assert json.loads(paths["report"].read_text())["settings"]["epochs"] == 1
    assert paths["plot"].read_bytes().startswith(PNG_MAGIC)


# ---------------------------------------------------------------------------------------------
# Bad input: exit status 2 and one line naming what was expected and found


def test_missing_data_file(tmp_path, capsys):
    missing = tmp_path / "missing.csv"
    for command in (["train", missing], ["quantize", missing, "-o", tmp_path / "x.zsgd"]):
        assert_bad_input(capsys, *command,
                         expected=[str(missing), "expected an existing data file", "no such"])
    assert not (tmp_path / "x.zsgd").exists()


def test_missing_stream_file(tmp_path, capsys):
    missing = tmp_path / "missing.zsgd"
    for command in ("inspect", "train"):
        assert_bad_input(capsys, command, missing,
                         expected=[str(missing), "expected a readable .zsgd file", "no such file"])


def test_unknown_source_prefix(tmp_path, capsys):
    for command in (["train", "foo:bar"], ["quantize", "foo:bar", "-o", tmp_path / "x.zsgd"]):
        assert_bad_input(capsys, *command,
                         expected=["unknown source prefix 'foo'", "expected one of", "csv:"])


@pytest.mark.parametrize("bits", [0, 9])
def test_bits_out_of_range(tmp_path, capsys, bits):
    expected = ["bits must be an integer in 1..8", f"found {bits}"]
    assert_bad_input(capsys, "quantize", SPEC, "-o", tmp_path / "x.zsgd", "--bits", bits,
                     expected=expected)
    assert_bad_input(capsys, "train", SPEC, "--bits", bits, expected=expected)


def test_bus_width_100(tmp_path, capsys):
    expected = ["bus width must be one of (64, 128, 256, 512)", "found 100"]
    assert_bad_input(capsys, "quantize", SPEC, "-o", tmp_path / "x.zsgd", "--bus-width", 100,
                     expected=expected)
    assert_bad_input(capsys, "train", SPEC, "--bus-width", 100, expected=expected)


@pytest.mark.parametrize("value", ["32", "a,b", "32,24,1"])
def test_bad_model_format(capsys, value):
    status, out, err = run(capsys, "train", SPEC, "--model-format", value)
    assert status == 2 and out == ""
    last = err.splitlines()[-1]
    assert last.startswith("zipsgd train: error: argument --model-format: ")
    assert "expected WL,FL (two integers)" in last and f"found {value!r}" in last


def test_bad_model_format_is_one_line(capsys):
    status, out, err = run(capsys, "train", SPEC, "--model-format", "a,b")
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("zipsgd train: error: ") and "WL,FL" in err


def test_model_format_out_of_range(capsys):
    assert_bad_input(capsys, "train", SPEC, "--epochs", 1, "--model-format", "40,24",
                     expected=["model_width must be in 2..32", "found 40"])


def test_negative_epochs(tmp_path, capsys):
    assert_bad_input(capsys, "train", SPEC, "--epochs", -1,
                     expected=["epochs must be >= 1", "found -1"])
    assert_bad_input(capsys, "train", SPEC, "--epochs", 0, expected=["found 0"])
    assert_bad_input(capsys, "quantize", SPEC, "-o", tmp_path / "x.zsgd", "--epochs", -1,
                     expected=["epochs must be an integer in 1..", "found -1"])


def test_step_size_zero(capsys):
    assert_bad_input(capsys, "train", SPEC, "--step-size", 0,
                     expected=["step size must be > 0", "found 0.0"])


def test_step_size_rounds_to_zero(capsys):
    line = assert_bad_input(capsys, "train", SPEC, "--step-size", "1e-12",
                            expected=["step size / batch", "rounds to 0 in its register",
                                      "resolution"])
    assert "6.25e-14" in line  # 1e-12 / 16, the value that was found


def test_corrupt_stream_file(tmp_path, capsys, stream):
    data = bytearray(stream.read_bytes())
    data[-100] ^= 0x01  # a payload byte
    stream.write_bytes(bytes(data))
    for command in ("inspect", "train"):
        assert_bad_input(capsys, command, stream,
                         expected=["payload CRC-32 mismatch", "stored 0x", "computed 0x"])


def test_corrupt_stream_header(tmp_path, capsys, stream):
    data = bytearray(stream.read_bytes())
    data[30] ^= 0x01
    stream.write_bytes(bytes(data))
    assert_bad_input(capsys, "inspect", stream, expected=["header CRC-32 mismatch"])


def test_truncated_stream_file(tmp_path, capsys, stream):
    stream.write_bytes(stream.read_bytes()[:-1])
    assert_bad_input(capsys, "train", stream, expected=["truncated", "expected", "found"])


def test_stream_file_with_float_backend(capsys, stream):
    assert_bad_input(capsys, "train", stream, "--backend", "float",
                     expected=["golden model or an engine backend", "found 'float'"])


def test_csv_with_nan(tmp_path, capsys):
    path = tmp_path / "nan.csv"
    path.write_text("y,a,b\n1,2,3\n4,nan,6\n")
    expected = [str(path), "line 3", "expected finite values", "found nan"]
    assert_bad_input(capsys, "train", path, expected=expected)
    assert_bad_input(capsys, "quantize", path, "-o", tmp_path / "x.zsgd", expected=expected)


def test_ragged_csv(tmp_path, capsys):
    path = tmp_path / "ragged.csv"
    path.write_text("1,2,3\n4,5,6\n7,8\n")
    expected = [str(path), "line 3", "expected 3 columns", "found 2"]
    assert_bad_input(capsys, "train", path, expected=expected)
    assert_bad_input(capsys, "quantize", path, "-o", tmp_path / "x.zsgd", expected=expected)


def test_lssvm_on_a_regression_label(capsys):
    assert_bad_input(capsys, "train", SPEC, "--loss", "lssvm",
                     expected=["lssvm loss needs exactly two label values", "found 300"])


def test_unknown_choice_and_missing_argument(capsys):
    status, _, err = run(capsys, "train", SPEC, "--encoding", "triple")
    assert status == 2 and "invalid choice: 'triple'" in err
    status, _, err = run(capsys, "quantize", SPEC)  # no -o
    assert status == 2 and "-o/--output" in err


@pytest.mark.parametrize("option", [("--batch-size", "0"), ("--step-size", "inf"),
                                    ("--l2", "inf"), ("--l1", "nan")], ids=lambda o: o[0])
def test_bad_batch_size_and_non_finite_values(capsys, option):
    assert_bad_input(capsys, "train", SPEC, "--epochs", 1, *option, expected=[option[1]])


# ---------------------------------------------------------------------------------------------
# Version and the installed script


def test_version(capsys):
    status, out, _ = run(capsys, "--version")
    assert status == 0
    assert out.strip() == f"zipsgd {__version__}"


def test_console_script_exit_status(tmp_path):
    script = Path(sys.executable).parent / "zipsgd"
    assert script.is_file(), "the zipsgd console script is not installed next to python"
    result = subprocess.run([script, "train", str(tmp_path / "missing.csv")],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"zipsgd: error: {tmp_path / 'missing.csv'}: expected an existing data file, "
        "found no such file"]
