"""Where token generations are kept, and how a running bridge follows them (docs/configuration.md, Revocation).

A store is a small interface, `GenerationStore`: read every row, tell cheaply whether anything
changed since, read one generation, raise one. `SqliteStore` is the one-process store, a
SQLite file (`--state PATH`) shared by the bridge and `clientmcp revoke` / `clientmcp token`.
A cluster's store, a NATS JetStream key-value bucket (`--state nats`), is the second
implementation, `NatsBucketStore` in net/nats_state.py, which a bridge follows by watching the
bucket (`NatsGenerationFollower` there) rather than by polling.

The core keeps the table in memory (core/generations.py) and never reads the file:
`GenerationFollower` polls the store on a timer of the event loop and hands changes in.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from typing import TYPE_CHECKING, Protocol

from clientmcp_fast.config import STATE_NATS
from clientmcp_fast.core.channel import AppChannel
from clientmcp_fast.core.generations import MAX_GENERATION, Generations, close_revoked_apps
from clientmcp_fast.core.tokens import ROLE_CLIENT, ROLES, TokenVerifier
from clientmcp_fast.log import logger

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge

# How often a running bridge looks for changes: a revocation counts within this delay (plus
# the time to read the table). One look is one `PRAGMA data_version`, a few microseconds.
POLL_SECONDS = 0.1
# Changes logged one line each; beyond, a count (a restored backup may change thousands).
LOGGED_CHANGES = 20
# How long a writer waits for another one (two `clientmcp revoke` at once) before failing.
BUSY_TIMEOUT_SECONDS = 5.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS generations (
    role TEXT NOT NULL CHECK (role IN ('client', 'agent')),
    client_id TEXT NOT NULL,
    gen INTEGER NOT NULL CHECK (typeof(gen) = 'integer' AND gen >= 0),
    PRIMARY KEY (role, client_id)
) WITHOUT ROWID
"""


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


class SqliteStore:
    """Generations in a SQLite file (the standard library's sqlite3), created when missing.

    The file is in WAL mode: the bridge's looks never wait for a writer, and a writer never
    waits for the bridge. Like any SQLite file in WAL mode it must be on a local file system.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._db, self._identity = _open(path)
        self._version = self._data_version()

    def _data_version(self) -> int:
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    def rows(self) -> list[tuple[str, str, int]]:
        return self._db.execute("SELECT role, client_id, gen FROM generations").fetchall()

    def changed(self) -> bool:
        # A file replaced under its name (restored from a backup, removed and made again by
        # `clientmcp revoke`) is another file: the connection still reads the old one, so the
        # name is looked up each time too (one stat), and the new file opened.
        try:
            identity = _identity_of(self.path)
        except OSError as error:
            raise StoreError(f"state file {self.path}: {error.strerror or error}") from None
        if identity != self._identity:
            db, self._identity = _open(self.path)
            self._db.close()
            self._db = db
            self._version = self._data_version()
            return True
        # data_version changes when another connection commits (https://sqlite.org/pragma.html#pragma_data_version).
        version = self._data_version()
        if version == self._version:
            return False
        self._version = version
        return True

    def _current(self, role: str, client_id: str) -> int:
        row = self._db.execute(
            "SELECT gen FROM generations WHERE role = ? AND client_id = ?", (role, client_id)
        ).fetchone()
        return 0 if row is None else row[0]

    def current(self, role: str, client_id: str) -> int:
        try:
            return self._current(role, client_id)
        except sqlite3.Error as error:
            raise StoreError(f"state file {self.path}: {error}") from None

    def raise_generation(self, role: str, client_id: str) -> int:
        if role not in ROLES:
            raise ValueError(f"role must be client or agent, not {role!r}")
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")  # the write lock first: two revokes at once both count
            try:
                generation = self._current(role, client_id) + 1
                if generation > MAX_GENERATION:
                    raise StoreError(
                        f"the {role} generation of {client_id} is at its largest, {MAX_GENERATION}"
                    )
                db.execute(
                    "INSERT INTO generations (role, client_id, gen) VALUES (?, ?, ?) "
                    "ON CONFLICT (role, client_id) DO UPDATE SET gen = excluded.gen",
                    (role, client_id, generation),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            raise StoreError(f"state file {self.path}: {error}") from None
        return generation

    def close(self) -> None:
        self._db.close()


def _identity_of(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_dev, status.st_ino


def _open(path: str) -> tuple[sqlite3.Connection, tuple[int, int]]:
    """A connection to the state file at `path`, made and given its table if need be, and the file's identity."""
    try:
        # autocommit (isolation_level=None): each statement is its own transaction, and
        # raise_generation opens its own, so that no read leaves a transaction open.
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
    except sqlite3.Error as error:
        raise StoreError(f"state file {path}: {error}") from None
    try:
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode=WAL")
        db.execute(_SCHEMA)
        db.execute("SELECT role, client_id, gen FROM generations LIMIT 1").fetchall()
        return db, _identity_of(path)
    except (sqlite3.Error, OSError) as error:
        db.close()
        raise StoreError(f"state file {path}: {error}") from None


