"""``hw.regfile.RegisterFile`` in Amaranth's simulator, against the map in
``zipsgd/spec/registers.py``.

An AXI4-Lite manager (:class:`Manager`) drives the bus with per-channel delays and response
back-pressure; a model of the core's port answers model reads after a chosen latency (0 = in
the cycle of the ``read`` pulse, as the core does while busy) and a monitor records every
cycle's strobes and port pulses.
"""

from __future__ import annotations

import gc
import re
import subprocess
import warnings

import numpy as np
import pytest
from amaranth.back import verilog
from amaranth.hdl import Fragment, Module, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.sim import Simulator

from zipsgd.hw.regfile import (
    RegisterFile,
    axil_ports,
    axil_signature,
    connect_axil_ports,
    ctrl_signature,
    model_index_width,
    register_layout,
    status_signature,
)
from zipsgd.sim import toolchain
from zipsgd.sim.runner import DEFAULT_WAIVERS
from zipsgd.spec.engine import EngineParams, RunConfig, UpdateMode
from zipsgd.spec.fixed import RoundingMode
from zipsgd.spec.registers import (
    REGISTERS,
    RESP_OKAY,
    RESP_SLVERR,
    ErrorBit,
    decode,
    decode_status_words,
    encode,
    epoch_status,
    identity_values,
    read_run_config,
    register,
    register_at,
    run_config_writes,
    status_offsets,
)
from zipsgd.spec.stream import Encoding

PARAMS = EngineParams()
SMALL = EngineParams(bus_width=128, max_features=5, max_batch=7)
TIMEOUT = 200  # cycles any single handshake may take
STROBES = ("start", "abort", "clear_errors", "seed_write")
OFF = {r.name: r.offset for r in REGISTERS}
CONFIG_REGS = [r for r in REGISTERS if r.group == "config"]
UNMAPPED = [0x018, 0x01C, 0x038, 0x03C, 0x070, 0x07C, 0x0C8, 0x100, 0x800, 0xFFC]


class Manager:
    """AXI4-Lite manager: one transaction at a time per channel pair, cycle by cycle."""

    def __init__(self, bus):
        self.bus = bus

    async def write(self, ctx, addr, data, strb=0xF, *, aw_delay=0, w_delay=0, b_delay=0):
        """Write; AW and W are offered after their own delays; B is accepted ``b_delay`` cycles
        after BVALID rises (checking that BVALID and BRESP hold meanwhile).  Returns BRESP."""
        bus = self.bus
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.wdata, data)
        ctx.set(bus.wstrb, strb)
        aw_done = w_done = False
        for cycle in range(TIMEOUT):
            ctx.set(bus.awvalid, not aw_done and cycle >= aw_delay)
            ctx.set(bus.wvalid, not w_done and cycle >= w_delay)
            aw_hs = ctx.get(bus.awvalid) and ctx.get(bus.awready)
            w_hs = ctx.get(bus.wvalid) and ctx.get(bus.wready)
            await ctx.tick()
            aw_done, w_done = aw_done or aw_hs, w_done or w_hs
            if aw_done and w_done:
                break
        else:
            raise AssertionError(f"write {addr:#x}: AW/W not accepted")
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        return await self._response(ctx, bus.bvalid, bus.bready, (bus.bresp,), b_delay)

    async def read(self, ctx, addr, *, ar_delay=0, r_delay=0):
        """Read; returns ``(rdata, rresp)``."""
        bus = self.bus
        for _ in range(ar_delay):
            await ctx.tick()
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, 1)
        for _ in range(TIMEOUT):
            hs = ctx.get(bus.arready)
            await ctx.tick()
            if hs:
                break
        else:
            raise AssertionError(f"read {addr:#x}: AR not accepted")
        ctx.set(bus.arvalid, 0)
        rdata, rresp = await self._response(ctx, bus.rvalid, bus.rready,
                                            (bus.rdata, bus.rresp), r_delay)
        return rdata, rresp

    async def _response(self, ctx, valid, ready, payload, delay):
        held = None
        for _ in range(TIMEOUT):
            if ctx.get(valid):
                values = tuple(ctx.get(p) for p in payload)
                if held is None:
                    held, wait = values, delay
                assert values == held, "response changed while VALID waited for READY"
                if wait == 0:
                    ctx.set(ready, 1)
                    await ctx.tick()
                    ctx.set(ready, 0)
                    return values[0] if len(values) == 1 else values
                wait -= 1
            else:
                assert held is None, "VALID dropped before READY"
            await ctx.tick()
        raise AssertionError("no response")

    async def read_word(self, ctx, addr):
        data, resp = await self.read(ctx, addr)
        assert resp == RESP_OKAY, f"read {addr:#x} answered {resp}"
        return data

    async def write_word(self, ctx, addr, data, strb=0xF):
        resp = await self.write(ctx, addr, data, strb)
        assert resp == RESP_OKAY, f"write {addr:#x} answered {resp}"


