"""Atomic writes: a writer killed half-way (SIGKILL: no clean-up runs) leaves the previous file
intact, and what it leaves behind is a hidden temporary name in the same folder that no reader
takes for output.  Plus ``--force`` on the CLI commands whose refusal is not tested elsewhere
(``quantize``, ``train --report/--plot`` are in ``tests/test_cli.py``, ``perf --json`` in
``tests/host/test_perf.py``, the study's API in ``tests/host/test_study.py``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from zipsgd.cli import main
from zipsgd.host.output import TEMP_SUFFIX, stale_temporaries
from zipsgd.host.report import write_json
from zipsgd.host.zsgd_file import Scaling, StreamFile, StreamHeader, write_stream
from zipsgd.spec.errors import StreamFormatError
from zipsgd.spec.stream import Encoding, StreamLayout, pack_stream

LAYOUT = StreamLayout(Encoding.DOUBLE, 4, 64)
#: What atomic_output names its temporary file: ".<name>.<random>.tmp", next to the target.
TEMPORARY = r"\.{name}\.\d+\.zipsgd-tmp"

# The child writes through the project's writers, stops half-way (after the temporary file
# exists and holds data) and says so; the parent then kills it.
WRITERS = {
    "zsgd": """
        import sys, time
        import numpy as np
        from zipsgd.host.zsgd_file import Scaling, StreamHeader, write_stream
        from zipsgd.spec.stream import Encoding, StreamLayout

        n, features, chunks = 4096, 63, 64
        layout = StreamLayout(Encoding.DOUBLE, 4, 64)
        header = StreamHeader(layout, features, n * chunks, 1, Scaling.MAXABS,
                              np.zeros(features + 1), np.ones(features + 1))
        chunk = np.full(header.epoch_bytes // chunks, 0xA5, dtype=np.uint8)  # 6 beats a sample

        def pieces():
            for k in range(chunks):
                yield chunk
                if k == chunks // 2:
                    print("half", flush=True)
                    time.sleep(120)

        write_stream(sys.argv[1], header, pieces(), force=True)
    """,
    "json": """
        import sys, time
        from zipsgd.host.zsgd_file import atomic_output

        with atomic_output(sys.argv[1], force=True, mode="w") as file:
            file.write('{"partial": ' + "1" * 100000)
            file.flush()
            print("half", flush=True)
            time.sleep(120)
            file.write("}")
    """,
}


def small_stream(path: Path) -> bytes:
    header = StreamHeader(LAYOUT, 3, 5, 9, Scaling.MAXABS, np.zeros(4), np.ones(4))
    fields = np.random.default_rng(0).integers(0, 1 << LAYOUT.field_width, (5, 4),
                                               dtype=np.uint64)
    write_stream(path, header, [pack_stream(fields, LAYOUT)])
    return path.read_bytes()


def kill_half_way(kind: str, target: Path) -> None:
    """Start the ``kind`` writer on ``target``, wait until it is half-way with its temporary
    file on disk, and SIGKILL it."""
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITERS[kind]), str(target)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "half", "the writer did not get half-way"
        pattern = re.compile(TEMPORARY.format(name=re.escape(target.name)))
        deadline = time.monotonic() + 30
        while not [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)
                   and p.stat().st_size > 0]:
            assert time.monotonic() < deadline, "no temporary file appeared"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


@pytest.mark.parametrize("kind", list(WRITERS))
def test_killed_writer_leaves_previous_file_intact(tmp_path, kind):
    target = tmp_path / ("data.zsgd" if kind == "zsgd" else "report.json")
    if kind == "zsgd":
        before = small_stream(target)
    else:
        write_json({"previous": True}, target)
        before = target.read_bytes()
    kill_half_way(kind, target)
    assert target.read_bytes() == before
    if kind == "zsgd":
        assert StreamFile(target).header.n_samples == 5  # still the previous, valid file
    leftovers = [p for p in tmp_path.iterdir() if p != target]
    assert len(leftovers) == 1
    (leftover,) = leftovers
    assert re.fullmatch(TEMPORARY.format(name=re.escape(target.name)), leftover.name)
    assert leftover.name.startswith(".") and leftover.name.endswith(TEMP_SUFFIX)
    assert leftover.stat().st_size > 0  # it was really killed mid-way through the data
    if kind == "zsgd":
        with pytest.raises(StreamFormatError, match="magic"):  # the header is written last
            StreamFile(leftover)
    # The next output to the folder recognizes the dead writer's temporary and removes it.
    assert stale_temporaries(tmp_path) == [leftover]
    write_json({"next": True}, tmp_path / "next.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, "next.json"])


def test_killed_writer_without_previous_file_leaves_no_output(tmp_path):
    target = tmp_path / "new.zsgd"
    kill_half_way("zsgd", target)
    assert not target.exists()
    assert [p.name.startswith(".new.zsgd.") for p in tmp_path.iterdir()] == [True]


def test_cli_study_refuses_existing_outputs(tmp_path, capsys):
    out = tmp_path / "results"
    out.mkdir()
    (out / "convergence.json").write_text("{}")
    status = main(["study", "convergence", "--datasets", "synthetic:3:20", "--bits", "2",
                   "--epochs", "1", "--out", str(out)])
    err = capsys.readouterr().err
    assert status == 2 and "convergence.json" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1
    assert (out / "convergence.json").read_text() == "{}"
    assert sorted(p.name for p in out.iterdir()) == ["convergence.json"]
    assert main(["study", "convergence", "--datasets", "synthetic:3:20", "--bits", "2",
                 "--epochs", "1", "--out", str(out), "--force"]) == 0
    assert (out / "convergence.json").read_text() != "{}"
