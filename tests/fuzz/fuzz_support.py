"""Shared by the fuzz tests (``tests/fuzz``): the hypothesis settings and a memory probe.

Two runs of the same tests:

* the normal suite (``make test``): derandomized (a fixed sequence of examples, so a failure
  reproduces and the suite's time is fixed) with a modest example count per target;
* the long run (``make fuzz``, i.e. ``HYPOTHESIS_PROFILE=fuzz``): random examples, as many as
  the ``fuzz`` profile registered in ``tests/conftest.py`` asks for.
"""

from __future__ import annotations

import os
import tracemalloc

from hypothesis import HealthCheck, Phase, settings

LONG_RUN = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"
_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def fuzz_settings(examples: int = 150) -> settings:
    """The settings of one fuzz target: ``examples`` derandomized examples in the normal suite,
    the ``fuzz`` profile's count in the long run."""
    if LONG_RUN:
        return settings(deadline=None, suppress_health_check=_CHECKS)
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None,
                    suppress_health_check=_CHECKS)


def peak_allocation(call) -> int:
    """Bytes allocated at the peak while ``call()`` runs (Python and NumPy allocations): shows
    that a file claiming a huge size is refused before that size is allocated."""
    tracemalloc.start()
    try:
        call()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def cli_fuzz_settings(examples: int, long_examples: int = 300) -> settings:
    """The settings of a fuzz target whose every example starts processes (the CLI suite,
    ``test_fuzz_cli.py``): ``examples`` derandomized examples in the normal suite, without
    shrinking (a failing example is reported as drawn, so the suite's time stays bounded);
    in the long run ``ZIPSGD_FUZZ_CLI_EXAMPLES`` random examples (default ``long_examples``),
    shrunk, every distinct failure class reported."""
    if LONG_RUN:
        count = int(os.environ.get("ZIPSGD_FUZZ_CLI_EXAMPLES", long_examples))
        return settings(deadline=None, max_examples=count, suppress_health_check=_CHECKS)
    return settings(derandomize=True, database=None, max_examples=examples, deadline=None,
                    phases=(Phase.explicit, Phase.generate), suppress_health_check=_CHECKS)
