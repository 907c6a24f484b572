"""Where an app lives: the values the bridge calls an app, and the port that tells the rest of a cluster.

An app an agent can reach is either connected to this process (`core/channel.py`,
`AppChannel`) or held by another instance of a cluster (`core/directory.py`, `RemoteApp`).
The bridge and the agent endpoint treat both alike through `App`; what differs is what
`send` and `close` do, and who is told of a change: an `AppRouter`, the port a cluster's
directory implements and a single process fills with `LOCAL`, which tells no one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clientmcp_fast.core.calls import Call
    from clientmcp_fast.core.register import ToolSet


class App(Protocol):
    """An app as the bridge and the agent endpoint see it, wherever it is connected."""

    client_id: str
    toolset: ToolSet | None  # None until its first register
    calls: dict[str, Call]  # in flight, by call ID
    last_seen: float  # the latest `now` it was heard from (+inf when its own instance watches it)
    congested_since: float | None  # when unsent data to it passed the soft limit

    def send(self, message: bytes) -> None:
        """Deliver a `call` or `cancel` the bridge wrote (ClientMCP v1 §3.2)."""

    def close(self, code: int, reason: str, now: float) -> None:
        """End this app's connection with a close code (ClientMCP v1 §3.3)."""

    def call_ended(self, call: Call, outcome: int) -> None:
        """A call sent to this app ended with `outcome` (an Outcome, core/outcomes.py)."""

    def unregistered_text(self) -> str:
        """The tool error for a call while no tool set of this app is known here (core/outcomes.py)."""

    def ask_consent(self, request_id: str, client_name: str | None, client_uri: str, code: str) -> str | None:
        """Send the app `authorize` (docs/oauth.md); None when sent, else why this app cannot be asked."""


class AppRouter:
    """The port the bridge tells of each app connected here; a cluster's directory implements it."""

    __slots__ = ()

    def attached(self, app: App, now: float) -> None:
        """A connection here took its client ID."""

    def registered(self, app: App) -> None:
        """The app holding its client ID here has a new tool set."""

    def detached(self, app: App) -> None:
        """The app holding its client ID here went away."""

    def cancel_elsewhere(self, client_id: str, request_id: bytes, session: bytes | None) -> None:
        """A legacy notifications/cancelled named no call waiting here: wherever it waits, cancel it."""

    def is_remote(self, app: App) -> bool:
        """Whether `app` is held by another instance (whose own bridge counts, closes and revokes it)."""
        return False


# A single process: every app is connected here, and no one else needs to know.
LOCAL = AppRouter()

# The `calls` of every app not yet sent a call: one empty dict for all, never written. Most
# apps sit idle, and an empty dict each is a good part of what an idle app costs
# (docs/benchmarks.md, Idle footprint); `Bridge.start_call` gives an app its own at its first call.
NO_CALLS: dict = {}
