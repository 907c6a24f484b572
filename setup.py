"""Builds the Cython hot paths in `_speedups/` as `clientmcp_fast._speedups.*`; metadata is in pyproject.toml.

CLIENTMCP_NO_EXTENSIONS=1 builds nothing (the pure twins are used). A failed build falls
back to the twins with a warning, unless CLIENTMCP_BUILD_EXTENSION=yes makes it an error.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODULES = ("frames", "routing", "http_reader")
NO_EXTENSIONS = bool(os.environ.get("CLIENTMCP_NO_EXTENSIONS"))
REQUIRED = os.environ.get("CLIENTMCP_BUILD_EXTENSION", "").lower() in ("1", "yes", "true")


class OptionalBuildExt(build_ext):
    """build_ext that warns and carries on without the extensions when they cannot be built."""

    def run(self):
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - any build failure falls back to the twins
            self._fallback(error)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001
            self._fallback(error)

    def _fallback(self, error):
        if REQUIRED:
            raise error
        print(
            f"WARNING: clientmcp_fast extensions not built ({error}); using the pure-Python twins",
            file=sys.stderr,
        )


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
    # Cython finds a module's .pxd by the module's own name next to the .pyx, so each is
    # compiled as the top-level module `name`, then installed inside clientmcp_fast._speedups
    # (the import system only needs PyInit_<name>, which both spellings share).
    compiled = cythonize(
        [Extension(name, [f"_speedups/{name}.pyx"]) for name in MODULES],
        compiler_directives={"language_level": "3"},
        quiet=True,
    )
    for extension in compiled:
        extension.name = f"clientmcp_fast._speedups.{extension.name}"
    return compiled


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
