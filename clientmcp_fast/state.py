"""Where token generations are kept, and how a running bridge follows them (docs/configuration.md, Revocation).

A store is a small interface, `GenerationStore` (generation_store.py): read every row, tell
cheaply whether anything changed since, read one generation, raise one; and a bridge keeps its
table current through a `GenerationFollower` (the same module), started and stopped the same
way whatever the store. `SqliteStore` is the one-process store, a SQLite file (`--state PATH`)
shared by the bridge and `clientmcp revoke` / `clientmcp token`, which a bridge follows with
`FileGenerationFollower`. A cluster's store, a NATS JetStream key-value bucket (`--state
nats`), is the second implementation, `NatsBucketStore` and `NatsGenerationFollower` in
net/nats_state.py. `open_store` and `new_follower` are the one place that picks one of the two
from the `--state` value.

The core keeps the table in memory (core/generations.py) and never reads the file:
`FileGenerationFollower` looks at the store in a thread of its own, on a timer of the event
loop, and hands what changed to the loop. The file holds a change log beside the table, filled
by triggers, so that a look reads the rows that changed, not the whole table.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import os
import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING

from clientmcp_fast.config import STATE_NATS
from clientmcp_fast.core.generations import MAX_GENERATION, Generations, generation_problem
from clientmcp_fast.core.tokens import ROLES, TokenVerifier
from clientmcp_fast.generation_store import GenerationFollower, GenerationStore, StoreError, announce_changes
from clientmcp_fast.log import logger

if TYPE_CHECKING:
    from clientmcp_fast.core.bridge import Bridge
    from clientmcp_fast.net.nats_connection import NatsConnection

# How often a running bridge looks for changes: a revocation counts within this delay (plus
# the time to read the rows that changed). A look without a change is one stat and one
# `PRAGMA data_version`, in the store's thread: cheap enough to make ten times a second.
POLL_SECONDS = 0.1
# How long a writer waits for another one (two `clientmcp revoke` at once) before failing;
# the bridge too, for its first read, before it listens.
BUSY_TIMEOUT_SECONDS = 5.0
# How long one of a running bridge's looks waits for a lock another process holds, in the
# store's thread, before it gives up until the next look (with one warning per episode).
LOOK_BUSY_SECONDS = 0.1
# Entries of the change log a revoke leaves; a bridge further behind reads the whole table.
KEPT_CHANGES = 10_000
# Changed rows a look reads one by one; more (a table rewritten by hand) and it reads the
# whole table and compares it in the thread, so that the loop only swaps the tables.
ROWS_READ_ONE_BY_ONE = 1_000
# SQLite's result codes for a lock held by another connection (https://sqlite.org/rescode.html).
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED

_TABLE = """
CREATE TABLE IF NOT EXISTS generations (
    role TEXT NOT NULL CHECK (role IN ('client', 'agent')),
    client_id TEXT NOT NULL,
    gen INTEGER NOT NULL CHECK (typeof(gen) = 'integer' AND gen >= 0),
    PRIMARY KEY (role, client_id)
) WITHOUT ROWID
"""
# The change log: every write to `generations`, by `clientmcp revoke` or by hand, adds the
# (role, client ID) it touched, so that a bridge reads only those rows. AUTOINCREMENT: a
# sequence number is never reused, even after the oldest entries are pruned.
_CHANGE_LOG = (
    """CREATE TABLE IF NOT EXISTS generation_changes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        role TEXT,
        client_id TEXT
    )""",
    """CREATE TRIGGER IF NOT EXISTS generation_inserted AFTER INSERT ON generations BEGIN
        INSERT INTO generation_changes (role, client_id) VALUES (new.role, new.client_id);
    END""",
    """CREATE TRIGGER IF NOT EXISTS generation_updated AFTER UPDATE ON generations BEGIN
        INSERT INTO generation_changes (role, client_id) VALUES (old.role, old.client_id);
        INSERT INTO generation_changes (role, client_id) SELECT new.role, new.client_id
            WHERE new.role IS NOT old.role OR new.client_id IS NOT old.client_id;
    END""",
    """CREATE TRIGGER IF NOT EXISTS generation_deleted AFTER DELETE ON generations BEGIN
        INSERT INTO generation_changes (role, client_id) VALUES (old.role, old.client_id);
    END""",
)
_SCHEMA_NAMES = (
    "generations",
    "generation_changes",
    "generation_inserted",
    "generation_updated",
    "generation_deleted",
)


class StoreBusyError(StoreError):
    """The file is locked by another process for longer than this connection waits."""


class BadGenerationError(StoreError):
    """A stored generation is not a non-negative integer (a row written by hand); one line saying which."""


@dataclasses.dataclass
class Look:
    """What one look at a state file found: every row (`whole`), or the rows that changed since the last."""

    whole: bool
    rows: list[tuple[str, str, object]]  # a generation as stored: not always an integer (by hand)


class SqliteStore:
    """Generations in a SQLite file (the standard library's sqlite3), created when missing.

    The file is in WAL mode: the bridge's looks never wait for a writer, and a writer never
    waits for the bridge. Like any SQLite file in WAL mode it must be on a local file system.
    A running bridge uses one store from one thread at a time (`FileGenerationFollower`).
    """

    def __init__(self, path: str, busy_seconds: float = BUSY_TIMEOUT_SECONDS) -> None:
        self.path = path
        self._busy_seconds = busy_seconds
        self._db, self._identity = _open(path, busy_seconds)
        self._version = self._data_version()
        self._seq = 0  # the last change log entry read, as of `snapshot`

    def wait_for_locks(self, seconds: float) -> None:
        """How long each statement from now on waits for a lock another connection holds."""
        self._busy_seconds = seconds
        self._db.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")

    def _data_version(self) -> int:
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    def rows(self) -> list[tuple[str, str, int]]:
        return self._db.execute("SELECT role, client_id, gen FROM generations").fetchall()

    def changed(self) -> bool:
        if self._replaced():
            db, identity = _open(self.path, self._busy_seconds)
            self._swap(db, identity)
            return True
        # data_version changes when another connection commits (https://sqlite.org/pragma.html#pragma_data_version).
        version = self._data_version()
        if version == self._version:
            return False
        self._version = version
        return True

    def _replaced(self) -> bool:
        # A file replaced under its name (restored from a backup, removed and made again by
        # `clientmcp revoke`) is another file: the connection still reads the old one, so the
        # name is looked up each time too (one stat), and the new file opened.
        try:
            return _identity_of(self.path) != self._identity
        except OSError as error:
            raise StoreError(f"state file {self.path}: {error.strerror or error}") from None

    def _swap(self, db: sqlite3.Connection, identity: tuple[int, int]) -> None:
        self._db.close()
        self._db, self._identity = db, identity
        self._version = self._data_version()

    def snapshot(self) -> list[tuple[str, str, object]]:
        """Every row, as stored, read at one instant; the looks that follow read the changes since."""
        rows, seq = _read_whole(self._db)
        self._seq = seq
        return rows

    def look(self) -> Look | None:
        """What changed since the last look or snapshot; None if nothing. Nothing is taken as read if it raises.

        A replaced file is read whole; so is one whose change log no longer reaches back to
        the last entry read (pruned, or the file restored in place from a backup), or where
        more than ROWS_READ_ONE_BY_ONE rows changed.
        """
        if self._replaced():
            db, identity = _open(self.path, self._busy_seconds)
            try:
                rows, seq = _read_whole(db)
            except BaseException:
                db.close()
                raise
            self._swap(db, identity)
            self._seq = seq
            return Look(True, rows)
        version = self._data_version()
        if version == self._version:
            return None
        db = self._db
        db.execute("BEGIN")  # one snapshot for the log and the rows it names
        try:
            top = db.execute("SELECT coalesce(max(seq), 0) FROM generation_changes").fetchone()[0]
            entries = db.execute(
                "SELECT seq, role, client_id FROM generation_changes WHERE seq > ? ORDER BY seq LIMIT ?",
                (self._seq, KEPT_CHANGES + 1),
            ).fetchall()
            keys = list(dict.fromkeys((role, client_id) for _, role, client_id in entries))
            if (
                top < self._seq
                or (entries and entries[0][0] != self._seq + 1)
                or len(keys) > ROWS_READ_ONE_BY_ONE
            ):
                rows, top = _read_whole(db, in_transaction=True)
                whole = True
            else:
                rows = []
                for role, client_id in keys:
                    found = db.execute(
                        "SELECT gen FROM generations WHERE role = ? AND client_id = ?", (role, client_id)
                    ).fetchone()
                    rows.append((role, client_id, 0 if found is None else found[0]))  # no row: 0
                whole = False
        except BaseException:
            _roll_back(db)
            raise
        db.execute("COMMIT")  # a read: ends the snapshot
        self._seq = top
        self._version = version
        return Look(whole, rows)

    def _current(self, role: str, client_id: str) -> int:
        row = self._db.execute(
            "SELECT gen FROM generations WHERE role = ? AND client_id = ?", (role, client_id)
        ).fetchone()
        if row is None:
            return 0
        problem = generation_problem(role, client_id, row[0])
        if problem is not None:
            raise BadGenerationError(
                f"state file {self.path}: {problem}: set it right, or delete the row, with sqlite3"
            )
        return row[0]

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
                # The log keeps its last KEPT_CHANGES entries: one or two go per revoke, along
                # the primary key (a bridge further behind reads the whole table instead).
                db.execute(
                    "DELETE FROM generation_changes WHERE seq <= "
                    "(SELECT max(seq) FROM generation_changes) - ?",
                    (KEPT_CHANGES,),
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


def _read_whole(
    db: sqlite3.Connection, in_transaction: bool = False
) -> tuple[list[tuple[str, str, object]], int]:
    """Every row of the table and the last change log entry, read at one instant."""
    if in_transaction:
        return _whole(db)
    db.execute("BEGIN")
    try:
        found = _whole(db)
    except BaseException:
        _roll_back(db)
        raise
    db.execute("COMMIT")
    return found


def _whole(db: sqlite3.Connection) -> tuple[list[tuple[str, str, object]], int]:
    seq = db.execute("SELECT coalesce(max(seq), 0) FROM generation_changes").fetchone()[0]
    return db.execute("SELECT role, client_id, gen FROM generations").fetchall(), seq


def _roll_back(db: sqlite3.Connection) -> None:
    """End a read transaction that failed (a lock, an I/O error), whatever state it was left in."""
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass  # none was open any more: SQLite ended it itself


def _store_error(path: str, error: Exception) -> StoreError:
    """The one-line error for a failure on the state file, busy or not."""
    busy = isinstance(error, sqlite3.OperationalError) and is_busy(error)
    return (StoreBusyError if busy else StoreError)(f"state file {path}: {error}")


def is_busy(error: BaseException) -> bool:
    """Whether `error` is another connection's lock, held longer than this one waited."""
    if isinstance(error, StoreBusyError):
        return True
    return (
        isinstance(error, sqlite3.OperationalError)
        and getattr(error, "sqlite_errorcode", None) in _BUSY_CODES
    )


def _identity_of(path: str) -> tuple[int, int]:
    status = os.stat(path)
    return status.st_dev, status.st_ino


def _open(
    path: str, busy_seconds: float = BUSY_TIMEOUT_SECONDS
) -> tuple[sqlite3.Connection, tuple[int, int]]:
    """A connection to the state file at `path`, made and given its tables if need be, and the file's identity.

    A file of the first schema (the table without its change log) gets the log and its
    triggers here, in one transaction: the bridge or the first `clientmcp` command to open it.
    """
    try:
        # autocommit (isolation_level=None): each statement is its own transaction, and
        # the reads and writes that need one open it, so that no read leaves one open.
        db = sqlite3.connect(path, timeout=busy_seconds, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as error:
        raise StoreError(f"state file {path}: {error}") from None
    try:
        identity = _identity_of(path)  # before reading: a file replaced meanwhile is seen at the next look
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode=WAL")
        names = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        if not names.issuperset(_SCHEMA_NAMES):
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(_TABLE)
                # A table of another shape fails here, before any trigger names its columns.
                db.execute("SELECT role, client_id, gen FROM generations LIMIT 1").fetchall()
                for statement in _CHANGE_LOG:
                    db.execute(statement)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        db.execute("SELECT role, client_id, gen FROM generations LIMIT 1").fetchall()
        return db, identity
    except (sqlite3.Error, OSError) as error:
        db.close()
        raise _store_error(path, error) from None


def open_store(path: str, nats_urls: tuple[str, ...] = ()) -> GenerationStore:
    """The store a `--state` value names (`nats`: the bucket on `nats_urls`); StoreError if unusable."""
    if path == STATE_NATS:
        from clientmcp_fast.net.nats_state import NatsBucketStore  # nats-py only with --state nats

        return NatsBucketStore(nats_urls)
    return SqliteStore(path)


def new_follower(
    path: str,
    nats: NatsConnection | None,
    verifier: TokenVerifier,
    bridge: Bridge,
    loop: asyncio.AbstractEventLoop,
) -> GenerationFollower:
    """The follower of the store a `--state` value names (`nats`: the bucket, through the process's `nats`)."""
    if path == STATE_NATS:
        from clientmcp_fast.net.nats_state import NatsGenerationFollower  # nats-py only with --state nats

        return NatsGenerationFollower(nats, verifier, bridge, loop)
    return FileGenerationFollower(path, verifier, bridge, loop)


def bad_rows(rows: list[tuple[str, str, object]]) -> dict[tuple[str, str], str]:
    """The rows whose generation is not one, by (role, client ID): what is wrong with each."""
    found = {}
    for role, client_id, generation in rows:
        problem = generation_problem(role, client_id, generation)
        if problem is not None:
            found[(role, client_id)] = problem
    return found


@dataclasses.dataclass
class _Changes:
    """A look's findings, made ready in the store's thread for the loop to take in at once."""

    fresh: dict[str, dict[str, int]] | None  # whole: the new tables (install)
    rows: list[tuple[str, str, object]]  # not whole: the changed rows that are good (update)
    changed: list[tuple[str, str]]  # whole: the pairs that differ
    bad: dict[tuple[str, str], str]  # the rows left out, each kept at its last generation
    looked: list[tuple[str, str]]  # not whole: every pair looked at, good or not


class FileGenerationFollower:
    """Keeps a running bridge's generations current from a state file: loads them at start, then follows it.

    Every POLL_SECONDS after the last look ended, the next one runs in the follower's own
    thread (one look at a time, so the SQLite connection has one user): it reads the rows
    that changed (or the whole table, compared there with the one in memory), and the loop
    then takes them in, replaces what the verifier reads, and closes with 4401 the connected
    apps whose client generation changed. Nothing on the loop waits for the file: a file
    another process holds locked, or one gone unreadable, leaves the last generations read in
    force, with one warning, and the next look tries again. A row whose generation is not
    one (written by hand) keeps that ID at its last generation, with one warning.
    """

    def __init__(
        self, path: str, verifier: TokenVerifier, bridge: Bridge, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.path = path
        self.store: SqliteStore | None = None
        self.generations = Generations()
        self._verifier = verifier
        self._bridge = bridge
        self._loop = loop
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="clientmcp-state"
        )
        self._failing = False
        self._bad: dict[tuple[str, str], str] = {}  # rows warned of, until they are good again
        self._timer: asyncio.TimerHandle | None = None
        self._look: asyncio.Future[_Changes | None] | None = None
        self._closed = False

    async def start(self) -> None:
        """Read every generation (StoreError if the file cannot be used, or a row is bad), then follow."""
        try:
            fresh = await self._loop.run_in_executor(self._thread, self._load)
        except BaseException:
            self._thread.shutdown(wait=False)
            raise
        self.generations.install(fresh)
        self.generations.attach(self._verifier)
        kept = sum(len(table) for table in self.generations.tables.values())
        logger.info("token generations kept in %s (%d raised)", self.path, kept)
        self._timer = self._loop.call_later(POLL_SECONDS, self._poll)

    def _load(self) -> dict[str, dict[str, int]]:
        """The whole table, checked and made into the tables the verifier reads, in the store's thread."""
        store = SqliteStore(self.path)  # waits BUSY_TIMEOUT_SECONDS for a writer, as a revoke does
        try:
            rows = store.snapshot()
            bad = bad_rows(rows)
            if bad:
                more = f" (and {len(bad) - 1} more rows like it)" if len(bad) > 1 else ""
                raise BadGenerationError(
                    f"state file {self.path}: {next(iter(bad.values()))}{more}: "
                    "set it right, or delete the row, with sqlite3"
                )
            store.wait_for_locks(LOOK_BUSY_SECONDS)
        except sqlite3.Error as error:
            store.close()
            raise _store_error(self.path, error) from None
        except BaseException:
            store.close()
            raise
        self.store = store
        return self.generations.compare(rows)[0]  # type: ignore[arg-type]

    def _poll(self) -> None:
        self._timer = None
        self._look = self._loop.run_in_executor(self._thread, self._read)
        self._look.add_done_callback(self._take)

    def _read(self) -> _Changes | None:
        """One look, in the store's thread: what changed, checked and compared, ready for the loop."""
        assert self.store is not None
        look = self.store.look()
        if look is None:
            return None
        bad = bad_rows(look.rows)
        good = [row for row in look.rows if (row[0], row[1]) not in bad]
        if look.whole:
            # The loop changes the tables only in _take, which never runs during a look.
            fresh, changed = self.generations.compare(good, kept=bad)  # type: ignore[arg-type]
            return _Changes(fresh, [], changed, bad, [])
        return _Changes(None, good, [], bad, [(role, client_id) for role, client_id, _ in look.rows])

    def _take(self, look: asyncio.Future[_Changes | None]) -> None:
        self._look = None
        if self._closed or look.cancelled():
            return
        self._timer = self._loop.call_later(POLL_SECONDS, self._poll)
        error = look.exception()
        if error is not None:
            self._failed(error)
            return
        if self._failing:
            self._failing = False
            logger.info("state file %s readable again", self.path)
        found = look.result()
        if found is None:
            return
        if found.fresh is not None:
            self.generations.install(found.fresh)
            changed = found.changed
            self._bad = {key: self._bad.get(key, "") for key in found.bad}
        else:
            changed = self.generations.update(found.rows)  # type: ignore[arg-type]
            for key in found.looked:
                if key not in found.bad:
                    self._bad.pop(key, None)  # good again: a later fault is warned of anew
        self._warn_bad(found.bad)
        if changed:
            announce_changes(self.generations, self._bridge, changed, self._loop.time())

    def _warn_bad(self, bad: Mapping[tuple[str, str], str]) -> None:
        for key, problem in bad.items():
            if self._bad.get(key) == problem:
                continue  # warned of already: a row is read again only when it changes
            self._bad[key] = problem
            role, client_id = key
            logger.warning(
                "state file %s: %s; keeping generation %d until the row is set right",
                self.path,
                problem,
                self.generations.current(role, client_id),
            )

    def _failed(self, error: BaseException) -> None:
        if self._failing:
            return  # one warning per episode; the next look tries again
        self._failing = True
        said = str(error) if isinstance(error, StoreError) else f"state file {self.path}: {error!s}"
        if is_busy(error):
            logger.warning(
                "%s (another process holds it locked): keeping the last generations read, "
                "looking again every %g s",
                said,
                POLL_SECONDS,
            )
        elif isinstance(error, (sqlite3.Error, StoreError, OSError)):
            logger.warning("state store unreadable, keeping the last generations read: %s", said)
        else:  # not the file's doing: say what it was, still once
            logger.warning("state store look failed, keeping the last generations read: %r", error)

    async def stop(self) -> None:
        """Stop following and release the file."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._look is not None:
            await asyncio.wait([self._look])  # the look in flight ends first: the connection is its thread's
        if self.store is not None:
            await self._loop.run_in_executor(self._thread, self.store.close)
            self.store = None
        self._thread.shutdown(wait=False)
