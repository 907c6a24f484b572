"""The code stays in the shape pyproject.toml sets: ruff's checks pass and its formatting holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_TREES = ["clientmcp_fast", "bench", "tests", "packaging", "examples", "setup.py"]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PYTHON_TREES], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_finds_nothing():
    done = _ruff("check", "--output-format", "concise")
    assert done.returncode == 0, done.stdout + done.stderr


def test_code_is_formatted():
    done = _ruff("format", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
