"""The backend registry (:mod:`zipsgd.host.backend`) and the driver's use of an engine backend."""

from __future__ import annotations

import numpy as np
import pytest

from zipsgd.golden.engine import GoldenEngine
from zipsgd.host import backend as registry
from zipsgd.host.backend import (
    Backend,
    Engine2Backend,
    EngineBackend,
    FloatBackend,
    GoldenBackend,
    backend_names,
    get_backend,
)
from zipsgd.host.train import ScaledData, TrainSettings, train_in_memory
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.registers import decode_status_words, status_offsets


def test_every_backend_is_registered_under_its_name():
    assert set(backend_names()) == {"float", "golden", "golden2", "verilator", "verilator2",
                                    "board", "board-sim", "soc", "soc-sim"}
    for name in backend_names():
        backend = get_backend(name)
        assert isinstance(backend, Backend) and backend.name == name
    assert isinstance(get_backend("float"), FloatBackend)
    assert isinstance(get_backend("golden"), GoldenBackend)
    assert {n for n in backend_names() if get_backend(n).kind == "engine"} == {
        "verilator", "verilator2", "board", "board-sim", "soc", "soc-sim"}
    assert all(isinstance(get_backend(n), EngineBackend) for n in ("verilator", "board"))
    assert all(isinstance(get_backend(n), Engine2Backend)
               for n in ("verilator2", "soc", "soc-sim"))
    assert get_backend("verilator2").numerics == 2 and get_backend("verilator2").levels


def test_unknown_backend_is_a_config_error():
    with pytest.raises(ConfigError, match="backend must be one of float, golden.*found 'gpu'"):
        get_backend("gpu")
    with pytest.raises(ConfigError, match="found 'gpu'"):
        TrainSettings(backend="gpu")


def test_board_backend_checks_its_settings():
    with pytest.raises(ConfigError, match="serial port"):
        TrainSettings(backend="board")
    assert TrainSettings(backend="board", port="/dev/null").port == "/dev/null"


class _Replay(EngineBackend):
    """An engine backend that answers with the golden model's own words and counters,
    optionally with one model word changed: the driver must call that a mismatch."""

    name = "replay"
    corrupt = False

    def run_epochs(self, settings, params, jobs, initial_model, progress=None):
        engine, results = None, []
        for done, job in enumerate(jobs, 1):
            if engine is None:
                engine = GoldenEngine(params, job.config)
            else:
                engine.configure(job.config)
            status = engine.run_epoch(job.payload)
            words = engine.model.copy()
            if self.corrupt and done == len(jobs):
                words[0] += 1
            regs = {"loss": status.loss_acc, "samples": status.samples,
                    "beats": status.beats, "updates": status.updates,
                    "model_saturations": status.model_saturations,
                    "residual_saturations": status.residual_saturations,
                    "loss_saturated": int(status.loss_saturated)}
            decoded = decode_status_words(dict.fromkeys(status_offsets(), 0))
            decoded.update(regs, error_flags=0, cycles_busy=status.beats)
            results.append({"status": decoded, "model_words": words.tolist(), "wall_s": 0.0})
            if progress is not None:
                progress(done)
        return results


@pytest.mark.parametrize("corrupt", [False, True])
def test_driver_checks_an_engine_backend_against_the_golden_model(monkeypatch, corrupt):
    replay = type("Replay", (_Replay,), {"corrupt": corrupt})
    monkeypatch.setitem(registry._BUILTIN, "replay", replay)
    rng = np.random.default_rng(3)
    features = rng.uniform(-1, 1, (40, 6))
    labels = np.clip(features @ rng.uniform(-0.2, 0.2, 6), -1, 1)
    data = ScaledData("toy", labels, features, lambda m: (m, 0.0))
    report = train_in_memory(data, TrainSettings(backend="replay", epochs=2, step_size=0.25))
    assert [r["bit_exact"] for r in report["epochs"]] == [True, not corrupt]
    assert report["bit_exact"] is (not corrupt)
