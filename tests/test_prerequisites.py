"""`make test` says what the machine lacks, one line each, within seconds and before any setup.

Each prerequisite is taken off PATH in turn (a folder of links to every other command): the
check names it, what it is for and how to install it, on one line, then the one command that
installs every missing package. As root where apt-get is, it installs them instead: those
tests put a fake `apt-get` that records its arguments, and a fake `id`, in that folder. The
real apt-get is never on the PATH these tests give the check.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "prerequisites"
# Each command the check looks for, and a word its line must hold.
COMMANDS = {
    "gcc": "gcc is missing",
    "npm": "npm is missing",
    "chromium": "chromium is missing",
    "nats-server": "nats-server is missing",
    "curl": "curl is missing",
    "openssl": "openssl is missing",
    "nginx": "nginx is missing",
    "caddy": "caddy is missing",
    "systemd-analyze": "systemd-analyze is missing",
    "qemu-aarch64-static": "qemu-aarch64-static is missing",
}
# The Debian package of each command whose package is named otherwise.
PACKAGES = {"nginx": "nginx-light", "systemd-analyze": "systemd", "qemu-aarch64-static": "qemu-user-static"}
SYSTEM_PATH = os.environ["PATH"].split(os.pathsep) + ["/usr/sbin", "/sbin"]


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH of one folder holding a link to every command of the usual PATH but `names`.

    Never the machine's apt-get: run as root, the check would install what `names` hides.
    """
    folder = tmp_path / "bin"
    folder.mkdir()
    hidden = {*names, "apt-get"}
    for directory in SYSTEM_PATH:
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if entry.name in hidden or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(folder)


def fake(path: str, name: str, script: str) -> None:
    """A command `name` in the PATH folder of path_without, running the shell `script`."""
    command = Path(path) / name
    command.unlink(missing_ok=True)
    command.write_text(f"#!/bin/sh\n{script}\n")
    command.chmod(0o755)


def fake_apt_get(path: str, installs: bool) -> Path:
    """An apt-get that appends each call's arguments to a file, the returned one; if it
    `installs`, `install` puts a command named after each package in the PATH folder."""
    calls = Path(path).parent / "apt-get.calls"
    # Each package becomes an empty command of its name, so the check after the install passes.
    install = (
        'for p in "$@"; do case $p in -*|install) ;; *)\n'
        '  printf "#!/bin/sh\\n" >"$(dirname "$0")/$p"; chmod +x "$(dirname "$0")/$p";;\n'
        "esac; done"
    )
    script = f'echo "$*" >>{calls}\n[ "$1" = install ] || exit 0\n'
    fake(path, "apt-get", script + (install if installs else "exit 100"))
    return calls


def fake_id(path: str, root: bool) -> None:
    fake(path, "id", "echo 0" if root else "echo 1000")


