"""Which module may import which: the core is sans-I/O, and the hot paths are leaves the core calls.

docs/architecture.md, Imports. Every import of every module of the package is read from its
sources, wherever it stands (at the top, in a function, under TYPE_CHECKING): `ast` reads the
.py files, and the `import` and `cimport` statements of the .pyx and .pxd files are read as
text. A module typed by a .pxd has the imports of both.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import clientmcp_fast

PACKAGE = Path(clientmcp_fast.__file__).parent
NAME = PACKAGE.name

# The core takes `now` as an argument, is handed bytes and tells ports what to do: it reads no
# clock, opens nothing, writes no log line (it tells its event log, core/events.py) and reads
# no random source (the I/O side gives the bridge `new_session_id`).
NOT_IN_CORE = (
    f"{NAME}.net",
    f"{NAME}.log",
    "asyncio",
    "datetime",
    "logging",
    "os",
    "random",
    "secrets",
    "select",
    "selectors",
    "socket",
    "ssl",
    "subprocess",
    "sys",
    "threading",
    "time",
    "uvloop",
    "nats",
)
# The hot paths (`_speedups/` and their twins in `_pure/`) are leaves: the core and the net layer
# call them, give them what they need (a limit, the type of request to make), and they import
# nothing of the package but one another.
HOT_PATHS = (f"{NAME}._speedups", f"{NAME}._pure")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


# -- reading a module's imports -----------------------------------------------------------------


def python_imports(text: str, module: str, is_package: bool = False) -> set[str]:
    """The modules a .py source imports, anywhere in it; `from P import x` counts as P.x as well as P."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


_FROM = re.compile(r"from\s+([\w.]+)\s+c?import\s+\(?\s*([\w\s,.]*)")
_IMPORT = re.compile(r"c?import\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*)\s*$")


def cython_imports(text: str) -> set[str]:
    """The modules a .pyx or .pxd source imports or cimports, anywhere in it."""
    found: set[str] = set()
    for line in text.splitlines():
        code = line.split("#", 1)[0].strip()
        if match := _FROM.match(code):
            found.add(match[1])
            names = [name.split()[0] for name in match[2].split(",") if name.strip()]
            found.update(f"{match[1]}.{name}" for name in names)
        elif match := _IMPORT.match(code):
            found.update(part.split()[0] for part in match[1].split(","))
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports() -> dict[str, set[str]]:
    """Every module of the package, by name, with what its sources import."""
    modules: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".pyx", ".pxd") or "__pycache__" in path.parts:
            continue
        name = _module_name(path)
        text = path.read_text()
        if path.suffix == ".py":
            found = python_imports(text, name, path.name == "__init__.py")
        else:
            found = cython_imports(text)
        modules.setdefault(name, set()).update(found)
    return modules


MODULES = package_imports()


def reached(module: str) -> dict[str, str]:
    """The package's modules that importing `module` imports in turn, each with the module that imports it.

    The package's own __init__, which every import runs first, is left out: it imports only
    `compiled` (test_the_package_runs_nothing_of_the_bridge_first).
    """
    via: dict[str, str] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        for name in MODULES.get(current, ()):
            if name in MODULES and name not in via and name not in (module, NAME):
                via[name] = current
                todo.append(name)
    return via


def _chain(module: str, target: str, via: dict[str, str]) -> str:
    """How `module` comes to import `target`: `target <- ... <- module`."""
    chain = [target]
    while chain[-1] != module:
        chain.append(via[chain[-1]])
    return " <- ".join(chain)


# -- the rules ----------------------------------------------------------------------------------

CORE = sorted(name for name in MODULES if _within(name, (f"{NAME}.core",)))
LEAVES = sorted(name for name in MODULES if _within(name, HOT_PATHS))


def core_faults(module: str) -> list[str]:
    """What `module` of the core imports that the core may not, directly or through the package's other modules."""
    outside = sorted(
        name for name in MODULES[module] if _within(name, NOT_IN_CORE) and not _within(name, (NAME,))
    )
    via = reached(module)
    return outside + [_chain(module, name, via) for name in sorted(via) if _within(name, NOT_IN_CORE)]


