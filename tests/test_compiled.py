"""What is compiled is one behaviour with what runs pure: the list, the .pxd files, the ports, stale builds.

The typed modules are compiled from their own .py with the .pxd beside each (setup.py). A .pxd
that disagrees with its .py shows only in the compiled run, if at all (an attribute missing from
it fails at run time; a class typed in it refuses a stand-in the pure run accepts), so these
checks read the files themselves and run, identically, in both runs.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import clientmcp_fast
from clientmcp_fast import compiled

PACKAGE = Path(clientmcp_fast.__file__).parent
TYPED_PXD = sorted(PACKAGE / (name.replace(".", "/") + ".pxd") for name in compiled.TYPED)

# The core's ports: what a second implementation must be able to stand in for (an app held
# by another instance, an app directory that answers remotely: docs/architecture.md, Ports).
# No .pxd may type an attribute, a parameter or a local with them: compiled, that refuses any
# other class, while the pure run accepts it.
PORTS = {"AppChannel"}


def test_the_list_names_every_cython_source_and_nothing_else():
    pyx = {path.stem for path in (PACKAGE / "_speedups").glob("*.pyx")}
    assert pyx == set(compiled.HOT_PATHS)
    for name in compiled.HOT_PATHS:
        assert (PACKAGE / "_pure" / f"{name}.py").exists(), f"{name} has no pure twin"
    typed = {
        ".".join(pxd.relative_to(PACKAGE).with_suffix("").parts)
        for pxd in PACKAGE.rglob("*.pxd")
        if pxd.parent.name != "_speedups"
    }
    assert typed == set(compiled.TYPED)
    for name in compiled.TYPED:
        assert (PACKAGE / (name.replace(".", "/") + ".py")).exists(), f"{name}.pxd has no .py"


# -- reading a .pxd ----------------------------------------------------------------------------


@dataclass
class Function:
    """A cdef/cpdef function or method: its parameters in order, which have defaults, its locals."""

    name: str
    params: list[str]
    defaults: set[str]
    types: list[str]
    local_names: list[str] = field(default_factory=list)


@dataclass
class Declared:
    """What one .pxd declares: classes (base, attributes, methods), functions, module variables."""

    bases: dict[str, list[str]] = field(default_factory=dict)
    attributes: dict[str, dict[str, str]] = field(default_factory=dict)
    methods: dict[str, dict[str, Function]] = field(default_factory=dict)
    functions: dict[str, Function] = field(default_factory=dict)
    variables: set[str] = field(default_factory=set)


_CLASS = re.compile(r"cdef class (\w+)(?:\(([\w., ]*)\))?:")
_ATTRIBUTE = re.compile(r"cdef (?:public |readonly )?(\w+) (\w+)")
_VARIABLES = re.compile(r"cdef (\w+) ([\w, ]+)")
_FUNCTION = re.compile(r"c?p?def (?:inline )?(?:\w+ )?(\w+)\((.*)\)", re.DOTALL)
_LOCALS = re.compile(r"@cython\.locals\((.*)\)")


def _statements(text: str) -> list[tuple[int, str]]:
    """The .pxd's statements with their indentation, a parenthesis spanning lines joined into one."""
    statements: list[tuple[int, str]] = []
    pending = ""
    for line in text.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if not code.strip() and not pending:
            continue
        if pending:
            pending += " " + code.strip()
        else:
            pending = code
        if pending.count("(") == pending.count(")"):
            statements.append((len(pending) - len(pending.lstrip()), pending.strip()))
            pending = ""
    return statements


def _function(statement: str, local_names: list[str]) -> Function:
    match = _FUNCTION.fullmatch(statement)
    assert match, statement
    params, defaults, types = [], set(), []
    for item in filter(None, (part.strip() for part in match[2].split(","))):
        declaration, _, default = item.partition("=")
        words = declaration.split()
        params.append(words[-1])
        types.extend(words[:-1])
        if default:
            defaults.add(words[-1])
    return Function(match[1], params, defaults, types, local_names)


def read_pxd(path: Path) -> Declared:
    """Parse the declarations this test checks (the .pxd files keep to these few forms)."""
    declared = Declared()
    current: str | None = None
    local_names: list[str] = []
    local_types: list[str] = []
    for indent, statement in _statements(path.read_text()):
        if statement.startswith(("cimport ", "from ")):
            continue
        if indent == 0:
            current = None
        if match := _CLASS.fullmatch(statement):
            current = match[1]
            declared.bases[current] = [b.strip() for b in (match[2] or "").split(",") if b.strip()]
            declared.attributes[current] = {}
            declared.methods[current] = {}
        elif match := _LOCALS.fullmatch(statement):
            pairs = [pair.split("=") for pair in match[1].split(",")]
            local_names += [name.strip() for name, _ in pairs]
            local_types += [kind.strip() for _, kind in pairs]
        elif "(" in statement:
            function = _function(statement, local_names)
            function.types += local_types
            local_names, local_types = [], []
            if current is None:
                declared.functions[function.name] = function
            else:
                declared.methods[current][function.name] = function
        elif current is not None and (match := _ATTRIBUTE.fullmatch(statement)):
            declared.attributes[current][match[2]] = match[1]
        elif current is None and (match := _VARIABLES.fullmatch(statement)):
            declared.variables |= {name.strip() for name in match[2].split(",")}
        else:
            raise AssertionError(f"{path.name}: a declaration this test cannot read: {statement!r}")
    return declared


