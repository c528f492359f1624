"""``zipsgd train --backend soc-sim``: engine v2 in its LiteX SoC simulated by Verilator, reached
as a board is, through LiteX's UART bridge (the SoC's serial lines on a pseudo-terminal),
``litex_server`` and ``RemoteClient``; each epoch uploaded into the SDRAM model's DRAM once and
run from DRAM, checked against the golden model of engine v2 after every epoch."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from zipsgd.backends.soc import SocBackend
from zipsgd.cli import main
from zipsgd.host import soc as driver
from zipsgd.host.backend import EpochJob2
from zipsgd.host.train import TrainSettings, load_scaled, train_in_memory
from zipsgd.sim.soc_sim import simulated_soc
from zipsgd.spec.engine2 import EngineParams2, RunConfig2, lane_plan
from zipsgd.spec.errors import ConfigError, LinkError

# The engine of the other SoC and engine v2 tests (W = 64, N_max = 4096, B_max = 512).
PARAMS = EngineParams2(64, 4096, 512)
SETTINGS = TrainSettings(backend="soc-sim", bits=3, epochs=2, batch_size=16, step_size=0.25,
                         max_features=4096, max_batch=512, seed=4)


def test_training_through_the_uart_bridge_is_bit_exact():
    data = load_scaled("synthetic:6:200:2")
    report = train_in_memory(data, SETTINGS)
    golden = train_in_memory(data, replace(SETTINGS, backend="golden2"))
    assert report["bit_exact"] is True and report["model_words"] == golden["model_words"]
    epochs = report["epochs"]
    # Each epoch's stream (sampled afresh) is uploaded, read back, then run from DRAM.
    assert all(e["upload_seconds"] > 0 and e["epoch_seconds"] > 0 and e["cycles"] >= e["beats"]
               for e in epochs)


def test_the_driver_refuses_a_bitstream_of_other_parameters_and_a_stream_too_big():
    """Bad input on the real bridge: the engine's identity registers disagree with the
    driver's parameters; a stream larger than the DRAM.  Both before any upload."""
    config = RunConfig2(n_features=4)
    job = EpochJob2(config, lane_plan(config, PARAMS, 8), np.zeros(64, np.uint8))
    with simulated_soc(PARAMS) as (path, facts), \
            driver.litex_server(path, facts["baud"]) as port, \
            driver.RemoteBus(port=port, clock_hz=facts["clock_hz"], timeout_s=120) as bus:
        with pytest.raises(LinkError, match="max_features 8192, max_batch 512; the "
                                            "bitstream's has .*max_features 4096"):
            driver.run_soc_jobs(bus, facts, EngineParams2(64, 8192, 512), [job], [0] * 4)
        small = facts | {"main_ram_size": 32}
        with pytest.raises(ConfigError, match="the packed stream is 64 bytes; the board's DRAM "
                                              "holds 32"):
            driver.run_soc_jobs(bus, small, PARAMS, [job], [0] * 4)


def test_the_command_line_names_a_missing_soc_file(tmp_path, capsys):
    path = tmp_path / "none.json"
    status = main(["train", "synthetic:4:50", "--backend", "soc", "--port", "/dev/null",
                   "--soc", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "expected the SoC's soc.json" in err[0]


def test_the_command_line_takes_the_boards_build_from_its_soc_file(tmp_path, capsys,
                                                                    monkeypatch):
    """``--backend soc`` runs the bitstream's engine: N_max and B_max come from its soc.json
    (the driver then checks them against the engine's identity registers)."""
    facts = dict.fromkeys(("csrs", "init", "main_ram_base", "main_ram_size", "engine_base",
                           "clock_hz", "baud"), 0)
    facts["params"] = {"bus_width": 64, "max_features": 8192, "max_batch": 256}
    path = tmp_path / "soc.json"
    path.write_text(json.dumps(facts))
    seen = []

    def no_board(self, settings, params, jobs, initial_model, progress=None):
        seen.append(params)
        raise LinkError("no board answers")
    monkeypatch.setattr(SocBackend, "run_epochs", no_board)
    status = main(["train", "synthetic:4:50", "--backend", "soc", "--port", "/dev/null",
                   "--soc", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "no board answers" in err[0]
    assert seen == [EngineParams2(64, 8192, 256)]
