"""The command line with level tables: ``quantize --levels``, ``inspect`` (level summary and
variance), ``train --backend golden2`` from a file and on the fly, and the bad input of
issue 31 (constant feature, fewer distinct values than levels, M out of range, a bad table in
a file): each a documented behaviour or exit status 2 with one line."""

from __future__ import annotations

import json
import struct
import zlib

import numpy as np
import pytest

from tests.test_cli import assert_bad_input, run
from zipsgd.host.zsgd_file import FIXED_BYTES, StreamFile


@pytest.fixture
def npy(tmp_path):
    """Label, a skewed feature, a constant feature, a feature of two values and one of three."""
    rng = np.random.default_rng(2)
    x = rng.lognormal(size=400)
    table = np.column_stack([x + rng.normal(0, 0.1, 400), x, np.full(400, 3.0),
                             rng.integers(0, 2, 400) * 5.0, rng.choice([0.0, 1.0, 5.0], 400)])
    np.save(tmp_path / "d.npy", table)
    return tmp_path / "d.npy"


def _inspect(capsys, path, *extra) -> dict:
    status, out, _ = run(capsys, "inspect", path, "--json", *extra)
    assert status == 0
    return json.loads(out)


def test_quantize_inspect_train_with_optimal_levels(tmp_path, capsys, npy):
    path = tmp_path / "o.zsgd"
    status, out, _ = run(capsys, "quantize", npy, "-o", path, "--bits", 3, "--levels", "optimal",
                         "--levels-method", "approx2", "--intercept")
    assert status == 0 and "optimal level table" in out
    info = _inspect(capsys, path, "--source", npy)
    assert info["levels"] == "table" and info["scaling"] == "minmax"
    rows = info["level_table"]
    assert [r["column"] for r in rows] == ["label"] + [f"feature {k}" for k in range(1, 6)]
    skewed, constant, two, three, intercept = rows[1:]
    # The skewed feature: finer levels where its values are, less variance than uniform.
    assert skewed["min_spacing"] < skewed["median_spacing"] < 0.25
    assert skewed["variance"] < 0.5 * skewed["uniform_variance"]
    # Constant (0 after minmax) and intercept (1): the uniform row, the value on a level.
    for row in (constant, intercept):
        assert row["first"] == [-1.0, -0.75, -0.5] and row["variance"] == 0.0
    assert two["variance"] == 0.0  # two values: the endpoints -1 and +1
    # Three values: the middle one within 1/512 of a stored level (variance <= spacing/512).
    assert three["variance"] < 0.05 * three["uniform_variance"]
    status, out, _ = run(capsys, "inspect", path, "--source", npy)
    assert status == 0 and "mean over features:" in out and "vs uniform" in out
    status, out, _ = run(capsys, "train", path, "--backend", "golden2", "--epochs", 2)
    assert status == 0 and "golden2 backend" in out


def test_train_on_the_fly_with_levels(capsys, npy):
    status, out, _ = run(capsys, "train", npy, "--backend", "golden2", "--levels", "optimal",
                         "--bits", 2, "--epochs", 2, "--intercept")
    assert status == 0 and "optimum loss" in out


@pytest.mark.parametrize("argv, expected", [
    (["--levels", "optimal", "--levels-points", "7"], ["levels points M", "8..4096", "found 7"]),
    (["--levels", "optimal", "--levels-points", "5000"], ["found 5000"]),
    (["--levels", "optimal", "--scaling", "maxabs"], ["minmax", "found scaling maxabs"]),
    (["--levels", "uniform", "--encoding", "raw32"], ["raw32"]),
    (["--levels", "optimal", "--bits", "5"], ["engine v2 holds at b <= 4", "found --bits 5",
                                              "--levels uniform"]),
    (["--levels", "optimal", "--levels-method", "exact", "--levels-points", "8"],
     ["exact solver needs every column's distinct values"]),
])
def test_bad_level_options(tmp_path, capsys, npy, argv, expected):
    assert_bad_input(capsys, "quantize", npy, "-o", tmp_path / "o.zsgd", *argv,
                     expected=expected)
    assert not (tmp_path / "o.zsgd").exists()


def test_levels_need_golden2_and_a_data_source(tmp_path, capsys, npy):
    assert_bad_input(capsys, "train", npy, "--levels", "optimal", expected=[
        "needs a backend that decodes level tables (golden2, verilator2), found 'golden'"])
    path = tmp_path / "o.zsgd"
    assert run(capsys, "quantize", npy, "-o", path, "--levels", "uniform")[0] == 0
    assert_bad_input(capsys, "train", path, expected=["level table", "golden2"])
    assert_bad_input(capsys, "train", path, "--backend", "golden2", "--levels", "optimal",
                     expected=["brings its own levels"])
    assert_bad_input(capsys, "inspect", tmp_path / "none.zsgd", expected=["none.zsgd"])


@pytest.mark.parametrize("entry, word, rule", [
    (2, -256, "strictly increasing"),  # not increasing
    (0, -255, "first entry -256"),
    (2, 400, "entries in -256..256"),
])
def test_a_bad_table_in_a_file_is_refused(tmp_path, capsys, npy, entry, word, rule):
    path = tmp_path / "o.zsgd"
    assert run(capsys, "quantize", npy, "-o", path, "--bits", 2, "--levels", "optimal")[0] == 0
    header = StreamFile(path).header
    data = bytearray(path.read_bytes())
    at = FIXED_BYTES + 16 * (header.n_features + 1) + 2 * 5 + 2 * entry  # feature 1's row
    struct.pack_into("<h", data, at, word)
    end = header.header_bytes - 4
    struct.pack_into("<I", data, end, zlib.crc32(bytes(data[:end])))
    path.write_bytes(bytes(data))
    for command in (["inspect", path], ["train", path, "--backend", "golden2"]):
        assert_bad_input(capsys, *command, expected=["level table row 1 (feature 1)",
                                                      f"entry {entry}", rule])
