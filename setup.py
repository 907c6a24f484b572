"""Builds the C extensions listed in clientmcp_fast/compiled.py; metadata is in pyproject.toml.

The hot paths, `clientmcp_fast/_speedups/*.pyx`, and the typed modules, each a .py compiled
from itself with the .pxd beside it. CLIENTMCP_NO_EXTENSIONS=1 builds nothing (the pure twins
and the .py run). A failed build falls back to those with a warning, unless
CLIENTMCP_BUILD_EXTENSION=yes makes it an error.
"""

import json
import os
import runpy
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = runpy.run_path("clientmcp_fast/compiled.py")
TYPED = [f"clientmcp_fast.{name}" for name in COMPILED["TYPED"]]
# llhttp as released (vendor/llhttp/README.md), compiled into the request reader beside its .pyx
# and declared from its own header (_speedups/http_reader.pxd).
LLHTTP = "vendor/llhttp"
C_DIR = "build/cython"
LLHTTP_SOURCES = [f"{LLHTTP}/src/{name}.c" for name in ("api", "http", "llhttp")]
NO_EXTENSIONS = bool(os.environ.get("CLIENTMCP_NO_EXTENSIONS"))
REQUIRED = os.environ.get("CLIENTMCP_BUILD_EXTENSION", "").lower() in ("1", "yes", "true")
# No pickle support for the extension types: nothing pickles a protocol, a channel or a call,
# and the __reduce_cython__/__setstate_cython__ pair Cython writes for each one is some 10 % of
# the machine code, resident in every bridge (see docs/architecture.md). Without it,
# pickling one fails, as it does for the sockets they hold.
# Functions as C built-ins (binding off, Cython 3's default on): nothing reads a compiled
# function's argument names or code, nor binds one as a class attribute, and the Python-function
# look-alike costs each module its own copy of that type's code and each function a code object
# made at import, in every bridge (docs/benchmarks.md, Idle footprint).
SMALLER = {"auto_pickle": False, "binding": False}
# The typed modules' WebSocket derives from the frame reader's class (core/websocket.pxd): built
# without it, they would not import.
NEEDED_BY_TYPED = {"clientmcp_fast._speedups.frames"}


class OptionalBuildExt(build_ext):
    """build_ext that warns and carries on without the extensions when they cannot be built."""

    typed_failed = False

    def run(self):
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - any build failure falls back to the twins
            self._fallback(error)
            self.typed_failed = True
        if self.typed_failed:
            # The typed modules cimport one another's classes: all of them compiled, or none.
            for ext in self.extensions:
                path = self.get_ext_fullpath(ext.name)
                if ext.name in TYPED and os.path.exists(path):
                    os.remove(path)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001
            self._fallback(error)
            self.typed_failed = self.typed_failed or ext.name in TYPED or ext.name in NEEDED_BY_TYPED

    def _fallback(self, error):
        if REQUIRED:
            raise error
        print(
            f"WARNING: clientmcp_fast extensions not built ({error}); using the pure-Python twins",
            file=sys.stderr,
        )


def hot_path(name):
    """The extension of `_speedups/{name}.pyx`, with the C it is built with."""
    module, source = f"clientmcp_fast._speedups.{name}", f"clientmcp_fast/_speedups/{name}.pyx"
    if name != "http_reader":
        return Extension(module, [source])
    return Extension(
        module,
        [source, *LLHTTP_SOURCES],
        include_dirs=[f"{LLHTTP}/include"],
        depends=[f"{LLHTTP}/include/llhttp.h"],
        # llhttp's functions stay inside the module: a copy of llhttp loaded into the process
        # with RTLD_GLOBAL (httptools' own, which may be of another release) cannot stand in for them.
        extra_compile_args=[] if os.name == "nt" else ["-fvisibility=hidden"],
    )


def written_with(directives):
    """The directives the C in C_DIR was last written with, as `record_directives` stored them."""
    try:
        with open(os.path.join(C_DIR, "directives.json")) as file:
            return json.load(file)
    except (FileNotFoundError, ValueError):
        return None


def record_directives(directives):
    with open(os.path.join(C_DIR, "directives.json"), "w") as file:
        json.dump(directives, file)


def extensions():
    if NO_EXTENSIONS:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as error:
        if REQUIRED:
            raise
        print(f"WARNING: Cython unavailable ({error}); using the pure-Python twins", file=sys.stderr)
        return []
    hot_directives = {"language_level": "3", **SMALLER}
    # The types come from the .pxd only: the modules' annotations are loose, and stay hints.
    typed_directives = {
        "language_level": "3",
        "annotation_typing": False,
        "nonecheck": True,
        **SMALLER,
    }
    # Cython rewrites a module's C when its sources change, not when these directives do.
    directives = [hot_directives, typed_directives]
    force = written_with(directives) != directives
    compiled = cythonize(
        [hot_path(name) for name in COMPILED["HOT_PATHS"]],
        compiler_directives=hot_directives,
        build_dir=C_DIR,
        quiet=True,
        force=force,
    )
    try:
        typed = cythonize(
            [Extension(name, [name.replace(".", "/") + ".py"]) for name in TYPED],
            compiler_directives=typed_directives,
            build_dir=C_DIR,
            quiet=True,
            force=force,
        )
    except Exception as error:  # noqa: BLE001 - the .py then run interpreted
        if REQUIRED:
            raise
        print(f"WARNING: typed modules not compiled ({error}); their .py run interpreted", file=sys.stderr)
        typed = []
    else:
        record_directives(directives)
    return compiled + typed


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
