"""clientmcp_fast: the ClientMCP bridge in Python, live applications exposed as MCP servers.

The typed modules of `compiled.TYPED` are also built as extension modules of the same name
beside their .py (setup.py compiles each .py, typed by the .pxd next to it), and Python's
import prefers an extension module to a source file. With CLIENTMCP_NO_EXTENSIONS=1, or on a
Python other than CPython, `_SourceFinder` is put first on `sys.meta_path`: it finds this
package's modules as .py sources only, so the very same files run interpreted. Nothing else
changes between the two.

In a source checkout (an editable install), a compiled module older than its sources would
run code that is no longer there: importing the package then fails, naming the modules to
rebuild (`make .venv/.installed`) or the switch that runs the sources as they are.
"""

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder, SourceFileLoader

from clientmcp_fast import compiled

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


def stale_extensions(package: str = os.path.dirname(__file__)) -> list[str]:
    """The compiled modules of a source checkout that are older than their sources, or missing."""
    if not os.path.exists(os.path.join(os.path.dirname(package), "setup.py")):
        return []  # an installed wheel, or a frozen build: what was built is what runs
    modules = [(f"_speedups.{name}", (".pyx", ".pxd")) for name in compiled.HOT_PATHS]
    modules += [(name, (".py", ".pxd")) for name in compiled.TYPED]
    built, stale = 0, []
    for name, source_suffixes in modules:
        base = os.path.join(package, *name.split("."))
        try:
            built_at = os.stat(base + EXTENSION_SUFFIXES[0]).st_mtime
        except FileNotFoundError:
            stale.append(f"{name} (not built)")
            continue
        built += 1
        if any(os.stat(base + suffix).st_mtime > built_at for suffix in source_suffixes):
            stale.append(name)
    return stale if built else []  # none built at all: a pure install, which `speedups` selects


if not NO_EXTENSIONS and (_stale := stale_extensions()):
    raise ImportError(
        f"clientmcp_fast: compiled modules older than their sources: {', '.join(_stale)}; "
        "rebuild them (make .venv/.installed) or run the sources with CLIENTMCP_NO_EXTENSIONS=1"
    )
