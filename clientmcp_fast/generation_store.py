"""What every store of token generations and its follower share (docs/configuration.md, Revocation).

Two stores implement these ports: a SQLite file (state.py, `--state PATH`) and a NATS
JetStream bucket (net/nats_state.py, `--state nats`). Both import this module and neither
imports the other; state.py alone chooses between them, from the `--state` value
(`open_store`, `new_follower`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from clientmcp_fast.core.generations import Generations, close_revoked_apps
from clientmcp_fast.core.tokens import ROLE_CLIENT
from clientmcp_fast.log import logger

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

# Changes logged one line each; beyond, a count (a restored backup may change thousands).
LOGGED_CHANGES = 20


class StoreError(Exception):
    """The store cannot be used; the message is one line for the operator."""


class GenerationStore(Protocol):
    """Where generations live, shared by every bridge and `clientmcp` command that names it."""

    path: str  # where it is, as messages name it: the file's path, or the bucket

    def rows(self) -> list[tuple[str, str, int]]:
        """Every generation kept, as (role, client ID, generation); absent ones are 0."""

    def changed(self) -> bool:
        """Whether anything may have changed since the last call (cheap: it runs ten times a second)."""

    def current(self, role: str, client_id: str) -> int:
        """One generation, 0 when none is kept."""

    def raise_generation(self, role: str, client_id: str) -> int:
        """Add one to a generation, atomically against other writers; the new generation."""

    def close(self) -> None:
        """Release the store."""


class GenerationFollower(Protocol):
    """Keeps a running bridge's generations current from its store, by itself once started.

    Each one watches its store in its own way (the file: a look on a timer, in a thread; the
    bucket: a JetStream watch), keeps the last generations read in force while the store
    cannot be read, and closes the connected apps that a change revokes (`announce_changes`).
    """

    generations: Generations  # what the verifier reads, attached by `start`

    async def start(self) -> None:
        """Read every generation and start following; StoreError if the store cannot be used."""

    async def stop(self) -> None:
        """Stop following and let go of what it opened."""


def announce_changes(
    generations: Generations, bridge: Bridge, changed: list[tuple[str, str]], now: float
) -> None:
    """Log the generations that changed and close with 4401 the apps connected here that they revoke.

    In a cluster an app held by another instance is closed there, by that instance's own follower.
    """
    if len(changed) > LOGGED_CHANGES:  # a file replaced, a bucket re-read: one line, not one per row
        logger.info("%d generations changed in the state store", len(changed))
    for role, client_id in changed[:LOGGED_CHANGES]:
        logger.info("%s generation of %s is now %d", role, client_id, generations.current(role, client_id))
    local = {}
    for role, client_id in changed:
        app = bridge.apps.get(client_id) if role == ROLE_CLIENT else None
        if app is not None and not bridge.router.is_remote(app):
            local[client_id] = app
    for client_id in close_revoked_apps(local, changed, now):
        logger.info("app %s closed: its token was revoked", client_id)
