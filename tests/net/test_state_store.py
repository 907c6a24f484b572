"""The state file of token generations, without a bridge (state.py; docs/configuration.md, Revocation)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from clientmcp_fast import state
from clientmcp_fast.state import BadGenerationError, Look, SqliteStore, StoreError, open_store


def test_a_missing_file_is_made_with_every_generation_at_zero(tmp_path: Path):
    store = open_store(str(tmp_path / "state.db"))
    assert store.rows() == []
    assert store.current("client", "a") == 0
    store.close()
    assert (tmp_path / "state.db").exists()


def test_raise_counts_up_per_role_and_client_id(tmp_path: Path):
    store = SqliteStore(str(tmp_path / "state.db"))
    assert [store.raise_generation("client", "a") for _ in range(3)] == [1, 2, 3]
    assert store.raise_generation("agent", "a") == 1
    assert store.raise_generation("client", "b") == 1
    assert sorted(store.rows()) == [("agent", "a", 1), ("client", "a", 3), ("client", "b", 1)]
    with pytest.raises(ValueError):
        store.raise_generation("robot", "a")
    store.close()


def test_changed_sees_another_connections_commits_and_not_its_own_reads(tmp_path: Path):
    path = str(tmp_path / "state.db")
    follower, writer = SqliteStore(path), SqliteStore(path)
    assert not follower.changed()
    follower.rows()
    assert not follower.changed()
    writer.raise_generation("agent", "a")
    assert follower.changed()
    assert not follower.changed()
    assert follower.rows() == [("agent", "a", 1)]
    follower.close()
    writer.close()


def test_revokes_at_once_from_several_connections_all_count(tmp_path: Path):
    path = str(tmp_path / "state.db")
    SqliteStore(path).close()

    def revoke_ten() -> None:
        store = SqliteStore(path)
        for _ in range(10):
            store.raise_generation("client", "shared")
        store.close()

    threads = [threading.Thread(target=revoke_ten) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    store = SqliteStore(path)
    assert store.current("client", "shared") == 40
    store.close()


def test_a_file_that_is_not_sqlite_or_cannot_be_made_is_refused(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("not a database\n" * 200)
    with pytest.raises(StoreError, match="file is not a database"):
        open_store(str(tmp_path / "notes.txt"))
    with pytest.raises(StoreError, match="unable to open database file"):
        open_store(str(tmp_path / "missing-dir" / "state.db"))
    with pytest.raises(StoreError, match="unable to open database file"):
        open_store(str(tmp_path))  # a directory


def test_a_table_of_another_shape_under_the_name_is_refused(tmp_path: Path):
    path = str(tmp_path / "other.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE generations (name TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="no such column"):
        open_store(path)


def test_generations_written_by_hand_must_be_non_negative_integers(tmp_path: Path):
    path = str(tmp_path / "state.db")
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    for row in (("client", "a", -1), ("client", "a", "one"), ("client", "a", 1.5), ("robot", "a", 1)):
        with pytest.raises(sqlite3.IntegrityError):
            db.execute("INSERT INTO generations VALUES (?, ?, ?)", row)
    db.close()


def test_a_removed_file_is_an_error_for_the_follower_and_a_new_one_is_opened(tmp_path: Path):
    path = tmp_path / "state.db"
    store = SqliteStore(str(path))
    store.raise_generation("agent", "a")
    assert store.changed() is False  # its own write
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with pytest.raises(StoreError, match="No such file or directory"):
        store.changed()
    other = SqliteStore(str(path))
    other.raise_generation("client", "b")
    assert store.changed() is True
    assert store.rows() == [("client", "b", 1)]
    store.close()
    other.close()


FIRST_SCHEMA = """
CREATE TABLE generations (
    role TEXT NOT NULL CHECK (role IN ('client', 'agent')),
    client_id TEXT NOT NULL,
    gen INTEGER NOT NULL CHECK (typeof(gen) = 'integer' AND gen >= 0),
    PRIMARY KEY (role, client_id)
) WITHOUT ROWID
"""


def write_by_hand(path: str, *statements: str) -> None:
    """Statements run on the file with sqlite3, as an operator would, the CHECK constraints off."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA ignore_check_constraints = ON")
    for statement in statements:
        db.execute(statement)
    db.close()


