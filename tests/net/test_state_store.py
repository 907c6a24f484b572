"""The state file of token generations, without a bridge (state.py; docs/configuration.md, Revocation)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from clientmcp_fast.state import SqliteStore, StoreError, open_store


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