class Bench:
    """The DUT, a manager, a model of the core's memory port and a cycle monitor."""

    def __init__(self, params=PARAMS, latency=1):
        self.params = params
        self.dut = RegisterFile(params=params)
        self.axil = Manager(self.dut.axil)
        self.latency = latency
        self.memory: dict[int, int] = {}
        self.port_log: list[tuple[int, str, int]] = []  # (cycle, "read"/"write", index)
        self.cycles: list[dict] = []  # per cycle: strobes, port pulses, ctrl seed
        self.spurious_rvalid = False

    async def core(self, ctx):
        port = self.dut.model
        due: list[tuple[int, int]] = []
        cycle = 0
        while True:
            await ctx.tick()
            cycle += 1
            ctx.set(port.rvalid, 0)
            if ctx.get(port.write):
                index = ctx.get(port.index)
                self.memory[index] = ctx.get(port.wdata)
                self.port_log.append((cycle, "write", index))
            if ctx.get(port.read):
                index = ctx.get(port.index)
                self.port_log.append((cycle, "read", index))
                due.append((cycle + self.latency, self.memory.get(index, 0)))
            if due and due[0][0] == cycle:
                ctx.set(port.rvalid, 1)
                ctx.set(port.rdata, due.pop(0)[1])
            elif self.spurious_rvalid and cycle % 3 == 0:
                ctx.set(port.rvalid, 1)
                ctx.set(port.rdata, 0xDEAD_BEEF)

    async def monitor(self, ctx):
        ctrl, port = self.dut.ctrl, self.dut.model
        while True:
            await ctx.tick()
            row = {name: ctx.get(getattr(ctrl, name)) for name in STROBES}
            row.update(read=ctx.get(port.read), write=ctx.get(port.write),
                       seed=ctx.get(ctrl.seed))
            self.cycles.append(row)

    def pulses(self, name):
        """Cycles in which ``name`` was high."""
        return [i for i, row in enumerate(self.cycles) if row[name]]

    def run(self, *testbenches):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        sim.add_testbench(self.core, background=True)
        sim.add_testbench(self.monitor, background=True)
        for tb in testbenches:
            sim.add_testbench(tb)
        sim.run()


def run(testbench, **kwargs) -> Bench:
    bench = Bench(**kwargs)

    async def tb(ctx):
        await testbench(ctx, bench, bench.axil)
    bench.run(tb)
    return bench


def ctrl_values(ctx, dut) -> dict[str, int]:
    return {name: ctx.get(getattr(dut.ctrl, name)) for name in ctrl_signature().members}


def random_words(seed):
    rng = np.random.default_rng(seed)
    return {r.name: int(rng.integers(0, 1 << 32, dtype=np.uint64)) for r in REGISTERS}


# -- contract ----------------------------------------------------------------------------------

def test_signature_members_and_widths():
    widths = {name: member.shape for name, member in ctrl_signature().members.items()}
    assert widths == {
        "encoding": 2, "bits": 6, "n_features": 32, "batch_size": 32, "n_samples": 64,
        "model_width": 6, "model_frac": 6, "grad_width": 6, "grad_frac": 6, "step": 32,
        "decay": 24, "threshold": 31, "rounding": 2, "update_mode": 1, "seed": 32,
        "start": 1, "abort": 1, "clear_errors": 1, "seed_write": 1}
    assert all(m.flow == wiring.Out for m in ctrl_signature().members.values())
    widths = {name: member.shape for name, member in status_signature().members.items()}
    assert widths == {
        "busy": 1, "done": 1, "draining": 1, "loss_saturated": 1, "error_flags": 5,
        "error_count": 32, "loss": 64, "beats": 64, "samples": 64, "cycles_busy": 64,
        "cycles_starved": 64, "cycles_update_stall": 64, "updates": 32,
        "model_saturations": 32, "residual_saturations": 32, "discarded_beats": 32}
    dut = RegisterFile(params=SMALL)
    Fragment.get(dut, None)  # elaborates (and marks it used)
    assert dut.params is SMALL
    members = dut.signature.members
    assert (members["axil"].flow, members["ctrl"].flow, members["status"].flow,
            members["model"].flow) == (wiring.In, wiring.Out, wiring.In, wiring.Out)
    assert {n: (m.flow, m.shape) for n, m in members["model"].signature.members.items()} == {
        "index": (wiring.Out, 3), "wdata": (wiring.Out, 32), "write": (wiring.Out, 1),
        "read": (wiring.Out, 1), "rdata": (wiring.In, 32), "rvalid": (wiring.In, 1)}
    assert model_index_width(EngineParams(max_features=1)) == 1
    assert model_index_width(EngineParams(max_features=32768)) == 15
    assert model_index_width(EngineParams(max_features=32769)) == 16


