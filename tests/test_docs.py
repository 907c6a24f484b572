"""The README and docs say what the code does: every setting documented with its real default."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from clientmcp_fast.config import OPTIONS
from clientmcp_fast.core.limits import Limits

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
README = (ROOT / "README.md").read_text()
LIMIT_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Limits)}


def _table_row(env: str) -> list[str]:
    for line in CONFIGURATION.splitlines():
        if line.startswith(f"| `{env}` |"):
            return [cell.strip().strip("`") for cell in line.strip("|").split("|")]
    raise AssertionError(f"{env} is not in the settings table of docs/configuration.md")


def test_every_setting_has_a_row_with_its_flag():
    for option in OPTIONS:
        row = _table_row(option.env)
        assert row[1] == f"--{option.name}", option.name


def test_documented_limit_defaults_are_the_code_defaults():
    for option in OPTIONS:
        if option.attr in LIMIT_DEFAULTS:
            documented = _table_row(option.env)[2]
            assert option.parse(documented) == LIMIT_DEFAULTS[option.attr], option.name


def test_readme_starts_with_the_demo_and_test_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
