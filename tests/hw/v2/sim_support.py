"""Running a testbench on an engine v2 block in Amaranth's simulator."""

from __future__ import annotations

from amaranth.sim import Simulator


def simulate(dut, bench, *, clock: bool = True) -> None:
    """Run ``bench`` (an async testbench) on ``dut``, with a clock unless ``clock`` is false."""
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
