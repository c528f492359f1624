"""Formal properties of the engine (``zipsgd/hw/formal.py``), checked with yowasp-sby and Boolector.

The quick properties (AXI4-Lite of both engines, the decoder, the core's stream handshake,
engine v2's window stage and its memory reader, seconds each) run here with their broken
variants, which must fail; the others on the whole core take minutes each and are ``slow``
(``make formal`` runs them all and ``docs/results/formal.md`` has the figures).
"""

from __future__ import annotations

import dataclasses

import pytest

from zipsgd.hw import formal
from zipsgd.spec.engine import EngineParams
from zipsgd.spec.errors import ConfigError
from zipsgd.spec.stream import Encoding, StreamLayout

QUICK = [prop for prop in formal.PROPERTIES.values() if prop.quick]
LONG = [prop for prop in formal.PROPERTIES.values() if not prop.quick]


def _runs(props):
    """(property, broken) pairs: the design, and the broken variant unless the design is
    known to fail."""
    return [pytest.param(prop, broken, id=f"{prop.name}-{'broken' if broken else 'design'}")
            for prop in props for broken in ((False,) if prop.finding else (False, True))]


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("formal")


@pytest.mark.parametrize("prop, broken", _runs(QUICK))
def test_quick_property_holds_and_its_broken_variant_fails(prop, broken, build_dir):
    result = formal.run(prop, broken=broken, build_dir=build_dir)
    assert result.status == result.expected, "\n".join(result.details)
    if broken:  # the counterexample is a real trace
        assert (result.workdir / "engine_0" / "trace.yw").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("prop, broken", _runs(LONG))
def test_core_property(prop, broken, build_dir):
    result = formal.run(prop, broken=broken, build_dir=build_dir)
    assert result.status == result.expected, "\n".join(result.details)


def test_quick_properties_are_the_fast_ones():
    # The core's deep pipelines take minutes; the normal suite keeps the fast ones.
    assert {p.name for p in QUICK} == {"axil_handshake", "axil_progress", "axil_settings",
                                       "decoder_levels", "stream_handshake",
                                       "axil2_handshake", "axil2_progress", "axil2_settings",
                                       "window_stage2", "window_stage4", "window_stage_hold",
                                       "memory_reader"}
    assert all(p.fault for p in formal.PROPERTIES.values() if not p.finding)


def test_slices_bound_is_the_longest_sample_over_every_layout():
    params = formal.SMALL
    layouts = [StreamLayout.make(Encoding.RAW32, 32, 64)] + [
        StreamLayout.make(e, b, 64) for e in (Encoding.DOUBLE, Encoding.SINGLE)
        for b in range(1, 9)]
    expected = max(lay.slices_per_sample(params.max_features, params.lanes) for lay in layouts)
    assert formal.slices_bound(params) == expected == 3  # 5 fields in 2-field slices
    wide = EngineParams(bus_width=64, max_features=4, max_batch=2)  # one slice per beat
    assert formal.slices_bound(wide) == 3  # raw32: 2 fields per beat


def test_narrow_variant_is_one_bit_narrower_and_otherwise_equal():
    p = formal.SMALL
    narrow = formal.NarrowAccumulators(p.bus_width, p.max_features, p.max_batch, p.lanes)
    assert (narrow.dot_width, narrow.grad_acc_width) == (p.dot_width - 1, p.grad_acc_width - 1)
    assert dataclasses.astuple(narrow) == dataclasses.astuple(p)
    # The widths are tight: N_max (B_max) products of 2**39 need every bit of DOT_W (GACC_W).
    assert p.max_features * formal.MAX_PRODUCT > (1 << (narrow.dot_width - 1)) - 1
    assert p.max_batch * formal.MAX_PRODUCT > (1 << (narrow.grad_acc_width - 1)) - 1


def test_response_latency_is_two_per_feature_plus_four():
    assert formal.AxiLiteHarness.response_latency(formal.SMALL) == 12


@pytest.mark.parametrize("make", [
    lambda: formal.StreamHarness(formal.SMALL, fault="stuck"),
    lambda: formal.StreamHarness(formal.SMALL, check="liveness"),
    lambda: formal.AxiLiteHarness(formal.SMALL, fault="registered_ready"),
    lambda: formal.DotAccumulatorHarness(formal.SMALL, fault="wide"),
    lambda: formal.GradientAccumulatorHarness(formal.SMALL, fault="wide"),
    lambda: formal.DecoderHarness(formal.SMALL, fault="narrow"),
    lambda: formal.WindowStageHarness(2, fault="tight"),
])
def test_unknown_fault_or_check_is_a_config_error(make):
    with pytest.raises(ConfigError, match="must be one of"):
        make()


def test_cli_lists_the_properties(capsys):
    assert formal.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in formal.PROPERTIES)


def test_cli_unknown_property_exits_2_naming_what_was_expected(capsys):
    assert formal.main(["no_such_property"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected a property name" in err
    assert "no_such_property" in err