def test_parameters_are_validated():
    # The half-built components die with the exception: collect them here, where their
    # "created but never used" warning is expected.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(TypeError, match="EngineParams"):
            RegisterFile(params={"bus_width": 64})
        with pytest.raises(TypeError):
            RegisterFile(PARAMS)  # keyword-only
        gc.collect()
    with pytest.raises(ValueError, match="data_width"):
        axil_signature(data_width=16)
    with pytest.raises(ValueError, match="addr_width"):
        axil_signature(addr_width=1)


def test_verilog_is_clean(tmp_path):
    text = verilog.convert(RegisterFile(params=PARAMS), name="zipsgd_regfile", emit_src=False)
    ports = set(re.findall(r"(?:input|output)\s+(?:\[\d+:0\]\s+)?(\w+);", text))
    for name in axil_signature().members:
        assert f"axil__{name}" in ports
    assert {"ctrl__start", "ctrl__n_samples", "status__loss", "model__rvalid"} <= ports
    assert "/work" not in text and "\\src" not in text
    # Verilator lints it clean with the project's waivers (the warnings a build would stop on).
    source = tmp_path / "zipsgd_regfile.amaranth.v"
    source.write_text(text)
    lint = subprocess.run(
        [str(toolchain.find_verilator().executable), "--lint-only", str(DEFAULT_WAIVERS),
         str(source), "--top-module", "zipsgd_regfile"],
        env=toolchain.verilator_env(), capture_output=True, text=True, timeout=120)
    assert lint.returncode == 0, lint.stderr