def check(path: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    environment = {**os.environ, "PATH": path, "PYTHON": sys.executable, **env}
    started = time.monotonic()
    done = subprocess.run([str(CHECK)], env=environment, capture_output=True, text=True, timeout=30)
    return done, time.monotonic() - started


def test_a_complete_machine_passes_in_silence(tmp_path):
    done, took = check(path_without(tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert took < 5


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_missing_command_is_one_line_saying_what_for_and_how(tmp_path, name):
    done, took = check(path_without(tmp_path, name))
    assert done.returncode == 1
    assert done.stdout == ""
    line, install = done.stderr.splitlines()
    assert line.startswith(f"make test: {COMMANDS[name]}: "), line
    assert "install" in line  # how to get it
    assert install == f"make test: to install them all: apt-get install -y {PACKAGES.get(name, name)}"
    assert took < 5


def test_valgrind_is_not_needed_by_make_test(tmp_path):
    # Only `make test-bench` and the full bench count instructions with it.
    done, _ = check(path_without(tmp_path, "valgrind", "callgrind_control"))
    assert (done.returncode, done.stderr) == (0, "")


def test_a_python_older_or_absent_is_named(tmp_path):
    done, _ = check(path_without(tmp_path), PYTHON=str(tmp_path / "no-python"))
    (line,) = done.stderr.splitlines()
    assert line.startswith("make test: Python 3.11 or later"), line


def test_python_2_7_is_found_on_path_then_in_pyenv_else_named(tmp_path):
    found = subprocess.run([str(CHECK), "python27"], capture_output=True, text=True, check=False)
    assert found.returncode == 0 and found.stdout.strip().endswith("python2.7"), found
    empty = tmp_path / "home"
    empty.mkdir()
    path = path_without(tmp_path, "python2.7", "python2")
    done, _ = check(path, HOME=str(empty), PYENV_ROOT=str(empty / ".pyenv"), PY27="")
    (line,) = done.stderr.splitlines()
    assert line.startswith("make test: Python 2.7 is missing: the Autobahn TestSuite"), line


def test_no_builder_is_named(tmp_path):
    done, _ = check(path_without(tmp_path, "podman", "docker"))
    line, install = done.stderr.splitlines()
    assert line.startswith("make test: a Docker engine or podman is missing"), line
    assert install == "make test: to install them all: apt-get install -y podman"


def test_without_a_builder_debootstrap_comes_with_podman(tmp_path):
    # A podman installed now has no base image: it would need debootstrap in a second round.
    done, _ = check(path_without(tmp_path, "podman", "docker", "debootstrap"))
    builder, debootstrap, install = done.stderr.splitlines()
    assert builder.startswith("make test: a Docker engine or podman is missing"), builder
    assert debootstrap.startswith("make test: debootstrap is missing: "), debootstrap
    assert install == "make test: to install them all: apt-get install -y podman debootstrap"


def test_not_root_lists_what_is_missing_and_the_one_command_that_installs_it_all(tmp_path):
    path = path_without(tmp_path, "caddy", "nginx", "curl")
    calls = fake_apt_get(path, installs=True)
    fake_id(path, root=False)
    done, took = check(path)
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert [line.split(" is missing: ")[0] for line in lines[:-1]] == [
        "make test: curl",
        "make test: nginx",
        "make test: caddy",
        "make test: root",
    ], lines
    assert lines[-1] == "make test: to install them all: sudo apt-get install -y curl nginx-light caddy"
    assert not calls.exists()
    assert took < 5


def test_as_root_every_missing_package_is_announced_then_installed_in_one_call(tmp_path):
    path = path_without(tmp_path, "caddy", "nats-server", "curl")
    calls = fake_apt_get(path, installs=True)
    fake_id(path, root=True)
    done, took = check(path)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines() == [
        "make test: installing nats-server for nats-server: bridge instances are joined through it"
        " (tests/e2e/test_cluster.py)",
        "make test: installing curl for curl: examples/agent_curl.sh is run as the README shows it",
        "make test: installing caddy for caddy: deploy/Caddyfile is run in front of a bridge"
        " (tests/e2e/test_proxies.py)",
    ]
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq nats-server curl caddy"]
    assert took < 5


def test_as_root_what_apt_get_could_not_install_is_named_once_and_not_tried_again(tmp_path):
    path = path_without(tmp_path, "caddy")
    calls = fake_apt_get(path, installs=False)
    fake_id(path, root=True)
    done, _ = check(path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "make test: installing caddy for caddy: deploy/Caddyfile is run in front of a bridge"
        " (tests/e2e/test_proxies.py)"
    ]
    line, install = done.stderr.splitlines()
    assert line.startswith("make test: caddy is missing: "), line
    assert install == "make test: to install them all: apt-get install -y caddy"
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq caddy"]


def test_as_root_a_complete_machine_calls_no_apt_get(tmp_path):
    path = path_without(tmp_path)
    calls = fake_apt_get(path, installs=True)
    fake_id(path, root=True)
    done, _ = check(path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not calls.exists()


def test_as_root_what_is_not_a_debian_package_stays_a_line_and_the_packages_are_installed(tmp_path):
    empty = tmp_path / "home"
    empty.mkdir()
    path = path_without(tmp_path, "python2.7", "python2", "curl")
    calls = fake_apt_get(path, installs=True)
    fake_id(path, root=True)
    done, _ = check(path, HOME=str(empty), PYENV_ROOT=str(empty / ".pyenv"), PY27="")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "make test: installing curl for curl: examples/agent_curl.sh is run as the README shows it"
    ]
    (line,) = done.stderr.splitlines()
    assert line.startswith("make test: Python 2.7 is missing: "), line
    assert "pyenv install 2.7.18" in line
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq curl"]


def test_make_test_stops_at_the_check_before_any_setup(tmp_path):
    """Through `make test` itself: the reason first, within 5 s, and no recipe after it."""
    environment = {**os.environ, "PATH": path_without(tmp_path, "curl")}
    started = time.monotonic()
    done = subprocess.run(
        ["make", "-C", str(ROOT), "test"], env=environment, capture_output=True, text=True, timeout=60
    )
    assert time.monotonic() - started < 5
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert lines[0].startswith("make test: curl is missing: "), lines
    assert all(line.startswith(("make test:", "make:", "make[")) for line in lines), lines
    assert "pip" not in done.stdout and "npm" not in done.stdout, done.stdout


def test_make_test_as_root_installs_what_is_missing_then_goes_on(tmp_path):
    """Through make's own prerequisites target: the check after the install finds the machine complete."""
    path = path_without(tmp_path, "curl")
    calls = fake_apt_get(path, installs=True)
    fake_id(path, root=True)
    done = subprocess.run(
        ["make", "-C", str(ROOT), "prerequisites"],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "make test: installing curl for curl: " in done.stdout
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq curl"]
