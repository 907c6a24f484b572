"""Token generations (ClientMCP v1 §2, docs/configuration.md, Revocation): the current one of each client ID and role.

A token is accepted only when its `gen` claim equals the current generation of its client ID
in its role; raising a generation revokes every token minted before. This is the table in
memory and what a change to it does to connected apps; no file and no clock: the store that
keeps it (clientmcp_fast/state.py) reads its rows and hands them in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from clientmcp_fast.core.tokens import CLIENT_ID_PATTERN, ROLE_AGENT, ROLE_CLIENT, ROLES, TokenVerifier

# The largest generation a store keeps: SQLite's INTEGER is 64 bits, signed.
MAX_GENERATION = 2**63 - 1

REVOKED_REASON = "token revoked: its generation is no longer current"


class ClosableApp(Protocol):
    """A connected app as far as revocation is concerned (core/channel.py's `AppChannel`)."""

    def close(self, code: int, reason: str, now: float) -> None: ...


class Generations:
    """The current generation of every client ID in each role; absent means 0 (ClientMCP v1 §2).

    `tables[role]` maps client IDs to their generation and holds no zeros, so that a bridge
    that never revoked anything keeps two empty dicts. The token verifier reads `tables` on
    every check (core/tokens.py, `attach`); `replace` changes it in place, never swaps it.
    """

    __slots__ = ("tables",)

    def __init__(self, rows: Iterable[tuple[str, str, int]] = ()) -> None:
        self.tables: dict[str, dict[str, int]] = {ROLE_CLIENT: {}, ROLE_AGENT: {}}
        self.replace(rows)

    def attach(self, verifier: TokenVerifier) -> None:
        """Make `verifier` accept only tokens of the current generations (None there: gen ignored)."""
        verifier.generations = self.tables

    def current(self, role: str, client_id: str) -> int:
        return self.tables[role].get(client_id, 0)

    def replace(self, rows: Iterable[tuple[str, str, int]]) -> list[tuple[str, str]]:
        """Take every row `(role, client ID, generation)` as the whole table; the (role, ID) pairs that changed.

        Rows of an unknown role, or whose generation is not a non-negative integer, are
        skipped: the store validates what it writes, and this is the last guard.
        """
        fresh, changed = self.compare(rows)
        self.install(fresh)
        return changed

    def compare(
        self, rows: Iterable[tuple[str, str, int]], kept: Iterable[tuple[str, str]] = ()
    ) -> tuple[dict[str, dict[str, int]], list[tuple[str, str]]]:
        """The tables that every row `(role, client ID, generation)` makes as a whole, and the pairs they change.

        Each (role, ID) pair in `kept` keeps its current generation whatever the rows say (a
        row the store could not take). Nothing here changes: `install` takes the tables. A
        follower may run this off the loop, as long as nothing changes `tables` meanwhile.
        """
        fresh: dict[str, dict[str, int]] = {ROLE_CLIENT: {}, ROLE_AGENT: {}}
        for role, client_id, generation in rows:
            table = fresh.get(role)
            if table is None or type(generation) is not int or not 0 <= generation <= MAX_GENERATION:
                continue
            if generation:
                table[client_id] = generation
        for role, client_id in kept:
            table = fresh.get(role)
            if table is None:
                continue
            generation = self.tables[role].get(client_id, 0)
            if generation:
                table[client_id] = generation
            else:
                table.pop(client_id, None)
        changed = [
            (role, client_id) for role in ROLES for client_id in _differing(self.tables[role], fresh[role])
        ]
        return fresh, changed

    def install(self, fresh: Mapping[str, dict[str, int]]) -> None:
        """Make the tables that `compare` returned the current ones."""
        for role in ROLES:
            self.tables[role] = fresh[role]  # in place: the verifier holds `tables`

    def update(self, rows: Iterable[tuple[str, str, int]]) -> list[tuple[str, str]]:
        """Take each row `(role, client ID, generation)` as a change, the rest kept; the pairs that changed.

        For a store that tells its changes one by one (a watched bucket), where `replace` would
        rebuild the whole table for each. Rows that `replace` skips are skipped here too.
        """
        changed = []
        for role, client_id, generation in rows:
            table = self.tables.get(role)
            if table is None or type(generation) is not int or not 0 <= generation <= MAX_GENERATION:
                continue
            if table.get(client_id, 0) == generation:
                continue
            if generation:
                table[client_id] = generation
            else:
                del table[client_id]  # no zeros kept (see the class)
            changed.append((role, client_id))
        return changed


def generation_problem(role: object, client_id: object, generation: object) -> str | None:
    """What is wrong with a stored row's generation, in one line for the operator; None if nothing.

    A row whose role is neither `client` nor `agent`, or whose client ID is not text, names no
    token's generation and is skipped (None here too).
    """
    if role not in ROLES or type(client_id) is not str:
        return None
    if type(generation) is int and 0 <= generation <= MAX_GENERATION:
        return None
    return f"the {role} generation of {shown_id(client_id)} is {shown_value(generation)}, not a non-negative integer"


def shown_id(client_id: str) -> str:
    """A stored client ID as a message names it: as it is when it is one, else quoted and escaped."""
    return client_id if CLIENT_ID_PATTERN.fullmatch(client_id) else shown_value(client_id)


def shown_value(value: object) -> str:
    """A stored value as one short line of a message: as Python writes it (no newline gets through)."""
    if isinstance(value, bytes):
        return f"a blob of {len(value)} byte{'' if len(value) == 1 else 's'}"
    if value is None:
        return "NULL"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _differing(old: Mapping[str, int], new: Mapping[str, int]) -> list[str]:
    return [
        client_id for client_id in old.keys() | new.keys() if old.get(client_id, 0) != new.get(client_id, 0)
    ]


def close_revoked_apps(
    apps: Mapping[str, ClosableApp], changed: Iterable[tuple[str, str]], now: float
) -> list[str]:
    """Close with 4401 each connected app whose client generation changed; the client IDs closed.

    The app's token was checked when it connected, against the generation current then; every
    change since went through `replace`, so an app connected before a change holds a token of
    the old generation, which is no longer accepted (ClientMCP v1 §2; §3.3 for the code).
    """
    closed = []
    for role, client_id in changed:
        if role != ROLE_CLIENT:
            continue
        app = apps.get(client_id)
        if app is not None:
            app.close(4401, REVOKED_REASON, now)
            closed.append(client_id)
    return closed
