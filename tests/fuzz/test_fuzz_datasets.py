"""The LIBSVM, CSV and NPY/NPZ loaders under fuzzed input: only ``DatasetError`` escapes.

Inputs are built from the formats' own tokens (numbers of every kind, NaN/Inf, huge and
negative indices, empty and non-numeric cells, stray separators, comments, byte-order marks,
line ends) in ragged rows, or are random bytes; ``.npy`` headers claim any shape and dtype
(huge, negative, overflowing) over data of any length, and ``.npz`` archives hold such members
or are damaged zip files.  Each input is opened and read to the end (every chunk), as packing
does.  The named malformed classes (NaN/Inf, ragged rows, bad syntax...) are tests in
``tests/host/test_datasets.py``; those added here are at the end.
"""

from __future__ import annotations

import io
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import sklearn.datasets  # noqa: F401  (the LIBSVM loader imports it lazily: not a cost to measure)
from hypothesis import given
from hypothesis import strategies as st

from zipsgd.host.datasets import CsvSource, LibsvmSource, NpySource, NpzSource
from zipsgd.spec.errors import DatasetError

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import fuzz_settings, peak_allocation

NUMBERS = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "NaN", "-inf", "inf", "Infinity", "1e309", "-1e309", "1e-400",
                     "0x10", "1_000", "+1", "-0", ".5", "5.", "1e", "--1", "", " ", "1 2",
                     "abc", "\u00e9", "\x00", '"1"', "1,5", "4j"]))
INDICES = st.one_of(st.integers(-2, 40), st.sampled_from(
    [2**24 - 1, 2**24, 2**31 - 1, 2**31, 2**32, 2**63, 10**30]))


def read_all(source) -> int:
    """Every chunk of one pass (3 rows at a time); returns the rows."""
    rows = 0
    for labels, features in source.iter_chunks(3):
        assert np.isfinite(labels).all() and np.isfinite(features).all()
        assert features.shape == (labels.shape[0], source.n_features)
        rows += labels.shape[0]
    return rows


def only_dataset_errors(tmp: Path, data: bytes, suffix: str, open_source) -> None:
    path = tmp / f"fuzzed{suffix}"
    path.write_bytes(data)
    try:
        source = open_source(path)
        assert read_all(source) >= 1
    except DatasetError as error:
        assert "\n" not in str(error)  # one line, for the CLI


def fuzz_files(data: bytes, suffix: str, open_source) -> None:
    with tempfile.TemporaryDirectory() as folder:
        only_dataset_errors(Path(folder), data, suffix, open_source)


# -- LIBSVM ---------------------------------------------------------------------------------

@st.composite
def libsvm_text(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        pairs = draw(st.lists(st.tuples(INDICES, NUMBERS), max_size=5))
        if draw(st.booleans()):
            pairs.sort(key=lambda pair: pair[0])
        tokens = [draw(NUMBERS)] + [f"{i}:{v}" for i, v in pairs]
        if draw(st.integers(0, 5)) == 0:
            tokens.insert(1, f"qid:{draw(NUMBERS)}")
        line = draw(st.sampled_from([" ", "\t", "  "])).join(tokens)
        if draw(st.integers(0, 5)) == 0:
            line += " # " + draw(st.text(max_size=10))
        lines.append(line)
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return end.join(lines).encode("utf-8", "surrogatepass") + draw(st.sampled_from([b"", b"\n"]))


@fuzz_settings(100)
@given(data=libsvm_text(), block_bytes=st.integers(1, 64))
def test_libsvm_only_dataset_error(data, block_bytes):
    fuzz_files(data, ".svm", lambda path: LibsvmSource(path, block_bytes=block_bytes))


# -- CSV ------------------------------------------------------------------------------------

@st.composite
def csv_text(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=200))
    columns = draw(st.integers(1, 4))
    lines = []
    if draw(st.booleans()):
        lines.append(",".join(draw(st.text(max_size=4)) for _ in range(columns)))
    for _ in range(draw(st.integers(0, 6))):
        width = columns if draw(st.integers(0, 4)) else draw(st.integers(1, 6))  # ragged rows
        lines.append(",".join(draw(NUMBERS) for _ in range(width)))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = end.join(lines).encode("utf-8", "surrogatepass")
    return (b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b"") + text


