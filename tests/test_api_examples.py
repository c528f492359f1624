"""The Python API as the README shows it: the example script runs; the command line's
automatic step, --eval and divergence stop."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

import zipsgd
from zipsgd.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_python_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["python_api.py", str(tmp_path)])
    runpy.run_path(str(ROOT / "docs/examples/python_api.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "diabetes R^2" in out and "breast_cancer accuracy" in out
    assert zipsgd.load(tmp_path / "breast_cancer.zsgd").n_samples == 569


def test_saved_packed_data_is_the_file_the_cli_writes(tmp_path):
    from zipsgd.host.datasets import open_source

    labels, features = open_source("synthetic:5:200:1").arrays()
    packed = zipsgd.quantize(features, labels, bits=3, epochs=2, seed=7)
    packed.save(tmp_path / "api.zsgd")
    assert main(["quantize", "synthetic:5:200:1", "-o", str(tmp_path / "cli.zsgd"), "--bits",
                 "3", "--epochs", "2", "--seed", "7"]) == 0
    assert (tmp_path / "api.zsgd").read_bytes() == (tmp_path / "cli.zsgd").read_bytes()
    with pytest.raises(zipsgd.OutputExistsError):
        packed.save(tmp_path / "api.zsgd")
    packed.save(tmp_path / "api.zsgd", force=True)
    loaded = zipsgd.load(tmp_path / "api.zsgd")
    assert loaded.info() == {**packed.info(), "file": str(tmp_path / "api.zsgd")}
    labels_q, features_q = loaded.dequantized(1)
    assert features_q.shape == (200, 5) and abs(labels_q).max() <= 1


def test_cli_auto_step_and_eval(tmp_path, capsys):
    path = tmp_path / "s.zsgd"
    assert main(["quantize", "synthetic:6:300:1", "-o", str(path), "--bits", "5"]) == 0
    capsys.readouterr()
    assert main(["train", str(path), "--epochs", "3", "--eval", "synthetic:6:300:1"]) == 0
    out = capsys.readouterr().out
    assert "step size alpha" in out and "(auto:" in out
    assert "eval loss" in out and "dequant. loss" in out and "on-chip loss" in out
    assert "goal" not in out


def test_cli_diverging_step_exits_2_with_one_line(capsys):
    assert main(["train", "sklearn:breast_cancer", "--loss", "lssvm", "--backend", "float",
                 "--step-size", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too large: expected a smaller one, e.g. 1.25" in err


@pytest.mark.parametrize("argv", [["train", "synthetic:4:50", "--step-size", "fast"],
                                  ["train", "synthetic:4:50", "--eval", "synthetic:4:50"]])
def test_cli_bad_step_or_eval_is_exit_2(argv, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_every_train_option_states_its_default_or_none(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--rounding", "--model-format", "--update-mode", "--encoding", "--epochs",
                   "--step-size", "--bits", "--batch-size"):
        after = text.split(f"{option} ", 2)[-1]
        assert "(default: " in after.split(" --")[0], option
