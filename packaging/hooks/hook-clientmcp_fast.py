"""PyInstaller hook: every module of clientmcp_fast, and what its compiled modules import.

PyInstaller finds imports by reading bytecode, and a module compiled by Cython has none:
the imports its .py or .pyx names are listed here from the sources, so that the frozen
bridge runs the same compiled modules as the installed one.
"""

import ast
import re
from pathlib import Path

from PyInstaller.utils.hooks import collect_data_files, collect_submodules, get_package_paths

_, package_dir = get_package_paths("clientmcp_fast")
_PYX_IMPORT = re.compile(r"^\s*(?:import\s+([\w.]+)|from\s+([\w.]+)\s+import)", re.MULTILINE)


def _imports_of_python(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _imports_of_cython(path: Path) -> set[str]:
    # `cimport` lines are resolved when compiling; only Python-level imports remain at run time.
    return {a or b for a, b in _PYX_IMPORT.findall(path.read_text(encoding="utf-8"))}


hiddenimports = set(collect_submodules("clientmcp_fast"))
for source in Path(package_dir).rglob("*.py"):
    hiddenimports |= _imports_of_python(source)
# The .pyx sources stay in the repository (a wheel carries only what they compile to).
for source in (Path(__file__).resolve().parents[2] / "clientmcp_fast" / "_speedups").glob("*.pyx"):
    hiddenimports |= _imports_of_cython(source)
hiddenimports.discard("__future__")
hiddenimports = sorted(hiddenimports)

# The JavaScript client and the todo page that `clientmcp demo` serves (package data).
datas = collect_data_files("clientmcp_fast", subdir="web")