def test_top_level_names_the_ports_s_axil():
    class Top(wiring.Component):
        def __init__(self):
            super().__init__({**axil_ports("s_axil_"), "start": wiring.Out(1)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.regfile = regfile = RegisterFile(params=PARAMS)
            connect_axil_ports(m, self, regfile.axil, prefix="s_axil_")
            m.d.comb += self.start.eq(regfile.ctrl.start)
            return m

    text = verilog.convert(Top(), name="top", emit_src=False)
    expected = {"s_axil_awaddr", "s_axil_awvalid", "s_axil_awready", "s_axil_wdata",
                "s_axil_wstrb", "s_axil_wvalid", "s_axil_wready", "s_axil_bresp",
                "s_axil_bvalid", "s_axil_bready", "s_axil_araddr", "s_axil_arvalid",
                "s_axil_arready", "s_axil_rdata", "s_axil_rresp", "s_axil_rvalid",
                "s_axil_rready"}
    ports = {name: d for d, name in re.findall(r"(input|output)\s+(?:\[\d+:0\]\s+)?(\w+);",
                                               text)}
    assert expected <= set(ports)
    assert ports["s_axil_awaddr"] == "input" and ports["s_axil_rdata"] == "output"
    assert ports["s_axil_bready"] == "input" and ports["s_axil_wready"] == "output"


# -- reset and identity ------------------------------------------------------------------------

@pytest.mark.parametrize("params", [PARAMS, SMALL], ids=["default", "small"])
def test_reset_values(params):
    async def tb(ctx, bench, axil):
        assert ctrl_values(ctx, bench.dut) == {
            **{f.name: getattr(RunConfig(), f.name) for r in CONFIG_REGS for f in r.fields
               if f.name != "n_samples"},
            "n_samples": 0, "start": 0, "abort": 0, "clear_errors": 0, "seed_write": 0}
        assert ctx.get(bench.dut.model.index) == 0
        ident = identity_values(params)
        for reg in REGISTERS:
            if not reg.readable or reg.name == "MODEL_DATA":
                continue
            expected = ident.get(reg.name, reg.reset)
            assert await axil.read_word(ctx, reg.offset) == expected, reg.name
        words = {r.offset: await axil.read_word(ctx, r.offset) for r in CONFIG_REGS}
        assert read_run_config(words.__getitem__) == (RunConfig(), 0)

    run(tb, params=params)


# -- reads and writes of every register --------------------------------------------------------

def test_every_writable_register_reads_back_and_drives_ctrl():
    words = random_words(2)

    async def tb(ctx, bench, axil):
        for reg in REGISTERS:
            if reg.access == "rw" and reg.name != "MODEL_DATA":
                await axil.write_word(ctx, reg.offset, words[reg.name])
        expected_ctrl = {}
        for reg in REGISTERS:
            if reg.access != "rw" or reg.name == "MODEL_DATA":
                continue
            expected = words[reg.name] & reg.mask
            assert await axil.read_word(ctx, reg.offset) == expected, reg.name
            if reg.group == "config":
                for name, value in decode(reg.name, expected).items():
                    expected_ctrl[name] = expected_ctrl.get(name, 0) | (value << 32 * reg.word)
        ctrl = ctrl_values(ctx, bench.dut)
        assert {k: ctrl[k] for k in expected_ctrl} == expected_ctrl
        assert ctx.get(bench.dut.model.index) == (words["MODEL_INDEX"] & 0xFFFFFF) & 0x7FFF

    run(tb)


CONFIGS = [
    (RunConfig(encoding=Encoding.SINGLE, bits=7, n_features=1234, batch_size=17,
               model_width=20, model_frac=18, grad_width=30, grad_frac=40, step=0xDEADBEEF,
               decay=0xABCDEF, threshold=0x7FFF0000, rounding=RoundingMode.HALF_EVEN,
               update_mode=UpdateMode.DELAYED, seed=0x12345678), (1 << 40) + 3),
    (RunConfig(encoding=Encoding.RAW32, n_features=3, model_frac=31, grad_frac=63), 1),
]


@pytest.mark.parametrize("config, n_samples", CONFIGS)
def test_run_config_writes_load_the_ctrl_outputs(config, n_samples):
    async def tb(ctx, bench, axil):
        for offset, value in run_config_writes(config, n_samples, seed=True):
            await axil.write_word(ctx, offset, value)
        ctrl = ctrl_values(ctx, bench.dut)
        for name in ctrl:
            if name in STROBES:
                continue
            expected = n_samples if name == "n_samples" else int(getattr(config, name))
            assert ctrl[name] == expected, name
        words = {r.offset: await axil.read_word(ctx, r.offset) for r in CONFIG_REGS}
        assert read_run_config(words.__getitem__) == (config, n_samples)

    run(tb)


def test_status_registers_show_the_core_signals():
    rng = np.random.default_rng(3)
    values = {name: int(rng.integers(0, 1 << min(m.shape, 63), dtype=np.uint64))
              | (1 << (m.shape - 1) if m.shape == 64 else 0)
              for name, m in status_signature().members.items()}

    async def tb(ctx, bench, axil):
        for name, value in values.items():
            ctx.set(getattr(bench.dut.status, name), value)
        words = {o: await axil.read_word(ctx, o) for o in status_offsets()}
        status = decode_status_words(words)
        for name, value in values.items():
            assert status[name] == value, name
        assert status["error"] == int(values["error_flags"] != 0)
        for bit in ErrorBit:
            assert status[bit.name.lower()] == (values["error_flags"] >> bit) & 1
        assert epoch_status(status).loss_acc == values["loss"]
        # STATUS.ERROR follows the flags.
        ctx.set(bench.dut.status.error_flags, 0)
        assert decode("STATUS", await axil.read_word(ctx, OFF["STATUS"]))["error"] == 0
        ctx.set(bench.dut.status.error_flags, 1 << ErrorBit.MODEL_PORT_BUSY)
        assert decode("STATUS", await axil.read_word(ctx, OFF["STATUS"]))["error"] == 1

    run(tb)


def test_hi_returns_the_high_word_latched_by_lo():
    async def tb(ctx, bench, axil):
        loss = bench.dut.status.loss
        ctx.set(loss, 0x0000_0001_FFFF_FFFF)
        assert await axil.read_word(ctx, OFF["LOSS_LO"]) == 0xFFFF_FFFF
        ctx.set(loss, 0x0000_0002_0000_0000)  # the counter carried between the two reads
        assert await axil.read_word(ctx, OFF["LOSS_HI"]) == 0x1
        assert await axil.read_word(ctx, OFF["LOSS_LO"]) == 0
        assert await axil.read_word(ctx, OFF["LOSS_HI"]) == 0x2
        # Each pair has its own latch.
        ctx.set(bench.dut.status.beats, 0x0000_0005_0000_0000)
        assert await axil.read_word(ctx, OFF["BEATS_LO"]) == 0
        ctx.set(loss, 0x0000_0009_0000_0000)
        assert await axil.read_word(ctx, OFF["LOSS_HI"]) == 0x2
        assert await axil.read_word(ctx, OFF["BEATS_HI"]) == 0x5

    run(tb)


# -- AXI4-Lite protocol ------------------------------------------------------------------------

DELAYS = [(0, 0), (0, 1), (1, 0), (0, 5), (5, 0), (3, 3), (7, 2)]


def test_aw_and_w_in_any_order_and_with_delays():
    async def tb(ctx, bench, axil):
        for i, (aw_delay, w_delay) in enumerate(DELAYS):
            value = 0x1000_0000 * (i + 1) + i
            resp = await axil.write(ctx, OFF["STEP"], value, aw_delay=aw_delay, w_delay=w_delay)
            assert resp == RESP_OKAY
            assert ctx.get(bench.dut.ctrl.step) == value
            assert await axil.read_word(ctx, OFF["STEP"]) == value

    run(tb)


def test_b_and_r_back_pressure():
    async def tb(ctx, bench, axil):
        for delay in (1, 4, 13):
            assert await axil.write(ctx, OFF["SEED"], delay, b_delay=delay) == RESP_OKAY
            assert await axil.read(ctx, OFF["SEED"], r_delay=delay) == (delay, RESP_OKAY)
            assert await axil.write(ctx, 0x038, 1, b_delay=delay) == RESP_SLVERR
            assert await axil.read(ctx, 0x038, r_delay=delay) == (0, RESP_SLVERR)
            assert await axil.read(ctx, OFF["SEED"], ar_delay=delay) == (delay, RESP_OKAY)

    run(tb)


def test_next_write_waits_for_the_pending_response():
    """A second write's AW and W are buffered while B waits, and execute once B is taken."""
    async def tb(ctx, bench, axil):
        bus = bench.dut.axil
        ctx.set(bus.awaddr, OFF["STEP"])
        ctx.set(bus.wdata, 1)
        ctx.set(bus.wstrb, 0xF)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        await ctx.tick()  # first write accepted
        ctx.set(bus.wdata, 2)  # second write offered at once, B not taken
        await ctx.tick()
        await ctx.tick()  # second AW/W accepted into the buffers
        ctx.set(bus.awvalid, 0)
        ctx.set(bus.wvalid, 0)
        for _ in range(6):
            assert ctx.get(bus.bvalid) and ctx.get(bench.dut.ctrl.step) == 1
            await ctx.tick()
        ctx.set(bus.bready, 1)
        await ctx.tick()  # first B taken
        ctx.set(bus.bready, 0)
        await ctx.tick()  # second write executes
        assert ctx.get(bus.bvalid) and ctx.get(bench.dut.ctrl.step) == 2
        ctx.set(bus.bready, 1)
        await ctx.tick()
        ctx.set(bus.bready, 0)
        assert not ctx.get(bus.bvalid)

    run(tb)


@pytest.mark.parametrize("latency", [0, 3])
def test_pipelined_reads_answer_in_order(latency):
    """The manager offers the next AR as soon as the last one is accepted (R always ready)."""
    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["MODEL_DATA"], 0xAAAA)
        await axil.write_word(ctx, OFF["MODEL_DATA"], 0xBBBB)
        await axil.write_word(ctx, OFF["STEP"], 0x5157)
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 0)
        bus = bench.dut.axil
        queue = [OFF["MODEL_DATA"], OFF["ID"], OFF["MODEL_DATA"], OFF["STEP"], 0x038]
        answers = []
        ctx.set(bus.rready, 1)
        for _ in range(60):
            if queue:
                ctx.set(bus.araddr, queue[0])
            ctx.set(bus.arvalid, bool(queue))
            accepted = bool(queue) and ctx.get(bus.arready)
            if ctx.get(bus.rvalid):
                answers.append((ctx.get(bus.rdata), ctx.get(bus.rresp)))
            await ctx.tick()
            if accepted:
                queue.pop(0)
        assert answers == [(0xAAAA, RESP_OKAY), (0x5A534744, RESP_OKAY), (0xBBBB, RESP_OKAY),
                           (0x5157, RESP_OKAY), (0, RESP_SLVERR)]

    run(tb, latency=latency)


