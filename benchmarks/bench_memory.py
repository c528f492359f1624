"""Training memory on a ``.zsgd`` file (goal: peak <= 512 MiB at N_max = 32768, any file size).

``zipsgd train FILE.zsgd --backend golden`` runs in a child process on files of 32768 features
and a growing number of samples; the figure is the child's peak resident set
(``ru_maxrss``).  The golden model decodes at most ``DECODE_BYTES`` of samples at a time and
the file is read in checked chunks, so the peak must not grow with the file.

Run with ``make bench`` or ``python -m benchmarks memory``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from zipsgd.host.datasets import ArraySource
from zipsgd.host.pack import pack_source
from zipsgd.spec.stream import StreamLayout

FEATURES = 32768
SAMPLE_COUNTS = (64, 512, 2048)
GOAL_MIB = 512


def _peak_mib(command: list[str]) -> float:
    """Peak RSS of one child process, in MiB (``ru_maxrss`` of the children, which is the
    maximum over them: each run gets a fresh grandchild through ``python -c``)."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
             "stdout=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True,
                         capture_output=True, text=True).stdout
    return int(out.strip()) / 1024


def main() -> dict:
    rng = np.random.default_rng(0)
    layout = StreamLayout.make("double", 4, 64)
    zipsgd = str(Path(sys.executable).with_name("zipsgd"))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for samples in SAMPLE_COUNTS:
            features = rng.uniform(-1, 1, (samples, FEATURES)).astype(np.float32)
            labels = features[:, :64].sum(axis=1) / 64
            path = os.path.join(folder, f"n{samples}.zsgd")
            pack_source(ArraySource(labels, features, "bench"), path, layout, progress=False)
            del features
            size_mib = os.path.getsize(path) / 2**20
            peak = _peak_mib([zipsgd, "train", path, "--backend", "golden", "--epochs", "1",
                              "--batch-size", "16", "--step-size", "0.01"])
            rows.append({"samples": samples, "file_mib": round(size_mib, 1),
                         "peak_mib": round(peak, 1)})
    print(f"training memory, {FEATURES} features, double b=4, W=64 (goal: peak <= {GOAL_MIB} "
          f"MiB whatever the file size); this process's own peak "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"{'samples':>8} {'file MiB':>9} {'peak MiB':>9}")
    for row in rows:
        print(f"{row['samples']:>8} {row['file_mib']:>9} {row['peak_mib']:>9}")
    worst = max(row["peak_mib"] for row in rows)
    print(f"goal {'met' if worst <= GOAL_MIB else 'NOT met'}: worst peak {worst:.0f} MiB")
    return {"rows": rows, "goal_mib": GOAL_MIB}
