"""What the conformance tests share: Node 22 from the repository's node_modules, and the conformance app.

The Node peers come from the committed package.json and package-lock.json (`npm ci`, which
`make test` runs). They are never skipped: a missing install fails the test and says how to fix it.
The fixtures live here rather than in a conftest.py, which would shadow tests/conftest.py for the
tests that `from conftest import ...`; test modules import them (`node_fixture`, `start_app_fixture`).
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conformance_app import ConformanceApp

from clientmcp_fast.client import AuthorizeHandler
from clientmcp_fast.speedups import IMPLEMENTATION

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"
NODE = NODE_MODULES / "node" / "bin" / "node"
# Reports of the runs, for reading after `make test` (gitignored); one folder per implementation.
REPORTS = ROOT / "reports" / IMPLEMENTATION
CLIENT_ID = "conformance"


class RunningApp:
    """The conformance app on its own event loop in a background thread, like a separate program."""

    def __init__(self, bridge: Any, client_id: str, on_authorize: AuthorizeHandler | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="conformance-app", daemon=True)
        self._thread.start()
        token = bridge.token("client", client_id)
        self.app: ConformanceApp = self.run(self._connect(bridge.ws_url, token, on_authorize))

    async def _connect(self, url: str, token: str, on_authorize: AuthorizeHandler | None) -> ConformanceApp:
        app = ConformanceApp(url, token, on_authorize)
        await asyncio.wait_for(app.client.connect(), 15)
        return app

    def run(self, coroutine: Any, timeout: float = 15) -> Any:
        """Run `coroutine` on the app's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.run(self.app.client.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="session", name="node")
def node_fixture() -> Path:
    """The Node 22 binary of the `node` npm package (the machine's Node 20 crashes the suite)."""
    if not NODE.exists():
        pytest.fail(f"{NODE} is missing: run `npm ci` in {ROOT} (`make test` does)")
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version.startswith("v22."), f"{NODE} is {version}, not Node 22"
    return NODE


@pytest.fixture(name="start_app")
def start_app_fixture() -> Iterator[Callable[[Any], RunningApp]]:
    """A factory: `start_app(bridge)` connects the conformance app to `bridge` and waits for `registered`.

    With `on_authorize`, the app registers `consent` and answers OAuth requests with it (docs/oauth.md).
    """
    running: list[RunningApp] = []

    def start(
        bridge: Any, client_id: str = CLIENT_ID, on_authorize: AuthorizeHandler | None = None
    ) -> RunningApp:
        app = RunningApp(bridge, client_id, on_authorize)
        running.append(app)
        return app

    yield start
    for app in running:
        if app.loop.is_running():
            app.stop()