def open_store(path: str, nats_urls: tuple[str, ...] = ()) -> GenerationStore:
    """The store a `--state` value names (`nats`: the bucket on `nats_urls`); StoreError if unusable."""
    if path == STATE_NATS:
        from clientmcp_fast.net.nats_state import NatsBucketStore  # nats-py only with --state nats

        return NatsBucketStore(nats_urls)
    return SqliteStore(path)


def announce_changes(generations: Generations, bridge: Bridge, changed: list[tuple[str, str]]) -> None:
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
        if isinstance(app, AppChannel):
            local[client_id] = app
    for client_id in close_revoked_apps(local, changed):
        logger.info("app %s closed: its token was revoked", client_id)


class GenerationFollower:
    """Keeps a running bridge's generations current: loads them at start, then follows the store.

    Every POLL_SECONDS it asks the store whether anything changed; if so it reads the rows,
    replaces the table the verifier reads, and closes with 4401 the connected apps whose
    client generation changed. A store that fails while the bridge runs (the file gone
    unreadable) leaves the last generations read in force, and says so in the log.
    """

    def __init__(
        self,
        store: GenerationStore,
        verifier: TokenVerifier,
        bridge: Bridge,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.store = store
        try:
            rows = store.rows()
        except sqlite3.Error as error:
            store.close()
            raise StoreError(f"state file: {error}") from None
        self.generations = Generations(rows)
        self._bridge = bridge
        self._loop = loop
        self._failing = False
        self._timer: asyncio.TimerHandle | None = None
        self.generations.attach(verifier)

    def start(self) -> None:
        kept = sum(len(table) for table in self.generations.tables.values())
        logger.info(
            "token generations kept in %s (%d raised)", getattr(self.store, "path", "the store"), kept
        )
        self._timer = self._loop.call_later(POLL_SECONDS, self._poll)

    def _poll(self) -> None:
        self._timer = self._loop.call_later(POLL_SECONDS, self._poll)
        try:
            # `changed()` is true once per change: after a failed read, read again until one works.
            if not self.store.changed() and not self._failing:
                return
            rows = self.store.rows()
        except (sqlite3.Error, StoreError) as error:
            if not self._failing:
                self._failing = True
                logger.warning("state store unreadable, keeping the last generations read: %s", error)
            return
        self._recovered()
        changed = self.generations.replace(rows)
        if changed:
            announce_changes(self.generations, self._bridge, changed)

    def _recovered(self) -> None:
        if self._failing:
            self._failing = False
            logger.info("state store readable again")

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.store.close()

    async def close(self) -> None:
        """Stop following and release the store (the same call as the NATS follower's)."""
        self.stop()