def test_unmapped_addresses_answer_slverr_and_change_nothing():
    async def tb(ctx, bench, axil):
        before = ctrl_values(ctx, bench.dut)
        for offset in UNMAPPED:
            assert await axil.read(ctx, offset) == (0, RESP_SLVERR)
            assert await axil.write(ctx, offset, 0xFFFF_FFFF) == RESP_SLVERR
        assert ctrl_values(ctx, bench.dut) == before
        assert bench.pulses("start") == [] and bench.port_log == []
        # Address bits [1:0] are ignored.
        await axil.write_word(ctx, OFF["DECAY"] + 3, 0x55)
        assert await axil.read_word(ctx, OFF["DECAY"] + 1) == 0x55

    run(tb)


def test_wrong_direction_answers_slverr():
    async def tb(ctx, bench, axil):
        before = ctrl_values(ctx, bench.dut)
        for reg in REGISTERS:
            if reg.access == "ro":
                assert await axil.write(ctx, reg.offset, 0xFFFF_FFFF) == RESP_SLVERR, reg.name
            if reg.access == "wo":
                assert await axil.read(ctx, reg.offset) == (0, RESP_SLVERR), reg.name
        assert ctrl_values(ctx, bench.dut) == before
        assert await axil.read_word(ctx, OFF["ID"]) == 0x5A534744

    run(tb)


