"""The register map (``zipsgd/spec/registers.py``): consistency, encode/decode, the RunConfig and
status
helpers, and ``docs/REGISTERS.md`` being its rendering."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from zipsgd.spec import registers as regs
from zipsgd.spec.engine import EngineParams, EpochStatus, RunConfig, UpdateMode
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.registers import (
    REGISTERS,
    ErrorBit,
    Field,
    Register,
    decode,
    decode_status_words,
    encode,
    epoch_status,
    identity_values,
    read_run_config,
    read_status_words,
    register,
    register_at,
    run_config_writes,
    status_offsets,
)
from zipsgd.spec.stream import Encoding

DOC = Path(__file__).resolve().parents[2] / "docs" / "REGISTERS.md"

#: The map as specified: (name, offset, access).
EXPECTED_MAP = [
    ("ID", 0x000, "ro"), ("VERSION", 0x004, "ro"), ("BUS_WIDTH", 0x008, "ro"),
    ("MAX_FEATURES", 0x00C, "ro"), ("MAX_BATCH", 0x010, "ro"), ("LANES", 0x014, "ro"),
    ("CTRL", 0x020, "wo"), ("STATUS", 0x024, "ro"), ("ERROR_FLAGS", 0x028, "ro"),
    ("ERROR_COUNT", 0x02C, "ro"),
    ("IRQ_ENABLE", 0x030, "rw"),
    ("IRQ_STATUS", 0x034, "w1c"),
    ("FORMAT", 0x040, "rw"), ("N_FEATURES", 0x044, "rw"), ("BATCH_SIZE", 0x048, "rw"),
    ("N_SAMPLES_LO", 0x04C, "rw"), ("N_SAMPLES_HI", 0x050, "rw"), ("MODEL_FORMAT", 0x054, "rw"),
    ("GRAD_FORMAT", 0x058, "rw"), ("STEP", 0x05C, "rw"), ("DECAY", 0x060, "rw"),
    ("THRESHOLD", 0x064, "rw"), ("MODE", 0x068, "rw"), ("SEED", 0x06C, "rw"),
    ("LOSS_LO", 0x080, "ro"), ("LOSS_HI", 0x084, "ro"), ("BEATS_LO", 0x088, "ro"),
    ("BEATS_HI", 0x08C, "ro"), ("SAMPLES_LO", 0x090, "ro"), ("SAMPLES_HI", 0x094, "ro"),
    ("CYCLES_BUSY_LO", 0x098, "ro"), ("CYCLES_BUSY_HI", 0x09C, "ro"),
    ("CYCLES_STARVED_LO", 0x0A0, "ro"), ("CYCLES_STARVED_HI", 0x0A4, "ro"),
    ("CYCLES_UPDATE_STALL_LO", 0x0A8, "ro"), ("CYCLES_UPDATE_STALL_HI", 0x0AC, "ro"),
    ("UPDATES", 0x0B0, "ro"), ("MODEL_SATURATIONS", 0x0B4, "ro"),
    ("RESIDUAL_SATURATIONS", 0x0B8, "ro"), ("DISCARDED_BEATS", 0x0BC, "ro"),
    ("MODEL_INDEX", 0x0C0, "rw"), ("MODEL_DATA", 0x0C4, "rw"),
]

#: Field positions as specified: register -> {field: (lsb, width)}.
EXPECTED_FIELDS = {
    "IRQ_ENABLE": {"done": (0, 1), "error": (1, 1)},
    "IRQ_STATUS": {"done": (0, 1), "error": (1, 1)},
    "CTRL": {"start": (0, 1), "abort": (1, 1), "clear_errors": (2, 1)},
    "STATUS": {"busy": (0, 1), "done": (1, 1), "error": (2, 1), "draining": (3, 1),
               "loss_saturated": (4, 1)},
    "ERROR_FLAGS": {"tlast_early": (0, 1), "tlast_missing": (1, 1), "start_while_busy": (2, 1),
                    "bad_config": (3, 1), "model_port_busy": (4, 1)},
    "FORMAT": {"encoding": (0, 2), "bits": (8, 6)},
    "MODEL_FORMAT": {"model_width": (0, 6), "model_frac": (8, 6)},
    "GRAD_FORMAT": {"grad_width": (0, 6), "grad_frac": (8, 6)},
    "STEP": {"step": (0, 32)},
    "DECAY": {"decay": (0, 24)},
    "THRESHOLD": {"threshold": (0, 31)},
    "MODE": {"rounding": (0, 2), "update_mode": (8, 1)},
    "SEED": {"seed": (0, 32)},
}

#: Configurations at the edges of every RunConfig range.
CONFIGS = [
    RunConfig(),
    RunConfig(encoding=Encoding.SINGLE, bits=8, n_features=32768, batch_size=1024,
              model_width=2, model_frac=1, grad_width=2, grad_frac=0, step=(1 << 32) - 1,
              decay=(1 << 24) - 1, threshold=(1 << 31) - 1, rounding=RoundingMode.HALF_EVEN,
              update_mode=UpdateMode.DELAYED, seed=(1 << 32) - 1),
    RunConfig(encoding=Encoding.RAW32, n_features=7, batch_size=3, model_width=16,
              model_frac=31, grad_width=32, grad_frac=63, step=1 << 24, decay=1, threshold=5,
              rounding=RoundingMode.TRUNCATE, seed=0),
    RunConfig(encoding="double", bits=1, n_features=(1 << 32) - 1, batch_size=(1 << 32) - 1),
]
SAMPLE_COUNTS = [0, 1, (1 << 32) - 1, 1 << 32, (1 << 64) - 1]


def test_map_is_as_specified():
    assert [(r.name, r.offset, r.access) for r in REGISTERS] == EXPECTED_MAP
    for name, expected in EXPECTED_FIELDS.items():
        assert {f.name: (f.lsb, f.width) for f in register(name).fields} == expected, name
    assert register("ID").reset == 0x5A534744 == int.from_bytes(b"ZSGD", "big")
    assert register("VERSION").reset == regs.ENGINE_VERSION == 2


def test_offsets_are_unique_aligned_and_in_the_address_space():
    offsets = [r.offset for r in REGISTERS]
    assert offsets == sorted(set(offsets))
    assert all(o % 4 == 0 and o < 1 << regs.ADDR_WIDTH for o in offsets)
    assert len({r.name for r in REGISTERS}) == len(REGISTERS)
    for r in REGISTERS:
        assert register(r.name) is r
        assert register_at(r.offset) is r
    assert register_at(0x018) is None
    with pytest.raises(KeyError, match="NOPE"):
        register("NOPE")


def test_fields_fit_and_do_not_overlap():
    for reg in REGISTERS:
        used = 0
        for f in reg.fields:
            assert f.lsb >= 0 and f.msb < regs.DATA_WIDTH
            assert not used & f.mask, (reg.name, f.name)
            used |= f.mask
            assert 0 <= f.reset < 1 << f.width
        assert used == reg.mask


def test_definitions_are_validated():
    with pytest.raises(ValueError, match="overlaps"):
        Register("X", 0, "rw", (Field("a", 0, 4), Field("b", 3, 2)), "", "config")
    with pytest.raises(ValueError, match="multiple of 4"):
        Register("X", 2, "rw", (Field("a", 0, 4),), "", "config")
    with pytest.raises(ValueError, match="access"):
        Register("X", 0, "rx", (Field("a", 0, 4),), "", "config")
    with pytest.raises(ValueError, match="fit bits"):
        Field("a", 30, 4)
    with pytest.raises(ValueError, match="reset"):
        Field("a", 0, 2, reset=4)
    with pytest.raises(ValueError, match="_HI"):
        Register("X_HI", 0, "ro", (Field("a", 0, 32),), "", "counters", word=0)


def test_pairs_are_adjacent_and_alike():
    for lo in (r for r in REGISTERS if r.name.endswith("_LO")):
        hi = register(lo.name[:-3] + "_HI")
        assert hi.offset == lo.offset + 4 and (lo.word, hi.word) == (0, 1)
        assert hi.access == lo.access and hi.group == lo.group
        assert [f.name for f in lo.fields] == [f.name for f in hi.fields]
        assert lo.fields[0].width == hi.fields[0].width == 32


def test_error_bits_are_the_flag_fields():
    fields = register("ERROR_FLAGS").fields
    assert [(f.name, f.lsb) for f in fields] == [(b.name.lower(), int(b)) for b in ErrorBit]


def test_encode_decode_round_trip():
    rng = np.random.default_rng(1)
    for reg in REGISTERS:
        for _ in range(20):
            values = {f.name: int(rng.integers(0, 1 << f.width, dtype=np.uint64))
                      for f in reg.fields}
            word = encode(reg.name, **values)
            assert 0 <= word < 1 << 32 and word & ~reg.mask == 0
            assert decode(reg.name, word) == values
        # Bits outside every field are ignored by decode.
        assert decode(reg.name, ~reg.mask & 0xFFFF_FFFF) == {f.name: 0 for f in reg.fields}
    assert encode("FORMAT", encoding=Encoding.SINGLE, bits=4) == 0x0401
    assert encode("MODE", rounding=RoundingMode.STOCHASTIC, update_mode=1) == 0x0102
    assert encode("STATUS") == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"bits": 64}, "0..63"),
    ({"bits": -1}, "0..63"),
    ({"encoding": 4}, "0..3"),
    ({"bits": True}, "integer"),
    ({"bits": 2.0}, "integer"),
    ({"nope": 1}, "no field"),
])
def test_encode_rejects_bad_values(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        encode("FORMAT", **kwargs)


def test_decode_rejects_bad_words_and_names():
    for bad in (-1, 1 << 32, "0", True):
        with pytest.raises(ConfigError, match="32-bit"):
            decode("STEP", bad)
    with pytest.raises(KeyError):
        encode("NOPE", value=1)


def test_reset_values_are_the_run_config_defaults():
    assert read_run_config(lambda offset: register_at(offset).reset) == (RunConfig(), 0)


@pytest.mark.parametrize("config", CONFIGS)
def test_run_config_writes_round_trip(config):
    for n_samples in SAMPLE_COUNTS:
        writes = run_config_writes(config, n_samples, seed=True)
        words = dict(writes)
        assert len(words) == len(writes)  # each register once
        assert all(register_at(o).group == "config" for o in words)
        assert read_run_config(words.__getitem__) == (config, n_samples)
        assert words[register("N_SAMPLES_LO").offset] == n_samples & 0xFFFF_FFFF
        assert words[register("N_SAMPLES_HI").offset] == n_samples >> 32


def test_run_config_writes_cover_every_field():
    names = {f.name for f in dataclasses.fields(RunConfig)} - {"extra"}
    written = {f.name for r in REGISTERS if r.group == "config" for f in r.fields}
    assert written == names | {"n_samples"}
    base = dict(run_config_writes(RunConfig(), 5, seed=True))
    changes = {"encoding": Encoding.SINGLE, "bits": 3, "n_features": 9, "batch_size": 4,
               "model_width": 20, "model_frac": 20, "grad_width": 16, "grad_frac": 20,
               "step": 77, "decay": 5, "threshold": 3, "rounding": RoundingMode.TRUNCATE,
               "update_mode": UpdateMode.DELAYED, "seed": 99}
    assert set(changes) == names
    for name, value in changes.items():
        changed = dict(run_config_writes(RunConfig().with_(**{name: value}), 5, seed=True))
        differing = [register_at(o).name for o in base if base[o] != changed[o]]
        assert len(differing) == 1, (name, differing)
    assert dict(run_config_writes(RunConfig(), 6)) != base


def test_run_config_writes_seed_only_when_asked():
    seed = register("SEED").offset
    assert seed not in dict(run_config_writes(RunConfig(), 1))
    assert dict(run_config_writes(RunConfig(seed=42), 1, seed=True))[seed] == 42
    # The order loads LO before HI and SEED last.
    offsets = [o for o, _ in run_config_writes(RunConfig(), 1, seed=True)]
    assert offsets == sorted(offsets)


def test_run_config_writes_validation():
    for bad in (-1, 1 << 64, True, 1.0):
        with pytest.raises(ConfigError, match="n_samples"):
            run_config_writes(RunConfig(), bad)
    params = EngineParams(max_features=8, max_batch=4)
    run_config_writes(RunConfig(n_features=8, batch_size=4), 1, params=params)
    with pytest.raises(ConfigError, match="n_features"):
        run_config_writes(RunConfig(n_features=9), 1, params=params)
    with pytest.raises(ConfigError, match="n_features"):
        run_config_writes(RunConfig(n_features=1 << 32), 1)  # does not fit the register
    with pytest.raises(TypeError, match="RunConfig"):
        run_config_writes({"n_features": 1}, 1)


def test_read_run_config_refuses_a_bad_configuration():
    words = dict(run_config_writes(RunConfig(), 1, seed=True))
    words[register("FORMAT").offset] = encode("FORMAT", encoding=3, bits=4)
    with pytest.raises(ConfigError, match="encoding"):
        read_run_config(words.__getitem__)


@pytest.mark.parametrize("params", [EngineParams(), EngineParams(bus_width=512,
                                                                 max_features=1000,
                                                                 max_batch=7)])
def test_identity_values(params):
    assert identity_values(params) == {
        "ID": 0x5A534744, "VERSION": 2, "BUS_WIDTH": params.bus_width,
        "MAX_FEATURES": params.max_features, "MAX_BATCH": params.max_batch,
        "LANES": params.lanes}
    with pytest.raises(TypeError, match="EngineParams"):
        identity_values(64)


def _status_words(values: dict) -> dict[int, int]:
    """The words a core with these status values shows (the reference mapping)."""
    words = {}
    for offset in status_offsets():
        reg = register_at(offset)
        if reg.name == "STATUS":
            words[offset] = encode("STATUS", busy=values["busy"], done=values["done"],
                                   error=int(values["error_flags"] != 0),
                                   draining=values["draining"],
                                   loss_saturated=values["loss_saturated"])
        elif reg.name == "ERROR_FLAGS":
            words[offset] = values["error_flags"]
        else:
            (f,) = reg.fields
            words[offset] = (values[f.name] >> (32 * reg.word)) & 0xFFFF_FFFF
    return words


def test_status_words_decode_and_epoch_status():
    values = {"busy": 0, "done": 1, "draining": 0, "loss_saturated": 1,
              "error_flags": (1 << ErrorBit.BAD_CONFIG) | (1 << ErrorBit.TLAST_EARLY),
              "error_count": 3, "loss": 0x1234_5678_9ABC_DEF0, "beats": 1 << 40,
              "samples": (1 << 33) + 5, "cycles_busy": (1 << 64) - 1, "cycles_starved": 7,
              "cycles_update_stall": 1 << 32, "updates": 11, "model_saturations": 12,
              "residual_saturations": 13, "discarded_beats": 14}
    words = _status_words(values)
    order = []

    def read(offset):
        order.append(offset)
        return words[offset]

    status = read_status_words(read)
    assert order == status_offsets()
    for name, value in values.items():
        assert status[name] == value, name
    assert status["error"] == 1 and status["bad_config"] == 1 and status["tlast_early"] == 1
    assert status["model_port_busy"] == 0
    assert decode_status_words(words) == status
    assert epoch_status(status) == EpochStatus(
        loss_acc=values["loss"], samples=values["samples"], beats=values["beats"],
        updates=11, model_saturations=12, residual_saturations=13, loss_saturated=True)


def test_status_offsets_read_lo_before_hi():
    offsets = status_offsets()
    names = [register_at(o).name for o in offsets]
    assert "CTRL" not in names and "ID" not in names and "MODEL_DATA" not in names
    for i, name in enumerate(names):
        if name.endswith("_HI"):
            assert names[i - 1] == name[:-3] + "_LO"


def test_doc_is_up_to_date():
    assert DOC.read_text() == regs.render(), (
        "docs/REGISTERS.md is stale: run `python -m zipsgd.spec.registers > docs/REGISTERS.md`")


def test_doc_lists_every_register_and_field():
    text = regs.render()
    for reg in REGISTERS:
        assert f"| 0x{reg.offset:03X} | [{reg.name}]" in text
        assert f"\n### {reg.name}\n" in text
        for f in reg.fields:
            assert f"| {f.bits} | `{f.name}` |" in text


def test_module_prints_the_doc():
    out = subprocess.run([sys.executable, "-m", "zipsgd.spec.registers"], check=True,
                         capture_output=True, text=True).stdout
    assert out == regs.render()
