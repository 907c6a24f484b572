"""The benchmark suite of docs/benchmarks.md: `python -m bench` (see bench/__main__.py and bench/run.py)."""