def leaf_faults(module: str) -> list[str]:
    """What a hot path imports of the package beyond the hot paths, directly or through them."""
    via = reached(module)
    return [_chain(module, name, via) for name in sorted(via) if not _within(name, HOT_PATHS)]


@pytest.mark.parametrize("module", CORE)
def test_the_core_reads_no_clock_does_no_io_and_writes_no_log_line(module):
    assert core_faults(module) == []


@pytest.mark.parametrize("module", LEAVES)
def test_the_hot_paths_import_nothing_of_the_core(module):
    assert leaf_faults(module) == []


def test_the_package_runs_nothing_of_the_bridge_first():
    assert {name for name in MODULES[NAME] if _within(name, (NAME,))} <= {NAME, f"{NAME}.compiled"}
    assert {name for name in MODULES[f"{NAME}.compiled"] if _within(name, (NAME,))} == set()


def test_every_kind_of_module_is_read():
    assert f"{NAME}.core.bridge" in CORE and f"{NAME}.core.events" in CORE
    assert f"{NAME}._speedups.http_reader" in LEAVES and f"{NAME}._pure.http_reader" in LEAVES
    # A typed module has the cimports of its .pxd; a .pyx its imports and cimports.
    assert f"{NAME}.core.events.EventLog" in MODULES[f"{NAME}.net.log_lines"]
    assert "libc.string" in MODULES[f"{NAME}._speedups.http_reader"]
    assert f"{NAME}._pure.http_reader" in MODULES[f"{NAME}._speedups.http_reader"]
    assert f"{NAME}.core.directory" in CORE and f"{NAME}.core.forwarding" in CORE


# -- the reader and the rules fail where they should --------------------------------------------


def test_imports_are_found_wherever_they_stand():
    source = (
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from clientmcp_fast.net.http import HttpProtocol\n"
        "def now():\n"
        "    import time\n"
        "    from . import memo\n"
        "    from ..log import logger\n"
        "    return time.time()\n"
    )
    found = python_imports(source, f"{NAME}.core.clock")
    assert {
        "json",
        "time",
        f"{NAME}.net.http",
        f"{NAME}.core.memo",
        f"{NAME}.log",
        f"{NAME}.log.logger",
    } <= found
    cython = (
        "cimport cython\n"
        "from libc.string cimport memcmp, memcpy\n"
        "from clientmcp_fast.core.http import (\n"
        "    KNOWN_NAMES,\n"
        ")\n"
        "cdef class Reader:\n"
        "    def feed(self):\n"
        "        import os, socket as s  # a late import\n"
        "from clientmcp_fast._pure import http_reader as twin\n"
    )
    assert cython_imports(cython) >= {
        "cython",
        "libc.string",
        f"{NAME}.core.http",
        "os",
        "socket",
        f"{NAME}._pure",
        f"{NAME}._pure.http_reader",
    }


def test_a_forbidden_import_is_a_fault_directly_or_through_another_module(monkeypatch):
    monkeypatch.setitem(MODULES, f"{NAME}.core.memo", MODULES[f"{NAME}.core.memo"] | {"time"})
    assert core_faults(f"{NAME}.core.memo") == ["time"]
    monkeypatch.setitem(MODULES, f"{NAME}.speedups", MODULES[f"{NAME}.speedups"] | {f"{NAME}.log"})
    assert f"{NAME}.log <- {NAME}.speedups <- {NAME}.core.bridge" in core_faults(f"{NAME}.core.bridge")
    monkeypatch.setitem(
        MODULES, f"{NAME}._pure.errors", MODULES[f"{NAME}._pure.errors"] | {f"{NAME}.core.limits"}
    )
    assert leaf_faults(f"{NAME}._pure.errors") == [f"{NAME}.core.limits <- {NAME}._pure.errors"]
    assert f"{NAME}.core.limits <- {NAME}._pure.errors <- {NAME}._pure.frames" in leaf_faults(
        f"{NAME}._pure.frames"
    )
