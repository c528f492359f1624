"""Run the benchmark modules ``benchmarks/bench_*.py``.

Each module must define ``main()``; it prints its own report (and may also return
a value, which is printed). Usage::

    python -m benchmarks              # run every bench_*.py, in name order
    python -m benchmarks NAME ...     # run only the named ones (``bench_`` prefix optional)

Exits non-zero if any benchmark raised or a named benchmark does not exist.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
import traceback

import benchmarks


def discover() -> list[str]:
    """Names of the ``bench_*`` modules in this package, sorted."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(benchmarks.__path__)
        if info.name.startswith("bench_")
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    names = discover()
    if args:
        wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in args]
        missing = [w for w in wanted if w not in names]
        if missing:
            print(f"unknown benchmark(s): {', '.join(missing)}; have: {names}", file=sys.stderr)
            return 2
        names = wanted
    if not names:
        print("No benchmarks yet: add benchmarks/bench_<name>.py modules with a main() function.")
        return 0

    failed: list[str] = []
    for name in names:
        print(f"=== {name} ===", flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            entry = getattr(module, "main", None)
            if not callable(entry):
                raise TypeError(f"benchmarks/{name}.py defines no main() function")
            result = entry()
            if result is not None:
                print(result)
        except Exception:
            traceback.print_exc()
            failed.append(name)
            status = "FAILED"
        else:
            status = "ok"
        print(f"=== {name}: {status} in {time.perf_counter() - t0:.1f} s ===", flush=True)

    if failed:
        print(f"{len(failed)} benchmark(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
