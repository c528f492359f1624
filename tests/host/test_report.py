"""The per-epoch table of ``zipsgd train`` (``zipsgd.host.report.print_epochs``)."""

from __future__ import annotations

import io

from zipsgd.host.report import print_epochs


def _report(**epoch) -> dict:
    record = {"epoch": 1, "loss": 0.5, "engine_loss": 0.25, "bytes_streamed": 4096,
              "cycles": 640, "bus_efficiency": 0.8, "bit_exact": True, **epoch}
    return {"source": "synthetic:4:50", "n_samples": 50, "n_features": 4, "layout": "double3/W64",
            "settings": {"backend": "soc-sim"}, "bit_exact": True,
            "epochs": [record, record | {"epoch": 2}]}


def test_a_socs_epochs_show_the_upload_apart_from_the_run():
    out = io.StringIO()
    report = _report(upload_seconds=1.25, epoch_seconds=0.5)
    report["epochs"][1].update(upload_seconds=0.0, epoch_seconds=0.375)
    print_epochs(report, file=out)
    lines = out.getvalue().splitlines()
    assert lines[1].split()[-4:] == ["upload", "s", "epoch", "s"]
    assert lines[2].split()[-2:] == ["1.250", "0.500"]
    assert lines[3].split()[-2:] == ["0.000", "0.375"]
    assert any(line.startswith("upload s: the epoch's stream written into the board's DRAM")
               for line in lines)


def test_other_engines_have_no_time_columns():
    out = io.StringIO()
    print_epochs(_report(), file=out)
    assert "upload s" not in out.getvalue() and "epoch s" not in out.getvalue()
