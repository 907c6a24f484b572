"""The README and docs say what the code does: every setting documented with its real default."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import tomllib
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


# The canonical https://www.apache.org/licenses/LICENSE-2.0.txt, byte for byte.
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_the_license_files_hold_the_two_licenses_pyproject_names():
    """pyproject.toml says MIT OR Apache-2.0: both texts are in the repository, and the README links them."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == {"text": "MIT OR Apache-2.0"}
    assert hashlib.sha256((ROOT / "LICENSE-APACHE").read_bytes()).hexdigest() == APACHE_2_SHA256
    mit = (ROOT / "LICENSE-MIT").read_text()
    assert mit.startswith(
        "MIT License\n\nCopyright (c) 2026 the clientmcp_fast authors\n\nPermission is hereby granted"
    )
    assert " ".join(mit.split()).endswith(
        "OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE."
    )
    assert "](LICENSE-MIT)" in README and "](LICENSE-APACHE)" in README
