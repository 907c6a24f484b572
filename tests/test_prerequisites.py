"""`make test` says what the machine lacks, one line each, within seconds and before any setup.

Each prerequisite is taken off PATH in turn (a folder of links to every other command): the
check names it, what it is for and how to install it, on one line, and nothing else. Not
tested: running as another user than root, which these tests need themselves.
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
}
SYSTEM_PATH = os.environ["PATH"].split(os.pathsep) + ["/usr/sbin", "/sbin"]


def path_without(tmp_path: Path, *names: str) -> str:
    """A PATH of one folder holding a link to every command of the usual PATH but `names`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in SYSTEM_PATH:
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if entry.name in names or link.exists() or not os.access(entry.path, os.X_OK):
                continue
            link.symlink_to(entry.path)
    return str(folder)


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
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"make test: {COMMANDS[name]}: "), line
    assert "install" in line  # how to get it
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
    (line,) = done.stderr.splitlines()
    assert line.startswith("make test: a Docker engine or podman is missing"), line


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
