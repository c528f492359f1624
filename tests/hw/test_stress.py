"""Stress of the simulated engine: every scoreboard family under fixed and seeded random idle
patterns (with AXI-Lite channel pauses), resets and aborts aimed mid-sample and mid-update
followed by a full bit-exact epoch, and the soak machinery (``zipsgd/sim/stress.py``,
``zipsgd/sim/stress_bench.py``, ``zipsgd/sim/soak.py``).

The simulations reuse the test suite's W = 64 build; each test is one simulator run.
"""

from __future__ import annotations

import collections
import io
import json

import pytest

from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.sim import runner, soak, soak2, stress
from zipsgd.spec.engine import sim_params
from zipsgd.spec.errors import ConfigError

PARAMS = sim_params(64)


def run_bench(testcase: str, plan: dict, tmp_path, sim_options) -> list[dict]:
    report = tmp_path / f"{testcase}.json"
    runner.build_and_test(ZipsgdEngine(PARAMS), TOP_NAME, "zipsgd.sim.stress_bench",
                          testcase=testcase, test_params={"params": PARAMS.__dict__, **plan},
                          extra_env={"ZIPSGD_SIM_REPORT": str(report)}, **sim_options)
    return json.loads(report.read_text())


# -- plans (no simulation) --------------------------------------------------------------------

def test_fixed_patterns_do_what_they_say():
    def first(name, n):
        pattern = stress.make_pattern(stress.FIXED_PATTERNS[name])
        return [pattern.idle() for _ in range(n)] if pattern else [False] * n

    assert first("none", 5) == [False] * 5
    assert first("every_other", 6) == [False, True] * 3
    assert first("one_then_idle", 48) == ([False] + [True] * 23) * 2
    assert first("long_bursts", 88) == [False] * 48 + [True] * 40
    # Seeded Bernoulli: the idle fraction of 4000 cycles is within 5 standard deviations.
    for name in ("mostly_idle", "rare_gaps"):
        p = stress.FIXED_PATTERNS[name]["p"]
        idle = sum(first(name, 4000))
        assert abs(idle - 4000 * p) < 5 * (4000 * p * (1 - p)) ** 0.5, (name, idle)


def test_random_patterns_are_seeded_and_varied():
    specs = stress.patterns(n_random=20, seed=0)
    assert len(specs) == len(stress.FIXED_PATTERNS) + 20
    assert len({s["name"] for s in specs}) == len(specs)
    assert stress.patterns(20, 0) == specs
    random = specs[len(stress.FIXED_PATTERNS):]
    assert {s["kind"] for s in random} == {"bernoulli", "bursty", "cycle", "runs"}
    for spec in random:
        a, b = stress.make_pattern(spec), stress.make_pattern(spec)
        seq = [a.idle() for _ in range(500)]
        assert seq == [b.idle() for _ in range(500)], spec
    with pytest.raises(ValueError, match="pattern kind"):
        stress.make_pattern({"kind": "sometimes"})


def test_every_random_pattern_offers_beats():
    """A pattern that is always idle would hang the stream: none of 3000 seeds draws one."""
    for seed in range(3000):
        pattern = stress.make_pattern(stress.random_pattern(seed))
        assert pattern is None or not all(pattern.idle() for _ in range(200)), seed
    with pytest.raises(ValueError, match="never offers a beat"):
        stress.make_pattern({"kind": "runs", "on": 0, "off": 3})


def test_bursty_runs_have_the_requested_means():
    pattern = stress.make_pattern({"kind": "bursty", "on": 20, "off": 5, "seed": 3})
    seq = [pattern.idle() for _ in range(50_000)]
    # Geometric run lengths: the idle fraction is off / (on + off) = 0.2 up to sampling noise
    # (about 2000 runs of each kind; 5 standard deviations of the fraction is about 0.03).
    assert abs(sum(seq) / len(seq) - 0.2) < 0.03


def test_every_family_meets_fixed_and_random_patterns():
    cases = stress.stress_cases(PARAMS, stress.patterns(20))
    seen = collections.defaultdict(set)
    for case in cases:
        seen[case["family"]].add("random" if case["name"].startswith("random") else "fixed")
    assert dict(seen) == {f: {"fixed", "random"} for f in stress.FAMILIES}
    errors = {c["error"] for c in cases if c["family"] == "errors"}
    assert errors == set(stress.ERROR_KINDS)


