"""cocotb tests for ``AxisAdder`` (see design.py).

Parameters come from ``zipsgd.sim.runner.run(test_params=...)`` via
``$ZIPSGD_SIM_PARAMS``: ``add`` (the constant the design was built with),
``n_beats`` (throughput tests), ``report_dir`` (where to write
``<test>.json`` with measured beats/s).
"""

import itertools
import json
import os
import random
import time
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

MASK = 0xFFFF_FFFF


def params():
    return json.loads(os.environ.get("ZIPSGD_SIM_PARAMS") or "{}")


def report(name, **data):
    d = params().get("report_dir")
    if d:
        Path(d).mkdir(parents=True, exist_ok=True)
        (Path(d) / f"{name}.json").write_text(json.dumps(data))


async def setup(dut):
    Clock(dut.clk, 10, unit="ns").start()
    dut.rst.value = 1
    dut.s_axis_tvalid.value = 0
    dut.s_axis_tlast.value = 0
    dut.s_axis_tdata.value = 0
    dut.m_axis_tready.value = 0
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def make_ends(dut):
    # byte_lanes=1: one list item == one 32-bit beat (engine-style words)
    s_bus = AxiStreamBus.from_prefix(dut, "s_axis")
    m_bus = AxiStreamBus.from_prefix(dut, "m_axis")
    src = AxiStreamSource(s_bus, dut.clk, dut.rst, byte_lanes=1)
    snk = AxiStreamSink(m_bus, dut.clk, dut.rst, byte_lanes=1)
    return src, snk


def set_pause(end, gen):
    """cocotbext-axi 0.1.28 bug: set_pause_generator(None) kills the pause
    coroutine but leaves ``pause`` latched at its last value (-> the source or
    sink can stall forever).  Always clear it explicitly."""
    end.set_pause_generator(gen)
    if gen is None:
        end.pause = False


@cocotb.test(timeout_time=1, timeout_unit="ms")
async def axis_roundtrip_idle_backpressure(dut):
    """Random frames, random idle on the source and backpressure on the sink:
    every word arrives +add, frame boundaries (tlast) preserved."""
    add = params().get("add", 0)
    rng = random.Random(1)
    await setup(dut)
    src, snk = make_ends(dut)
    for idle, bp in [(None, None),
                     (itertools.cycle([1, 0, 0]), None),
                     (None, itertools.cycle([1, 1, 0])),
                     ((rng.random() < 0.3 for _ in itertools.count()),
                      (rng.random() < 0.4 for _ in itertools.count()))]:
        set_pause(src, idle)
        set_pause(snk, bp)
        frames = [[rng.getrandbits(32) for _ in range(rng.randint(1, 40))] for _ in range(30)]
        for f in frames:
            await src.send(AxiStreamFrame(f))
        for f in frames:
            rx = await snk.recv()
            assert list(rx.tdata) == [(x + add) & MASK for x in f]
    assert snk.empty()


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def axis_throughput_cocotbext(dut):
    """n_beats through cocotbext-axi source/sink, no idle, no backpressure."""
    p = params()
    n, add = p.get("n_beats", 10_000), p.get("add", 0)
    frame_len = 1024
    await setup(dut)
    src, snk = make_ends(dut)
    data = [i & MASK for i in range(n)]
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, n, frame_len):
        src.send_nowait(AxiStreamFrame(data[i:i + frame_len]))
    got = []
    while len(got) < n:
        got.extend((await snk.recv()).tdata)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert got == [(x + add) & MASK for x in data]
    dut._log.info("cocotbext-axi: %d beats in %.2f s = %.0f beats/s (%.0f per CPU-s)",
                  n, wall, n / wall, n / cpu)
    report("axis_throughput_cocotbext", beats=n, wall=wall, cpu=cpu, beats_per_s=n / wall,
           beats_per_cpu_s=n / cpu)


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def axis_throughput_lean(dut):
    """Same traffic, lean driver/monitor: one coroutine each, one RisingEdge
    await per clock, direct .value writes/reads, handles cached."""
    p = params()
    n, add = p.get("n_beats", 10_000), p.get("add", 0)
    await setup(dut)
    clk = dut.clk
    s_data, s_valid, s_last = dut.s_axis_tdata, dut.s_axis_tvalid, dut.s_axis_tlast
    s_ready = dut.s_axis_tready
    m_data, m_valid, m_ready = dut.m_axis_tdata, dut.m_axis_tvalid, dut.m_axis_tready
    got = []

    async def drive():
        edge = RisingEdge(clk)
        i = 0
        s_data.value = 0
        s_last.value = int(n == 1)
        s_valid.value = 1
        while i < n:
            await edge
            if s_ready.value:          # beat i accepted at this edge
                i += 1
                if i < n:
                    s_data.value = i & MASK
                    if i == n - 1:
                        s_last.value = 1
        s_valid.value = 0

    async def sink():
        edge = RisingEdge(clk)
        m_ready.value = 1
        while len(got) < n:
            await edge
            if m_valid.value:
                got.append(m_data.value.to_unsigned())

    t0, c0 = time.perf_counter(), time.process_time()
    d = cocotb.start_soon(drive())
    await sink()
    await d
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert got == [(i + add) & MASK for i in range(n)]
    dut._log.info("lean: %d beats in %.2f s = %.0f beats/s (%.0f per CPU-s)",
                  n, wall, n / wall, n / cpu)
    report("axis_throughput_lean", beats=n, wall=wall, cpu=cpu, beats_per_s=n / wall,
           beats_per_cpu_s=n / cpu)


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def axis_throughput_fused(dut):
    """Leanest: source and sink in ONE coroutine, one await per clock."""
    p = params()
    n, add = p.get("n_beats", 10_000), p.get("add", 0)
    await setup(dut)
    s_data, s_valid, s_last = dut.s_axis_tdata, dut.s_axis_tvalid, dut.s_axis_tlast
    s_ready = dut.s_axis_tready
    m_data, m_valid, m_ready = dut.m_axis_tdata, dut.m_axis_tvalid, dut.m_axis_tready
    edge = RisingEdge(dut.clk)
    got = []
    t0, c0 = time.perf_counter(), time.process_time()
    i = 0
    s_data.value = 0
    s_last.value = int(n == 1)
    s_valid.value = 1
    m_ready.value = 1
    while len(got) < n:
        await edge
        if m_valid.value:
            got.append(m_data.value.to_unsigned())
        if i < n and s_ready.value:
            i += 1
            if i < n:
                s_data.value = i & MASK
                if i == n - 1:
                    s_last.value = 1
            else:
                s_valid.value = 0
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert got == [(i + add) & MASK for i in range(n)]
    dut._log.info("fused: %d beats in %.2f s = %.0f beats/s (%.0f per CPU-s)",
                  n, wall, n / wall, n / cpu)
    report("axis_throughput_fused", beats=n, wall=wall, cpu=cpu, beats_per_s=n / wall,
           beats_per_cpu_s=n / cpu)
