"""The coverage report of ``sim/coverage.py`` on a hand-made ``coverage.dat`` (Verilator's
format: one ``C '<key>' <count>`` record per point, key fields separated by \\x01, name and value
by \\x02)."""

from __future__ import annotations

from zipsgd.sim import coverage

VERILOG = """module top(clk, rst, a, y);
  (* src = "/x/zipsgd/hw/core.py:10" *)
  wire \\$1 ;
  (* src = "/x/zipsgd/hw/core.py:20" *)
  reg y = 1'h0;
  wire \\$3 ;
  assign \\$3  = ! (* src = "/x/zipsgd/hw/core.py:30" *) y;
  always @(posedge clk)
    y <= \\$2 ;
  always @* begin
    \\$2  = y;
    if (\\$1 ) begin
      \\$2  = 1'h1;
    end
    if (\\$3 ) begin
      \\$2  = 1'h0;
    end
  end
endmodule
"""


def _record(count, **fields):
    key = "\x01".join(f"{k}\x02{v}" for k, v in fields.items())
    return f"C '{key}' {count}\n"


def _dat(tmp_path, name, counts):
    lines = ["# SystemC::Coverage-3\n",
             _record(counts[0], f="top.v", l=12, S="12-13", page="v_line/top", o="if", h="TOP"),
             _record(counts[1], f="top.v", l=15, S="15-16", page="v_line/top", o="if", h="TOP"),
             _record(counts[2], f="top.v", l=3, page="v_toggle/top", o="y", h="TOP"),
             _record(counts[3], f="top.v", l=5, page="v_toggle/top", o="a", h="TOP")]
    path = tmp_path / name
    path.write_text("".join(lines))
    return path


def test_summary_counts_lines_points_and_toggles(tmp_path):
    points = coverage.parse(_dat(tmp_path, "a.dat", [3, 0, 1, 0]))
    assert [p.lines for p in points[:2]] == [(12, 13), (15, 16)]
    summary = coverage.summarize(points)
    assert summary["modules"]["top"] == {"line": [2, 4], "line_points": [1, 2],
                                         "toggle": [1, 2]}
    assert summary["total"]["line"] == [2, 4]


def test_merge_sums_counts_of_the_same_point(tmp_path):
    points = coverage.merge([_dat(tmp_path, "a.dat", [3, 0, 1, 0]),
                             _dat(tmp_path, "b.dat", [0, 2, 0, 0])])
    assert sorted(p.count for p in points) == [0, 1, 2, 3]
    assert coverage.summarize(points)["total"]["line"] == [4, 4]


def test_concatenated_runs_merge_as_separate_files(tmp_path):
    """Engine v2's runs are concatenated into one ``coverage.dat`` (``_finish``): a point that
    repeats in it sums as if the runs were merged file by file."""
    a, b = _dat(tmp_path, "a.dat", [3, 0, 1, 0]), _dat(tmp_path, "b.dat", [0, 2, 0, 0])
    joined = tmp_path / "joined.dat"
    joined.write_text(a.read_text() + b.read_text())
    one = sorted((p.key, p.count) for p in coverage.merge([joined]))
    assert one == sorted((p.key, p.count) for p in coverage.merge([a, b]))


def test_engine2s_plan_names_its_benchs_testcases():
    from zipsgd.sim import engine2_bench
    from zipsgd.spec.engine2 import EngineParams2

    plan = coverage.coverage_plan2(EngineParams2(64, 4096, 512))
    assert [name for name, _ in plan] == ["engine2_matches_golden", "engine2_errors",
                                          "engine2_memory_runs", "engine2_memory_errors",
                                          "engine2_resets"]
    assert all(hasattr(engine2_bench, name) for name, _ in plan)
    assert all(extra["runs"] for _, extra in plan) and plan[-1][1]["points"]


def test_lcov_tracefile(tmp_path):
    points = coverage.parse(_dat(tmp_path, "a.dat", [3, 0, 1, 0]))
    info = tmp_path / "coverage.info"
    coverage.write_info(points, info)
    assert info.read_text().splitlines() == [
        "TN:zipsgd_engine", "SF:top.v", "DA:12,3", "DA:13,3", "DA:15,0", "DA:16,0", "LF:4",
        "LH:2", "end_of_record"]


def test_uncovered_lines_lead_back_to_the_amaranth_source(tmp_path):
    points = coverage.parse(_dat(tmp_path, "a.dat", [0, 5, 1, 0]))
    (row,) = coverage.uncovered_lines(points, VERILOG)
    assert row["line"] == 12 and row["verilog"] == "if (\\$1 ) begin"
    assert row["condition_src"] == "hw/core.py:10"
    assert row["drives"] == "\\$2" and row["drives_src"] == "hw/core.py:20"
    points = coverage.parse(_dat(tmp_path, "b.dat", [1, 0, 1, 0]))
    (row,) = coverage.uncovered_lines(points, VERILOG)
    assert row["condition"] == "\\$3" and row["condition_src"] == "hw/core.py:30"