# -- reading its .py ---------------------------------------------------------------------------


def _signature(node: ast.FunctionDef, method: bool) -> tuple[list[str], set[str]]:
    args = node.args
    positional = [a.arg for a in args.posonlyargs + args.args][1 if method else 0 :]
    with_defaults = set(positional[len(positional) - len(args.defaults) :]) if args.defaults else set()
    keyword = [a.arg for a in args.kwonlyargs]
    with_defaults |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    return positional + keyword, with_defaults


def _assigned_names(node: ast.AST) -> set[str]:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    if isinstance(node, ast.FunctionDef):
        names |= set(_signature(node, method=False)[0])
    return names


def _slots(node: ast.ClassDef) -> set[str] | None:
    for statement in node.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__slots__" for t in statement.targets
        ):
            return set(ast.literal_eval(statement.value))
    return None


@pytest.mark.parametrize("pxd", TYPED_PXD, ids=lambda path: path.stem)
def test_every_pxd_declaration_matches_its_py(pxd: Path):
    declared = read_pxd(pxd)
    tree = ast.parse(pxd.with_suffix(".py").read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name, bases in declared.bases.items():
        assert name in classes, f"{pxd.name} declares class {name}, which the .py does not define"
        node = classes[name]
        assert [ast.unparse(base) for base in node.bases] == bases, f"{name}'s bases differ"
        # Compiled, an attribute missing from the .pxd cannot be set; one in excess is dead.
        assert _slots(node) == set(declared.attributes[name]), f"{name}: __slots__ and .pxd attributes differ"
        methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
        for method in declared.methods[name].values():
            assert method.name in methods, f"{pxd.name} declares {name}.{method.name}, not in the .py"
            _same_signature(f"{name}.{method.name}", method, methods[method.name], is_method=True)
    for function in declared.functions.values():
        assert function.name in functions, f"{pxd.name} declares {function.name}, not in the .py"
        _same_signature(function.name, function, functions[function.name], is_method=False)
    module_names = set().union(
        *(_assigned_names(n) for n in tree.body if isinstance(n, (ast.Assign, ast.ImportFrom, ast.AnnAssign)))
    )
    module_names |= {
        alias.asname or alias.name for n in tree.body if isinstance(n, ast.ImportFrom) for alias in n.names
    }
    assert declared.variables <= module_names, f"{pxd.name}: module variables the .py never sets"


def _same_signature(name: str, declared: Function, node: ast.FunctionDef, is_method: bool) -> None:
    params, defaults = _signature(node, is_method)
    if is_method:
        assert declared.params[:1] == ["self"], f"{name}: a method's first parameter is self"
        declared_params = declared.params[1:]
    else:
        declared_params = declared.params
    assert declared_params == params, f"{name}: parameters {declared_params} in the .pxd, {params} in the .py"
    assert declared.defaults == defaults, f"{name}: defaults differ between the .pxd and the .py"
    unknown = set(declared.local_names) - _assigned_names(node)
    assert not unknown, f"{name}: @cython.locals names no local of the .py: {sorted(unknown)}"


@pytest.mark.parametrize("pxd", TYPED_PXD, ids=lambda path: path.stem)
def test_no_pxd_types_a_port(pxd: Path):
    declared = read_pxd(pxd)
    types = [t for attributes in declared.attributes.values() for t in attributes.values()]
    for function in [
        *declared.functions.values(),
        *(m for ms in declared.methods.values() for m in ms.values()),
    ]:
        types += function.types
    assert not PORTS & set(types), f"{pxd.name} types a port ({PORTS & set(types)}): type it as object"


def test_the_reader_of_pxd_files_fails_on_a_mismatch(tmp_path: Path):
    # The check above is only as good as its reader: a .pxd and .py that disagree must fail it.
    (tmp_path / "m.py").write_text(
        "class A(B):\n    __slots__ = ('x', 'y')\n    def go(self, a, b=1):\n        c = a\n"
    )
    (tmp_path / "m.pxd").write_text(
        "cimport cython\n\ncdef class A(B):\n    cdef public object x\n\n"
        "    @cython.locals(c=int)\n    cpdef go(self, a, b=*)\n"
    )
    with pytest.raises(AssertionError, match="__slots__"):
        test_every_pxd_declaration_matches_its_py(tmp_path / "m.pxd")
    (tmp_path / "m.pxd").write_text(
        "cdef class A(B):\n    cdef public object x\n    cdef Bridge y\n\n    cpdef go(self, a, AppChannel b)\n"
    )
    with pytest.raises(AssertionError, match="defaults differ"):
        test_every_pxd_declaration_matches_its_py(tmp_path / "m.pxd")
    with pytest.raises(AssertionError, match="types a port"):
        test_no_pxd_types_a_port(tmp_path / "m.pxd")
    (tmp_path / "m.pxd").write_text("cdef class A(B):\n    cdef public object x, y\n")
    with pytest.raises(AssertionError, match="cannot read"):
        read_pxd(tmp_path / "m.pxd")
    (tmp_path / "m.pxd").write_text(
        "cdef class A(B):\n    cdef object x\n    cdef object y\n    cpdef go(self, b, a=*)\n"
    )
    with pytest.raises(AssertionError, match="parameters"):
        test_every_pxd_declaration_matches_its_py(tmp_path / "m.pxd")
    (tmp_path / "m.pxd").write_text(
        "cimport cython\ncdef class A(B):\n    cdef object x\n    cdef object y\n"
        "    @cython.locals(d=int)\n    cpdef go(self, a, b=*)\n"
    )
    with pytest.raises(AssertionError, match="names no local"):
        test_every_pxd_declaration_matches_its_py(tmp_path / "m.pxd")
    (tmp_path / "m.pxd").write_text(
        "cdef class A(B):\n    cdef object x\n    cdef object y\n    cpdef go(self, a, b=*)\n"
    )
    test_every_pxd_declaration_matches_its_py(tmp_path / "m.pxd")  # and agreeing, it passes


# -- a stale build in a checkout -------------------------------------------------------------

_SUFFIX = EXTENSION_SUFFIXES[0]


def _fake_checkout(tmp_path: Path, built: bool = True) -> Path:
    """A package tree laid out as compiled.py says, with a setup.py beside it, built an hour ago."""
    package = tmp_path / "clientmcp_fast"
    package.mkdir(parents=True)
    (tmp_path / "setup.py").write_text("")
    sources = [(f"_speedups/{n}", (".pyx", ".pxd")) for n in compiled.HOT_PATHS]
    sources += [(n.replace(".", "/"), (".py", ".pxd")) for n in compiled.TYPED]
    for base, suffixes in sources:
        for suffix in suffixes + ((_SUFFIX,) if built else ()):
            path = package / (base + suffix)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
            age = 3600 if suffix != _SUFFIX else 1800
            os.utime(path, (path.stat().st_mtime - age,) * 2)
    return package


def test_a_fresh_build_is_not_stale(tmp_path: Path):
    assert clientmcp_fast.stale_extensions(str(_fake_checkout(tmp_path))) == []


def test_a_source_newer_than_its_build_is_stale(tmp_path: Path):
    package = _fake_checkout(tmp_path)
    (package / "core" / "bridge.py").touch()
    (package / "_speedups" / "frames.pxd").touch()
    assert clientmcp_fast.stale_extensions(str(package)) == ["_speedups.frames", "core.bridge"]


def test_a_module_left_unbuilt_beside_built_ones_is_stale(tmp_path: Path):
    package = _fake_checkout(tmp_path)
    (package / "core" / ("agent" + _SUFFIX)).unlink()
    assert clientmcp_fast.stale_extensions(str(package)) == ["core.agent (not built)"]


def test_a_pure_checkout_or_an_installed_package_is_never_stale(tmp_path: Path):
    assert clientmcp_fast.stale_extensions(str(_fake_checkout(tmp_path / "pure", built=False))) == []
    installed = _fake_checkout(tmp_path / "site")
    (installed / "core" / "bridge.py").touch()
    (tmp_path / "site" / "setup.py").unlink()
    assert clientmcp_fast.stale_extensions(str(installed)) == []


def test_importing_a_stale_checkout_fails_and_says_what_to_do(tmp_path: Path):
    # A copy of this checkout's package, as built, with one typed .py edited after the build.
    shutil.copytree(PACKAGE, tmp_path / "clientmcp_fast", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "setup.py").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "CLIENTMCP_NO_EXTENSIONS"}
    env["PYTHONPATH"] = str(tmp_path)
    script = ["-c", "import clientmcp_fast.speedups as s; print(s.build())"]
    done = subprocess.run([sys.executable, *script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "compiled\n"), done.stderr
    (tmp_path / "clientmcp_fast" / "core" / "bridge.py").touch()
    done = subprocess.run([sys.executable, *script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "ImportError: clientmcp_fast: compiled modules older than their sources: core.bridge; "
        "rebuild them (make .venv/.installed) or run the sources with CLIENTMCP_NO_EXTENSIONS=1"
    )
    done = subprocess.run(
        [sys.executable, *script],
        capture_output=True,
        text=True,
        env={**env, "CLIENTMCP_NO_EXTENSIONS": "1"},
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, "pure\n"), done.stderr


def test_hot_paths_not_built_fall_back_to_the_twins_quietly():
    # As an install built with CLIENTMCP_NO_EXTENSIONS=1, or whose build failed, imports them.
    script = """
import sys, warnings
class Unbuilt:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("clientmcp_fast._speedups."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Unbuilt())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from clientmcp_fast import speedups
print(speedups.IMPLEMENTATION, [str(w.message) for w in caught])
"""
    env = {key: value for key, value in os.environ.items() if key != "CLIENTMCP_NO_EXTENSIONS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert done.stdout == "pure []\n"