def test_byte_strobes_merge_bytes():
    async def tb(ctx, bench, axil):
        value = 0x0123_4567
        await axil.write_word(ctx, OFF["STEP"], value)
        for strb in range(16):
            data = 0x89AB_CDEF ^ (strb * 0x1111_1111)
            await axil.write_word(ctx, OFF["STEP"], data, strb)
            mask = sum(0xFF << 8 * b for b in range(4) if strb >> b & 1)
            value = (value & ~mask) | (data & mask)
            assert await axil.read_word(ctx, OFF["STEP"]) == value
            assert ctx.get(bench.dut.ctrl.step) == value
        # Narrow fields merge too: byte 1 of FORMAT is BITS.
        await axil.write_word(ctx, OFF["FORMAT"], encode("FORMAT", encoding=1, bits=3))
        await axil.write_word(ctx, OFF["FORMAT"], 0xFFFF_0502, strb=0b0010)
        assert decode("FORMAT", await axil.read_word(ctx, OFF["FORMAT"])) == {
            "encoding": 1, "bits": 5}

    run(tb)


# -- strobes -----------------------------------------------------------------------------------

def test_ctrl_strobes_last_one_cycle():
    async def tb(ctx, bench, axil):
        for name in ("start", "abort", "clear_errors"):
            n = len(bench.cycles)
            await axil.write_word(ctx, OFF["CTRL"], encode("CTRL", **{name: 1}))
            for _ in range(4):
                await ctx.tick()
            new = bench.cycles[n:]
            for other in STROBES:
                assert sum(row[other] for row in new) == (other == name), (name, other)
        # All three together pulse together; zero bits and a disabled byte pulse nothing.
        n = len(bench.cycles)
        await axil.write_word(ctx, OFF["CTRL"], 0b111)
        await axil.write_word(ctx, OFF["CTRL"], 0)
        await axil.write_word(ctx, OFF["CTRL"], 0b111, strb=0b1110)
        await axil.write_word(ctx, OFF["CTRL"], 0b111, strb=0)
        for _ in range(4):
            await ctx.tick()
        rows = [row for row in bench.cycles[n:] if any(row[s] for s in STROBES)]
        assert rows == [{**rows[0], "start": 1, "abort": 1, "clear_errors": 1,
                         "seed_write": 0}]

    run(tb)


def test_seed_write_pulses_with_the_new_seed():
    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["SEED"], 0xCAFE_F00D)
        await axil.write_word(ctx, OFF["SEED"], 0x0000_00AA, strb=0b0001)
        await axil.write_word(ctx, OFF["SEED"], 0x1234_5678, strb=0)  # no bytes: no pulse
        for _ in range(3):
            await ctx.tick()
        pulses = bench.pulses("seed_write")
        assert [bench.cycles[i]["seed"] for i in pulses] == [0xCAFE_F00D, 0xCAFE_F0AA]
        assert all(bench.cycles[i - 1]["seed"] != bench.cycles[i]["seed"] for i in pulses)
        assert ctx.get(bench.dut.ctrl.seed) == 0xCAFE_F0AA

    run(tb)


def test_configuration_is_locked_while_busy():
    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["N_FEATURES"], 10)
        ctx.set(bench.dut.status.busy, 1)
        before = ctrl_values(ctx, bench.dut)
        for reg in CONFIG_REGS:
            assert await axil.write(ctx, reg.offset, 0x1234_5678) == RESP_SLVERR, reg.name
        assert ctrl_values(ctx, bench.dut) == before
        assert bench.pulses("seed_write") == []
        assert await axil.read_word(ctx, OFF["N_FEATURES"]) == 10  # reads still work
        # CTRL and MODEL_INDEX stay writable.
        await axil.write_word(ctx, OFF["CTRL"], encode("CTRL", abort=1))
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 2)
        ctx.set(bench.dut.status.busy, 0)
        await axil.write_word(ctx, OFF["N_FEATURES"], 11)
        assert ctx.get(bench.dut.ctrl.n_features) == 11
        # A config write pipelined right behind START is refused when the core raises BUSY
        # in the cycle after the START pulse (as the core does).
        bus = bench.dut.axil
        queue = [(OFF["CTRL"], encode("CTRL", start=1)), (OFF["N_FEATURES"], 12)]
        responses = []
        busy_next = False
        ctx.set(bus.bready, 1)
        ctx.set(bus.wstrb, 0xF)
        for _ in range(20):
            if busy_next:
                ctx.set(bench.dut.status.busy, 1)
            if queue:
                ctx.set(bus.awaddr, queue[0][0])
                ctx.set(bus.wdata, queue[0][1])
            ctx.set(bus.awvalid, bool(queue))
            ctx.set(bus.wvalid, bool(queue))
            accepted = bool(queue) and ctx.get(bus.awready) and ctx.get(bus.wready)
            if ctx.get(bus.bvalid):
                responses.append(ctx.get(bus.bresp))
            busy_next = busy_next or ctx.get(bench.dut.ctrl.start)
            await ctx.tick()
            if accepted:
                queue.pop(0)
        ctx.set(bus.bready, 0)
        assert responses == [RESP_OKAY, RESP_SLVERR]
        assert ctx.get(bench.dut.ctrl.n_features) == 11

    run(tb)


