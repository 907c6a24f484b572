"""clientmcp_fast: the ClientMCP bridge in Python, live applications exposed as MCP servers.

The per-call modules listed in `speedups.TYPED_MODULES` are also built as extension modules
of the same name beside their .py (setup.py compiles each .py, typed by the .pxd next to
it), and Python's import prefers an extension module to a source file. With
CLIENTMCP_NO_EXTENSIONS=1, or on a Python other than CPython, `_SourceFinder` is put first
on `sys.meta_path`: it finds this package's modules as .py sources only, so the very same
files run interpreted. Nothing else changes between the two.
"""

import os
import sys
from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader

__version__ = "0.1.0"

NO_EXTENSIONS = bool(os.environ.get("CLIENTMCP_NO_EXTENSIONS")) or sys.implementation.name != "cpython"


class _SourceFinder:
    """Finds `clientmcp_fast.*` modules from their .py files, ahead of compiled copies beside them."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if path is None or not name.startswith(__name__ + "."):
            return None
        for entry in path:
            spec = FileFinder(entry, (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(name)
            if spec is not None and spec.loader is not None:
                return spec
        return None  # no .py (the `_speedups`): the usual finders look


if NO_EXTENSIONS and _SourceFinder not in sys.meta_path:
    sys.meta_path.insert(0, _SourceFinder)