@fuzz_settings(150)
@given(data=csv_text(), label_column=st.integers(-3, 3))
def test_csv_only_dataset_error(data, label_column):
    fuzz_files(data, ".csv", lambda path: CsvSource(path, label_column=label_column,
                                                    block_rows=2))


# -- NPY and NPZ ------------------------------------------------------------------------------

DESCRS = ["<f8", ">f8", "<f4", "<f2", "<i4", "|i1", "<u8", "|b1", "<c16", "|O", "<U3", "|S2",
          "<M8[s]", "|V4", [("a", "<f8")], "<f16", "garbage", 3]
SHAPES = st.one_of(
    st.lists(st.integers(0, 6), max_size=3).map(tuple),
    st.lists(st.sampled_from([0, 1, 2, -1, 2**31, 2**40, 2**62, 2**63, 2**64]), min_size=1,
             max_size=3).map(tuple),
    st.sampled_from(["(3, 2)", "[3, 2]", "3", "(3.0, 2)", "(True, 2)", None]))


def npy_bytes(header: dict | str, data: bytes, version: tuple[int, int] = (1, 0)) -> bytes:
    text = (header if isinstance(header, str) else repr(header)).encode("latin1", "replace")
    size_bytes = 2 if version == (1, 0) else 4
    text += b" " * ((64 - (8 + size_bytes + len(text) + 1) % 64) % 64) + b"\n"
    return (b"\x93NUMPY" + bytes(version) + len(text).to_bytes(size_bytes, "little") + text
            + data)


@st.composite
def npy_file(draw) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.binary(max_size=200))
    if kind <= 3:  # a real array, possibly cut short
        shape = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple))
        dtype = draw(st.sampled_from(["<f8", "<f4", "<i2", "|b1", "<c8"]))
        values = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32),
                               min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        array = np.array(values, dtype=np.float64).reshape(shape)
        with np.errstate(invalid="ignore", over="ignore"):
            array = array.astype(dtype) if dtype != "<c8" else array.astype(np.complex64)
        buffer = io.BytesIO()
        np.save(buffer, array)
        data = buffer.getvalue()
        return data[:draw(st.integers(0, len(data)))] if draw(st.booleans()) else data
    header = {"descr": draw(st.sampled_from(DESCRS)), "fortran_order": draw(st.booleans()),
              "shape": draw(SHAPES)}
    if draw(st.integers(0, 9)) == 0:
        header = draw(st.sampled_from([str(header)[:-1], "{" * 300, "[]", "{'shape': (1, 2)}",
                                       str(header) + "x"]))
    version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0), (4, 0)]))
    return npy_bytes(header, draw(st.binary(max_size=96)), version)


@fuzz_settings(200)
@given(data=npy_file(), label_column=st.integers(-2, 2))
def test_npy_only_dataset_error(data, label_column):
    fuzz_files(data, ".npy", lambda path: NpySource(path, label_column=label_column,
                                                    block_rows=2))


@st.composite
def npz_file(draw) -> bytes:
    buffer = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for key in draw(st.sampled_from([("X", "y"), ("features", "labels"), ("X",), ("y", "z")])):
            name = key + (".npy" if draw(st.integers(0, 5)) else "")
            archive.writestr(name, draw(npy_file()))
    data = buffer.getvalue()
    change = draw(st.integers(0, 5))
    if change == 0:
        data = data[:draw(st.integers(0, len(data)))]
    elif change == 1:
        position = draw(st.integers(0, len(data) - 1))
        data = data[:position] + bytes([data[position] ^ draw(st.integers(1, 255))]) + \
            data[position + 1:]
    return data


@fuzz_settings(100)
@given(data=npz_file())
def test_npz_only_dataset_error(data):
    fuzz_files(data, ".npz", NpzSource)


