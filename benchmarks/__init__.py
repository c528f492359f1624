"""Benchmarks: each ``benchmarks/bench_*.py`` module defines ``main()``; run with
``python -m benchmarks [NAME ...]`` (or ``make bench``)."""
