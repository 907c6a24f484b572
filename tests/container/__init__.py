"""The frozen builds of the bridge, run from their own root filesystems (see conftest.py)."""
