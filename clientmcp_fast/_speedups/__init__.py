"""The compiled hot paths (built from the top-level `_speedups/` sources by setup.py)."""