# -- model port --------------------------------------------------------------------------------

@pytest.mark.parametrize("latency", [0, 1, 6])
def test_model_port_reads_wait_for_the_core(latency):
    words = [0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFE, 5, 0]

    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 1)
        for w in words[:4]:
            await axil.write_word(ctx, OFF["MODEL_DATA"], w)
        assert bench.memory == {1 + i: w for i, w in enumerate(words[:4])}
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == 5
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 1)
        for w in words[:4]:
            assert await axil.read_word(ctx, OFF["MODEL_DATA"]) == w
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == 5
        # The R response comes exactly one cycle after the core's answer.
        bus = bench.dut.axil
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 2)
        ctx.set(bus.araddr, OFF["MODEL_DATA"])
        ctx.set(bus.arvalid, 1)
        await ctx.tick()
        ctx.set(bus.arvalid, 0)
        waited = 0
        while not ctx.get(bus.rvalid):
            await ctx.tick()
            waited += 1
            assert waited < 20
        assert waited == 2 + latency  # AR buffered, executed, core latency, R registered
        assert ctx.get(bus.rdata) == words[1]
        ctx.set(bus.rready, 1)
        await ctx.tick()
        ctx.set(bus.rready, 0)

    bench = run(tb, latency=latency)
    assert all(not (row["read"] and row["write"]) for row in bench.cycles)
    assert [len(bench.pulses(k)) for k in ("read", "write")] == [5, 4]


def test_model_port_pulses_are_one_cycle_with_the_index():
    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 3)
        await axil.write_word(ctx, OFF["MODEL_DATA"], 0xAB)
        await axil.read_word(ctx, OFF["MODEL_DATA"])
        await axil.write(ctx, OFF["MODEL_DATA"], 0xCD, strb=0)  # no bytes: no access
        for _ in range(3):
            await ctx.tick()
        assert [(kind, index) for _, kind, index in bench.port_log] == [("write", 3),
                                                                          ("read", 4)]
        for kind in ("read", "write"):
            (cycle,) = bench.pulses(kind)
            assert not bench.cycles[cycle + 1][kind]
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == 5

    run(tb)


def test_model_index_out_of_range_answers_slverr():
    async def tb(ctx, bench, axil):
        await axil.write_word(ctx, OFF["MODEL_INDEX"], SMALL.max_features - 1)
        await axil.write_word(ctx, OFF["MODEL_DATA"], 42)
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == SMALL.max_features
        assert await axil.write(ctx, OFF["MODEL_DATA"], 43) == RESP_SLVERR
        assert await axil.read(ctx, OFF["MODEL_DATA"]) == (0, RESP_SLVERR)
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == SMALL.max_features  # unchanged
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 0xFF_FFFF)
        assert await axil.read(ctx, OFF["MODEL_DATA"]) == (0, RESP_SLVERR)
        assert bench.port_log[1:] == []
        assert bench.memory == {SMALL.max_features - 1: 42}

    run(tb, params=SMALL)


def test_partial_model_data_write_answers_slverr():
    async def tb(ctx, bench, axil):
        for strb in (0b0001, 0b0111, 0b1000, 0b1110):
            assert await axil.write(ctx, OFF["MODEL_DATA"], 7, strb=strb) == RESP_SLVERR
        assert await axil.read_word(ctx, OFF["MODEL_INDEX"]) == 0
        assert bench.port_log == []

    run(tb)


def test_model_rvalid_outside_a_read_is_ignored():
    async def tb(ctx, bench, axil):
        bench.spurious_rvalid = True
        await axil.write_word(ctx, OFF["MODEL_DATA"], 0x1111)
        await axil.write_word(ctx, OFF["MODEL_DATA"], 0x2222)
        for _ in range(10):
            await ctx.tick()
            assert not ctx.get(bench.dut.axil.rvalid)
        assert await axil.read_word(ctx, OFF["SEED"]) == 1
        await axil.write_word(ctx, OFF["MODEL_INDEX"], 0)
        bench.spurious_rvalid = False
        assert await axil.read_word(ctx, OFF["MODEL_DATA"]) == 0x1111

    run(tb, latency=4)