# -- named malformed classes not covered in tests/host/test_datasets.py -----------------------

def expect_refused(call, *fragments) -> None:
    def refuse():
        with pytest.raises(DatasetError) as info:
            call()
        for fragment in fragments:
            assert fragment in str(info.value), str(info.value)
    assert peak_allocation(refuse) < 1 << 24  # far below every size claimed here


@pytest.mark.parametrize("shape", [(2**40, 2), (2**62, 2**62), (2**24, 2)])
def test_npy_huge_shape_refused_before_allocating(tmp_path, shape):
    path = tmp_path / "huge.npy"
    path.write_bytes(npy_bytes({"descr": "<f8", "fortran_order": False, "shape": shape},
                               bytes(64)))
    expect_refused(lambda: NpySource(path), "needs", "bytes of data", "found 64")


def test_npy_negative_shape(tmp_path):
    path = tmp_path / "negative.npy"
    path.write_bytes(npy_bytes({"descr": "<f8", "fortran_order": False, "shape": (-1, 2)},
                               bytes(16)))
    expect_refused(lambda: NpySource(path), "negative dimensions")


@pytest.mark.parametrize("shape", [(2**40, 2), (2**24, 2)])
def test_npz_huge_shape_refused_before_allocating(tmp_path, shape):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("X.npy", npy_bytes({"descr": "<f8", "fortran_order": False,
                                             "shape": shape}, bytes(64)))
        archive.writestr("y.npy", npy_bytes({"descr": "<f8", "fortran_order": False,
                                             "shape": (2,)}, bytes(16)))
    path = tmp_path / "huge.npz"
    path.write_bytes(buffer.getvalue())
    expect_refused(lambda: NpzSource(path), "needs", "found 64")


def test_npz_member_claiming_more_than_it_can_hold(tmp_path):
    """A zip directory entry whose uncompressed size is far beyond its compressed bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("X.npy", npy_bytes({"descr": "<f8", "fortran_order": False,
                                             "shape": (2, 2)}, bytes(32)))
    data = bytearray(buffer.getvalue())
    central = data.rindex(b"PK\x01\x02")
    data[central + 24:central + 28] = (2**32 - 1).to_bytes(4, "little")  # uncompressed size
    path = tmp_path / "bomb.npz"
    path.write_bytes(bytes(data))
    expect_refused(lambda: NpzSource(path), "claims 4294967295 bytes")


def test_npz_unsupported_zip_version(tmp_path):
    """A member needing a newer zip version than Python's zipfile reads (found by the fuzzer:
    zipfile raises NotImplementedError)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("X.npy", npy_bytes({"descr": "<f8", "fortran_order": False,
                                             "shape": (1, 2)}, bytes(16)))
        archive.writestr("y.npy", npy_bytes({"descr": "<f8", "fortran_order": False,
                                             "shape": (1,)}, bytes(8)))
    data = bytearray(buffer.getvalue())
    central = data.index(b"PK\x01\x02")
    data[central + 6] = 84  # "version needed to extract": 8.4
    path = tmp_path / "future.npz"
    path.write_bytes(bytes(data))
    expect_refused(lambda: NpzSource(path), "expected an .npz archive", "zip file version 8.4")


def test_npz_archive_read_as_npy(tmp_path):
    path = tmp_path / "archive.npy"
    with open(path, "wb") as file:
        np.savez(file, X=np.ones((2, 2)), y=np.ones(2))
    expect_refused(lambda: NpySource(path), "expected a .npy array file, found a .npz archive")


def test_npz_not_a_zip_file(tmp_path):
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip archive")
    expect_refused(lambda: NpzSource(path), "expected an .npz archive", "not a zip file")


@pytest.mark.parametrize("index", [2**24, 2**31, 2**32, 10**30])
def test_libsvm_huge_index(tmp_path, index):
    path = tmp_path / "huge.svm"
    path.write_bytes(f"1 1:0.5 {index}:1\n".encode())
    expect_refused(lambda: read_all(LibsvmSource(path)), "huge.svm")