def test_soak_configurations_replay_from_their_seed():
    seeds = soak.plan_seeds(7, 200_000)
    assert seeds == soak.plan_seeds(7, 200_000)
    assert sum(soak.run_beats(soak.soak_run(s)) for s in seeds) >= 200_000
    assert soak.soak_run(seeds[0]) == soak.soak_run(seeds[0])
    runs = [soak.soak_run(s) for s in soak.plan_seeds(1, 3_000_000)]
    assert len({(r["config"]["encoding"], r["config"]["bits"]) for r in runs}) >= 8
    assert {r["config"]["update_mode"] for r in runs} == {0, 1}
    assert {r["config"]["rounding"] for r in runs} == {0, 1, 2}


def test_soak_names_the_failing_seed(tmp_path):
    """The seed to replay is the first logged as failed, else the first never logged (a run
    that crashed or hung the simulator)."""
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in (
        {"soak": {"master_seed": 1}}, {"seed": 11, "ok": True, "beats": 5},
        {"seed": 12, "ok": False, "error": "model words differ"})))
    assert soak._failure([11, 12, 13], log) == 12
    assert soak._failure([11, 13, 14], log) == 13


def test_soak_summary_of_a_log(tmp_path):
    """The figures count the last soak of the log only, and every failure."""
    run = soak.soak_run(3)
    entry = {"config": run["config"], "epochs": 2, "frames": False, "pattern": None,
             "cycles": 120, "wall_s": 1.5}
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in (
        {"soak": {"master_seed": 1, "beats": 50}}, {**entry, "seed": 1, "ok": True, "beats": 9},
        {"soak": {"master_seed": 2, "beats": 100}},
        {**entry, "seed": 2, "ok": True, "beats": 100},
        {**entry, "seed": 3, "ok": False, "frames": True})))
    summary = soak.summarize_log(log)
    assert summary["master_seed"] == 2 and summary["configs"] == 1 and summary["beats"] == 100
    assert summary["mismatches"] == 1 and summary["failed_seeds"] == [3]


def test_soak_refuses_an_empty_budget(capsys):
    with pytest.raises(SystemExit) as exit_info:
        soak.main(["--beats", "0"])
    assert exit_info.value.code == 2
    assert "--beats and --chunk-beats must be at least 1, found 0" in capsys.readouterr().err


# -- simulations -----------------------------------------------------------------------------

def test_stress_patterns(tmp_path, sim_options):
    """6 fixed + 20 random patterns, one small case each, families in rotation; every epoch
    and every error case is checked inside the bench."""
    cases = stress.stress_cases(PARAMS, stress.patterns(n_random=20, seed=0))
    report = run_bench("stress_patterns", {"cases": cases}, tmp_path, sim_options)
    assert [r["name"] for r in report] == [c["name"] for c in cases]
    assert all(r["beats"] > 0 for r in report)
    # The patterns starve the engine's input (idle cycles seen by the engine).
    assert sum(r["cycles_starved"] > 0 for r in report) >= 20


def test_resets_mid_stream(tmp_path, sim_options):
    """24 reset/abort points, each landing where it was aimed, then a full bit-exact epoch."""
    points = stress.reset_points(PARAMS, count=24, seed=0)
    report = run_bench("resets_mid_stream", {"points": points}, tmp_path, sim_options)
    assert len(report) == 24
    for row in report:
        assert row["observed"] == row["kind"], row
        assert row["recovery_beats"] == row["beats"], row
    assert collections.Counter(r["action"] for r in report) == {"reset": 20, "abort": 4}


def test_soak_smoke(tmp_path):
    """The soak machinery on 20k beats: seeds logged, every configuration bit-exact."""
    log = tmp_path / "log.jsonl"
    out = io.StringIO()
    summary = soak.soak(20_000, 9, log, chunk_beats=1_000_000, timeout_s=1800, out=out)
    assert summary["mismatches"] == 0 and summary["beats"] >= 20_000, out.getvalue()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[0]["soak"]["master_seed"] == 9
    assert [e["seed"] for e in entries[1:]] == soak.plan_seeds(9, 20_000)
    assert all(e["ok"] for e in entries[1:])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_stress_patterns_more_seeds(seed, tmp_path, sim_options):
    cases = stress.stress_cases(PARAMS, stress.patterns(n_random=40, seed=seed), seed=seed)
    report = run_bench("stress_patterns", {"cases": cases}, tmp_path, sim_options)
    assert len(report) == len(cases)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_resets_more_points(seed, tmp_path, sim_options):
    points = stress.reset_points(PARAMS, count=60, seed=seed)
    report = run_bench("resets_mid_stream", {"points": points}, tmp_path, sim_options)
    assert all(r["observed"] == r["kind"] for r in report)