def test_concurrent_reads_and_writes_serialize_the_model_port():
    """A writer streams MODEL_DATA while a reader polls registers and reads MODEL_DATA: every
    model access gets its own index and the port never sees a read and a write at once."""
    bench = Bench(latency=3)
    axil = bench.axil
    n = 12
    reads = []

    async def writer(ctx):
        rng = np.random.default_rng(4)
        for i in range(n):
            await axil.write(ctx, OFF["MODEL_DATA"], 0x100 + i,
                             aw_delay=int(rng.integers(0, 3)), w_delay=int(rng.integers(0, 3)),
                             b_delay=int(rng.integers(0, 3)))

    async def reader(ctx):
        rng = np.random.default_rng(5)
        for i in range(n):
            if i % 2:
                reads.append(await axil.read(ctx, OFF["MODEL_DATA"],
                                             r_delay=int(rng.integers(0, 3))))
            else:
                assert await axil.read(ctx, OFF["ID"]) == (0x5A534744, RESP_OKAY)

    bench.run(writer, reader)
    # Every access took its own index, in the order the port saw them.
    assert [index for _, _, index in bench.port_log] == list(range(n + n // 2))
    assert all(not (row["read"] and row["write"]) for row in bench.cycles)
    # Writes land in order; a read's index was never written, so it reads 0.
    written = [index for _, kind, index in bench.port_log if kind == "write"]
    assert [bench.memory[i] for i in written] == [0x100 + i for i in range(n)]
    assert reads == [(0, RESP_OKAY)] * (n // 2)


def test_status_offsets_cover_readable_status_registers():
    names = {register_at(o).name for o in status_offsets()}
    assert names == {r.name for r in REGISTERS
                     if r.group in ("control", "counters") and r.readable}
    assert register("CTRL").name not in names


def test_register_layout_packs_as_the_map():
    """Each register's Amaranth layout packs and unpacks the bits of ``encode``/``decode``."""
    rng = np.random.default_rng(1)
    for reg in REGISTERS:
        layout = register_layout(reg)
        for _ in range(20):
            values = {f.name: int(rng.integers(0, 1 << f.width, dtype=np.uint64))
                      for f in reg.fields}
            word = encode(reg.name, **values)
            assert layout.const(values).as_bits() == word
            view = layout.from_bits(word)
            assert {f.name: int(view[f.name]) for f in reg.fields} == values


def test_irq_follows_enabled_events_and_write_one_clears():
    async def tb(ctx, bench, axil):
        dut = bench.dut
        assert decode("IRQ_STATUS", await axil.read_word(ctx, OFF["IRQ_STATUS"])) == \
            {"done": 0, "error": 0}
        # An epoch ends (DONE rises): pending, but irq stays low until enabled.
        ctx.set(dut.status.done, 1)
        await ctx.tick().repeat(2)
        assert decode("IRQ_STATUS", await axil.read_word(ctx, OFF["IRQ_STATUS"]))["done"] == 1
        assert ctx.get(dut.irq) == 0
        await axil.write_word(ctx, OFF["IRQ_ENABLE"], encode("IRQ_ENABLE", done=1))
        await ctx.tick().repeat(2)
        assert ctx.get(dut.irq) == 1
        # DONE staying high is no new event; writing 1 clears the bit and drops irq.
        await axil.write_word(ctx, OFF["IRQ_STATUS"], encode("IRQ_STATUS", done=1))
        await ctx.tick().repeat(2)
        assert ctx.get(dut.irq) == 0
        assert decode("IRQ_STATUS", await axil.read_word(ctx, OFF["IRQ_STATUS"]))["done"] == 0
        # Writing 0 clears nothing; an error event (ERROR_COUNT moves) sets ERROR.
        ctx.set(dut.status.error_count, 1)
        await ctx.tick().repeat(2)
        await axil.write_word(ctx, OFF["IRQ_STATUS"], 0)
        assert decode("IRQ_STATUS", await axil.read_word(ctx, OFF["IRQ_STATUS"])) == \
            {"done": 0, "error": 1}
        assert ctx.get(dut.irq) == 0                   # error not enabled
        await axil.write_word(ctx, OFF["IRQ_ENABLE"], encode("IRQ_ENABLE", done=1, error=1))
        await ctx.tick().repeat(2)
        assert ctx.get(dut.irq) == 1
        # A new epoch's DONE edge while ERROR is pending: both pending.
        ctx.set(dut.status.done, 0)
        await ctx.tick()
        ctx.set(dut.status.done, 1)
        await ctx.tick().repeat(2)
        assert decode("IRQ_STATUS", await axil.read_word(ctx, OFF["IRQ_STATUS"])) == \
            {"done": 1, "error": 1}
        await axil.write_word(ctx, OFF["IRQ_STATUS"], encode("IRQ_STATUS", done=1, error=1))
        await ctx.tick().repeat(2)
        assert ctx.get(dut.irq) == 0

    run(tb)
