"""The image holds the frozen bridge and what it loads, nothing else, and is configured to run it.

From the image itself (its configuration and its filesystem, as the image store has them):
an unprivileged user, port 8080, the executable as entrypoint and its own health check;
no shell, no package manager, no Python tree; the frozen folder and the C library it needs.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from .conftest import IMAGE, PODMAN, ROOT

MIB = 2**20
# docs/deployment.md's budget for the image's files (the target: at most 30 MB).
MAX_IMAGE_BYTES = 30_000_000


def inspect() -> dict:
    done = subprocess.run([*PODMAN, "image", "inspect", IMAGE], check=True, capture_output=True, text=True)
    (config,) = json.loads(done.stdout)
    return config


def files_of(root: Path) -> dict[str, int]:
    """Every file of the image by its path inside it, with its size."""
    return {
        "/" + str(path.relative_to(root)): path.stat().st_size
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink()
    }


def test_it_runs_the_executable_as_an_unprivileged_user_on_8080():
    config = inspect()["Config"]
    assert config["User"] == "65532:65532"
    assert list(config["ExposedPorts"]) == ["8080/tcp"]
    assert config["Entrypoint"] == ["/clientmcp/clientmcp"]
    assert not config.get("Cmd")  # `docker run IMAGE token ...` passes its words to the executable


def test_its_health_check_needs_no_shell():
    config = inspect()
    check = config.get("Healthcheck") or config["Config"]["Healthcheck"]  # podman's place, or Docker's
    assert check["Test"] == ["CMD", "/clientmcp/clientmcp", "health"]


def test_it_holds_no_shell_no_package_manager_and_no_python_tree(image):
    assert sorted(path.name for path in image.root.iterdir()) == ["clientmcp", "etc", "lib", "lib64"]
    names = {Path(path).name for path in files_of(image.root)}
    for forbidden in (
        "sh",
        "bash",
        "busybox",
        "apt",
        "apt-get",
        "dpkg",
        "pip",
        "python",
        "python3",
        "python3.11",
    ):
        assert forbidden not in names, forbidden
    # The standard library lives inside the executable's archive, not as a tree of .py files.
    assert not [path for path in files_of(image.root) if path.endswith(".py")]


def test_its_files_are_the_frozen_bridge_and_the_c_library_it_loads(image):
    files = files_of(image.root)
    outside = sorted(path for path in files if not path.startswith("/clientmcp/"))
    assert all(
        path.startswith(("/lib/", "/lib64/")) for path in outside if path not in ("/etc/passwd", "/etc/group")
    )
    assert any(Path(path).name.startswith("ld-linux") for path in outside)  # the loader
    assert any(Path(path).name == "libc.so.6" for path in outside)
    executable = image.root / "clientmcp" / "clientmcp"
    assert executable.stat().st_mode & stat.S_IXOTH
    large = sorted(((size, path) for path, size in files.items() if size > MIB), reverse=True)
    total = sum(files.values())
    print(f"\nimage {IMAGE}: {total / 1e6:.1f} MB in {len(files)} files; over 1 MiB:")
    for size, path in large:
        print(f"  {size / 1e6:6.2f} MB  {path}")
    # Large files are the frozen bridge's (the executable, libpython, OpenSSL for uvloop's
    # ssl import, uvloop) or the C library itself.
    assert all(path.startswith("/clientmcp/") or Path(path).name.startswith("libc.so") for _, path in large)
    assert total <= MAX_IMAGE_BYTES, f"{total:,} bytes: over the {MAX_IMAGE_BYTES:,} of docs/deployment.md"


def test_it_carries_the_javascript_client_as_a_file(image):
    """`clientmcp demo` serves clientmcp.js: the frozen bridge has the file sdk/js/clientmcp.js, not a link."""
    web = [path.parent for path in image.root.rglob("clientmcp_fast/web/todo.js")]
    assert len(web) == 1, web
    client = web[0] / "clientmcp.js"
    assert not client.is_symlink() and client.is_file()
    assert client.read_bytes() == (ROOT / "sdk" / "js" / "clientmcp.js").read_bytes()


def test_its_accounts_name_the_user_it_runs_as(image):
    passwd = (image.root / "etc" / "passwd").read_text().splitlines()
    assert "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin" in passwd


def test_it_runs_on_a_read_only_root(image):
    """The root is bound read-only here: the folder build writes nothing (no /tmp in the image)."""
    assert not (image.root / "tmp").exists()
    probe = image.root / "clientmcp" / "probe"
    try:
        probe.write_text("x")
    except OSError as error:
        assert error.errno == 30  # EROFS: the bind mount is what a read-only container sees
    else:  # pragma: no cover - would mean the fixture's read-only bind failed
        os.unlink(probe)
        raise AssertionError("the image's root was writable")
    result = image.run("token", "client", "my-app")
    assert result.returncode == 0, result.stderr
