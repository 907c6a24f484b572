"""The frozen bridge as its users run it: the image's own filesystem, and `dist/clientmcp`.

No container can be started on the machines these tests run on (docs/deployment.md), so
each is run the way a container runtime would: `chroot` into its root filesystem as the
image's unprivileged user (65532), with an empty environment but the documented settings.
The image's filesystem is read from the image itself (`podman image mount`) and bound
read-only; the single file is alone in an empty root with a /tmp, as on a bare host.
`make test-container` builds both first (`make image binary`). The image built for arm64 is
run the same way under qemu by test_arm64.py (`make test-arm64`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PODMAN = shlex.split(os.environ.get("PODMAN", "podman --storage-driver vfs"))
IMAGE = os.environ.get("CLIENTMCP_IMAGE", "clientmcp")
BINARY = Path(os.environ.get("CLIENTMCP_BINARY", ROOT / "dist" / "clientmcp"))
USER = "65532:65532"
# chroot lives in /usr/sbin, which a login's PATH may lack.
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"
SECRET_TEXT = "container-tests-secret-0123456789abcdef-0123"


@dataclass(frozen=True)
class Frozen:
    """One frozen build: a root filesystem, and the path of the executable inside it."""

    name: str
    root: Path
    executable: str

    def command(self, *args: str) -> list[str]:
        """The command line that runs the executable with `args` in its root, as uid and gid 65532."""
        return [CHROOT, f"--userspec={USER}", str(self.root), self.executable, *args]

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(*args), env=environment(**env), capture_output=True, text=True, timeout=60
        )


def environment(**values: str) -> dict[str, str]:
    """An empty environment but the secret and `values`: nothing of the test's Python reaches it."""
    return {"CLIENTMCP_SECRET": SECRET_TEXT, **values}


def _root_required() -> None:
    if os.geteuid() != 0:
        pytest.fail("the frozen builds are run with chroot, which needs root (docs/deployment.md)")


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def mounted_image(name: str, build: str) -> Iterator[Frozen]:
    """The filesystem of the image `name`, straight from the image store, bound read-only; `build` makes it."""
    _root_required()
    found = subprocess.run([*PODMAN, "image", "exists", name], check=False)
    if found.returncode != 0:
        pytest.fail(f"no image {name!r}: build it first ({build})")
    mounted = subprocess.run(
        [*PODMAN, "image", "mount", name], check=True, capture_output=True, text=True
    ).stdout.strip()
    readonly = Path(tempfile.mkdtemp(prefix="clientmcp-image-"))
    _mount("--bind", mounted, str(readonly))
    try:
        _mount("-o", "remount,bind,ro", str(readonly))
        yield Frozen("image", readonly, "/clientmcp/clientmcp")
    finally:
        subprocess.run(["umount", str(readonly)], check=False)
        readonly.rmdir()
        subprocess.run([*PODMAN, "image", "unmount", name], check=False, capture_output=True)


@pytest.fixture(scope="session")
def image() -> Iterator[Frozen]:
    """The image's filesystem, bound read-only."""
    with mounted_image(IMAGE, "make image") as frozen:
        yield frozen


@pytest.fixture(scope="session")
def single() -> Iterator[Frozen]:
    """dist/clientmcp alone in an empty root, with the /tmp it unpacks into and a /proc."""
    _root_required()
    if not BINARY.is_file():
        pytest.fail(f"no {BINARY}: build it first (make binary)")
    root = Path(tempfile.mkdtemp(prefix="clientmcp-single-"))
    root.chmod(0o755)  # mkdtemp's 0700 would keep the unprivileged user out of its own root
    shutil.copy(BINARY, root / "clientmcp")
    (root / "tmp").mkdir(mode=0o1777)
    (root / "tmp").chmod(0o1777)
    (root / "proc").mkdir()
    _mount("-t", "proc", "proc", str(root / "proc"))
    try:
        yield Frozen("single", root, "/clientmcp")
    finally:
        subprocess.run(["umount", str(root / "proc")], check=False)
        shutil.rmtree(root)


@pytest.fixture(scope="session", params=["image", "single"])
def frozen(request: pytest.FixtureRequest) -> Frozen:
    """Each frozen build in turn: the image's folder executable, then the single static file."""
    return request.getfixturevalue(request.param)


@contextlib.contextmanager
def with_files(frozen: Frozen, files: dict[str, str]) -> Iterator[Frozen]:
    """`frozen` with `files` (path in its root -> text, readable by its user only), as a mounted secret is.

    The single file's root is its own: they are written there and removed after. The image's
    stays read-only: it is seen through an overlay whose upper layer holds them.
    """
    if frozen.name == "image":
        scratch = Path(tempfile.mkdtemp(prefix="clientmcp-overlay-"))
        upper, work, merged = (scratch / name for name in ("upper", "work", "merged"))
        for folder in (upper, work, merged):
            folder.mkdir()
        lower = f"lowerdir={frozen.root},upperdir={upper},workdir={work}"
        _mount("-t", "overlay", "overlay", "-o", lower, str(merged))
        view = Frozen(frozen.name, merged, frozen.executable)
    else:
        scratch, view = None, frozen
    written: list[Path] = []
    try:
        for name, text in files.items():
            path = view.root / name.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            os.chown(path, 65532, 65532)
            path.chmod(0o400)
            written.append(path)
        yield view
    finally:
        if scratch is not None:
            subprocess.run(["umount", str(view.root)], check=False)
            shutil.rmtree(scratch)
        else:
            for path in written:
                path.unlink()
