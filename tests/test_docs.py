"""The README and docs say what the code does: every setting documented with its real default."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess
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


# What a reader of the repository alone must be able to follow: every reference names a file
# of the repository, a heading in it, or a public specification by name and section.
TEXT_TREES = (
    "clientmcp_fast",
    "_speedups",
    "tests",
    "bench",
    "docs",
    "examples",
    "packaging",
    "deploy",
    "scripts",
    "sdk",
    "README.md",
    "Makefile",
    "Dockerfile",
    ".ci/run",
    "setup.py",
    "pyproject.toml",
)
# Documents that are not in the repository, and the numbered issues of a tracker it does not hold.
# Spelled so that this file does not match itself.
UNREACHABLE = re.compile(r"\bBRIDGE" r"\.md|\bMCP" r"\.md|\bspec[ ]§|\bissue[ ]\d|seeds/\d", re.I)
SPEC_CITATION = re.compile(r"ClientMCP v1 (§[\d.]+(?:(?:, | and |-)§[\d.]+)*)")
DOC_SECTION = re.compile(r"\bdocs/([\w-]+\.md), ([A-Z][\w ]*\w)")
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCS = sorted((ROOT / "docs").glob("*.md")) + [
    ROOT / "README.md",
    *sorted((ROOT / "sdk" / "js").glob("*.md")),
]


def _repository_texts() -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *TEXT_TREES], cwd=ROOT, capture_output=True, check=True
    ).stdout
    texts = {}
    for name in filter(None, listed.decode().split("\0")):
        try:
            texts[name] = (ROOT / name).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary (a chart), or deleted in the work tree
    return texts


def _headings(path: Path) -> dict[str, str]:
    """A Markdown file's headings as cited ("Client channel") and as GitHub anchors them."""
    found = {}
    for line in path.read_text().splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            title = match.group(1).strip()
            anchor = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
            found[anchor] = re.sub(r" \(.*\)$", "", title)
    return found


def _spec_sections() -> set[str]:
    references = PROTOCOL.split("\n## References\n", 1)[1]
    return set(re.findall(r"^\| (\d+(?:\.\d+)*) \| [^|]+ \|$", references, re.M))


PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()


def test_no_text_of_the_repository_cites_a_document_that_is_not_in_it():
    texts = _repository_texts()
    assert "clientmcp_fast/core/agent.py" in texts and "docs/protocol.md" in texts
    found = [
        f"{name}:{number}: {line.strip()}"
        for name, text in texts.items()
        for number, line in enumerate(text.splitlines(), 1)
        if UNREACHABLE.search(line)
    ]
    assert not found, "cite docs/ or a public specification instead:\n" + "\n".join(found)


def test_every_relative_link_of_readme_and_docs_reaches_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for target in MD_LINK.findall(doc.read_text()):
            if re.match(r"[a-z][a-z+.-]*:", target):
                continue  # https:, mailto:: not a file of the repository
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.name}: {target}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in _headings(file):
                broken.append(f"{doc.name}: {target}: no such heading")
    assert not broken, "\n".join(broken)


def test_every_cited_docs_page_and_section_exists():
    """`docs/protocol.md, Call outcomes` anywhere in the repository: that page has that heading."""
    missing = []
    cited = 0
    for name, text in _repository_texts().items():
        for page in re.findall(r"\bdocs/([\w-]+\.md)\b", text):
            if not (ROOT / "docs" / page).exists():
                missing.append(f"{name}: docs/{page}")
        for page, section in DOC_SECTION.findall(text):
            cited += 1
            if (ROOT / "docs" / page).exists() and section not in _headings(ROOT / "docs" / page).values():
                missing.append(f"{name}: docs/{page}, {section}")
    assert cited > 50
    assert not missing, "\n".join(missing)


def test_every_clientmcp_v1_section_cited_is_in_the_table_of_docs_protocol():
    sections = _spec_sections()
    assert {"1", "3.2", "4.3", "9.2", "10"} <= sections
    wrong = []
    cited = 0
    for name, text in _repository_texts().items():
        for citation in SPEC_CITATION.findall(text):
            for number in re.findall(r"§([\d.]*\d)", citation):
                cited += 1
                if number not in sections:
                    wrong.append(f"{name}: ClientMCP v1 §{number}")
    assert cited > 50
    assert not wrong, "not a section of ClientMCP v1 (docs/protocol.md, References):\n" + "\n".join(wrong)
