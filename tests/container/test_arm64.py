"""The image built for linux/arm64, run here under qemu: `make test-arm64` (docs/deployment.md, The arm64 image).

`make image PLATFORM=linux/arm64` builds it from the same Dockerfile under emulation
(packaging/emulate.sh), tagged clientmcp-arm64 (CLIENTMCP_ARM64_IMAGE names another).
Its filesystem is run as tests/container runs the machine's own image: chroot into it,
read-only, as uid 65532; the kernel hands each arm64 program to qemu-aarch64-static,
registered with the F flag, so no qemu is inside the image. First what makes it arm64
and the same image as the amd64 one, then that image's own checks of behaviour
(tests/container/test_frozen.py): token, serve with `/healthz` and `health`, an app on the
`websockets` library called by the official `mcp` SDK in both eras, SIGTERM, one process,
and two instances joined through nats-server (without creds files: below).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import PODMAN, Frozen, mounted_image
from .test_frozen import (  # noqa: F401 - pytest collects what this module holds: these run on arm64
    Served,
    served,
    test_health_answers_0_for_the_bridge_and_1_for_a_closed_port,
    test_it_runs_the_compiled_extensions,
    test_sigterm_closes_apps_with_1001_and_exits_0,
    test_the_image_is_one_process_and_the_single_file_leaves_none_behind,
    test_the_sdk_calls_an_apps_tools_through_it,
    test_token_prints_a_jwt_that_pyjwt_verifies,
    test_two_instances_joined_through_nats_carry_a_call_between_them,
    test_without_a_secret_it_says_so_in_one_line,
)
from .test_image import MAX_IMAGE_BYTES, MIB, files_of

# Not taken from test_frozen.py: test_two_instances_join_an_account_secured_nats_with_creds_files.
# A bridge stopped while nats-py waits to retry the credentials the server refused can fail to
# exit (seen once in 33 stops natively); under qemu it is stopped in that wait more often (once
# in the first two runs here). It checks the same Python on every platform, and does so on amd64.

ARM64_IMAGE = os.environ.get("CLIENTMCP_ARM64_IMAGE", "clientmcp-arm64")
EM_AARCH64 = 183  # e_machine of an ELF file for arm64 (the ELF specification's machine numbers)
PT_LOAD = 1  # a program header's type for a segment loaded into memory


@pytest.fixture(scope="module")
def frozen() -> Iterator[Frozen]:
    """The arm64 image's filesystem, bound read-only: what every test of this module runs."""
    with mounted_image(ARM64_IMAGE, "make image PLATFORM=linux/arm64") as image:
        yield image


def inspect() -> dict:
    done = subprocess.run(
        [*PODMAN, "image", "inspect", ARM64_IMAGE], check=True, capture_output=True, text=True
    )
    (config,) = json.loads(done.stdout)
    return config


def elf_machine(path: Path) -> int | None:
    """The machine an ELF file is built for, or None for a file that is not ELF."""
    with path.open("rb") as file:
        head = file.read(20)
    if head[:4] != b"\x7fELF":
        return None
    return int.from_bytes(head[18:20], "little")


def page_padding(path: Path) -> int:
    """The zeros between the loadable segments of a 64-bit ELF file (0 for another file).

    arm64's programs and libraries are laid out for pages of up to 64 KiB, so each segment
    starts on such a boundary in the file, and the bytes before it are zeros: code no one
    runs, which compression removes.
    """
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        return 0
    (table,) = struct.unpack_from("<Q", data, 32)
    entry_size, entries = struct.unpack_from("<HH", data, 54)
    loads = []
    for index in range(entries):
        kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", data, table + index * entry_size)
        if kind == PT_LOAD:
            loads.append((offset, size))
    loads.sort()
    gaps = (data[offset + size : following] for (offset, size), (following, _) in zip(loads, loads[1:]))
    return sum(len(gap) for gap in gaps if not gap.strip(b"\0"))


def test_it_is_an_arm64_image_whose_every_program_is_for_arm64(frozen):
    config = inspect()
    assert (config["Os"], config["Architecture"]) == ("linux", "arm64")
    machines = {path: elf_machine(frozen.root / path.lstrip("/")) for path in files_of(frozen.root)}
    programs = {path: machine for path, machine in machines.items() if machine is not None}
    assert "/clientmcp/clientmcp" in programs and len(programs) > 20, sorted(programs)
    assert {path: machine for path, machine in programs.items() if machine != EM_AARCH64} == {}


def test_it_is_configured_as_the_amd64_image(frozen):
    config = inspect()
    settings = config["Config"]
    assert settings["User"] == "65532:65532"
    assert list(settings["ExposedPorts"]) == ["8080/tcp"]
    assert settings["Entrypoint"] == ["/clientmcp/clientmcp"]
    assert not settings.get("Cmd")
    check = config.get("Healthcheck") or settings["Healthcheck"]
    assert check["Test"] == ["CMD", "/clientmcp/clientmcp", "health"]


def test_its_files_are_the_frozen_bridge_and_arm64s_c_library(frozen):
    """As on amd64, but arm64's loader is /lib/ld-linux-aarch64.so.1: there is no /lib64."""
    assert sorted(path.name for path in frozen.root.iterdir()) == ["clientmcp", "etc", "lib"]
    files = files_of(frozen.root)
    outside = sorted(path for path in files if not path.startswith("/clientmcp/"))
    assert all(path.startswith("/lib/") for path in outside if path not in ("/etc/passwd", "/etc/group"))
    assert "/lib/ld-linux-aarch64.so.1" in outside
    assert "/lib/aarch64-linux-gnu/libc.so.6" in outside
    assert not [path for path in files if path.endswith(".py")]
    large = sorted(((size, path) for path, size in files.items() if size > MIB), reverse=True)
    total = sum(files.values())
    padding = sum(page_padding(frozen.root / path.lstrip("/")) for path in files)
    print(
        f"\nimage {ARM64_IMAGE}: {total / 1e6:.1f} MB in {len(files)} files,"
        f" {padding / 1e6:.1f} MB of them zeros between ELF segments; over 1 MiB:"
    )
    for size, path in large:
        print(f"  {size / 1e6:6.2f} MB  {path}")
    # The budget of the amd64 image, for what the files hold: the zeros of arm64's 64 KiB page
    # layout are not counted (docs/deployment.md, The arm64 image).
    content = total - padding
    assert content <= MAX_IMAGE_BYTES, (
        f"{content:,} bytes: over the {MAX_IMAGE_BYTES:,} of docs/deployment.md"
    )


def test_serve_answers_healthz_to_the_host(frozen):
    bridge = Served(frozen)
    try:
        bridge.wait_listening()
        with urllib.request.urlopen(f"{bridge.http_url}/healthz", timeout=10) as response:
            assert (response.status, response.read()) == (200, b"ok")
    finally:
        bridge.end()
