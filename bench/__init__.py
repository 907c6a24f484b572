"""The benchmark suite of issue 4: `python -m bench` (see bench/__main__.py and bench/run.py)."""
