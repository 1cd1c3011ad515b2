"""Kestrel benchmarks, run by hand: ``python -m bench --help`` (see bench/README.md)."""