# -- engine v2's soak ----------------------------------------------------------------------------

def test_soak2_configurations_replay_from_their_seed():
    seeds = soak.plan_seeds(7, 300_000, soak2.SOAK2_PARAMS, soak2.SOAK2)
    assert seeds == soak.plan_seeds(7, 300_000, soak2.SOAK2_PARAMS, soak2.SOAK2)
    assert sum(soak2.run_beats2(soak2.soak_run2(s)) for s in seeds) >= 300_000
    runs = [soak2.soak_run2(s) for s in soak.plan_seeds(1, 3_000_000, soak2.SOAK2_PARAMS,
                                                         soak2.SOAK2)]
    assert len({(r["encoding"], r["bits"]) for r in runs}) >= 10
    assert {r["mode"] for r in runs} == {"delayed", "exact"}
    assert {r["rounding"] for r in runs} == {"stochastic", "half_even", "truncate"}
    assert {r["levels"] for r in runs} == {"uniform", "random", "optimal", "shared-optimal"}
    assert any(r["idle"] for r in runs) and any(r["decay"] for r in runs)


def test_soak2_summary_of_a_log(tmp_path):
    run = soak2.soak_run2(3)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in (
        {"soak": {"master_seed": 2, "beats": 100}},
        {"seed": 3, "run": run, "ok": True, "beats": 100, "cycles": 150, "wall_s": 1.0},
        {"seed": 4, "run": run, "ok": False, "error": "model words differ"})))
    summary = soak2.summarize_log2(log)
    assert summary["configs"] == 1 and summary["beats"] == 100 and summary["cycles"] == 150
    assert summary["mismatches"] == 1 and summary["failed_seeds"] == [4]
    assert summary["level_tables"] == [run["levels"]]


def test_soak2_smoke(tmp_path):
    """Engine v2's soak on 5k beats: seeds logged, every configuration bit-exact."""
    log = tmp_path / "log.jsonl"
    out = io.StringIO()
    summary = soak.soak(5_000, 3, log, chunk_beats=1_000_000, timeout_s=1800, out=out,
                        target=soak2.SOAK2)
    assert summary["mismatches"] == 0 and summary["beats"] >= 5_000, out.getvalue()
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[0]["soak"]["engine"] == "engine v2"
    assert [e["seed"] for e in entries[1:]] == soak.plan_seeds(3, 5_000, soak2.SOAK2_PARAMS,
                                                                  soak2.SOAK2)
    assert all(e["ok"] for e in entries[1:])


def test_soak2_resume(tmp_path):
    """A stopped soak goes on from the configurations it has not finished, on the same engine
    Verilog only; a finished one runs nothing more."""
    log = tmp_path / "log.jsonl"
    out = io.StringIO()
    seeds = soak.plan_seeds(284, 2_000, soak2.SOAK2_PARAMS, soak2.SOAK2)
    assert len(seeds) >= 2
    summary = soak.soak(2_000, 284, log, chunk_beats=1_000_000, timeout_s=1800, out=out,
                        target=soak2.SOAK2)
    lines = log.read_text().splitlines()
    header = json.loads(lines[0])["soak"]
    assert header["verilog"] == soak2.SOAK2.digest(soak2.SOAK2_PARAMS)
    # Stopped before its last configuration: only that one runs again.
    log.write_text("".join(line + "\n" for line in lines[:-1]))
    again = soak.soak(2_000, 284, log, chunk_beats=1_000_000, timeout_s=1800, out=out,
                      target=soak2.SOAK2, resume=True)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["seed"] for e in entries[1:]] == seeds and all(e["ok"] for e in entries[1:])
    assert (again["configs"], again["beats"]) == (summary["configs"], summary["beats"])
    assert soak.soak(2_000, 284, log, chunk_beats=1_000_000, timeout_s=1800, out=out,
                     target=soak2.SOAK2, resume=True)["beats"] == summary["beats"]
    assert len(log.read_text().splitlines()) == len(entries)
    # Another soak, or a log with a failure, is not resumed.
    with pytest.raises(ConfigError, match="expected the last soak .* master seed 285"):
        soak.soak(2_000, 285, log, 1_000_000, 1800, out=out, target=soak2.SOAK2, resume=True)
    log.write_text(log.read_text().replace('"ok": true', '"ok": false', 1))
    with pytest.raises(ConfigError, match=f"found seed {seeds[0]} failed"):
        soak.soak(2_000, 284, log, 1_000_000, 1800, out=out, target=soak2.SOAK2, resume=True)