def test_a_look_reads_only_the_rows_that_changed_by_revoke_or_by_hand(tmp_path: Path):
    path = str(tmp_path / "state.db")
    writer = SqliteStore(path)
    for number in range(50):
        writer.raise_generation("agent", f"id-{number}")
    follower = SqliteStore(path)
    assert len(follower.snapshot()) == 50
    assert follower.look() is None
    writer.raise_generation("agent", "id-7")
    writer.raise_generation("client", "new")
    write_by_hand(path, "DELETE FROM generations WHERE client_id = 'id-9'")
    look = follower.look()
    assert look == Look(False, [("agent", "id-7", 2), ("client", "new", 1), ("agent", "id-9", 0)])
    assert follower.look() is None
    write_by_hand(path, "UPDATE generations SET client_id = 'id-99' WHERE client_id = 'id-8'")
    assert follower.look() == Look(False, [("agent", "id-8", 0), ("agent", "id-99", 1)])
    follower.close()
    writer.close()


def test_a_look_reads_the_whole_table_when_the_change_log_cannot_tell(tmp_path: Path, monkeypatch):
    path = str(tmp_path / "state.db")
    writer = SqliteStore(path)
    writer.raise_generation("agent", "a")
    backup = sqlite3.connect(str(tmp_path / "backup.db"))
    sqlite3.connect(path).backup(backup)
    follower = SqliteStore(path)
    follower.snapshot()
    # Pruned past the follower's last entry: it cannot know what the pruned entries named.
    monkeypatch.setattr(state, "KEPT_CHANGES", 2)
    for _ in range(4):
        writer.raise_generation("client", "b")
    assert follower.look() == Look(True, [("agent", "a", 1), ("client", "b", 4)])
    # Restored in place from the backup (sqlite3's `.restore`): its log is behind the follower's.
    with sqlite3.connect(path) as db:
        backup.backup(db)
    assert follower.look() == Look(True, [("agent", "a", 1)])
    # More changed rows than are read one by one.
    monkeypatch.setattr(state, "ROWS_READ_ONE_BY_ONE", 3)
    for number in range(4):
        writer.raise_generation("client", f"c{number}")
    assert follower.look().whole
    backup.close()
    follower.close()
    writer.close()


def test_a_file_of_the_first_schema_gets_the_change_log_and_keeps_its_rows(tmp_path: Path):
    path = str(tmp_path / "state.db")
    write_by_hand(path, FIRST_SCHEMA, "INSERT INTO generations VALUES ('client', 'old', 3)")
    follower = SqliteStore(path)
    assert follower.snapshot() == [("client", "old", 3)]
    writer = SqliteStore(path)
    assert writer.raise_generation("client", "old") == 4
    assert follower.look() == Look(False, [("client", "old", 4)])
    follower.close()
    writer.close()


def test_a_generation_that_is_not_an_integer_is_a_one_line_error_for_current_and_raise(tmp_path: Path):
    path = str(tmp_path / "state.db")
    SqliteStore(path).close()
    write_by_hand(path, "INSERT INTO generations VALUES ('client', 'a', 'one'), ('agent', 'b', -2)")
    store = SqliteStore(path)
    with pytest.raises(BadGenerationError) as raised:
        store.raise_generation("client", "a")
    assert str(raised.value) == (
        f"state file {path}: the client generation of a is 'one', not a non-negative integer: "
        "set it right, or delete the row, with sqlite3"
    )
    with pytest.raises(BadGenerationError, match="the agent generation of b is -2, not a non-negative"):
        store.current("agent", "b")
    assert store.raise_generation("client", "c") == 1  # the other rows are untouched
    assert sorted(store.rows()) == [("agent", "b", -2), ("client", "a", "one"), ("client", "c", 1)]
    store.close()
