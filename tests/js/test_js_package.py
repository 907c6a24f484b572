"""The JavaScript client as the package `clientmcp` (sdk/js): what a web developer installs.

Its one source, sdk/js/clientmcp.js, which the Python package links (clientmcp_fast/web) and its
wheel carries as a file; its declarations, type-checked on a typed app with `tsc --strict` and
compared with the module at run time; the tarball of `npm pack`, installed into an empty project
and run there against a bridge; its size. TypeScript, esbuild and Node 22 come from the committed
package-lock.json (`npm ci`).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "js"
MODULE = SDK / "clientmcp.js"
BIN = ROOT / "node_modules" / ".bin"
NODE = ROOT / "node_modules" / "node" / "bin" / "node"
TYPED_APP = SDK / "examples" / "todo.ts"
# `tsc --strict --noEmit` as an app's project would run it: ES modules as Node resolves them
# (by the package's "exports"), for a page or a Node app (the DOM's types, no @types/node).
TSC = ["--strict", "--noEmit", "--module", "nodenext", "--target", "es2022", "--lib", "es2022,dom"]
LIMIT = 5 * 1024  # bytes, minified and gzipped (sdk/js/README.md, Size)


def need(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `npm ci` in {ROOT} (`make test` does)")
    return path


def run(command: list, cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result


# -- one source ------------------------------------------------------------------------------


def test_the_module_has_one_source_that_the_python_package_links():
    """sdk/js/clientmcp.js is the only copy: clientmcp_fast/web/clientmcp.js is a link to it."""
    staged = run(["git", "ls-files", "-s"], ROOT).stdout
    entries = [line.split(maxsplit=3) for line in staged.splitlines()]
    blob = {path: (mode, sha) for mode, sha, _, path in entries}
    assert blob["sdk/js/clientmcp.js"][0] == "100644"
    assert blob["clientmcp_fast/web/clientmcp.js"][0] == "120000"  # a symbolic link, as committed
    assert os.readlink(ROOT / "clientmcp_fast" / "web" / "clientmcp.js") == "../../sdk/js/clientmcp.js"
    source = blob["sdk/js/clientmcp.js"][1]
    assert [path for path, (_, sha) in blob.items() if sha == source] == ["sdk/js/clientmcp.js"]


def test_the_wheel_carries_the_module_itself(tmp_path):
    """A wheel built from the tree (as `pip install .` and the Dockerfile build it) holds the file, not a link."""
    # The tree as the Dockerfile's context has it, links kept as links: what git tracks of it.
    context = tmp_path / "context"
    tracked = run(
        [
            "git",
            "ls-files",
            "-z",
            "--",
            "pyproject.toml",
            "setup.py",
            "MANIFEST.in",
            "README.md",
            "LICENSE-*",
            "clientmcp_fast",
            "vendor/llhttp",
            "sdk/js/clientmcp.js",
        ],
        ROOT,
    ).stdout
    for name in filter(None, tracked.split("\0")):
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, context / name, follow_symlinks=False)
    assert (context / "clientmcp_fast" / "web" / "clientmcp.js").is_symlink()
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            tmp_path / "dist",
            context,
        ],
        tmp_path,
        timeout=300,
        CLIENTMCP_NO_EXTENSIONS="1",
    )
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo("clientmcp_fast/web/clientmcp.js")
        assert stat.S_ISREG(info.external_attr >> 16)
        assert archive.read(info) == MODULE.read_bytes()
        assert {"clientmcp_fast/web/index.html", "clientmcp_fast/web/todo.js"} <= set(archive.namelist())


# -- the package -----------------------------------------------------------------------------


def test_the_package_json_says_what_a_registry_and_a_bundler_need():
    package = json.loads((SDK / "package.json").read_text())
    assert package["name"] == "clientmcp"
    assert package["type"] == "module"
    assert package["exports"]["."] == {"types": "./clientmcp.d.ts", "default": "./clientmcp.js"}
    assert list(package["exports"]["."]) == ["types", "default"]  # "types" first, or TypeScript skips it
    assert package["sideEffects"] is False
    assert package["engines"] == {"node": ">=22"}
    assert package["license"] == "MIT OR Apache-2.0"
    assert package["repository"]["directory"] == "sdk/js"
    assert not {"dependencies", "peerDependencies", "optionalDependencies"} & set(package)
    for name in package["files"]:
        assert (SDK / name).is_file(), name
    for name in (
        "LICENSE-MIT",
        "LICENSE-APACHE",
    ):  # the licences the package names, as the repository has them
        assert (SDK / name).read_bytes() == (ROOT / name).read_bytes()
    changelog = (SDK / "CHANGELOG.md").read_text()
    assert f"## {package['version']}" in changelog
    # No import: the module needs nothing but the platform (no dependency, no Node built-in).
    assert not re.search(r"^\s*import\b|\brequire\(", MODULE.read_text(), re.M)


def test_the_declarations_type_check_a_typed_app():
    """`tsc --strict` accepts the typed todo app, and each mistake it marks with @ts-expect-error is refused."""
    run([need(BIN / "tsc"), *TSC, TYPED_APP], ROOT)
    assert len(re.findall(r"@ts-expect-error", TYPED_APP.read_text())) >= 5


def test_the_tracing_option_takes_the_opentelemetry_api_as_its_types_have_it():
    """The module `@opentelemetry/api` and its tracers fit the declarations, which name neither (no import)."""
    typed = ROOT / "tests" / "js" / "package" / "tracing.ts"
    need(ROOT / "node_modules" / "@opentelemetry" / "api")
    run([need(BIN / "tsc"), *TSC, typed], ROOT)
    assert len(re.findall(r"@ts-expect-error", typed.read_text())) >= 1


def test_what_is_declared_is_what_the_module_exports():
    """Every export and every public member of ClientMCP, declared and at run time, the same."""
    found = json.loads(run([need(NODE), "declared.mjs", SDK], ROOT / "tests" / "js" / "package").stdout)
    assert found["declared"] == found["runtime"]
    assert len(found["runtime"]) >= 16
    assert found["declaredMembers"] == found["runtimeMembers"]
    assert {"connect", "close", "expose", "state", "onstatechange"} <= set(found["runtimeMembers"])


def test_minified_and_gzipped_it_stays_under_5_kb_as_the_readme_says():
    minified = run(
        [need(BIN / "esbuild"), MODULE, "--minify", "--format=esm", "--log-level=warning"], ROOT
    ).stdout
    size = len(gzip.compress(minified.encode(), compresslevel=9, mtime=0))
    assert size < LIMIT, f"{size} bytes"
    stated = re.search(r"minified and gzipped, ([\d.]+) KB", (SDK / "README.md").read_text())
    assert stated, "sdk/js/README.md states the size"
    assert float(stated.group(1)) == round(size / 1024, 1), f"{size} bytes measured"


def test_the_packed_tarball_installs_into_an_empty_project_and_runs_the_todo_example(tmp_path, start_bridge):
    """`npm pack`, `npm install` of the file, `import ... from "clientmcp"`: the todo example answers an agent."""
    need(NODE)
    packed = run(["npm", "pack", "--json", "--pack-destination", tmp_path, SDK], tmp_path).stdout
    [tarball] = json.loads(packed)
    with tarfile.open(tmp_path / tarball["filename"]) as archive:
        names = sorted(archive.getnames())
    assert names == sorted(
        f"package/{name}"
        for name in [
            "package.json",
            "clientmcp.js",
            "clientmcp.d.ts",
            "README.md",
            "CHANGELOG.md",
            "LICENSE-MIT",
            "LICENSE-APACHE",
        ]
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text('{"name": "my-todos", "private": true, "type": "module"}\n')
    # --offline: a package with no dependency needs nothing from a registry.
    run(
        [
            "npm",
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            tmp_path / tarball["filename"],
        ],
        project,
    )
    installed = project / "node_modules" / "clientmcp"
    assert not installed.is_symlink() and (installed / "clientmcp.js").read_bytes() == MODULE.read_bytes()
    # The typed app, by name from the installed package: its "exports" lead TypeScript to the declarations.
    shutil.copy(TYPED_APP, project / "todo.ts")
    run([BIN / "tsc", *TSC, "todo.ts"], project)
    # The repository's todo example, unchanged, against a real bridge.
    shutil.copy(ROOT / "examples" / "todo_app.mjs", project / "todo_app.mjs")
    bridge = start_bridge()
    app = subprocess.Popen(
        [str(NODE), "todo_app.mjs"],
        cwd=project,
        env={
            **os.environ,
            "CLIENTMCP_CONNECT_URL": bridge.ws_url,
            "CLIENTMCP_CLIENT_TOKEN": bridge.token("client", "my-app"),
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert (
            app.stdout.readline() == f"Connected to {bridge.ws_url} with the tool add_todo; Ctrl-C stops.\n"
        )
        result = agent_call(bridge, "my-app", "add_todo", {"title": "Buy milk"})
        assert result == {
            "content": [{"type": "text", "text": "Added Buy milk"}],
            "structuredContent": {"status": "completed", "count": 1},
        }
    finally:
        app.kill()
        app.communicate()


def agent_call(bridge, client_id: str, name: str, arguments: dict) -> dict:
    """tools/call as an agent of `client_id` (the legacy era: one POST, no session)."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    headers = {
        "Authorization": f"Bearer {bridge.token('agent', client_id)}",
        "Content-Type": "application/json",
        "Accept": "application/json",
    }
    body = urllib.request.Request(bridge.mcp_url, json.dumps(request).encode(), headers)
    with urllib.request.urlopen(body, timeout=15) as response:
        return json.loads(response.read())["result"]
